"""First-cut evaluation on KAMEL questions: ReFactX constrained generation vs the same model free."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..decoding.generate import FactGenerator
from ..knowledge.kamel import Question
from .metrics import Record, Score, score

MODES = {"refactx": True, "llm-only": False}


@dataclass
class ModeResult:
    mode: str
    score: Score
    seconds: float
    rows: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "score": self.score.as_dict(), "seconds": round(self.seconds, 2),
                "seconds_per_question": round(self.seconds / max(1, len(self.rows)), 3), "questions": self.rows}


def evaluate(generator: FactGenerator, questions: Sequence[Question], modes: Sequence[str] = ("refactx", "llm-only"),
             batch_size: int = 4, on_batch: Callable[[int], None] | None = None) -> list[ModeResult]:
    """Answer every question in each mode; a question counts as answered when the model gave an
    ``Answer:`` that is not "I don't know" (truncated outputs are not answers)."""
    results = []
    for mode in modes:
        constrained = MODES[mode]
        rows: list[dict[str, Any]] = []
        records: list[Record] = []
        start = time.perf_counter()
        for i in range(0, len(questions), batch_size):
            batch = questions[i : i + batch_size]
            for q, a in zip(batch, generator.answer_batch([q.text for q in batch], constrained=constrained)):
                records.append(Record(a.answer, q.answers, not a.truncated))
                rows.append({"id": q.id, "question": q.text, "gold": list(q.answers), "prediction": a.answer,
                             "truncated": a.truncated, "text": a.text, "facts": [f.as_dict() for f in a.facts],
                             "tokens": a.tokens})
            if on_batch:
                on_batch(len(batch))
        results.append(ModeResult(mode, score(records), time.perf_counter() - start, rows))
    return results
