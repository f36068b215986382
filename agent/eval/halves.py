"""The dev and test halves of every evaluation set: a frozen split that catches tuning.

Every question belongs to one half, ``dev`` or ``test``, by a hash of its id (SHA-256 of
``"factweave-half/" + id``; even first byte: ``dev``). The split needs no file, never changes
when a set grows or a sample's size or seed changes, and is the same on every machine: a question
in the test half stays there. Build and debug on the dev half only (``factweave eval ... --half
dev``); run the test half only to report (``--half test``), and report both side by side
(``benchmarks/reasoning_table.py``): a gap between them is a finding, the sign that something was
fitted to the questions it was written from.

Questions asked as a pair share a half: a follow-up and its standalone twin (``kamel-chat``) carry
the same ``meta["twin"]``, and a question in another wording (a model's paraphrase,
:mod:`agent.eval.wordings`) keeps its original's id.

Example::

    >>> half_of("2wiki/8813f87c0bdd11eba7f7acde48001122")   # 'dev' or 'test', the same everywhere
    'dev'
    >>> [q for q in questions if in_half(q, "test")]   # not run: needs questions   # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal

from ..errors import FactweaveError
from .questions import EvalQuestion

Half = Literal["dev", "test"]
HALVES: tuple[Half, ...] = ("dev", "test")
_SALT = "factweave-half/"


def half_of(key: str) -> Half:
    """The half of the question whose id (or twin key) is ``key``."""
    return "dev" if hashlib.sha256((_SALT + key).encode("utf-8")).digest()[0] % 2 == 0 else "test"


def half_key(question: EvalQuestion) -> str:
    """What decides ``question``'s half: its twin key when it has one (a follow-up and its
    standalone twin go together), else its id."""
    return str(question.meta.get("twin") or question.id)


def in_half(question: EvalQuestion, half: str | None) -> bool:
    """Whether ``question`` is in ``half`` (None: every question is)."""
    return half is None or half_of(half_key(question)) == half


def only_half(questions: Iterable[EvalQuestion], half: str | None) -> list[EvalQuestion]:
    """The questions of ``half`` (None: all of them), in their order."""
    if half is not None and half not in HALVES:
        raise FactweaveError(f"unknown half {half!r}; choose dev or test")
    return [q for q in questions if in_half(q, half)]
