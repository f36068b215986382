"""A compact, immutable table of facts: UTF-8 blobs with offsets per column, no Python objects per row.

The ``statement`` column (free-text facts) came after the first index files; a table loaded from
a file without it reads every statement as empty, i.e. all its facts are triples.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..knowledge.facts import Fact

COLUMNS = ("subject", "predicate", "object", "source", "statement")


def _pack(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8) if encoded else np.zeros(0, np.uint8)
    return blob, offsets


@dataclass(frozen=True)
class FactTable:
    """Fact ``i`` is ``table[i]``; arrays are ``{column}_blob`` and ``{column}_offsets``."""

    arrays: dict[str, np.ndarray]

    @classmethod
    def from_facts(cls, facts: Iterable[Fact]) -> FactTable:
        facts = list(facts)
        arrays: dict[str, np.ndarray] = {}
        for col in COLUMNS:
            blob, offsets = _pack([getattr(f, col) for f in facts])
            arrays[f"{col}_blob"] = blob
            arrays[f"{col}_offsets"] = offsets
        return cls(arrays)

    def __len__(self) -> int:
        return len(self.arrays["subject_offsets"]) - 1

    def _field(self, col: str, i: int) -> str:
        off = self.arrays.get(f"{col}_offsets")
        if off is None:  # an index file written before the column existed
            return ""
        return bytes(self.arrays[f"{col}_blob"][off[i] : off[i + 1]]).decode("utf-8")

    def __getitem__(self, i: int) -> Fact:
        if not 0 <= i < len(self):
            raise IndexError(f"fact id {i} out of range (0..{len(self) - 1})")
        return Fact(*(self._field(c, int(i)) for c in COLUMNS))

    def __iter__(self) -> Iterator[Fact]:
        return (self[i] for i in range(len(self)))
