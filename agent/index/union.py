"""A fact index that grows while a model generates: a base index plus small trees added later.

Multi-hop chaining: a completed ``Fact:`` line names a bridge entity, the agent searches it and
adds the facts it finds to the per-question tree, and the model may state them from its next
``Fact:`` line on, in the same generation. Rebuilding one tree per hop would copy the base each
time and invalidate every beam's cursor; instead the index is an append-only list of segments
(the base, then one small :class:`~agent.index.trie.FactIndex` per :meth:`GrowingFactIndex.grow`)
and a cursor is a tuple with one position per segment. Segments never change once published, so
a cursor stays valid forever and readers never lock: a grow builds the new segment aside and
publishes the new segment list with one attribute assignment.

The cursor API is the one every index has (``root``, ``step``, ``next_tokens``, ``can_end``,
``finish``, ``facts``, ``fingerprint``), so the tracker, the logits processor and span location
work on it unchanged. Fact ids are global: a segment's local id plus the number of facts in the
segments before it, so ids handed out never move.

When new facts become reachable. A cursor at the start of a fact (what ``root`` and ``finish``
return) holds no per-segment positions: it is resolved against the segments that exist when the
first token of the fact is chosen, so a grow reaches every sequence that has not yet begun its
next fact. A walk already under way keeps the segments it started in (its position in a newer
segment would need the tokens walked so far); the facts added reach it at its next ``Fact:`` line.

Usage::

    tree = GrowingFactIndex(FactIndex.build(retrieved, tokenizer), tokenizer)

    def on_fact(done):                         # called by the generator as each fact completes
        tree.grow(search_web(done.text))       # allowed from the next Fact: line on

    answer = generator.answer(question, index=tree, on_fact=on_fact)
"""
from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol, cast

import numpy as np

from ..errors import IndexMismatchError
from ..knowledge.facts import Fact
from .base import FactTree, walk
from .disk import DiskFactIndex
from .tokens import fact_token_ids, tokenizer_fingerprint
from .trie import FactIndex

_NO_TOKENS = np.zeros(0, dtype=np.int32)


class _Fingerprinted(Protocol):
    """An index's tokenizer fingerprint (every index has one; :class:`FactTree` does not list it)."""

    fingerprint: str


class UnionCursor(NamedTuple):
    """``walk``: the position in each segment of the fact being written, ``None`` where that
    segment has no fact with these tokens (or did not exist when the walk began); the whole
    field is ``None`` at the start of a fact. ``used``: per segment, that segment's own ``used``
    (facts this sequence already generated); shorter than the segment list when the newer
    segments have none."""

    walk: tuple[Any, ...] | None = None
    used: tuple[tuple, ...] = ()


class _Segments(NamedTuple):
    """One published state: the segments and the global id of each one's first fact."""

    indexes: tuple[Any, ...]
    starts: tuple[int, ...]
    total: int


class UnionFacts:
    """``facts[i]`` across the segments, by global id (always the latest segments)."""

    def __init__(self, owner: GrowingFactIndex) -> None:
        self._owner = owner

    def __len__(self) -> int:
        return self._owner._state.total

    def __getitem__(self, i: int) -> Fact:
        state = self._owner._state
        i = int(i)
        if not 0 <= i < state.total:
            raise IndexError(f"fact id {i} out of range (0..{state.total - 1})")
        k = bisect.bisect_right(state.starts, i) - 1
        return state.indexes[k].facts[i - state.starts[k]]

    def __iter__(self) -> Iterator[Fact]:
        state = self._owner._state
        for index in state.indexes:
            yield from index.facts


