"""KAMEL questions through the evaluation runner: ReFactX constrained generation vs the same model free.

The first-cut API, kept for scripts that use it; ``agent.eval.evaluation.run_evaluation`` runs
every method (web-RAG and the agent too) with the judge.

Example (not run: needs a model)::

    results = evaluate(open_generator("smollm2-135m"), kamel_questions(demo_kamel_root(), limit=20))
    [(r.method, r.score.exact_accuracy) for r in results]
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..decoding.generate import FactGenerator
from ..errors import FactweaveError
from ..knowledge.kamel import Question
from .methods import LLMOnlyMethod, ReFactXMethod
from .questions import EvalQuestion
from .run import MethodResult, evaluate_methods

MODES = ("refactx", "llm-only")


def evaluate(generator: FactGenerator, questions: Sequence[Question], modes: Sequence[str] = MODES,
             batch_size: int = 4, on_batch: Callable[[int], None] | None = None) -> list[MethodResult]:
    """Answer every question in each mode (``refactx``: constrained to the generator's index;
    ``llm-only``: free); truncated outputs are not answers."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise FactweaveError(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}")
    methods = [ReFactXMethod(generator) if m == "refactx" else LLMOnlyMethod(generator) for m in modes]
    asked = [EvalQuestion(q.id, q.text, q.answers, {"relation": q.relation}) for q in questions]
    return evaluate_methods(methods, asked, batch_size=batch_size, on_progress=on_batch)
