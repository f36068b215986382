"""Index files for knowledge sources: where they live, when to rebuild, how to build them."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..knowledge.loaders import load_facts
from .disk import DiskFactIndex
from .disk_writer import build_disk_index
from .storage import load_index, read_header, save_index
from .tokens import tokenizer_fingerprint
from .trie import FactIndex


def source_key(kb: str | Path, inverse: bool = False) -> str:
    """A hash of a knowledge source's path, files, sizes and modification times: it changes
    when the source does, so a cached index is rebuilt instead of silently going stale."""
    kb = Path(kb).resolve()
    files = sorted(p for p in kb.rglob("*") if p.is_file()) if kb.is_dir() else [kb]
    h = hashlib.sha256(json.dumps([str(kb), inverse]).encode())
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(kb) if kb.is_dir() else p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def default_index_path(kb: str | Path, fingerprint: str, inverse: bool, cache_dir: Path) -> Path:
    name = Path(kb).resolve().name.replace(" ", "_")
    return cache_dir / "indexes" / f"{name}-{source_key(kb, inverse)}-{fingerprint[:12]}{'-inv' if inverse else ''}.fwi"


@dataclass(frozen=True)
class BuildReport:
    path: Path
    facts: int
    nodes: int
    seconds: float
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "facts": self.facts, "nodes": self.nodes,
                "seconds": round(self.seconds, 2), "bytes": self.bytes}


def build_index_file(kb: str | Path, tokenizer: Any, out: str | Path, *, inverse: bool = False,
                     model_name: str = "", progress: bool = True, disk: bool = False,
                     memory_mb: int = 1024) -> tuple[Any, BuildReport]:
    """Read ``kb``, build its index for ``tokenizer`` and save it atomically at ``out``. A
    malformed row raises before anything is written. ``disk``: write the memory-mapped disk
    format (streamed; sorting spills to disk beyond ``memory_mb``) and return it opened."""
    start = time.perf_counter()
    if disk:
        stats = build_disk_index(load_facts(kb, inverse=inverse), tokenizer, out, memory_mb=memory_mb,
                                 progress=progress, meta={"model": model_name, "kb": str(Path(kb).resolve()),
                                                          "inverse": inverse, "source_key": source_key(kb, inverse)})
        disk_index = DiskFactIndex.open(out, tokenizer)
        return disk_index, BuildReport(Path(out), len(disk_index), disk_index.node_count,
                                       time.perf_counter() - start, stats["bytes"])
    index = FactIndex.build(load_facts(kb, inverse=inverse), tokenizer, progress=progress)
    path = save_index(index, out, meta={"model": model_name, "kb": str(Path(kb).resolve()), "inverse": inverse,
                                        "source_key": source_key(kb, inverse)})
    return index, BuildReport(path, len(index), index.node_count, time.perf_counter() - start, path.stat().st_size)


def open_index(kb: str | Path, tokenizer: Any, cache_dir: Path, *, index_path: str | Path | None = None,
               inverse: bool = False, model_name: str = "", progress: bool = True) -> FactIndex:
    """The index of ``kb`` for ``tokenizer``: ``index_path`` when given (refused if built for
    another tokenizer), else the cached one, built on first use."""
    if index_path is not None:
        return load_index(index_path, tokenizer)
    fingerprint = tokenizer_fingerprint(tokenizer)
    path = default_index_path(kb, fingerprint, inverse, cache_dir)
    if path.exists() and read_header(path)[0]["tokenizer_fingerprint"] == fingerprint:
        return load_index(path, tokenizer)
    index, _ = build_index_file(kb, tokenizer, path, inverse=inverse, model_name=model_name, progress=progress)
    return index
