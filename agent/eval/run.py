"""Running methods over questions: answers, matches, the judge's verdicts, scores, timings.

Each method answers every question (in batches where the method batches), then each answered
prediction goes to the judge (when there is one). A question is *answered* when generation
finished with an ``Answer:`` line that is not an abstention (``agent.eval.metrics``); only those
are judged. Seconds are the method's own (the judge's time is counted apart).

An answered question of a method that states facts or is given them (``grounds = True``:
ReFactX, web-RAG, the agent) is *grounded* when its answer rests on those facts: the agent's own
verdict when its trace has one (``grounded``, else ``supported``), else
:func:`agent.pipeline.grounding.ground` over the facts stated (web-RAG: the facts it was given).

Example (not run: needs a model)::

    results = evaluate_methods([LLMOnlyMethod(gen), ReFactXMethod(gen)], questions,
                               judge=AnswerJudge(LocalChat(loaded)))
    for r in results:
        print(r.method, r.score.exact_accuracy, r.score.judge_precision, r.seconds_per_question)
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..pipeline.conversation import rewrite_by_rules
from ..pipeline.grounding import ground
from .questions import EvalQuestion
from .judge import AnswerJudge
from .methods import EvalMethod, MethodAnswer
from .metrics import (Record, Score, SetScore, approximate_match, counts_as_answered, exact_match, macro_set_scores,
                      score, set_score, token_f1)


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
    def grounded_rate(self) -> float | None:
        """Share of the answered questions whose answer is grounded in the method's facts; None
        for methods that state no facts, or when nothing was answered."""
        verdicts = [r["grounded"] for r in self.rows if r["answered"] and r.get("grounded") is not None]
        return sum(verdicts) / len(verdicts) if verdicts else None

    @property
    def proven_rate(self) -> float | None:
        """Share of all the questions answered right (exact match) *and* grounded in the
        method's facts: answers shown with their proof; None for methods that state no facts."""
        if not any(r.get("grounded") is not None for r in self.rows):
            return None
        return sum(bool(r.get("grounded")) and bool(r["exact"]) for r in self.rows) / max(1, len(self.rows))

    @property
    def wrong_grounded_rate(self) -> float | None:
        """Share of the answers marked grounded that are wrong (not even an approximate match):
        a wrong answer wearing a proof; None when nothing was grounded."""
        marked = [r for r in self.rows if r.get("grounded")]
        if not marked:
            return None
        return sum(not r["approximate"] for r in marked) / len(marked)

    @property
    def right_withheld_rate(self) -> float | None:
        """Share of all the questions where an attempt stated facts and gave a right answer (an
        approximate match) that the method's checks withheld, the question ending unanswered
        right: a right chain withheld. None for methods without attempts (only the agent has them)."""
        if not any("attempts" in r for r in self.rows):
            return None
        return sum(_withheld_right(r) for r in self.rows) / max(1, len(self.rows))

    @property
    def follow_up(self) -> dict[str, Any] | None:
        """Conversations only: EM and F1 over the ``follow-up`` questions and over the same
        questions asked ``standalone``, and each as a share of the standalone score (None when
        the standalone score is 0); None without both strata."""
        follow = [r for r in self.rows if r.get("stratum") == "follow-up"]
        alone = [r for r in self.rows if r.get("stratum") == "standalone"]
        if not follow or not alone:
            return None

        def mean(rows: list[dict[str, Any]], key: str) -> float:
            return sum(float(r.get(key) or 0) for r in rows) / len(rows)

        out: dict[str, Any] = {"items": len(follow)}
        for key, name in (("exact", "exact"), ("f1", "f1")):
            asked, standalone = mean(follow, key), mean(alone, key)
            out.update({name: asked, f"standalone_{name}": standalone,
                        f"{name}_share": asked / standalone if standalone else None})
        return out

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
    def best_of_n(self) -> dict[str, Any] | None:
        """Sampling methods only: the share of questions where one of the ``n`` samples matched
        (exact and approximate), the KGD paper's best-of-n accuracy; None for other methods."""
        scored = [r["best_of_n"] for r in self.rows if "best_of_n" in r]
        if not scored:
            return None
        return {"n": max(s["n"] for s in scored),
                "exact_accuracy": sum(s["exact"] for s in scored) / len(self.rows),
                "approximate_accuracy": sum(s["approximate"] for s in scored) / len(self.rows)}

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
        out["grounded"] = self.grounded_rate
        out["proven"] = self.proven_rate
        out["wrong_grounded"] = self.wrong_grounded_rate
        withheld = self.right_withheld_rate
        if withheld is not None:
            out["right_withheld"] = withheld
        if self.set_scores is not None:
            out["set_macro"] = self.set_scores
        if self.best_of_n is not None:
            out["best_of_n"] = self.best_of_n
        if self.follow_up is not None:
            out["follow_up"] = self.follow_up
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


