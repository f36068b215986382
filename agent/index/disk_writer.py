"""Writing a disk fact index (the format: :mod:`.disk_format`): :func:`build_disk_index` tokenizes
a stream of facts of any length, sorts it under a memory budget (runs on disk when it does not
fit), and :class:`DiskIndexWriter` writes the sections in one sequential pass, atomically.

>>> stats = build_disk_index(synthetic_facts(1_000_000), tokenizer, "kb.fwd", memory_mb=512)  # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FactweaveError
from ..files import replacing
from ..knowledge.facts import Fact
from .disk_format import (ALIGN, BLOCK, FORMAT_VERSION, MAGIC, MAX_TOKENS, SECTIONS, SUPER, cp_bytes, rank_to_cp,
                          utf8_of_ranks)
from .external_sort import SequenceSorter, flatten
from .segments import FactTokenizer
from .tokens import tokenizer_fingerprint
from .workdir import WorkDir


# ---- the sections ------------------------------------------------------------------------------------
class DiskIndexWriter:
    """Writes sorted, distinct token sequences (as padded matrices of ``token + 1``) into the
    sections of a disk index, in one sequential pass; :meth:`finish` assembles the file
    atomically (written aside, renamed at the end)."""

    def __init__(self, path: str | Path, *, fingerprint: str, token_counts: np.ndarray,
                 meta: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self.meta = meta or {}
        used = np.flatnonzero(token_counts)
        # Most frequent tokens get the shortest codes; ties by id keep the build deterministic.
        order = used[np.lexsort((used, -token_counts[used]))]
        self.rank_tokens = order.astype(np.uint32)
        self.token_rank = np.full(max(len(token_counts), 1), -1, dtype=np.int64)
        self.token_rank[order] = np.arange(len(order))
        self.first_dtype = np.dtype("<u2") if len(token_counts) <= 1 << 16 else np.dtype("<u4")
        # Removed by abort(); a killed build's is removed by the next build of this path.
        self._work = WorkDir(self.path, ".parts")
        self._dir = self._work.path
        self._files = {name: open(self._dir / name, "wb") for name in SECTIONS if name != "rank_tokens"}
        self.count = 0
        self.nodes = 1
        self._rest_bytes = 0
        self._prev = np.zeros(0, dtype=np.int64)  # last row of the previous chunk (token + 1)
        self._carry: list[np.ndarray] = []  # rows waiting for a multiple of SUPER
        self._carry_rows = 0

    def add(self, matrix: np.ndarray) -> None:
        """Append rows (``token + 1``, zero padded), already sorted after every row so far."""
        self._carry.append(matrix)
        self._carry_rows += len(matrix)
        if self._carry_rows >= 4 * SUPER:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self._carry:
            return
        width = max(m.shape[1] for m in self._carry)
        rows = np.concatenate([np.pad(m.astype(np.int64), ((0, 0), (0, width - m.shape[1]))) for m in self._carry])
        take = len(rows) if final else (len(rows) // SUPER) * SUPER
        self._carry = [rows[take:]] if take < len(rows) else []
        self._carry_rows = len(rows) - take
        if take:
            self._write_rows(rows[:take])

    def _write_rows(self, m: np.ndarray) -> None:
        n, width = m.shape
        lens = (m > 0).sum(axis=1)
        if int(lens.max()) > MAX_TOKENS:
            raise FactweaveError(f"a fact of {int(lens.max())} tokens is longer than the disk index allows ({MAX_TOKENS})")
        if int(lens.min()) == 0:
            raise FactweaveError("a fact tokenizes to nothing")
        prev = np.zeros((n, width), dtype=np.int64)
        prev[1:] = m[:-1]
        w = min(width, len(self._prev))
        prev[0, :w] = self._prev[:w]
        same = m == prev
        first_diff = np.where(same.all(axis=1), width, np.argmin(same, axis=1))
        prev_lens = np.concatenate([[int((self._prev > 0).sum())], lens[:-1]])
        lcp = np.minimum(first_diff, np.minimum(lens, prev_lens))
        if self.count == 0:
            lcp[0] = 0
        if np.any(lcp >= lens):
            raise ValueError("rows must be sorted and distinct")
        gid = self.count + np.arange(n)
        start = np.where(gid % BLOCK == 0, 0, lcp)
        first = m[np.arange(n), lcp] - 1
        depth = np.arange(width)[None, :]
        mask = (depth >= start[:, None]) & (depth < lens[:, None]) & (depth != lcp[:, None])
        ranks = self.token_rank[m[mask] - 1]
        if np.any(ranks < 0):
            raise ValueError("a token was not counted")
        nbytes = np.zeros((n, width), dtype=np.int64)
        nbytes[mask] = cp_bytes(rank_to_cp(ranks))
        row_bytes = nbytes.sum(axis=1)
        offsets = self._rest_bytes + np.cumsum(row_bytes) - row_bytes
        f = self._files
        f["lcp"].write(lcp.astype(np.uint8).tobytes())
        f["first"].write(first.astype(self.first_dtype).tobytes())
        f["rest_len"].write(np.minimum(row_bytes, 255).astype(np.uint8).tobytes())
        long = np.flatnonzero(row_bytes >= 255)
        if len(long):
            f["long_rows"].write(gid[long].astype("<u8").tobytes())
            f["long_lens"].write(row_bytes[long].astype("<u4").tobytes())
        f["rest"].write(utf8_of_ranks(ranks))
        f["block_offsets"].write(offsets[gid % BLOCK == 0].astype("<u8").tobytes())
        # lcp minima per block; a partial last block is padded with 255 (never the minimum).
        pad = (-n) % BLOCK
        mins = np.concatenate([lcp, np.full(pad, 255)]).reshape(-1, BLOCK).min(axis=1)
        f["lcp_min64"].write(mins.astype(np.uint8).tobytes())
        pad2 = (-len(mins)) % BLOCK
        mins2 = np.concatenate([mins, np.full(pad2, 255)]).reshape(-1, BLOCK).min(axis=1)
        f["lcp_min4096"].write(mins2.astype(np.uint8).tobytes())
        self.nodes += int((lens - lcp).sum())
        self._rest_bytes += int(row_bytes.sum())
        self.count += n
        self._prev = m[-1][: int(lens[-1])].copy()

    def finish(self) -> Path:
        """Write the header and the sections into a temporary file, then rename it into place."""
        self._flush(final=True)
        for fh in self._files.values():
            fh.close()
        try:
            (self._dir / "rank_tokens").write_bytes(self.rank_tokens.astype("<u4").tobytes())
            dtypes = {"lcp": "u1", "first": self.first_dtype.str, "rest_len": "u1", "rest": "u1",
                      "block_offsets": "<u8", "lcp_min64": "u1", "lcp_min4096": "u1", "long_rows": "<u8",
                      "long_lens": "<u4", "rank_tokens": "<u4"}
            sections: dict[str, dict[str, Any]] = {}
            offset = 0
            for name in SECTIONS:
                size = (self._dir / name).stat().st_size
                offset = -(-offset // ALIGN) * ALIGN
                sections[name] = {"offset": offset, "bytes": size, "dtype": dtypes[name]}
                offset += size
            header = {
                "format": "factweave-disk-index", "format_version": FORMAT_VERSION,
                "tokenizer_fingerprint": self.fingerprint, "fact_count": self.count, "node_count": self.nodes,
                "block": BLOCK, "sections": sections, "meta": self.meta,
            }
            # Digests are computed while copying; the header is written last into reserved space.
            reserve = -(-(len(json.dumps(header).encode()) + 200 * len(SECTIONS) + 4096) // 4096) * 4096
            # Written inside the parts folder: a kill leaves nothing beside the index.
            with replacing(self.path, binary=True, prefix=self.path.name + ".", folder=self._dir) as out:
                out.write(b"\0" * reserve)
                for name in SECTIONS:
                    out.write(b"\0" * (reserve + sections[name]["offset"] - out.tell()))
                    digest = hashlib.blake2b(digest_size=16)
                    with open(self._dir / name, "rb") as src:
                        while chunk := src.read(8 << 20):
                            digest.update(chunk)
                            out.write(chunk)
                    sections[name]["blake2b"] = digest.hexdigest()
                header["data_start"] = reserve
                header["file_bytes"] = out.tell()
                head = json.dumps(header, ensure_ascii=False).encode("utf-8")
                if len(MAGIC) + 8 + len(head) > reserve:
                    raise FactweaveError("disk index header does not fit its reserved space")
                out.seek(0)
                out.write(MAGIC + len(head).to_bytes(8, "little") + head)
        finally:
            self.abort()
        return self.path

    def abort(self) -> None:
        """Remove the part files (the real path is never touched before the rename)."""
        for fh in self._files.values():
            fh.close()
        self._work.remove()



# ---- from facts ------------------------------------------------------------------------------------
def build_disk_index(facts: Iterable[Fact], tokenizer: Any, path: str | Path, *, memory_mb: int = 1024,
                     meta: dict[str, Any] | None = None, progress: bool = False, batch: int = 50_000,
                     exact_tokens: bool = False) -> dict[str, Any]:
    """Tokenize ``facts`` (a stream of any length), sort them under ``memory_mb`` (runs on disk
    when they do not fit), and write the disk index at ``path`` atomically. Returns build stats.

    >>> stats = build_disk_index(synthetic_facts(1_000_000), tokenizer, "kb.fwd", memory_mb=512)  # doctest: +SKIP
    """
    from tqdm.auto import tqdm

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ft = FactTokenizer(tokenizer, exact=exact_tokens)
    vocab = max(len(tokenizer), max(tokenizer.get_vocab().values()) + 1)
    unit = 2 if vocab < (1 << 16) else 4
    counts = np.zeros(vocab, dtype=np.int64)
    work_dir = WorkDir(path, ".sort")  # a killed build's runs are removed by the next build
    work = work_dir.path
    sorter = SequenceSorter(work, memory_bytes=int(memory_mb) << 20, unit=unit)
    given = 0
    try:
        buf: list[Fact] = []
        bar = tqdm(desc="tokenizing", unit=" facts", disable=not progress)

        def flush() -> None:
            seqs = ft.encode(buf)
            # The file keeps tokens only: a fact's text must come back from them. Checked on a
            # sample (a tokenizer that maps words to <unk> would lose text silently otherwise).
            for i in range(0, len(buf), 997):
                back = tokenizer.decode(list(seqs[i]), skip_special_tokens=True, clean_up_tokenization_spaces=False)
                back = back[1:] if back.startswith(" ") else back
                if back != buf[i].text:
                    raise FactweaveError(f"this tokenizer does not decode {buf[i].text!r} back to its text "
                                         f"(got {back!r}); use the in-memory index for it")
            flat, lengths = flatten(seqs)
            counts[:] += np.bincount(flat, minlength=vocab)[:vocab]
            sorter.add(flat, lengths)
            bar.update(len(buf))
            buf.clear()

        for fact in facts:
            buf.append(fact)
            given += 1
            if len(buf) >= batch:
                flush()
        if buf:
            flush()
        bar.close()
        writer = DiskIndexWriter(path, fingerprint=tokenizer_fingerprint(tokenizer), token_counts=counts,
                                 meta={**(meta or {}), "facts_given": given, "composed_tokens": ft.composed})
        try:
            bar = tqdm(desc="writing", unit=" facts", disable=not progress)
            for keys in sorter.sorted_chunks():
                m = np.frombuffer(keys.tobytes(), dtype=">u2" if unit == 2 else ">u4").reshape(len(keys), -1)
                writer.add(m)
                bar.update(len(keys))
            bar.close()
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        runs = len(sorter.runs)
    finally:
        sorter.close()
        work_dir.remove()
    return {"path": str(path), "facts_given": given, "facts": writer.count, "nodes": writer.nodes,
            "runs": runs, "bytes": path.stat().st_size}
