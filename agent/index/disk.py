"""Reading the disk fact index: :class:`DiskFactIndex` memory-maps a file written by
:mod:`.disk_writer` (the layout: :mod:`.disk_format`) and walks it with the fact-index cursor API.

Usage::

    index = DiskFactIndex.open("kb.fwd", tokenizer)
    cur = index.root()
    cur = index.step(cur, int(index.next_tokens(cur)[0]))
    ...
    if index.can_end(cur): fact_id, cur = index.finish(cur)
    index.facts[fact_id].text
"""
from __future__ import annotations

import hashlib
import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FactweaveError
from ..knowledge.facts import Fact
from .cursor import FactCursor
from .disk_format import BLOCK, EAGER_VERIFY, EMPTY, SUPER, TRIPLE, rank_to_cp, ranks_of_utf8, read_disk_header
from .tokens import refuse_other_tokenizer


class DiskFacts:
    """``index.facts[i]``: fact ``i`` rebuilt from its tokens (needs the index's tokenizer)."""

    def __init__(self, index: DiskFactIndex) -> None:
        self.index = index

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> Fact:
        if not 0 <= i < len(self.index):
            raise IndexError(f"fact id {i} out of range (0..{len(self.index) - 1})")
        return self.index.fact(int(i))

    def __iter__(self) -> Iterator[Fact]:
        return (self[i] for i in range(len(self)))


