"""Benchmark: fact indexes at scale (1M, 10M, ... synthetic facts), per backend.

For each size and backend: build time and facts/s, peak memory of the build process, bytes per
distinct fact on disk, cold open time (the file evicted from the page cache first, a fresh
process), next-token lookup latency per decoding step (``next_tokens`` + ``can_end`` + ``step``,
as the logits processor does per token) p50/p99 over the tokens of 2,000 facts of the KB, and
constrained vs free generation with the default model on the same prompts (the method of
``benchmarks/overhead.py``: exactly ``--gen-tokens`` tokens in both modes, alternating order).
At the smallest size, the peer ``refactx`` package (the ReFactX authors' in-memory ``DictIndex``)
is built and probed on the same facts. Numbers are extrapolated to 800M facts at the end.

Every build, probe and generation runs in its own process, so peak memory and cold opens are
that step's own. The knowledge bases are written once (``factweave kb synthetic`` format) under
``--work``.

Backends: ``disk`` (memory-mapped), ``memory`` (the in-memory tree's file), ``pg`` (PostgreSQL at
$FACTWEAVE_PG_DSN, else a throwaway local cluster started for the run; its bytes are the tree
and facts tables with their indexes, ``tree_bytes_per_fact`` the tree's alone). Adding one: a
class with ``name``, ``suffix``, ``build(kb_tsv, tokenizer, out, memory_mb) -> dict`` and
``open(path, tokenizer)`` returning an object with the FactIndex cursor API, registered in
``BACKENDS``.

Examples::

    python benchmarks/index_scale.py                                  # 1M and 10M, disk + memory + peer
    python benchmarks/index_scale.py --sizes 100000 --gen-tokens 64   # a quick run
    python benchmarks/index_scale.py --sizes 1000000 --backends pg --no-peer --gen-backends pg \
        --json benchmarks/results/index_scale_pg.json                  # PostgreSQL at 1M
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RESULTS = Path(__file__).resolve().parent / "results"
PEER_SITE = os.environ.get("REFACTX_SITE", "/tmp/refactx/site")  # pip install --target <dir> refactx==0.1.2
TARGET_FACTS = 800_000_000


# ---- backends --------------------------------------------------------------------------------
class DiskBackend:
    """The memory-mapped disk index (agent/index/disk.py)."""

    name, suffix = "disk", ".fwd"

    def build(self, kb: Path, tokenizer: Any, out: Path, memory_mb: int) -> dict[str, Any]:
        from agent.index.disk_writer import build_disk_index

        return build_disk_index(read_kb(kb), tokenizer, out, memory_mb=memory_mb, progress=False)

    def open(self, path: Path, tokenizer: Any) -> Any:
        from agent.index import load_index

        return load_index(path, tokenizer)


class MemoryBackend:
    """The in-memory FactIndex saved in the single-file format (agent/index/storage.py)."""

    name, suffix = "memory", ".fwi"

    def build(self, kb: Path, tokenizer: Any, out: Path, memory_mb: int) -> dict[str, Any]:
        from agent.index import FactIndex, save_index

        index = FactIndex.build(read_kb(kb), tokenizer)
        save_index(index, out)
        return {"facts": len(index), "nodes": index.node_count, "bytes": out.stat().st_size}

    def open(self, path: Path, tokenizer: Any) -> Any:
        from agent.index import load_index

        return load_index(path, tokenizer)


class PostgresBackend:
    """The PostgreSQL index (agent/index/postgres.py) on the server at $FACTWEAVE_PG_DSN (main()
    starts a throwaway local cluster when it is not set). Bytes: the tree table plus the facts
    table (``pg_total_relation_size``, indexes included)."""

    name, suffix = "pg", ".pg"

    def build(self, kb: Path, tokenizer: Any, out: Path, memory_mb: int) -> dict[str, Any]:
        from agent.index.pg_build import build_postgres_index

        report = build_postgres_index(os.environ["FACTWEAVE_PG_DSN"], read_kb(kb), tokenizer, name=out.stem.replace("-", "_"))
        return {"facts": report.facts, "nodes": report.nodes, "bytes": report.tree_bytes + report.facts_bytes,
                "tree_bytes": report.tree_bytes, "rows": report.rows}

    def open(self, path: Path, tokenizer: Any) -> Any:
        from agent.index.postgres import PostgresFactIndex

        return PostgresFactIndex.open(os.environ["FACTWEAVE_PG_DSN"], path.stem.replace("-", "_"), tokenizer=tokenizer)


BACKENDS: dict[str, Any] = {"disk": DiskBackend(), "memory": MemoryBackend(), "pg": PostgresBackend()}


def read_kb(path: Path):
    """Facts of a ``subject<TAB>predicate<TAB>object`` file, streamed (no per-row checks: the file
    is ours, and the benchmark measures the index, not the reader)."""
    from agent.knowledge.facts import Fact

    with open(path, encoding="utf-8") as f:
        for line in f:
            s, p, o = line.rstrip("\n").split("\t")
            yield Fact(s, p, o)


def sample_facts(path: Path, count: int, total: int, seed: int = 0) -> list[str]:
    """``count`` fact texts of the KB file at random lines (same for every backend)."""
    from agent.knowledge.facts import verbalize

    want = set(random.Random(seed).sample(range(total), min(count, total)))
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i in want:
                out.append(verbalize(*line.rstrip("\n").split("\t")))
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def load_tok(model: str):
    from agent.models import load_tokenizer

    return load_tokenizer(model)


# ---- workers (each in its own process) --------------------------------------------------------
def worker_build(a: dict[str, Any]) -> dict[str, Any]:
    tok = load_tok(a["model"])
    base = peak_rss_mb()
    cpu0 = cpu_seconds()
    start = time.perf_counter()
    stats = BACKENDS[a["backend"]].build(Path(a["kb"]), tok, Path(a["out"]), a["memory_mb"])
    seconds = time.perf_counter() - start
    return {**stats, "seconds": seconds, "cpu_s": cpu_seconds() - cpu0, "peak_rss_mb": peak_rss_mb(),
            "rss_before_build_mb": base, "loadavg_1m": os.getloadavg()[0]}


def cpu_seconds() -> float:
    """User + system CPU time of this process, all threads (the tokenizer's included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _evict(path: Path) -> None:
    """Drop the file's pages from the page cache (no root needed), so the open is cold."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def walk_latencies(index: Any, sequences: list[list[int]]) -> list[float]:
    """Seconds per decoding step: what the logits processor asks, then the step taken."""
    from time import perf_counter_ns

    out = []
    for seq in sequences:
        cur = index.root()
        for t in seq:
            t0 = perf_counter_ns()
            index.next_tokens(cur)
            index.can_end(cur)
            cur = index.step(cur, t)
            out.append((perf_counter_ns() - t0) / 1e9)
        t0 = perf_counter_ns()
        index.can_end(cur)
        index.finish(cur)
        out.append((perf_counter_ns() - t0) / 1e9)
    return out


def worker_probe(a: dict[str, Any]) -> dict[str, Any]:
    from agent.index.tokens import fact_token_ids

    from agent.index.tokens import tokenizer_fingerprint

    tok = load_tok(a["model"])
    tokenizer_fingerprint(tok)  # hashing the vocabulary is the tokenizer's cost, not the open's
    path = Path(a["index"])
    if path.exists():  # a file backend; PostgreSQL's "cold" is a fresh process with an empty row cache
        _evict(path)
    base = peak_rss_mb()
    start = time.perf_counter()
    index = BACKENDS[a["backend"]].open(path, tok)
    open_s = time.perf_counter() - start
    seqs = fact_token_ids(tok, a["texts"])
    lat = walk_latencies(index, seqs)
    warm = walk_latencies(index, seqs)  # the same facts again: the pages are now cached
    return {"open_s": open_s, "steps": len(lat), "lookup_us_p50": percentile(lat, 0.5) * 1e6,
            "lookup_us_p99": percentile(lat, 0.99) * 1e6, "lookup_us_mean": statistics.fmean(lat) * 1e6,
            "warm_lookup_us_p50": percentile(warm, 0.5) * 1e6, "warm_lookup_us_p99": percentile(warm, 0.99) * 1e6,
            "rss_after_open_and_lookups_mb": peak_rss_mb(), "rss_before_open_mb": base}


def worker_peer(a: dict[str, Any]) -> dict[str, Any]:
    """refactx 0.1.2's in-memory DictIndex on the same facts: its own tokenization (texts without
    the ``Fact:`` context) and its ``batch_append``; lookups are its ``next_tokens(prefix)``."""
    sys.path.append(PEER_SITE)
    from refactx.index import DictIndex

    from agent.knowledge.facts import verbalize

    tok = load_tok(a["model"])
    base = peak_rss_mb()
    cpu0 = cpu_seconds()
    start = time.perf_counter()
    index = DictIndex()
    index.set_tokenizer(tok)
    batch: list[str] = []
    with open(a["kb"], encoding="utf-8") as f:
        for line in f:
            batch.append(" " + verbalize(*line.rstrip("\n").split("\t")))
            if len(batch) == 5000:  # refactx's own default ingestion batch size
                index.batch_append(tok(batch, add_special_tokens=False)["input_ids"])
                batch = []
    if batch:
        index.batch_append(tok(batch, add_special_tokens=False)["input_ids"])
    build_s = time.perf_counter() - start
    build_cpu = cpu_seconds() - cpu0
    build_rss = peak_rss_mb()
    seqs = tok([" " + t for t in a["texts"]], add_special_tokens=False)["input_ids"]
    from time import perf_counter_ns

    lat = []
    for seq in seqs:
        for k in range(len(seq) + 1):
            t0 = perf_counter_ns()
            index.next_tokens(seq[:k])
            lat.append((perf_counter_ns() - t0) / 1e9)
    from importlib.metadata import PathDistribution

    version = next((PathDistribution(p).version for p in Path(PEER_SITE).glob("refactx-*.dist-info")), "?")
    return {"version": version, "facts": len(index), "seconds": build_s, "cpu_s": build_cpu,
            "peak_rss_mb": build_rss, "rss_before_build_mb": base, "steps": len(lat),
            "lookup_us_p50": percentile(lat, 0.5) * 1e6, "lookup_us_p99": percentile(lat, 0.99) * 1e6,
            "lookup_us_mean": statistics.fmean(lat) * 1e6}


def worker_generate(a: dict[str, Any]) -> dict[str, Any]:
    import torch

    from agent.decoding import FactGenerator
    from agent.models import load_model
    from benchmarks.overhead import WARMUP_TOKENS, Bench, summarize

    loaded = load_model(a["model"])
    index = BACKENDS[a["backend"]].open(Path(a["index"]), loaded.tokenizer)
    generator = FactGenerator(loaded.model, loaded.tokenizer, index, beams=1)
    prompts = [generator.render(q) for q in a["questions"]]
    bench = Bench(loaded, generator, a["tokens"])
    for constrained in (True, False):
        bench.run(prompts[0], constrained, tokens=min(WARMUP_TOKENS, a["tokens"]))
    runs = []
    for rep in range(a["repeats"]):
        for p, prompt in enumerate(prompts):
            for constrained in ((True, False) if (rep + p) % 2 == 0 else (False, True)):
                row = bench.run(prompt, constrained)
                row.update(prompt=p, repeat=rep)
                runs.append(row)
    s = summarize(runs)
    return {"tokens": a["tokens"], "prompts": len(prompts), "repeats": a["repeats"], "threads": torch.get_num_threads(),
            "constrained_s": s["constrained"]["median_seconds"], "free_s": s["unconstrained"]["median_seconds"],
            "overhead_pct_of_medians": s["overhead_pct_of_medians"], "overhead_pct_median_pair": s["overhead_pct_median_pair"],
            "processor_share_pct": s["processor_share_pct"], "processor_ms_per_step": s["processor_ms_per_step"],
            "tokens_in_fact_lines": s["constrained"]["tokens_in_fact_lines"], "facts_completed": s["constrained"]["facts_completed"],
            "loadavg_1m": round(os.getloadavg()[0], 2)}


WORKERS = {"build": worker_build, "probe": worker_probe, "peer": worker_peer, "generate": worker_generate}


def run_worker(kind: str, args: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TOKENIZERS_PARALLELISM": "true"}
    proc = subprocess.run([sys.executable, __file__, "--worker", kind], input=json.dumps(args), text=True,
                          capture_output=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- the run ----------------------------------------------------------------------------------
def ensure_kb(work: Path, facts: int, seed: int) -> tuple[Path, float | None]:
    from agent.knowledge.synthetic import synthetic_facts

    path = work / f"kb-{facts}-seed{seed}.tsv"
    if path.exists():
        return path, None
    start = time.perf_counter()
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for fact in synthetic_facts(facts, seed, with_source=False):
            f.write(f"{fact.subject}\t{fact.predicate}\t{fact.object}\n")
    os.replace(tmp, path)
    return path, time.perf_counter() - start


def questions_for(kb: Path, count: int) -> list[str]:
    out: list[str] = []
    with open(kb, encoding="utf-8") as f:
        for line in f:
            s, p, _ = line.rstrip("\n").split("\t")
            q = f"What is the {p} of {s}?"
            if q not in out and p != "instance of":
                out.append(q)
            if len(out) == count:
                break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fact index backends at scale.",
                                     epilog="example: python benchmarks/index_scale.py --sizes 1000000,10000000")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1000000,10000000", help="facts per KB, comma separated")
    parser.add_argument("--backends", default="disk,memory", help=f"of {sorted(BACKENDS)}")
    parser.add_argument("--memory-max-facts", type=int, default=1_000_000,
                        help="build the in-memory backend only up to this size (it holds every fact in Python)")
    parser.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True,
                        help="also build and probe refactx's DictIndex at the smallest size")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--memory-mb", type=int, default=1024, help="sort memory of the disk build")
    parser.add_argument("--lookups", type=int, default=2000, help="facts walked for lookup latency")
    parser.add_argument("--gen-tokens", type=int, default=200)
    parser.add_argument("--gen-prompts", type=int, default=2)
    parser.add_argument("--gen-repeats", type=int, default=2)
    parser.add_argument("--gen-backends", default="disk", help="backends whose generation overhead is measured")
    parser.add_argument("--work", default="/tmp/factweave-index-scale", help="KB files and indexes go here")
    parser.add_argument("--json", default=str(RESULTS / "index_scale.json"))
    args = parser.parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](json.loads(sys.stdin.read()))
        print(json.dumps(result))
        return 0

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    local_pg = None
    if "pg" in args.backends.split(",") and not os.environ.get("FACTWEAVE_PG_DSN"):
        from agent.index.pg_local import LocalPostgres

        local_pg = LocalPostgres().start()
        os.environ["FACTWEAVE_PG_DSN"] = local_pg.dsn  # the workers inherit it
    try:
        return _run(args, work)
    finally:
        if local_pg is not None:
            local_pg.stop()


def _run(args: argparse.Namespace, work: Path) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    rows: list[dict[str, Any]] = []
    peer: dict[str, Any] | None = None
    for size in sizes:
        kb, gen_s = ensure_kb(work, size, args.seed)
        print(f"== {size:,} facts: {kb}" + (f" (written in {gen_s:.0f} s)" if gen_s else ""), flush=True)
        texts = sample_facts(kb, args.lookups, size, seed=args.seed)
        for name in backends:
            if name == "memory" and size > args.memory_max_facts:
                continue
            out = work / f"kb-{size}{BACKENDS[name].suffix}"
            b = run_worker("build", {"backend": name, "kb": str(kb), "out": str(out), "model": args.model,
                                     "memory_mb": args.memory_mb})
            row: dict[str, Any] = {"backend": name, "facts_given": size, "facts": b["facts"],
                                   "build_s": round(b["seconds"], 1), "build_facts_per_s": round(size / b["seconds"]),
                                   "build_cpu_s": round(b["cpu_s"], 1),
                                   "build_facts_per_cpu_s": round(size / b["cpu_s"]),
                                   "build_loadavg_1m": round(b["loadavg_1m"], 2),
                                   "build_peak_rss_mb": round(b["peak_rss_mb"]),
                                   "build_rss_before_mb": round(b["rss_before_build_mb"]),
                                   "bytes": b["bytes"], "bytes_per_fact": round(b["bytes"] / b["facts"], 2),
                                   "tree_bytes_per_fact": round(b.get("tree_bytes", b["bytes"]) / b["facts"], 2),
                                   "sort_runs": b.get("runs")}
            print(f"  {name}: built {b['facts']:,} facts in {b['seconds']:.1f} s, {row['bytes_per_fact']} B/fact", flush=True)
            p = run_worker("probe", {"backend": name, "index": str(out), "model": args.model, "texts": texts})
            row.update({"open_s": round(p["open_s"], 4), "lookup_us_p50": round(p["lookup_us_p50"], 1),
                        "lookup_us_p99": round(p["lookup_us_p99"], 1), "lookup_us_mean": round(p["lookup_us_mean"], 1),
                        "warm_lookup_us_p50": round(p["warm_lookup_us_p50"], 1),
                        "warm_lookup_us_p99": round(p["warm_lookup_us_p99"], 1), "lookup_steps": p["steps"],
                        "probe_rss_mb": round(p["rss_after_open_and_lookups_mb"]),
                        "probe_rss_before_open_mb": round(p["rss_before_open_mb"])})
            print(f"  {name}: open {p['open_s'] * 1e3:.1f} ms, lookup p50 {p['lookup_us_p50']:.1f} us p99 "
                  f"{p['lookup_us_p99']:.1f} us", flush=True)
            if name in args.gen_backends.split(","):
                g = run_worker("generate", {"backend": name, "index": str(out), "model": args.model,
                                            "questions": questions_for(kb, args.gen_prompts), "tokens": args.gen_tokens,
                                            "repeats": args.gen_repeats})
                row["generation"] = g
                print(f"  {name}: generation constrained {g['constrained_s']:.2f} s vs free {g['free_s']:.2f} s "
                      f"({g['overhead_pct_of_medians']:+.2f}%, median pair {g['overhead_pct_median_pair']:+.2f}%, "
                      f"processor share {g['processor_share_pct']:.2f}%)", flush=True)
            rows.append(row)
        if args.peer and peer is None:
            try:
                peer = {"facts_given": size, **run_worker("peer", {"kb": str(kb), "model": args.model, "texts": texts})}
                print(f"  refactx {peer['version']}: built in {peer['seconds']:.1f} s, peak {peer['peak_rss_mb']:.0f} MB, "
                      f"lookup p50 {peer['lookup_us_p50']:.1f} us p99 {peer['lookup_us_p99']:.1f} us", flush=True)
            except (RuntimeError, ImportError) as exc:
                peer = {"facts_given": size, "error": str(exc)[-500:]}
                print(f"  refactx: {peer['error']}", flush=True)

    extrapolation = extrapolate(rows)
    settings = {"model": args.model, "seed": args.seed, "memory_mb": args.memory_mb, "lookups": args.lookups,
                "gen_tokens": args.gen_tokens, "gen_prompts": args.gen_prompts, "gen_repeats": args.gen_repeats,
                "python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
                "loadavg_1m_at_end": round(os.getloadavg()[0], 2)}
    print_table(rows, peer, extrapolation)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "index_scale", "settings": settings, "rows": rows, "peer_refactx": peer,
                               "extrapolation_800m": extrapolation}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


def extrapolate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """800M facts from the largest size measured per backend: disk and build time scale linearly
    (bytes per fact and facts/s held; the merge reads each run once), lookups stay per-step."""
    out: dict[str, Any] = {}
    for name in {r["backend"] for r in rows}:
        r = max((x for x in rows if x["backend"] == name), key=lambda x: x["facts_given"])
        out[name] = {"from_facts": r["facts_given"], "disk_gb": round(r["bytes_per_fact"] * TARGET_FACTS / 1e9, 1),
                     "build_hours": round(TARGET_FACTS / r["build_facts_per_s"] / 3600, 2),
                     "paper_postgres_disk_gb": 95}
    return out


def print_table(rows: list[dict[str, Any]], peer: dict[str, Any] | None, extra: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="fact indexes at scale (medians; lookup = next_tokens + can_end + step per token)")
    for col in ("backend", "facts", "build s", "facts/s", "facts/cpu-s", "peak MB", "B/fact", "open ms", "lookup p50 us",
                "lookup p99 us", "gen constrained/free s", "overhead"):
        table.add_column(col, justify="right")
    for r in rows:
        g = r.get("generation")
        table.add_row(r["backend"], f"{r['facts']:,}", f"{r['build_s']:.1f}", f"{r['build_facts_per_s']:,}",
                      f"{r['build_facts_per_cpu_s']:,}",
                      f"{r['build_peak_rss_mb']:,}", f"{r['bytes_per_fact']:.2f}", f"{r['open_s'] * 1e3:.1f}",
                      f"{r['lookup_us_p50']:.1f}", f"{r['lookup_us_p99']:.1f}",
                      f"{g['constrained_s']:.2f}/{g['free_s']:.2f}" if g else "-",
                      f"{g['overhead_pct_of_medians']:+.2f}% (proc {g['processor_share_pct']:.2f}%)" if g else "-")
    if peer and "error" not in peer:
        table.add_row(f"refactx {peer['version']} (peer)", f"{peer['facts']:,}", f"{peer['seconds']:.1f}",
                      f"{round(peer['facts_given'] / peer['seconds']):,}", f"{round(peer['facts_given'] / peer['cpu_s']):,}",
                      f"{peer['peak_rss_mb']:,.0f}", "in memory",
                      "-", f"{peer['lookup_us_p50']:.1f}", f"{peer['lookup_us_p99']:.1f}", "-", "-")
    Console(width=220).print(table)
    for name, e in extra.items():
        print(f"800M facts, {name} (from {e['from_facts']:,}): {e['disk_gb']} GB on disk "
              f"(paper's PostgreSQL: 95 GB), build ~{e['build_hours']} h on this machine")


if __name__ == "__main__":
    raise SystemExit(main())
