"""The PostgreSQL fact index's rows: how the in-memory tree is cut into rows and each row
encoded (written by :mod:`.pg_build`, read by :mod:`.postgres`).

The tree is the in-memory one (pre-order node ids, exact leaf counts, explicit ends of facts),
cut into rows. Every node lives in exactly one row, so nothing is merged at read time:

* an *upper* node, one whose subtree has more than ``block_nodes`` nodes, has a row of its own
  (``hi = lo + 1``) holding its subtree end, its fact count, the fact ending at it, and in
  ``data`` its children's tokens, subtree ends and fact counts (one lookup answers
  ``next_tokens`` even with facts already used);
* every other node is in a *block*: a run of consecutive complete small subtrees, at most
  ``block_nodes`` nodes together. ``data`` holds, per node, its subtree end (relative) and the
  token leading to it, and, per node where a fact ends, that fact's id. Children cost nothing:
  in pre-order the first child of ``n`` is ``n + 1`` and each next sibling starts where the
  previous one's subtree ends.

Why not one row per node: facts average ~15 nodes, and a row costs ~60-100 bytes of tuple and
index overhead plus a round trip per token. Blocks of plain little-endian integers (``bytea``;
no pickle, nothing that runs code when read) cost ~5-7 bytes per node.

Tables, in one schema per build (``fwi_<name>_<random>``), named in ``public.factweave_indexes``:

* ``tree(lo bigint primary key, hi, subtree_end, leaf_count, fact_id, data bytea)``
* ``facts(id int primary key, subject, predicate, object, source, statement)``
* ``meta(key text primary key, value text)``: format version, tokenizer fingerprint, counts.

A build loads a fresh schema with ``COPY`` and points the registry at it in the same
transaction, dropping the old schema: a failed build leaves the old index untouched, and a
reader that opened the old one gets a clear error instead of a mix of both.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..errors import FactweaveError

FORMAT = "factweave-pg-index"
FORMAT_VERSION = 1
REGISTRY = "factweave_indexes"
DEFAULT_BLOCK_NODES = 256
DEFAULT_PREFETCH_NODES = 4096
NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


# ---- encoding and decoding--------------------------------------------------------------------

def token_dtype_for(max_token: int) -> np.dtype:
    return np.dtype("<u2") if max_token < 2**16 else np.dtype("<i4")


def encode_upper(tokens: np.ndarray, ends: np.ndarray, leaves: np.ndarray) -> bytes:
    """Children of an upper node: tokens int32, subtree ends int64, fact counts int64."""
    return (tokens.astype("<i4").tobytes() + ends.astype("<i8").tobytes() + leaves.astype("<i8").tobytes())


def encode_block(lo: int, hi: int, subtree_end: np.ndarray, token_in: np.ndarray, terminal_fact: np.ndarray,
                  token_dtype: np.dtype) -> tuple[bytes, int]:
    """A block of nodes ``[lo, hi)``: fact ids int32[t], incoming tokens [n], relative subtree
    ends uint16[n], relative positions of the fact ends uint16[t]. Returns the bytes and t."""
    term = terminal_fact[lo:hi]
    where = np.nonzero(term >= 0)[0]
    data = (term[where].astype("<i4").tobytes() + token_in[lo:hi].astype(token_dtype).tobytes()
            + (subtree_end[lo:hi] - lo).astype("<u2").tobytes() + where.astype("<u2").tobytes())
    return data, len(where)


class RawRow(NamedTuple):
    """A row as read, decoded on first use."""

    lo: int
    hi: int
    end: int
    leaf: int
    fact: int | None
    data: bytes


@dataclass
class UpperRow:
    lo: int
    end: int
    leaf: int
    fact: int
    tokens: np.ndarray
    children: np.ndarray
    ends: np.ndarray
    leaves: np.ndarray

    @property
    def hi(self) -> int:
        return self.lo + 1

    @classmethod
    def decode(cls, lo: int, end: int, leaf: int, fact: int | None, data: bytes) -> UpperRow:
        k = len(data) // 20
        tokens = np.frombuffer(data, "<i4", k, 0)
        ends = np.frombuffer(data, "<i8", k, 4 * k)
        leaves = np.frombuffer(data, "<i8", k, 12 * k)
        children = np.empty(k, np.int64)
        if k:
            children[0] = lo + 1
            children[1:] = ends[:-1]
        return cls(lo, end, leaf, -1 if fact is None else fact, tokens, children, ends, leaves)

    def own(self, node: int) -> tuple[int, int, int]:
        return self.end, self.leaf, self.fact

    def kids(self, node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.tokens, self.children, self.ends, self.leaves


@dataclass
class BlockRow:
    lo: int
    hi: int
    ends: np.ndarray  # int64 absolute subtree end per node
    tokens: np.ndarray  # incoming token per node
    facts: np.ndarray  # int32 fact id ending at each node, or -1
    cum: np.ndarray  # int64 [n + 1]: facts ending before each node of the block
    _kids: dict[int, tuple] = field(default_factory=dict)

    @classmethod
    def decode(cls, lo: int, hi: int, t: int, data: bytes, token_dtype: np.dtype) -> BlockRow:
        n = hi - lo
        fact_ids = np.frombuffer(data, "<i4", t, 0)
        off = 4 * t
        tokens = np.frombuffer(data, token_dtype, n, off).astype(np.int32)
        off += token_dtype.itemsize * n
        ends = np.frombuffer(data, "<u2", n, off).astype(np.int64) + lo
        where = np.frombuffer(data, "<u2", t, off + 2 * n).astype(np.int64)
        facts = np.full(n, -1, np.int32)
        facts[where] = fact_ids
        cum = np.zeros(n + 1, np.int64)
        np.cumsum(facts >= 0, out=cum[1:])
        return cls(lo, hi, ends, tokens, facts, cum)

    def own(self, node: int) -> tuple[int, int, int]:
        i = node - self.lo
        end = int(self.ends[i])
        return end, int(self.cum[end - self.lo] - self.cum[i]), int(self.facts[i])

    def kids(self, node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        got = self._kids.get(node)
        if got is None:
            lo, ends = self.lo, self.ends
            ids = []
            c, stop = node + 1, int(ends[node - lo])
            while c < stop:
                ids.append(c)
                c = int(ends[c - lo])
            rel = np.asarray(ids, np.int64) - lo
            kid_ends = ends[rel]
            got = (self.tokens[rel], rel + lo, kid_ends, self.cum[kid_ends - lo] - self.cum[rel])
            self._kids[node] = got  # a dict store is atomic: racing threads compute the same value
        return got


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise FactweaveError(f"index name {name!r}: use 1-40 lowercase letters, digits or _, starting with a letter")
    return name
