"""Sorting more token sequences than fit in memory: sorted runs on disk, then a k-way merge.

Rule: a sequence is a fixed-width byte key, its tokens plus one in big-endian units (2 bytes when
every id fits, else 4) padded with zero bytes. Bytewise order of keys is then the lexicographic
order of sequences with a prefix before its extensions, which is the pre-order of their prefix
tree; numpy sorts such keys (``S`` dtype) in C. Sequences are buffered until ``memory_bytes``, sorted,
deduplicated and written as a run; :meth:`SequenceSorter.sorted_chunks` merges the runs (in
blocks, so memory stays bounded) and yields the distinct sequences in order.

Example (not run: needs batches of tokenized facts)::

    sorter = SequenceSorter(tmp_dir, memory_bytes=256 << 20, unit=2)
    for batch in batches: sorter.add(*flatten(batch))  # lists of token tuples
    for keys in sorter.sorted_chunks(): ...           # numpy 'S' arrays, sorted and distinct
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from itertools import chain
from pathlib import Path

import numpy as np


def flatten(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, lengths)``: the sequences laid end to end, and each one's length."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    flat = np.fromiter(chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths


def keys_of(flat: np.ndarray, lengths: np.ndarray, unit: int) -> np.ndarray:
    """Fixed-width byte keys of the sequences ``flat`` split by ``lengths`` (see the module rule)."""
    width = int(lengths.max()) if len(lengths) else 1
    matrix = np.zeros((len(lengths), max(width, 1)), dtype=">u2" if unit == 2 else ">u4")
    rows = np.repeat(np.arange(len(lengths)), lengths)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix[rows, cols] = flat + 1
    return matrix.view(f"S{matrix.shape[1] * unit}").ravel()


def unique_sorted(keys: np.ndarray) -> np.ndarray:
    keys = np.sort(keys, kind="stable")
    if len(keys) > 1:
        keep = np.empty(len(keys), dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


class SequenceSorter:
    """Collects token sequences under a memory bound and yields them sorted and distinct."""

    def __init__(self, folder: str | Path, *, memory_bytes: int, unit: int = 2) -> None:
        self.folder = Path(folder)
        self.memory_bytes = max(1 << 16, int(memory_bytes))
        self.unit = unit
        self._pending: list[np.ndarray] = []
        self._pending_bytes = 0
        self.runs: list[tuple[Path, int, int]] = []  # (file, count, key width in bytes)
        self.sequences_in = 0

    def add(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        """Add sequences given as ``flatten`` returns them."""
        if not len(lengths):
            return
        keys = keys_of(flat, lengths, self.unit)
        self.sequences_in += len(lengths)
        self._pending.append(keys)
        # Sorting copies the keys and makes an index: budget three times their size.
        self._pending_bytes += keys.nbytes * 3
        if self._pending_bytes >= self.memory_bytes:
            self._spill()

    def _merged_pending(self) -> np.ndarray:
        width = max(k.dtype.itemsize for k in self._pending)
        keys = unique_sorted(np.concatenate([k.astype(f"S{width}") for k in self._pending]))
        self._pending, self._pending_bytes = [], 0
        return keys

    def _spill(self) -> None:
        keys = self._merged_pending()
        fd, name = tempfile.mkstemp(prefix="run-", suffix=".keys", dir=self.folder)
        with os.fdopen(fd, "wb") as f:
            f.write(keys.tobytes())
        self.runs.append((Path(name), len(keys), keys.dtype.itemsize))

    def sorted_chunks(self, chunk_rows: int = 1 << 16) -> Iterator[np.ndarray]:
        """The distinct sequences in order, as chunks of keys (widths may differ between chunks)."""
        if not self.runs:  # everything fit in memory: no merge
            if self._pending:
                keys = self._merged_pending()
                for i in range(0, len(keys), chunk_rows):
                    yield keys[i : i + chunk_rows]
            return
        if self._pending:
            self._spill()
        yield from self._merge(chunk_rows)

    def _merge(self, chunk_rows: int) -> Iterator[np.ndarray]:
        width = max(w for _, _, w in self.runs)
        maps = [np.memmap(p, dtype=f"S{w}", mode="r", shape=(n,)) for p, n, w in self.runs]
        pos = [0] * len(maps)
        block = max(256, self.memory_bytes // (4 * width * len(maps)))
        last: bytes | None = None
        while True:
            blocks = []
            bound = None
            for r, m in enumerate(maps):
                blk = np.asarray(m[pos[r] : pos[r] + block]).astype(f"S{width}")
                blocks.append(blk)
                if len(blk) and pos[r] + len(blk) < len(m):
                    # Keys beyond this block may be smaller than other runs' keys: safe to emit
                    # only up to the smallest last key among runs that have more to give.
                    bound = blk[-1] if bound is None or blk[-1] < bound else bound
            if all(len(b) == 0 for b in blocks):
                break
            parts = []
            for r, blk in enumerate(blocks):
                take = len(blk) if bound is None else int(np.searchsorted(blk, bound, side="right"))
                parts.append(blk[:take])
                pos[r] += take
            keys = unique_sorted(np.concatenate(parts))
            if last is not None and len(keys) and keys[0] == last:
                keys = keys[1:]
            if len(keys):
                last = keys[-1]
                for i in range(0, len(keys), chunk_rows):
                    yield keys[i : i + chunk_rows]
        del maps

    def close(self) -> None:
        for p, _, _ in self.runs:
            p.unlink(missing_ok=True)
        self.runs = []
