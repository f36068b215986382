"""What every fact index offers the decoder: the cursor API, as a Protocol (:class:`FactTree`).

Four indexes implement it: the in-memory prefix tree (:class:`agent.index.trie.FactIndex`), the
memory-mapped disk index (:class:`agent.index.disk.DiskFactIndex`), the PostgreSQL one
(:class:`agent.index.postgres.PostgresFactIndex`) and a base index grown with more facts while
generating (:class:`agent.index.union.GrowingFactIndex`). The decoder (the tracker, the
constrained generator, the agent's replies) only walks a tree through this API, so any of them
constrains generation the same way. ``FactIndex`` stays the name of the in-memory tree (public
since the first release); the Protocol is the tree every index *is*.

A cursor is the index's own small immutable value (:class:`~agent.index.cursor.FactCursor`, or a
union's :class:`~agent.index.union.UnionCursor`): where the fact being written stands, and the
facts this sequence already stated (``used``), which the index leaves out so that no fact is
written twice.

Example (not run: needs a fact index)::

    cursor = tree.root()
    for token in fact_tokens:
        assert token in tree.next_tokens(cursor)
        cursor = tree.step(cursor, token)
    if tree.can_end(cursor):
        fact_id, cursor = tree.finish(cursor)     # back at the root, that fact used
        tree.facts[fact_id].text
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..knowledge.facts import Fact


@runtime_checkable
class FactList(Protocol):
    """The facts of an index by id (a table in memory, rows on disk or in PostgreSQL)."""

    def __len__(self) -> int: ...
    def __getitem__(self, fact_id: int) -> Fact: ...
    def __iter__(self) -> Iterator[Fact]: ...


@runtime_checkable
class FactTree(Protocol):
    """A prefix tree of tokenized facts, walked one token at a time from a cursor."""

    @property
    def facts(self) -> FactList: ...

    def __len__(self) -> int:
        """How many facts the tree holds."""

    def root(self, used: tuple = ()) -> Any:
        """A cursor at the start of a fact, ``used`` facts excluded."""

    def next_tokens(self, cursor: Any) -> np.ndarray:
        """The tokens that continue some fact not yet used from ``cursor`` (sorted, unique)."""

    def step(self, cursor: Any, token: int) -> Any:
        """The cursor after ``token`` (one of :meth:`next_tokens`)."""

    def can_end(self, cursor: Any) -> bool:
        """Whether a whole fact not yet used ends at ``cursor``."""

    def finish(self, cursor: Any) -> tuple[int, Any]:
        """The id of the fact ending at ``cursor``, and a root cursor with it used."""


def walk(index: FactTree, tokens: Sequence[int]) -> Any:
    """The cursor after ``tokens`` from ``index``'s root, or None where no fact continues with them."""
    cursor = index.root()
    try:
        for token in tokens:
            cursor = index.step(cursor, int(token))
    except KeyError:
        return None
    return cursor
