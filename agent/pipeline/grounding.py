"""Whether an answer is grounded in the facts stated for it (minimal rule).

An answer is grounded when, normalized (``agent.eval.metrics.normalize_answer``: case,
punctuation, articles), it is contained word for word in one of the normalized facts (a triple's ``<`` ``>`` removed). "I don't
know." and empty answers are not grounded. This is the evaluation's stand-in: the pipeline's
own rule (chains of facts, computed answers) replaces this module with the same ``ground``
signature.

Example::

    ground("What is the official language of Germany?", "German", ["<Germany> <official language> <German> ."])
    # Grounding(grounded=True, how="contained in fact 1", facts=(0,))
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Grounding:
    """``grounded``: whether the answer stands; ``how``: one line for a trace; ``facts``: the
    indices (into the stated facts) it rests on."""

    grounded: bool
    how: str
    facts: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"grounded": self.grounded, "how": self.how, "facts": list(self.facts)}


def ground(question: str, answer: str, facts: Sequence[str]) -> Grounding:
    """Whether ``answer`` to ``question`` is contained in one of ``facts`` (see the module docstring)."""
    from ..eval.metrics import counts_as_answered, normalize_answer

    if not counts_as_answered(answer):
        return Grounding(False, "no answer")
    words = normalize_answer(answer).split()
    for i, fact in enumerate(facts):
        # A triple's brackets are symbols, which normalization keeps: they go first.
        stated = normalize_answer(fact.replace("<", " ").replace(">", " ")).split()
        if any(stated[start : start + len(words)] == words for start in range(len(stated) - len(words) + 1)):
            return Grounding(True, f"contained in fact {i + 1}", (i,))
    return Grounding(False, "in no stated fact" if facts else "no fact was stated")
