"""Running methods over questions: answers, matches, the judge's verdicts, scores, timings.

Each method answers every question (in batches where the method batches), then each answered
prediction goes to the judge (when there is one). A question is *answered* when generation
finished with an ``Answer:`` line that is not an abstention (``agent.eval.metrics``); only those
are judged. Seconds are the method's own (the judge's time is counted apart).

Example::

    results = evaluate_methods([LLMOnlyMethod(gen), ReFactXMethod(gen)], questions,
                               judge=AnswerJudge(LocalChat(loaded)))
    for r in results:
        print(r.method, r.score.exact_accuracy, r.score.judge_precision, r.seconds_per_question)
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .datasets import EvalQuestion
from .judge import AnswerJudge
from .methods import EvalMethod
from .metrics import (Record, Score, SetScore, approximate_match, counts_as_answered, exact_match, macro_set_scores,
                      score, set_score)


@dataclass
class MethodResult:
    """One method over all questions: its score, its time, and one row per question."""

    method: str
    score: Score
    seconds: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    judge_seconds: float = 0.0

    @property
    def seconds_per_question(self) -> float:
        return self.seconds / max(1, len(self.rows))

    @property
    def tokens(self) -> dict[str, int]:
        return {"generated": sum(r["tokens"] for r in self.rows),
                "prompt": sum(r["prompt_tokens"] for r in self.rows)}

    @property
    def judge_unusable(self) -> int:
        """Answered questions whose verdict could not be read (or whose judge call failed)."""
        return sum(1 for r in self.rows if r["answered"] and r.get("judge") and r["judge"]["correct"] is None)

    @property
    def judge_agreement(self) -> float | None:
        """Share of the judged predictions where the judge's verdict equals the approximate
        match: a cheap check of what the judge is worth (an unusable verdict disagrees)."""
        judged = [r for r in self.rows if r.get("judge")]
        if not judged:
            return None
        return sum(bool(r["judge"]["correct"]) == r["approximate"] for r in judged) / len(judged)

    @property
    def set_scores(self) -> dict[str, Any] | None:
        """Set answers only (RCD, VD, majority): precision, recall and F1 macro-averaged over
        relations (``groups``: how many), as in the RCD paper; None for other methods."""
        scored = [r for r in self.rows if "set" in r]
        if not scored:
            return None
        return macro_set_scores((r.get("relation", ""), SetScore(**r["set"])) for r in scored)

    def summary(self) -> dict[str, Any]:
        """Score, time and tokens, without the rows (for reports)."""
        out: dict[str, Any] = dict(self.score.as_dict())
        if self.set_scores is not None:
            out["set_macro"] = self.set_scores
        # The median resists a batch slowed by something else on the machine; the mean is the cost.
        median = statistics.median(r["seconds"] for r in self.rows) if self.rows else 0.0
        out.update(seconds=round(self.seconds, 2), seconds_per_question=round(self.seconds_per_question, 3),
                   seconds_per_question_median=round(median, 3),
                   tokens=self.tokens,
                   tokens_per_question=round(self.tokens["generated"] / max(1, len(self.rows)), 1))
        if self.score.judge_correct is not None:
            out.update(judge_unusable=self.judge_unusable, judge_agreement_with_approximate=self.judge_agreement,
                       judge_seconds=round(self.judge_seconds, 2))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, **self.summary(), "questions": self.rows}


def evaluate_methods(methods: Sequence[EvalMethod], questions: Sequence[EvalQuestion], *,
                     judge: AnswerJudge | None = None, batch_size: int = 4,
                     on_progress: Callable[[int], None] | None = None) -> list[MethodResult]:
    """Answer ``questions`` with each method in turn, judge the answered ones, and score.

    ``on_progress(n)`` is called after each batch with the number of questions it held.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    results = []
    for method in methods:
        size = batch_size if method.batched else 1
        rows: list[dict[str, Any]] = []
        records: list[Record] = []
        seconds = judge_seconds = 0.0
        for start in range(0, len(questions), size):
            batch = list(questions[start : start + size])
            t = time.perf_counter()
            answers = method.answer_batch(batch)
            elapsed = time.perf_counter() - t
            seconds += elapsed
            for question, answer in zip(batch, answers):
                answered = counts_as_answered(answer.prediction, answer.finished)
                row = {"id": question.id, "question": question.text, "gold": list(question.answers),
                       **answer.as_dict(), "answered": answered,
                       "exact": answered and exact_match(answer.prediction, question.answers),
                       "approximate": answered and approximate_match(answer.prediction, question.answers),
                       "seconds": round(elapsed / len(batch), 3)}
                if "answers" in answer.extra and question.meta.get("objects"):
                    row["relation"] = question.meta.get("relation", "")
                    row["set"] = set_score(answer.extra["answers"], question.meta["objects"]).as_dict()
                verdict = None
                if judge is not None and answered:
                    t = time.perf_counter()
                    judged = judge.judge(question.text, question.answers, answer.prediction)
                    judge_seconds += time.perf_counter() - t
                    row["judge"] = judged.as_dict()
                    verdict = judged.correct
                rows.append(row)
                # With a judge, every record carries a verdict (an unusable one is not correct;
                # score() ignores those of unanswered questions), so the judge's rates exist
                # even when nothing was answered.
                records.append(Record(answer.prediction, question.answers, answer.finished,
                                      bool(verdict) if judge is not None else None))
            if on_progress is not None:
                on_progress(len(batch))
        results.append(MethodResult(method.name, score(records), seconds, rows, judge_seconds))
    return results