class GrowingFactIndex:
    """An append-only union of a ``base`` index (anything with the cursor API: ``FactIndex``,
    ``DiskFactIndex``, ``PostgresFactIndex``) and small ``FactIndex`` segments added by
    :meth:`grow`, readable by any number of threads while one thread grows it.

    Args:
        base: the index to start from; it must be built for ``tokenizer``.
        tokenizer: tokenizes the facts added (refused with ``IndexMismatchError`` when the base
            was built for another one: token ids must mean the same in every segment).
        max_facts: the most facts :meth:`grow` may add in all (the base is not counted). A grow
            that would pass it is truncated: the facts that fit are added in the order given,
            the rest are dropped, and the returned ids say which were added.
        check_base: whether :meth:`grow` skips facts the base already holds. Checking walks the
            fact's tokens down the base (exact, no copy of the base's texts), cheap in memory or
            on a memory-mapped file; for a database it costs round trips inside the generation
            step. ``None`` (the default): check when the base is a ``FactIndex`` or
            ``DiskFactIndex``. Facts already in an added segment are always skipped.
    """

    def __init__(self, base: FactTree, tokenizer: Any, *, max_facts: int = 4096, check_base: bool | None = None) -> None:
        mine = tokenizer_fingerprint(tokenizer)
        theirs = cast(_Fingerprinted, base).fingerprint  # every index sets it; FactTree does not declare it
        if theirs != mine:
            raise IndexMismatchError(
                f"the base index was built for another tokenizer ({theirs[:12]}), not for this one "
                f"({mine[:12]}); every segment of a growing index must share one tokenizer")
        if max_facts < 0:
            raise ValueError("max_facts must be >= 0")
        self.base = base
        self.tokenizer = tokenizer
        self.fingerprint: str = theirs
        self.max_facts = max_facts
        self.check_base = isinstance(base, (FactIndex, DiskFactIndex)) if check_base is None else check_base
        self.facts = UnionFacts(self)
        self._state = _Segments((base,), (0,), len(base))
        self._grow_lock = threading.Lock()
        self._added_texts: set[str] = set()

    # ---- growing ----------------------------------------------------------------------------
    @property
    def segments(self) -> tuple[Any, ...]:
        """The base, then each added tree, oldest first."""
        return self._state.indexes

    @property
    def added(self) -> int:
        """Facts added by :meth:`grow` so far."""
        state = self._state
        return state.total - len(self.base)

    @property
    def added_texts(self) -> frozenset[str]:
        """The texts of the facts :meth:`grow` added (beyond the base)."""
        with self._grow_lock:
            return frozenset(self._added_texts)

    def grow(self, facts: Iterable[Fact]) -> list[int]:
        """Add ``facts`` as one new segment; the global ids of the facts actually added, in order.

        Skipped: facts whose text was already added, repeated in ``facts``, held by the base (see
        ``check_base``), or past ``max_facts``. Safe to call while other threads read."""
        with self._grow_lock:
            state = self._state
            room = self.max_facts - (state.total - len(self.base))
            fresh: dict[str, Fact] = {}
            for fact in facts:
                if fact.text not in self._added_texts:
                    fresh.setdefault(fact.text, fact)
            if room <= 0 or not fresh:
                return []
            texts = list(fresh)
            sequences = fact_token_ids(self.tokenizer, texts)  # reads the tokenizer only (agent.models)
            checked = state.indexes if self.check_base else state.indexes[1:]
            keep = [(fresh[t], s) for t, s in zip(texts, sequences) if not any(_holds(ix, s) for ix in checked)]
            keep = keep[:room]
            if not keep:
                return []
            segment = FactIndex.from_token_ids([s for _, s in keep], [f for f, _ in keep], self.fingerprint)
            start = state.total
            self._added_texts.update(f.text for f in segment.facts)
            # One assignment publishes the segment: readers see the old list or the new one.
            self._state = _Segments(state.indexes + (segment,), state.starts + (start,), start + len(segment))
            return list(range(start, start + len(segment)))

    def close(self) -> None:
        """Close the base (a PostgreSQL pool, a memory map); the added trees are plain memory."""
        close = getattr(self.base, "close", None)
        if close is not None:
            close()

    # ---- reading (the cursor API) -------------------------------------------------------------
    def __len__(self) -> int:
        return self._state.total

    def root(self, used: tuple = ()) -> UnionCursor:
        """A cursor at the start of a fact; ``used`` is a previous cursor's ``used``."""
        return UnionCursor(None, tuple(used))

    @staticmethod
    def _walk(cursor: UnionCursor, indexes: tuple[Any, ...]) -> tuple[Any, ...]:
        if cursor.walk is not None:
            return cursor.walk
        used = cursor.used
        return tuple(ix.root(used[k] if k < len(used) else ()) for k, ix in enumerate(indexes))

    def next_tokens(self, cursor: UnionCursor) -> np.ndarray:
        """Token ids that continue at least one fact not generated yet, in any segment (sorted)."""
        indexes = self._state.indexes
        parts = []
        for ix, c in zip(indexes, self._walk(cursor, indexes)):
            if c is not None:
                tokens = ix.next_tokens(c)
                if len(tokens):
                    parts.append(tokens)
        if not parts:
            return _NO_TOKENS
        if len(parts) == 1:
            return parts[0]
        return np.unique(np.concatenate(parts))

    def step(self, cursor: UnionCursor, token: int) -> UnionCursor:
        """Follow ``token`` in every segment where it continues a remaining fact; ``KeyError``
        when it continues none."""
        indexes = self._state.indexes
        walk: list[Any] = []
        alive = False
        for ix, c in zip(indexes, self._walk(cursor, indexes)):
            if c is not None:
                try:
                    c = ix.step(c, token)
                    alive = True
                except KeyError:
                    c = None
            walk.append(c)
        if not alive:
            raise KeyError(f"token {token} continues no remaining fact in any segment")
        return UnionCursor(tuple(walk), cursor.used)

    def can_end(self, cursor: UnionCursor) -> bool:
        """True when a fact not generated yet ends here, in some segment."""
        indexes = self._state.indexes
        return any(c is not None and ix.can_end(c) for ix, c in zip(indexes, self._walk(cursor, indexes)))

    def finish(self, cursor: UnionCursor) -> tuple[int, UnionCursor]:
        """End the fact at the cursor: its global id (the oldest segment holding it), and a start
        cursor that will not produce it again from any segment (a base that was not checked may
        hold a fact an added tree holds too)."""
        state = self._state
        walk = self._walk(cursor, state.indexes)
        used = list(cursor.used) + [()] * (len(walk) - len(cursor.used))
        fact_id = -1
        for k, (ix, c) in enumerate(zip(state.indexes, walk)):
            if c is not None and ix.can_end(c):
                local, after = ix.finish(c)
                used[k] = after.used
                if fact_id < 0:
                    fact_id = state.starts[k] + local
        if fact_id < 0:
            raise KeyError("no remaining fact ends here")
        return fact_id, UnionCursor(None, tuple(used))


def _holds(index: FactTree, tokens: list[int]) -> bool:
    """Whether ``index`` has a fact of exactly these tokens (walked through its cursor API)."""
    cursor = walk(index, tokens)
    return cursor is not None and bool(index.can_end(cursor))
