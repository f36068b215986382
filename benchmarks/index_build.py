"""Benchmark: building, saving and loading the fact index for a knowledge base.

Each configuration (model tokenizer x with/without inverse facts) is measured in a fresh
subprocess, so the peak memory of one build does not hide the next one's. The build is timed in
its three phases, done with the same public pieces ``FactIndex.build`` uses:

* reading: streaming facts out of the KB and collapsing identical texts,
* tokenizing: ``fact_token_ids`` over the distinct texts (8192 at a time, as ``build`` does),
* tree: ``FactIndex.from_token_ids`` plus the tokenizer fingerprint.

Loading is timed in another fresh subprocess, so its peak memory is its own too.

Examples::

    python benchmarks/index_build.py                                # demo KB, smollm2-135m
    python benchmarks/index_build.py --kb /work/shared/data/kamel --both
    python benchmarks/index_build.py --kb /work/shared/data/kamel --model qwen2.5-coder-0.5b --inverse
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from queue import Empty
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RESULTS = Path(__file__).resolve().parent / "results"
# FactIndex.build tokenizes this many texts per call; the phases below do the same.
TOKENIZE_STEP = 8192


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _current_rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return _peak_rss_bytes()


def load_tokenizer(name_or_path: str) -> tuple[Any, float]:
    """The tokenizer alone (no weights): a preset's converted folder, a local folder or a Hub id."""
    from transformers import AutoTokenizer

    from agent.models import PRESETS, prepare_preset

    start = time.perf_counter()
    if name_or_path in PRESETS:
        source, local = str(prepare_preset(PRESETS[name_or_path])), True
    else:
        local = Path(name_or_path).expanduser().is_dir()
        source = str(Path(name_or_path).expanduser()) if local else name_or_path
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local)
    return tokenizer, time.perf_counter() - start


def _build_worker(kb: str, model: str, inverse: bool, index_path: str, queue: Any) -> None:
    try:
        queue.put(_build(kb, model, inverse, index_path))
    except Exception as exc:  # noqa: BLE001 - any failure goes back to the parent as text
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def _build(kb: str, model: str, inverse: bool, index_path: str) -> dict[str, Any]:
    from agent.index import FactIndex, save_index
    from agent.index.tokens import fact_token_ids, tokenizer_fingerprint
    from agent.knowledge.loaders import load_facts

    tokenizer, tok_seconds = load_tokenizer(model)
    rss_before = _current_rss_bytes()
    peak_before = _peak_rss_bytes()

    t0 = time.perf_counter()
    unique: dict[str, Any] = {}
    read = 0
    for fact in load_facts(kb, inverse=inverse):
        read += 1
        unique.setdefault(fact.text, fact)
    texts = list(unique)
    facts = list(unique.values())
    distinct_texts = len(texts)
    del unique
    t1 = time.perf_counter()
    ids: list[list[int]] = []
    for i in range(0, len(texts), TOKENIZE_STEP):
        ids.extend(fact_token_ids(tokenizer, texts[i : i + TOKENIZE_STEP]))
    t2 = time.perf_counter()
    index = FactIndex.from_token_ids(ids, facts, tokenizer_fingerprint(tokenizer))
    t3 = time.perf_counter()
    tokens_total = sum(len(s) for s in ids)
    del ids, facts, texts
    peak_build = _peak_rss_bytes()

    arrays = index.arrays()
    tree_bytes = sum(a.nbytes for n, a in arrays.items() if not n.startswith("facts."))
    table_bytes = sum(a.nbytes for n, a in arrays.items() if n.startswith("facts."))
    t4 = time.perf_counter()
    save_index(index, index_path, meta={"model": model, "kb": kb, "inverse": inverse})
    t5 = time.perf_counter()
    distinct = len(index)
    build_s = t3 - t0
    return {
        "model": model,
        "kb": kb,
        "inverse": inverse,
        "facts_read": read,
        "distinct_texts": distinct_texts,
        "distinct_facts": distinct,
        "nodes": index.node_count,
        "tokens_total": tokens_total,
        "tokens_per_fact": round(tokens_total / max(1, distinct), 2),
        "nodes_per_fact": round(index.node_count / max(1, distinct), 2),
        "tokenizer_load_s": round(tok_seconds, 3),
        "read_s": round(t1 - t0, 3),
        "tokenize_s": round(t2 - t1, 3),
        "tree_s": round(t3 - t2, 3),
        "build_s": round(build_s, 3),
        "facts_per_s": round(read / build_s, 1) if build_s > 0 else None,
        "rss_before_build_bytes": rss_before,
        "peak_rss_increase_bytes": max(0, peak_build - max(peak_before, rss_before)),
        "array_bytes": tree_bytes + table_bytes,
        "tree_array_bytes": tree_bytes,
        "table_array_bytes": table_bytes,
        "bytes_per_fact": round((tree_bytes + table_bytes) / max(1, distinct), 1),
        "tree_bytes_per_fact": round(tree_bytes / max(1, distinct), 1),
        "file_bytes": os.path.getsize(index_path),
        "save_s": round(t5 - t4, 3),
    }


