"""Saving and loading a :class:`FactIndex`: one file, a JSON header, then raw arrays.

Layout: ``FWIDX1\\n`` magic, an 8-byte little-endian header length, the UTF-8 JSON header, then
each array's bytes at a 64-byte aligned offset. The header carries the format version, the
tokenizer fingerprint, fact and node counts, each array's dtype/shape/offset and a sha256 of the
payload. No pickle: arrays are plain numbers and bytes, so a file from elsewhere cannot run code.

Writes go to a temporary file in the same folder that is renamed into place at the end, so a
crash never leaves a half-written index under the real name.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FactweaveError
from ..files import replacing
from .disk import DiskFactIndex
from .disk_format import is_disk_index
from .header import read_json_header
from .table import FactTable
from .tokens import refuse_other_tokenizer
from .trie import TREE_ARRAYS, FactIndex

MAGIC = b"FWIDX1\n"
FORMAT_VERSION = 1
_ALIGN = 64


def save_index(index: FactIndex, path: str | Path, *, meta: dict[str, Any] | None = None) -> Path:
    """Write ``index`` to ``path`` atomically; ``meta`` (JSON-able) is stored in the header."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = index.arrays()
    entries: dict[str, dict[str, Any]] = {}
    offset = 0
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        offset = -(-offset // _ALIGN) * _ALIGN
        entries[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset}
        offset += arr.nbytes
    digest = hashlib.sha256()
    for arr in arrays.values():
        digest.update(np.ascontiguousarray(arr).tobytes())
    header = {
        "format": "factweave-index",
        "format_version": FORMAT_VERSION,
        "tokenizer_fingerprint": index.fingerprint,
        "fact_count": len(index),
        "node_count": index.node_count,
        "arrays": entries,
        "payload_sha256": digest.hexdigest(),
        "meta": meta or {},
    }
    head = json.dumps(header, ensure_ascii=False).encode("utf-8")
    start = -(-(len(MAGIC) + 8 + len(head)) // _ALIGN) * _ALIGN
    with replacing(path, binary=True, prefix=path.name + ".") as out:
        out.write(MAGIC)
        out.write(len(head).to_bytes(8, "little"))
        out.write(head)
        out.write(b"\0" * (start - out.tell()))
        for name, arr in arrays.items():
            pos = start + entries[name]["offset"]
            out.write(b"\0" * (pos - out.tell()))
            out.write(np.ascontiguousarray(arr).tobytes())
    return path


def read_header(path: str | Path) -> tuple[dict[str, Any], int]:
    """The header of an index file and the byte offset where its arrays start."""
    header, end = read_json_header(path, MAGIC, FORMAT_VERSION, kind="index")
    return header, -(-end // _ALIGN) * _ALIGN


def load_index(path: str | Path, tokenizer: Any | None = None, *, verify: bool | str = True) -> Any:
    """Read an index; with ``tokenizer`` given, refuse an index built for a different one.

    A disk index (see :mod:`agent.index.disk_format`, told apart by its magic bytes) is memory-mapped
    instead of read: a :class:`DiskFactIndex` with the same cursor API (its sections are checked
    against their digests only when ``verify`` is ``"full"``; small ones always)."""
    path = Path(path)
    if is_disk_index(path):
        return DiskFactIndex.open(path, tokenizer, verify=verify == "full")
    header, start = read_header(path)
    if tokenizer is not None:
        refuse_other_tokenizer(str(path), header["tokenizer_fingerprint"], header.get("meta", {}).get("model", ""),
                               tokenizer, "`factweave index build --model <your model>`")
    data = path.read_bytes()
    arrays: dict[str, np.ndarray] = {}
    digest = hashlib.sha256()
    for name, e in header["arrays"].items():
        dtype = np.dtype(e["dtype"])
        count = int(np.prod(e["shape"])) if e["shape"] else 1
        lo = start + e["offset"]
        hi = lo + count * dtype.itemsize
        if hi > len(data):
            raise FactweaveError(f"{path}: index file is truncated (array {name} incomplete)")
        arr = np.frombuffer(data, dtype=dtype, count=count, offset=lo).reshape(e["shape"])
        digest.update(arr.tobytes())
        arrays[name] = arr
    if verify and digest.hexdigest() != header["payload_sha256"]:
        raise FactweaveError(f"{path}: index file is corrupt (checksum mismatch); rebuild it")
    missing = [n for n in TREE_ARRAYS if n not in arrays]
    if missing:
        raise FactweaveError(f"{path}: index file lacks arrays {missing}; rebuild it")
    table = FactTable({k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith("facts.")})
    return FactIndex(**{n: arrays[n] for n in TREE_ARRAYS}, facts=table, fingerprint=header["tokenizer_fingerprint"])
