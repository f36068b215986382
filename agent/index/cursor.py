"""The per-sequence position in a fact index: tiny, immutable, cheap to copy per beam."""
from __future__ import annotations

from typing import NamedTuple


class FactCursor(NamedTuple):
    """``node``: where the fact being written stands in the tree (0 = its start).
    ``used``: terminal nodes of the facts this sequence has already generated; they are
    subtracted from leaf counts so no fact is produced twice in one answer."""

    node: int = 0
    used: tuple[int, ...] = ()
