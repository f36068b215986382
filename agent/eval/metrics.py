"""Answer matching and the accuracy / precision scores of the ReFactX paper.

Definitions (ReFactX, Pozzi et al. 2025):

* **accuracy** = correct answers / all questions.
* **precision** = correct answers / questions answered. A question is *not answered* when the
  model abstained ("I don't know"), its answer was truncated (the caller says so), or the answer
  is empty once normalized. Only answered questions can be correct, so precision >= accuracy.

Both are reported for two matchers: :func:`exact_match` (normalized equality with any gold) and
:func:`approximate_match` (whole-word containment either way, as in the FCKW re-ranker paper),
beside the token-level F1 of SQuAD and the multi-hop benchmarks (:func:`token_f1`: the best F1 of
the normalized prediction's words against any gold's, 0 for an unanswered question), averaged
over all questions (``f1``) and over the answered ones (``f1_answered``),
and, when records carry one, for an LLM judge's verdict (``Record.judged``; see
``agent.eval.judge``): only answered questions are judged, so the judge's precision has the same
denominator as the others'.
An empty prediction never matches anything; the peer implementation counted it as contained in
every gold.

Answers are normalized by :func:`agent.knowledge.normalize.normalize_answer` (its docstring says
how and why it differs from SQuAD's).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..knowledge.normalize import normalize_answer

# Matched against normalized text, so case, punctuation and articles need no alternatives here.
_ABSTENTIONS = re.compile(
    r"(?:i )?(?:do not|dont|cannot|can not|cant) (?:know|say|tell|answer)(?: (?:that|answer|for sure))?"
    r"|(?:it is |its |answer is )?unknown"
    r"|(?:i have )?no idea"
    r"|not known"
)


def is_abstention(prediction: str) -> bool:
    """True for "I don't know" and its variants ("I do not know.", "Unknown", "No idea").

    An empty prediction is not an abstention (the model said nothing); it still counts as not
    answered in :func:`score`.
    """
    return _ABSTENTIONS.fullmatch(normalize_answer(prediction)) is not None


def exact_match(prediction: str, golds: Iterable[str]) -> bool:
    """Normalized prediction equals a normalized gold; empty never matches."""
    predicted = normalize_answer(prediction)
    return bool(predicted) and any(predicted == normalize_answer(gold) for gold in golds)


def _contains_words(outer: Sequence[str], inner: Sequence[str]) -> bool:
    width = len(inner)
    return any(outer[start : start + width] == inner for start in range(len(outer) - width + 1))


def approximate_match(prediction: str, golds: Iterable[str]) -> bool:
    """A normalized gold occurs in the normalized prediction as whole words, or the prediction
    occurs in a gold as whole words; empty prediction or gold never matches.

    ``approximate_match("It was filmed in Paris, France", ["Paris"])`` is true;
    ``approximate_match("Parisian", ["Paris"])`` is not.
    """
    predicted = normalize_answer(prediction).split()
    if not predicted:
        return False
    for gold in golds:
        expected = normalize_answer(gold).split()
        if expected and (_contains_words(predicted, expected) or _contains_words(expected, predicted)):
            return True
    return False


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """Token-level F1 (SQuAD): the words of the normalized prediction against those of each
    normalized gold, counted with repeats; the best over the golds. An abstention, an empty
    prediction or an empty gold scores 0.

    ``token_f1("the Eiffel Tower in Paris", ["Eiffel Tower"])`` is 2 * (2/4 * 2/2) / (2/4 + 2/2) = 0.667.
    """
    if not counts_as_answered(prediction):
        return 0.0
    predicted = normalize_answer(prediction).split()
    best = 0.0
    for gold in golds:
        expected = normalize_answer(gold).split()
        same = sum((Counter(predicted) & Counter(expected)).values())
        if same:
            precision, recall = same / len(predicted), same / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


class Record(NamedTuple):
    """One question's outcome; ``answered`` is False when the caller saw the answer truncated;
    ``judged`` is an LLM judge's verdict (None: not judged, or no usable verdict)."""

    prediction: str
    golds: Sequence[str]
    answered: bool = True
    judged: bool | None = None


