"""An evaluation question (:class:`EvalQuestion`) and the natural sort key of ids and strata,
shared by every question source (:mod:`.datasets`, :mod:`.conversations`) and the reports."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EvalQuestion:
    """One question: ``answers`` holds every accepted gold answer (label and aliases);
    ``history`` the conversation's earlier turns, oldest first (``{"role": "user" | "assistant",
    "content": str}``), empty for a question asked alone."""

    id: str
    text: str
    answers: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    history: tuple[dict[str, str], ...] = field(default=(), hash=False)


def natural_key(text: str) -> list[Any]:
    """Sort key with numbers by value: P19 before P106."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]
