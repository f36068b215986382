"""What one installed llama.cpp build is, on this machine: the identity that its check
(:mod:`agent.engines.probe`) and its kept prompt snapshots (:mod:`agent.engines.llama_cpp`) are
keyed by, so a rebuild, another CPU (an environment copied to another machine), another Python or
another model file is never taken for the one checked.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path


def _library_files() -> list[tuple[str, int, int]]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    files = [p for p in root.rglob("*") if p.is_file() and (p.suffix in (".so", ".dylib", ".dll", ".py")
                                                          or ".so." in p.name)]
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


def _cpu() -> dict[str, str]:
    """This CPU's model name and flags (Linux; elsewhere what ``platform`` says)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        import platform

        return {"model": platform.processor() or platform.machine(), "flags": ""}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "flags", "Features") and key not in fields:
            fields[key] = value.strip()
    return {"model": fields.get("model name", ""), "flags": fields.get("flags") or fields.get("Features", "")}


def advertises_amx() -> bool:
    return "amx_tile" in _cpu()["flags"].split()


def build_key(gguf: Path) -> str:
    """What a llama.cpp build's behaviour here depends on, hashed: the library, the CPU, the Python, the model."""
    stat = gguf.stat()
    what = {"library": _library_files(), "cpu": _cpu(), "python": sys.executable,
            "gguf": [str(gguf.resolve()), stat.st_size, stat.st_mtime_ns]}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:20]