class DiskFactIndex:
    """A memory-mapped disk index with the :class:`FactIndex` cursor API (see module docs)."""

    def __init__(self, path: str | Path, header: dict[str, Any], tokenizer: Any | None = None) -> None:
        self.path = Path(path)
        self.header = header
        self.tokenizer = tokenizer
        self.fingerprint: str = header["tokenizer_fingerprint"]
        self._n = int(header["fact_count"])
        with open(self.path, "rb") as f:
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if header["file_bytes"] else None
        base = int(header["data_start"])
        self._arrays: dict[str, np.ndarray] = {}
        for name, s in header["sections"].items():
            dtype = np.dtype(s["dtype"])
            buf = self._mm if self._mm is not None else b""
            self._arrays[name] = np.frombuffer(buf, dtype=dtype, count=s["bytes"] // dtype.itemsize,
                                               offset=base + s["offset"]) if s["bytes"] else np.zeros(0, dtype)
        a = self._arrays
        self._lcp, self._first, self._rest_len = a["lcp"], a["first"], a["rest_len"]
        self._block_offsets, self._min64, self._min4096 = a["block_offsets"], a["lcp_min64"], a["lcp_min4096"]
        self._long_rows, self._long_lens = a["long_rows"], a["long_lens"]
        self._rest_start = base + header["sections"]["rest"]["offset"]
        # Code point -> token id, as a list: decoding a fact is a str decode plus list lookups.
        ranks = a["rank_tokens"].astype(np.int64)
        cps = rank_to_cp(np.arange(len(ranks)))
        table = np.zeros(int(cps.max()) + 1 if len(cps) else 1, dtype=np.int64)
        table[cps] = ranks
        self._cp_token = table.tolist()
        self._full64 = (self._n // BLOCK) * BLOCK
        self._full4096 = (self._n // SUPER) * SUPER
        self._rows: dict[int, tuple[int, list[int]]] = {}
        self._branches: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        self._big: dict[int, dict] = {}
        self._ones: dict[int, np.ndarray] = {}
        self._expanded: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.facts = DiskFacts(self)

    # ---- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, tokenizer: Any | None = None, *, verify: bool = False) -> DiskFactIndex:
        """Map ``path``; with ``tokenizer``, refuse an index built for another one. Small sections
        are checked against their digests now, all of them with ``verify``."""
        path = Path(path)
        header = read_disk_header(path)
        if tokenizer is not None:
            refuse_other_tokenizer(str(path), header["tokenizer_fingerprint"], header.get("meta", {}).get("model", ""),
                                   tokenizer, "`factweave index build --backend disk --model <your model>`")
        index = cls(path, header, tokenizer)
        index.verify(limit=None if verify else EAGER_VERIFY)
        return index

    def verify(self, limit: int | None = None) -> None:
        """Check section digests (those up to ``limit`` bytes; all when None); raise if corrupt."""
        base = int(self.header["data_start"])
        for name, s in self.header["sections"].items():
            if limit is not None and s["bytes"] > limit:
                continue
            digest = hashlib.blake2b(digest_size=16)
            for lo in range(0, s["bytes"], 8 << 20):
                assert self._mm is not None  # a section with bytes means a non-empty, mapped file
                hi = min(s["bytes"], lo + (8 << 20))
                digest.update(self._mm[base + s["offset"] + lo : base + s["offset"] + hi])
            if digest.hexdigest() != s["blake2b"]:
                raise FactweaveError(f"{self.path}: index file is corrupt (section {name} fails its checksum); rebuild it")

    def close(self) -> None:
        self._arrays.clear()
        self._lcp = self._first = self._rest_len = None  # type: ignore[assignment]
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # views still alive elsewhere: the map closes with them
                pass

    # ---- sizes --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    @property
    def node_count(self) -> int:
        """Nodes of the equivalent (uncompressed) prefix tree, root included."""
        return int(self.header["node_count"])

    # ---- positions ----------------------------------------------------------------------------
    def _pack(self, lo: int, hi: int, d: int) -> int:
        return ((lo * (self._n + 1) + (self._n - (hi - lo))) << 8) | d

    def _unpack(self, node: int) -> tuple[int, int, int]:
        q, d = node >> 8, node & 255
        lo, r = divmod(q, self._n + 1)
        return lo, lo + self._n - r, d

    def _rest_bytes(self, i: int) -> int:
        n = int(self._rest_len[i])
        if n == 255:
            j = int(np.searchsorted(self._long_rows, i))
            n = int(self._long_lens[j])
        return n

    def _row(self, i: int) -> tuple[int, list[int]]:
        """``(s, tokens)``: fact ``i``'s tokens from depth ``s`` on (0 at restart points)."""
        hit = self._rows.get(i)
        if hit is not None:
            return hit
        block = i // BLOCK
        lo = block * BLOCK
        off = int(self._block_offsets[block])
        if i > lo:
            lens = self._rest_len[lo:i]
            off += int(lens.sum(dtype=np.int64))
            if len(self._long_rows):
                a, b = np.searchsorted(self._long_rows, [lo, i])
                off += int(self._long_lens[a:b].sum(dtype=np.int64)) - 255 * int(b - a)
        n = self._rest_bytes(i)
        pos = self._rest_start + off
        assert self._mm is not None  # the file holds at least its header, so it is mapped
        text = self._mm[pos : pos + n].decode("utf-8")
        cpt = self._cp_token
        rest = [cpt[ord(c)] for c in text]
        lcp = int(self._lcp[i])
        s = 0 if i == lo else lcp
        rest.insert(lcp - s, int(self._first[i]))
        if len(self._rows) > 4096:
            self._rows.clear()
        self._rows[i] = (s, rest)
        return s, rest

    def _row_len(self, i: int) -> int:
        s, toks = self._row(i)
        return s + len(toks)

    def _min_positions(self, a: int, hi: int) -> tuple[int, np.ndarray]:
        """``b = min(lcp[a:hi])`` and the positions in ``[a, hi)`` where ``lcp == b``."""
        lcp = self._lcp
        if hi - a <= 2 * SUPER:  # a contiguous byte scan beats block bookkeeping up to here
            seg = lcp[a:hi]
            b = int(seg.min())
            return b, a + np.flatnonzero(seg == b)
        if hi - a <= 64 * SUPER:
            # Head and tail scanned, whole 64-blocks in between through their minima: only
            # blocks holding the minimum are read (one per child, roughly). Already in order.
            b1, b2 = -(-a // BLOCK), hi // BLOCK
            head, mids, tail = lcp[a : b1 * BLOCK], self._min64[b1:b2], lcp[b2 * BLOCK : hi]
            b = int(mids.min())
            if len(head):
                b = min(b, int(head.min()))
            if len(tail):
                b = min(b, int(tail.min()))
            cand = b1 + np.flatnonzero(mids == b)
            r, c = np.nonzero(lcp[: self._full64].reshape(-1, BLOCK)[cand] == b)
            parts = [cand[r] * BLOCK + c]
            if len(head):
                parts.insert(0, a + np.flatnonzero(head == b))
            if len(tail):
                parts.append(b2 * BLOCK + np.flatnonzero(tail == b))
            return b, np.concatenate(parts) if len(parts) > 1 else parts[0]
        # Split into a head and tail scanned directly and whole 64-blocks in between, which are
        # themselves split into 64-blocks and whole 4096-superblocks.
        b1, b2 = -(-a // BLOCK), hi // BLOCK  # whole blocks [b1, b2)
        pieces = [(a, b1 * BLOCK), (b2 * BLOCK, hi)]
        s1, s2 = -(-b1 // BLOCK), b2 // BLOCK  # whole superblocks [s1, s2)
        if s2 > s1:
            block_ranges = [(b1, s1 * BLOCK), (s2 * BLOCK, b2)]
        else:
            block_ranges, s1, s2 = [(b1, b2)], 0, 0
        mins = [int(lcp[x:y].min()) for x, y in pieces if y > x]
        mins += [int(self._min64[x:y].min()) for x, y in block_ranges if y > x]
        if s2 > s1:
            mins.append(int(self._min4096[s1:s2].min()))
        b = min(mins)
        blocks = [x + np.flatnonzero(self._min64[x:y] == b) for x, y in block_ranges if y > x]
        if s2 > s1:
            supers = s1 + np.flatnonzero(self._min4096[s1:s2] == b)
            if len(supers):
                sub = self._min64[: self._full4096 // BLOCK].reshape(-1, BLOCK)[supers]
                r, c = np.nonzero(sub == b)
                blocks.append(supers[r] * BLOCK + c)
        block_ids = np.sort(np.concatenate(blocks)) if blocks else np.zeros(0, np.int64)
        found = [x + np.flatnonzero(lcp[x:y] == b) for x, y in pieces if y > x]
        if len(block_ids):
            full = lcp[: self._full64].reshape(-1, BLOCK)
            r, c = np.nonzero(full[block_ids] == b)
            found.append(block_ids[r] * BLOCK + c)
        return b, np.sort(np.concatenate(found))

    def _branch(self, lo: int, hi: int) -> tuple[int, np.ndarray]:
        # One answer per fact range, shared by every depth of its unary stretch.
        key = (lo, hi)
        hit = self._branches.get(key) or self._big.get(id(self._branches), {}).get(key)
        if hit is None:
            hit = self._min_positions(lo + 1, hi)
            self._remember(self._branches, key, hit, hi - lo)
        return hit

    def _expand(self, lo: int, hi: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children of node ``(lo, hi, d)``: sorted tokens and each child's fact range."""
        key = (lo, hi, d)
        hit = self._expanded.get(key) or self._big.get(id(self._expanded), {}).get(key)
        if hit is not None:
            return hit
        if hi - lo <= 0:
            out = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        else:
            s, toks = self._row(lo)
            terminal = s + len(toks) == d
            b, positions = self._branch(lo, hi) if hi - lo > 1 else (255, None)
            if d < b and not terminal:  # inside a unary stretch: one child, the whole range
                out = (np.array([toks[d - s]]), np.array([lo]), np.array([hi]))
            elif hi - lo == 1:
                out = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
            else:
                assert positions is not None  # hi - lo > 1 here, so _branch ran
                starts = positions.astype(np.int64)
                tokens = self._first[starts].astype(np.int64)
                if not terminal:
                    starts = np.concatenate([[lo], starts])
                    tokens = np.concatenate([[toks[d - s]], tokens])
                ends = np.concatenate([starts[1:], [hi]])
                out = (tokens, starts, ends)
        self._remember(self._expanded, key, out, hi - lo)
        return out

    def _remember(self, cache: dict, key: Any, value: Any, size: int) -> None:
        # Ranges of many facts (the top of the tree: every walk passes there, and they cost the
        # most to expand) are kept in a second map with a larger bound; the rest is a small
        # cache emptied when full, so memory stays bounded whatever the index size.
        if size > SUPER:
            big = self._big.setdefault(id(cache), {})
            if len(big) > 65536:
                big.clear()
            big[key] = value
        else:
            if len(cache) > 8192:
                cache.clear()
            cache[key] = value

    # ---- the cursor API (same as FactIndex) ---------------------------------------------------
    def root(self, used: tuple[int, ...] = ()) -> FactCursor:
        """A cursor at the start of a fact; ``used`` are ids of facts already said."""
        return FactCursor(0, used)

    @staticmethod
    def _spent(used: tuple[int, ...], lo: np.ndarray | int, hi: np.ndarray | int):
        u = np.sort(np.asarray(used, dtype=np.int64))
        return np.searchsorted(u, hi) - np.searchsorted(u, lo)

    def remaining(self, node: int, used: tuple[int, ...] = ()) -> int:
        """Facts below ``node`` that have not been generated yet."""
        lo, hi, _ = self._unpack(node)
        n = hi - lo
        return n - int(self._spent(used, lo, hi)) if used else n

    def _single(self, lo: int, hi: int, d: int) -> int:
        """The only next token at ``(lo, hi, d)`` inside a unary stretch (most steps: no arrays
        built, nothing cached); -1 at a branch point; -2 where the only fact ends."""
        if hi <= lo:
            return -2
        s, toks = self._row(lo)
        if s + len(toks) == d:
            return -2 if hi - lo == 1 else -1
        if hi - lo == 1 or d < self._branch(lo, hi)[0]:
            return toks[d - s]
        return -1

    def _one(self, token: int) -> np.ndarray:
        arr = self._ones.get(token)
        if arr is None:
            arr = np.array([token], dtype=np.int64)
            arr.flags.writeable = False
            self._ones[token] = arr
        return arr

    def next_tokens(self, cursor: FactCursor) -> np.ndarray:
        """Token ids that continue at least one fact not generated yet (sorted)."""
        lo, hi, d = self._unpack(cursor.node)
        t = self._single(lo, hi, d)
        if t >= 0:
            if cursor.used and self.remaining(cursor.node, cursor.used) == 0:
                return EMPTY
            return self._one(t)
        if t == -2:
            return EMPTY
        tokens, starts, ends = self._expand(lo, hi, d)
        if not cursor.used or len(tokens) == 0:
            return tokens
        return tokens[(ends - starts) - self._spent(cursor.used, starts, ends) > 0]

    def can_end(self, cursor: FactCursor) -> bool:
        """True when a fact ends here and has not been generated yet."""
        lo, hi, d = self._unpack(cursor.node)
        return hi > lo and self._row_len(lo) == d and lo not in cursor.used

    def child(self, node: int, token: int) -> int:
        """The child of ``node`` along ``token``, or -1."""
        lo, hi, d = self._unpack(node)
        t = self._single(lo, hi, d)
        if t >= 0:
            return self._pack(lo, hi, d + 1) if t == token else -1
        if t == -2:
            return -1
        tokens, starts, ends = self._expand(lo, hi, d)
        j = int(np.searchsorted(tokens, token))
        if j < len(tokens) and tokens[j] == token:
            return self._pack(int(starts[j]), int(ends[j]), d + 1)
        return -1

    def step(self, cursor: FactCursor, token: int) -> FactCursor:
        """Follow ``token``; raises ``KeyError`` when no remaining fact continues with it."""
        node = self.child(cursor.node, token)
        if node < 0 or self.remaining(node, cursor.used) == 0:
            raise KeyError(f"token {token} continues no remaining fact at node {cursor.node}")
        return FactCursor(node, cursor.used)

    def finish(self, cursor: FactCursor) -> tuple[int, FactCursor]:
        """End the fact at the cursor: its fact id, and a root cursor that will not produce it again."""
        if not self.can_end(cursor):
            raise KeyError(f"no remaining fact ends at node {cursor.node}")
        lo = self._unpack(cursor.node)[0]
        return lo, FactCursor(0, cursor.used + (lo,))

    # ---- facts back -------------------------------------------------------------------------
    def fact_tokens(self, fact_id: int) -> list[int]:
        """The token ids of fact ``fact_id``, rebuilt from its restart point."""
        if not 0 <= fact_id < self._n:
            raise IndexError(f"fact id {fact_id} out of range (0..{self._n - 1})")
        tokens: list[int] = []
        for i in range(fact_id - fact_id % BLOCK, fact_id + 1):
            s, toks = self._row(i)
            tokens = tokens[:s] + toks
        return tokens

    def fact_text(self, fact_id: int) -> str:
        if self.tokenizer is None:
            raise FactweaveError(f"{self.path}: reading fact text needs the tokenizer (open the index with it)")
        text = self.tokenizer.decode(self.fact_tokens(fact_id), skip_special_tokens=True,
                                     clean_up_tokenization_spaces=False)
        return text[1:] if text.startswith(" ") else text

    def fact(self, fact_id: int) -> Fact:
        """Fact ``fact_id`` as a :class:`Fact` (a triple when its text is one, else a statement)."""
        text = self.fact_text(fact_id)
        m = TRIPLE.fullmatch(text)
        if m:
            return Fact(m.group(1), m.group(2), m.group(3), f"{self.path.name}#{fact_id}")
        return Fact("", "", "", f"{self.path.name}#{fact_id}", text)

    def token_rows(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, ...]]:
        """Every fact's tokens in id order, decoded a block of rows at a time (vectorized)."""
        stop = self._n if stop is None else min(stop, self._n)
        step = 64 * BLOCK
        for lo in range(start - start % BLOCK, stop, step):
            hi = min(stop, lo + step)
            yield from self._decode_rows(lo, hi)[max(0, start - lo):]

    def _decode_rows(self, lo: int, hi: int) -> list[tuple[int, ...]]:
        out, lens = self.token_matrix(lo, hi)
        return [tuple(row[:k]) for row, k in zip(out.tolist(), lens.tolist())]

    def token_matrix(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Facts ``lo..hi-1`` (``lo`` a multiple of 64) as a zero-padded token matrix and their
        lengths, rebuilt with numpy column by column (no Python loop per fact)."""
        if lo % BLOCK:
            raise ValueError(f"token_matrix starts at a multiple of {BLOCK}")
        hi = min(hi, self._n)
        n = hi - lo
        lens_b = self._rest_len[lo:hi].astype(np.int64)
        if len(self._long_rows):
            a, b = np.searchsorted(self._long_rows, [lo, hi])
            lens_b[self._long_rows[a:b].astype(np.int64) - lo] = self._long_lens[a:b]
        off = int(self._block_offsets[lo // BLOCK])
        nbytes = int(lens_b.sum())
        assert self._mm is not None  # the file holds at least its header, so it is mapped
        raw = np.frombuffer(self._mm, dtype=np.uint8, count=nbytes, offset=self._rest_start + off)
        starts = (raw & 0xC0) != 0x80
        ranks = ranks_of_utf8(raw.tobytes())
        tokens = np.asarray(self._arrays["rank_tokens"], dtype=np.int64)[ranks]
        # Tokens per row: code points whose first byte lies in that row's bytes.
        row_of_byte = np.repeat(np.arange(n), lens_b)
        per_row = np.bincount(row_of_byte[starts], minlength=n)
        lcp = self._lcp[lo:hi].astype(np.int64)
        gid = lo + np.arange(n)
        s = np.where(gid % BLOCK == 0, 0, lcp)
        lens = s + per_row + 1
        width = int(lens.max())
        out = np.zeros((n, width), dtype=np.int64)
        depth = np.arange(width)[None, :]
        stored = (depth >= s[:, None]) & (depth < lens[:, None])
        rest_mask = stored & (depth != lcp[:, None])
        out[rest_mask] = tokens
        out[np.arange(n), lcp] = self._first[lo:hi]
        # Depths below s come from the row above: forward-fill each column from the last row
        # that stored it (restart rows store everything, so the fill never crosses a block).
        idx = np.where(stored, np.arange(n)[:, None], 0)
        np.maximum.accumulate(idx, axis=0, out=idx)
        out = np.take_along_axis(out, idx, axis=0)
        out[depth >= lens[:, None]] = 0
        return out, lens

    def arrays(self) -> dict[str, np.ndarray]:
        return dict(self._arrays)