@dataclass(frozen=True)
class Score:
    """Counts over a set of questions and the rates derived from them (``None`` when undefined)."""

    total: int
    answered: int
    exact_correct: int
    approximate_correct: int
    judge_correct: int | None = None  # None: no record carried a verdict
    f1_sum: float = 0.0  # token F1 summed over the answered questions (the others score 0)

    @staticmethod
    def _rate(count: int, over: int) -> float | None:
        return count / over if over else None

    @property
    def exact_accuracy(self) -> float | None:
        return self._rate(self.exact_correct, self.total)

    @property
    def exact_precision(self) -> float | None:
        return self._rate(self.exact_correct, self.answered)

    @property
    def approximate_accuracy(self) -> float | None:
        return self._rate(self.approximate_correct, self.total)

    @property
    def approximate_precision(self) -> float | None:
        return self._rate(self.approximate_correct, self.answered)

    @property
    def f1(self) -> float | None:
        """Mean token F1 over all questions (unanswered ones score 0)."""
        return self.f1_sum / self.total if self.total else None

    @property
    def f1_answered(self) -> float | None:
        """Mean token F1 over the answered questions."""
        return self.f1_sum / self.answered if self.answered else None

    @property
    def judge_accuracy(self) -> float | None:
        return None if self.judge_correct is None else self._rate(self.judge_correct, self.total)

    @property
    def judge_precision(self) -> float | None:
        return None if self.judge_correct is None else self._rate(self.judge_correct, self.answered)

    def as_dict(self) -> dict[str, int | float | None]:
        """Counts and rates, for JSON reports (the judge's only when there were verdicts)."""
        out = {
            "total": self.total,
            "answered": self.answered,
            "exact_correct": self.exact_correct,
            "approximate_correct": self.approximate_correct,
            "exact_accuracy": self.exact_accuracy,
            "exact_precision": self.exact_precision,
            "approximate_accuracy": self.approximate_accuracy,
            "approximate_precision": self.approximate_precision,
            "f1": self.f1,
            "f1_answered": self.f1_answered,
        }
        if self.judge_correct is not None:
            out.update(judge_correct=self.judge_correct, judge_accuracy=self.judge_accuracy,
                       judge_precision=self.judge_precision)
        return out


def counts_as_answered(prediction: str, answered: bool = True) -> bool:
    """Whether a prediction enters precision: not truncated, not an abstention, not empty."""
    return answered and bool(normalize_answer(prediction)) and not is_abstention(prediction)


def score(records: Iterable[Record | tuple]) -> Score:
    """Score ``(prediction, golds, answered[, judged])`` records; see the module docstring.

    The judge's count is kept when any record carries a verdict (``judged`` not None); a
    verdict on a question that is not answered is ignored, and an answered question without
    one is not correct.
    """
    total = answered = exact = approximate = judge = 0
    f1_sum = 0.0
    judged_any = False
    for record in records:
        prediction, golds, was_answered, judged = Record(*record)
        total += 1
        judged_any = judged_any or judged is not None
        if not counts_as_answered(prediction, was_answered):
            continue
        answered += 1
        exact += exact_match(prediction, golds)
        approximate += approximate_match(prediction, golds)
        f1_sum += token_f1(prediction, golds)
        judge += judged is True
    return Score(total=total, answered=answered, exact_correct=exact, approximate_correct=approximate,
                 judge_correct=judge if judged_any else None, f1_sum=f1_sum)


# --- set answers (retrieval-constrained decoding) ----------------------------------------------


@dataclass(frozen=True)
class SetScore:
    """Precision, recall and F1 of one predicted answer set against the gold objects."""

    precision: float
    recall: float
    f1: float

    def as_dict(self) -> dict[str, float]:
        return {"precision": round(self.precision, 4), "recall": round(self.recall, 4), "f1": round(self.f1, 4)}


def set_score(predicted: Iterable[str], gold_objects: Sequence[Sequence[str]]) -> SetScore:
    """Compare answers with gold objects (each: its names, label and aliases), after
    :func:`normalize_answer`.

    Precision: the share of distinct predicted answers that name some gold object; recall: the
    share of gold objects named by some prediction. Abstentions are dropped from the
    prediction, and an empty prediction scores 0 / 0 / 0 (saying nothing finds nothing). Two
    predictions naming the same object count once for recall and each for precision.
    """
    answers = list(dict.fromkeys(a for a in (normalize_answer(p) for p in predicted)
                                 if a and not is_abstention(a)))
    golds = [{normalize_answer(n) for n in names if normalize_answer(n)} for names in gold_objects]
    golds = [g for g in golds if g]
    if not answers or not golds:
        return SetScore(0.0, 0.0, 0.0)
    correct = sum(1 for a in answers if any(a in g for g in golds))
    found = sum(1 for g in golds if any(a in g for a in answers))
    precision, recall = correct / len(answers), found / len(golds)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return SetScore(precision, recall, f1)


def macro_set_scores(rows: Iterable[tuple[str, SetScore]]) -> dict[str, Any]:
    """Macro average over groups (relations): the mean of each group's mean precision, recall and
    F1 (the RCD paper's KAMEL metric). ``rows``: ``(group, score)`` per question."""
    groups: dict[str, list[SetScore]] = {}
    for group, s in rows:
        groups.setdefault(group, []).append(s)
    if not groups:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "groups": 0}
    means = [(sum(s.precision for s in g) / len(g), sum(s.recall for s in g) / len(g), sum(s.f1 for s in g) / len(g))
             for g in groups.values()]
    n = len(means)
    return {"precision": round(sum(m[0] for m in means) / n, 4), "recall": round(sum(m[1] for m in means) / n, 4),
            "f1": round(sum(m[2] for m in means) / n, 4), "groups": n}