def _load_worker(index_path: str, queue: Any) -> None:
    try:
        from agent.index import load_index

        rss_before = _current_rss_bytes()
        peak_before = _peak_rss_bytes()
        t0 = time.perf_counter()
        index = load_index(index_path)
        t1 = time.perf_counter()
        queue.put({
            "load_s": round(t1 - t0, 3),
            "load_peak_rss_increase_bytes": max(0, _peak_rss_bytes() - max(peak_before, rss_before)),
            "loaded_facts": len(index),
        })
    except Exception as exc:  # noqa: BLE001 - any failure goes back to the parent as text
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def _in_subprocess(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    while True:
        try:
            result = queue.get(timeout=1.0)
            break
        except Empty:
            if not proc.is_alive():
                raise SystemExit(f"benchmark subprocess died (exit code {proc.exitcode})") from None
    proc.join()
    if "error" in result:
        raise SystemExit(f"benchmark subprocess failed: {result['error']}")
    return result


def measure(kb: str, model: str, inverse: bool, keep: str | None = None) -> dict[str, Any]:
    """Build+save in one fresh process, load in another; the index file is removed unless kept."""
    with tempfile.TemporaryDirectory(prefix="factweave-bench-") as tmp:
        path = keep or str(Path(tmp) / "index.fwidx")
        row = _in_subprocess(_build_worker, kb, model, inverse, path)
        row.update(_in_subprocess(_load_worker, path))
    if row["loaded_facts"] != row["distinct_facts"]:
        raise SystemExit(f"loaded {row['loaded_facts']} facts, built {row['distinct_facts']}")
    return row


def kb_name(kb: str | None) -> str:
    from agent.knowledge.kamel import demo_kamel_root

    if kb is None or Path(kb).resolve() == demo_kamel_root().resolve():
        return "demo"
    p = Path(kb)
    return p.name.split(".")[0] or "kb"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def print_table(rows: list[dict[str, Any]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("measure")
    for r in rows:
        table.add_column(f"{r['model']}{' +inverse' if r['inverse'] else ''}", justify="right")
    lines = [
        ("facts read", lambda r: f"{r['facts_read']:,}"),
        ("distinct facts", lambda r: f"{r['distinct_facts']:,}"),
        ("nodes", lambda r: f"{r['nodes']:,}"),
        ("tokens / fact", lambda r: f"{r['tokens_per_fact']}"),
        ("read s", lambda r: f"{r['read_s']:.2f}"),
        ("tokenize s", lambda r: f"{r['tokenize_s']:.2f}"),
        ("tree s", lambda r: f"{r['tree_s']:.2f}"),
        ("build s (total)", lambda r: f"{r['build_s']:.2f}"),
        ("facts / s", lambda r: f"{r['facts_per_s']:,.0f}"),
        ("peak RSS increase", lambda r: _mib(r["peak_rss_increase_bytes"])),
        ("arrays in memory", lambda r: _mib(r["array_bytes"])),
        ("  of which tree", lambda r: _mib(r["tree_array_bytes"])),
        ("bytes / fact (all)", lambda r: f"{r['bytes_per_fact']}"),
        ("bytes / fact (tree)", lambda r: f"{r['tree_bytes_per_fact']}"),
        ("file size", lambda r: _mib(r["file_bytes"])),
        ("save s", lambda r: f"{r['save_s']:.2f}"),
        ("load s", lambda r: f"{r['load_s']:.2f}"),
        ("load peak RSS increase", lambda r: _mib(r["load_peak_rss_increase_bytes"])),
    ]
    for label, fmt in lines:
        table.add_row(label, *(fmt(r) for r in rows))
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Time and size the fact index build for a KB.",
        epilog="example: python benchmarks/index_build.py --kb /work/shared/data/kamel --both",
    )
    parser.add_argument("--kb", help="fact file or KAMEL folder (default: the shipped demo KB)")
    parser.add_argument("--model", action="append",
                        help="preset, folder or Hub id whose tokenizer is used (repeatable; "
                             "default smollm2-135m)")
    parser.add_argument("--inverse", action="store_true", help="add inverse facts")
    parser.add_argument("--both", action="store_true", help="measure without and with inverse facts")
    parser.add_argument("--json", help="output JSON (default benchmarks/results/index_build-<kb>-<model>.json)")
    parser.add_argument("--keep", help="keep the built index at this path (one configuration only)")
    args = parser.parse_args(argv)

    from agent.knowledge.kamel import demo_kamel_root

    kb = args.kb or str(demo_kamel_root())
    models = args.model or ["smollm2-135m"]
    directions = [False, True] if args.both else [args.inverse]
    if args.keep and len(models) * len(directions) > 1:
        parser.error("--keep needs a single configuration")
    if args.json and len(models) > 1:
        parser.error("--json needs a single --model")
    name = kb_name(args.kb)
    env = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    for model in models:
        rows = [measure(kb, model, inverse, args.keep) for inverse in directions]
        print_table(rows, f"index build: {name} KB, {model} tokenizer")
        suffix = "-inverse" if directions == [True] else ""
        out = Path(args.json) if args.json else RESULTS / f"index_build-{name}-{Path(model).name}{suffix}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"benchmark": "index_build", "kb": kb, "kb_name": name, "model": model,
                                   "environment": env, "runs": rows}, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