def _withheld_right(row: dict[str, Any]) -> bool:
    """Whether ``row`` (a question's row, with its attempts) ends not right although an attempt
    stated a chain that holds its answer and answered right (approximate match with the gold
    answers): a right answer the model knew but stated no fact of is no chain withheld. Rows
    saved before attempts said ``in_facts`` count an attempt that stated any fact."""
    if row.get("approximate"):
        return False
    return any(a.get("facts") and a.get("in_facts", True) and counts_as_answered(a.get("answer") or "")
               and approximate_match(a["answer"], row["gold"]) for a in row.get("attempts") or ())


def _record(row: dict[str, Any], judged: bool) -> Record:
    # With a judge, every record carries a verdict (an unusable one is not correct; score()
    # ignores those of unanswered questions), so the judge's rates exist even when nothing was
    # answered.
    verdict = (row.get("judge") or {}).get("correct")
    return Record(row["prediction"], tuple(row["gold"]), not row["truncated"], bool(verdict) if judged else None)


def _grounded(question: EvalQuestion, answer: MethodAnswer) -> bool:
    for key in ("grounded", "supported"):  # the agent's own verdict
        if isinstance(answer.extra.get(key), bool):
            return answer.extra[key]
    # A follow-up's entities are in the conversation: ground against its standalone form (the
    # agent's own rules), so a method is not penalized for the pronoun it was asked with.
    asked = rewrite_by_rules(question.text, question.history).standalone if question.history else question.text
    return ground(asked, answer.prediction, [str(f.get("text", "")) for f in answer.facts]).grounded


def _row(question: EvalQuestion, answer: MethodAnswer, seconds: float, grounds: bool = False) -> dict[str, Any]:
    answered = counts_as_answered(answer.prediction, answer.finished)
    row = {"id": question.id, "question": question.text, "gold": list(question.answers),
           **answer.as_dict(), "answered": answered,
           "exact": answered and exact_match(answer.prediction, question.answers),
           "approximate": answered and approximate_match(answer.prediction, question.answers),
           "f1": round(token_f1(answer.prediction, question.answers), 4) if answered else 0.0,
           "grounded": _grounded(question, answer) if grounds and answered else None,
           "seconds": round(seconds, 3)}
    if question.history:
        row["history"] = [dict(turn) for turn in question.history]
    if "in_web" in question.meta:
        row["in_web"] = question.meta["in_web"]
    if question.meta.get("stratum") or question.meta.get("relation"):
        row["stratum"] = str(question.meta.get("stratum") or question.meta.get("relation"))
    if "answers" in answer.extra and question.meta.get("objects"):
        row["relation"] = question.meta.get("relation", "")
        row["set"] = set_score(answer.extra["answers"], question.meta["objects"]).as_dict()
    if "samples" in answer.extra:
        samples = answer.extra["samples"]
        row["best_of_n"] = {"n": len(samples),
                            "exact": any(counts_as_answered(s) and exact_match(s, question.answers) for s in samples),
                            "approximate": any(counts_as_answered(s) and approximate_match(s, question.answers)
                                               for s in samples)}
    return row


def evaluate_methods(methods: Sequence[EvalMethod], questions: Sequence[EvalQuestion], *,
                     judge: AnswerJudge | None = None, batch_size: int = 4,
                     on_progress: Callable[[int], None] | None = None,
                     done: Mapping[tuple[str, str], dict[str, Any]] | None = None,
                     on_row: Callable[[str, dict[str, Any]], None] | None = None) -> list[MethodResult]:
    """Answer ``questions`` with each method in turn, judge the answered ones, and score.

    ``done`` maps (method, question id) to rows saved by an earlier, interrupted run with the
    same settings: those questions are not asked again. ``on_row(method, row)`` is called as each
    new row is finished (to save it); ``on_progress(n)`` after each batch with the number of
    questions it held (resumed ones count at the start).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    done = done or {}
    results = []
    for method in methods:
        size = batch_size if method.batched else 1
        rows: dict[str, dict[str, Any]] = {q.id: done[(method.name, q.id)] for q in questions
                                          if (method.name, q.id) in done}
        if rows and on_progress is not None:
            on_progress(len(rows))
        todo = [q for q in questions if q.id not in rows]
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            t = time.perf_counter()
            answers = method.answer_batch(batch)
            elapsed = time.perf_counter() - t
            for question, answer in zip(batch, answers):
                row = _row(question, answer, elapsed / len(batch), getattr(method, "grounds", False))
                if judge is not None and row["answered"]:
                    t = time.perf_counter()
                    judged = judge.judge(question.text, question.answers, answer.prediction)
                    row["judge"] = {**judged.as_dict(), "seconds": round(time.perf_counter() - t, 3)}
                rows[question.id] = row
                if on_row is not None:
                    on_row(method.name, row)
            if on_progress is not None:
                on_progress(len(batch))
        ordered = [rows[q.id] for q in questions]
        records = [_record(r, judge is not None) for r in ordered]
        seconds = sum(r["seconds"] for r in ordered)
        judge_seconds = sum((r.get("judge") or {}).get("seconds", 0.0) for r in ordered)
        results.append(MethodResult(method.name, score(records), seconds, ordered, judge_seconds))
    return results
