"""The disk fact index's file format: a memory-mapped, front-coded prefix tree for hundreds of
millions of facts. Written by :mod:`.disk_writer`, read by :mod:`.disk`.

Layout rule. Facts are the distinct token sequences in sorted order (a prefix before its
extensions); fact id ``i`` is rank ``i``. Per fact ``i`` the file keeps

* ``lcp[i]`` (uint8): how many leading tokens it shares with fact ``i - 1``;
* ``first[i]`` (uint16/uint32): its token at depth ``lcp[i]``, where it leaves fact ``i - 1``;
* its other new tokens, front-coded: every token at depth ``s[i]..len - 1`` except depth
  ``lcp[i]``, where ``s[i] = lcp[i]``, or 0 on every 64th fact (a restart point, so a fact can be
  read back from at most 64 facts). Tokens are renumbered by frequency and written as UTF-8 code
  points: the 128 most frequent take one byte, the next 1,920 two (``rest``, byte length per fact
  in ``rest_len``, an offset per 64 facts in ``block_offsets``).

No node table is stored. A node of the tree is a range of facts ``[lo, hi)`` sharing ``d``
tokens: its leaf count is exactly ``hi - lo``; it branches at depth ``b = min(lcp[lo+1:hi])``;
its children start at ``lo`` and at the facts of the range whose ``lcp`` equals ``b`` (the
LCP-interval tree of enhanced suffix arrays); its child tokens are ``first`` of those facts.
Minima of ``lcp`` per 64 and per 4,096 facts make ``b`` and the child starts cheap to find in
ranges of any size. A fact ends at ``(lo, hi, d)`` when fact ``lo`` has ``d`` tokens.

A cursor's ``node`` packs ``(lo, hi, d)`` into one int (0 is the root); ``used`` holds fact ids.
The text of a fact is its tokens decoded by the tokenizer (the tokens are the text), so a fact
costs ~16 bytes on disk instead of a tree of nodes plus a table of strings.

File: ``FWDISK1\\n`` magic, an 8-byte header length, a JSON header (format version, tokenizer
fingerprint, counts, each section's offset, size, dtype and blake2b digest, the total file size),
then the sections at 64-byte aligned offsets. Opening maps the file and checks magic, version and
size (a truncated file is refused at once); digests of sections up to 4 MB are checked at every
open, all of them with ``verify=True`` or ``factweave index verify``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FactweaveError
from .header import read_json_header

MAGIC = b"FWDISK1\n"
FORMAT_VERSION = 1
BLOCK = 64  # facts per restart point / offset / lcp minimum
SUPER = 64 * 64  # facts per second-level lcp minimum
MAX_TOKENS = 255  # lcp is one byte
ALIGN = 64
EAGER_VERIFY = 4 << 20
SECTIONS = ("lcp", "first", "rest_len", "rest", "block_offsets", "lcp_min64", "lcp_min4096",
             "long_rows", "long_lens", "rank_tokens")
EMPTY = np.zeros(0, dtype=np.int64)
EMPTY.flags.writeable = False
TRIPLE = re.compile(r"<([^<>]*)> <([^<>]*)> <([^<>]*)> \.")


# ---- code points: frequency ranks as UTF-8, skipping the surrogate block ------------------------
def rank_to_cp(rank: np.ndarray) -> np.ndarray:
    return np.where(rank < 0xD800, rank, rank + 0x800)


def cp_bytes(cp: np.ndarray) -> np.ndarray:
    return 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)


def utf8_of_ranks(ranks: np.ndarray) -> bytes:
    """UTF-8 bytes of ``ranks`` read as code points (surrogates skipped): C speed via utf-32."""
    cps = rank_to_cp(ranks.astype(np.uint32))
    return cps.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")


def ranks_of_utf8(data: bytes) -> np.ndarray:
    cps = np.frombuffer(data.decode("utf-8").encode("utf-32-le"), dtype="<u4").astype(np.int64)
    return np.where(cps >= 0xE000, cps - 0x800, cps)



def read_disk_header(path: str | Path) -> dict[str, Any]:
    """The header of a disk index file; refuses bad magic, other versions and truncated files."""
    path = Path(path)
    header, _ = read_json_header(path, MAGIC, FORMAT_VERSION, kind="disk index")
    actual = path.stat().st_size
    if actual != header.get("file_bytes"):
        state = "truncated" if actual < header.get("file_bytes", 0) else "corrupt (longer than written)"
        raise FactweaveError(f"{path}: index file is {state}: {actual:,} bytes, header says {header.get('file_bytes', 0):,}")
    return header


def is_disk_index(path: str | Path) -> bool:
    """True when ``path`` starts with the disk index magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False
