"""Benchmark: the PostgreSQL fact index (agent/index/postgres.py) at scale.

For a set of facts it measures: building the tree in memory (tokenizing + tree), loading it into
PostgreSQL (COPY into a fresh schema, keys, swap), the tables' size on disk
(``pg_total_relation_size``) and bytes per fact, the time to open the index (cold: a new pool
and an empty cache), and then walks facts chosen uniformly at random, token by token, the way
decoding does (``next_tokens`` + ``can_end``, then ``step``), timing each position:

* cold: the cache is emptied before each fact (every upper row and block comes from the server);
* warm: the cache is kept across facts (the steady state of a long generation run), with
  ``--cache-rows`` rows at most;
* fetch: the latency of each row query sent (a round trip: one row, or a prefetched subtree).

Opening reads the top of the tree (the upper nodes whose subtrees are too big to prefetch) in
one query; ``open_s`` includes it and ``top_rows_read_on_open`` counts its rows.

and the round trips each fact costs in both modes. Facts come from a KB (default: all of KAMEL
where it is, else the demo KB; ``--inverse`` doubles it), padded up to ``--facts`` with
recombined real labels (a subject, one of its predicates' objects) when the KB has fewer.
Without ``--dsn`` a throwaway cluster is started on 127.0.0.1 (TCP) and removed afterwards.

Examples::

    PYTHONPATH=. .venv/bin/python benchmarks/postgres_index.py --facts 100000
    PYTHONPATH=. .venv/bin/python benchmarks/postgres_index.py --facts 1000000 --inverse
    PYTHONPATH=. .venv/bin/python benchmarks/postgres_index.py --dsn "host=/var/run/postgresql dbname=bench"

From Python (``benchmarks/index_scale.py``)::

    from benchmarks.postgres_index import measure
    result = measure(facts, tokenizer, dsn)           # facts: any iterable of agent.knowledge.facts.Fact
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent.index import FactIndex  # noqa: E402
from agent.index.pg_build import load_fact_index  # noqa: E402
from agent.index.pg_rows import DEFAULT_BLOCK_NODES, DEFAULT_PREFETCH_NODES  # noqa: E402
from agent.index.postgres import PostgresFactIndex  # noqa: E402
from agent.knowledge.facts import Fact  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
KAMEL = Path("/work/shared/data/kamel")


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(_pct(values, 50) * 1e3, 4), "p99_ms": round(_pct(values, 99) * 1e3, 4),
            "max_ms": round(max(values) * 1e3, 4) if values else 0.0, "n": len(values)}


class _TimedIndex(PostgresFactIndex):
    """Records the latency of every row fetch the index sends (not the reads of the top of the
    tree on opening, nor of facts)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.fetch_seconds: list[float] = []
        super().__init__(*args, **kwargs)

    def _query(self, statement, params):
        t = time.perf_counter()
        try:
            return super()._query(statement, params)
        finally:
            if statement is self._sql_row:
                self.fetch_seconds.append(time.perf_counter() - t)


def _walk(pg: PostgresFactIndex, tokens: list[int], times: list[float]) -> None:
    cur = pg.root()
    for tok in tokens:
        t = time.perf_counter()
        pg.next_tokens(cur)
        pg.can_end(cur)
        times.append(time.perf_counter() - t)
        cur = pg.step(cur, tok)
    t = time.perf_counter()
    pg.can_end(cur)
    times.append(time.perf_counter() - t)
    pg.finish(cur)


def measure_index(index: FactIndex, dsn: str, *, name: str = "bench", walks: int = 2000,
                  block_nodes: int = DEFAULT_BLOCK_NODES, prefetch_nodes: int = DEFAULT_PREFETCH_NODES,
                  cache_rows: int = 16384, seed: int = 0, keep: bool = False) -> dict[str, Any]:
    """Load an in-memory ``index`` into PostgreSQL at ``dsn`` and measure it (see the module doc)."""
    report = load_fact_index(dsn, index, name=name, block_nodes=block_nodes)
    n = len(index)
    out: dict[str, Any] = {
        "facts": n, "nodes": index.node_count, "rows": report.rows, "block_nodes": block_nodes,
        "prefetch_nodes": prefetch_nodes, "cache_rows": cache_rows,
        "load_s": round(report.seconds, 2), "load_facts_per_s": round(n / report.seconds),
        "tree_bytes": report.tree_bytes, "facts_table_bytes": report.facts_bytes,
        "tree_bytes_per_fact": round(report.tree_bytes / n, 1),
        "total_bytes_per_fact": round((report.tree_bytes + report.facts_bytes) / n, 1),
    }
    t = time.perf_counter()
    pg = _TimedIndex.open(dsn, name, cache_rows=cache_rows, prefetch_nodes=prefetch_nodes)
    out["open_s"] = round(time.perf_counter() - t, 4)
    out["top_rows_read_on_open"] = len(pg._rows)
    pg.fetch_seconds = []
    rng = random.Random(seed)
    chosen = [rng.randrange(n) for _ in range(walks)]
    paths = [index.fact_tokens(i) for i in chosen]
    out["tokens_per_fact"] = round(float(np.mean([len(p) for p in paths])), 2)
    try:
        cold: list[float] = []
        trips = []
        for path in paths[: max(1, walks // 4)]:
            pg.clear_cache()
            before = pg.round_trips
            _walk(pg, path, cold)
            trips.append(pg.round_trips - before)
        cold_fetch = list(pg.fetch_seconds)
        pg.clear_cache()
        pg.fetch_seconds = []
        warm: list[float] = []
        before = pg.round_trips
        for path in paths:
            _walk(pg, path, warm)
        out.update({
            "cold_lookup": _ms(cold), "warm_lookup": _ms(warm),
            "fetch": _ms(cold_fetch + pg.fetch_seconds),
            "round_trips_per_fact_cold": round(float(np.mean(trips)), 2),
            "round_trips_per_fact_cold_max": int(max(trips)),
            "round_trips_per_fact_warm": round((pg.round_trips - before) / len(paths), 3),
        })
    finally:
        pg.close()
        if not keep:
            from psycopg import sql

            from agent.index.pg_rows import REGISTRY
            from agent.index.postgres import connect

            with connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(report.schema)))
                conn.execute(sql.SQL("DELETE FROM {} WHERE name = %s").format(sql.Identifier(REGISTRY)), (name,))
    return out


def measure(facts: Iterable[Fact], tokenizer: Any, dsn: str, **kwargs: Any) -> dict[str, Any]:
    """Build the index of ``facts`` for ``tokenizer`` in memory, then :func:`measure_index`; the
    result adds the in-memory build time and end-to-end facts per second."""
    t = time.perf_counter()
    index = FactIndex.build(facts, tokenizer)
    tree_s = time.perf_counter() - t
    out = measure_index(index, dsn, **kwargs)
    out["tree_build_s"] = round(tree_s, 2)
    out["build_s"] = round(tree_s + out["load_s"], 2)
    out["build_facts_per_s"] = round(out["facts"] / out["build_s"])
    return out


def real_ish_facts(kb: Path, inverse: bool, count: int, seed: int = 0) -> list[Fact]:
    """Up to ``count`` facts of ``kb``; when it has fewer, padded with recombined real labels: a
    subject of the KB, one of its predicates, an object seen with that predicate."""
    from agent.knowledge.loaders import load_facts

    facts = list(itertools.islice(load_facts(kb, inverse=inverse), count))
    if len(facts) >= count:
        return facts
    rng = random.Random(seed)
    seen = {f.text for f in facts}
    subjects = sorted({f.subject for f in facts})
    by_pred: dict[str, list[str]] = {}
    for f in facts:
        by_pred.setdefault(f.predicate, []).append(f.object)
    preds = sorted(by_pred)
    while len(facts) < count:
        p = rng.choice(preds)
        fact = Fact(rng.choice(subjects), p, rng.choice(by_pred[p]), "recombined")
        if fact.text not in seen:
            seen.add(fact.text)
            facts.append(fact)
    return facts


def _table(results: list[dict[str, Any]]) -> str:
    cols = [("facts", lambda r: f"{r['facts']:,}"), ("nodes", lambda r: f"{r['nodes']:,}"),
            ("rows", lambda r: f"{r['rows']:,}"),
            ("build s", lambda r: f"{r.get('build_s', r['load_s'])}"), ("load s", lambda r: f"{r['load_s']}"),
            ("load facts/s", lambda r: f"{r['load_facts_per_s']:,}"),
            ("tree B/fact", lambda r: f"{r['tree_bytes_per_fact']}"),
            ("all B/fact", lambda r: f"{r['total_bytes_per_fact']}"), ("open s", lambda r: f"{r['open_s']}"),
            ("warm p50/p99 ms", lambda r: f"{r['warm_lookup']['p50_ms']:.3f}/{r['warm_lookup']['p99_ms']:.3f}"),
            ("cold p50/p99 ms", lambda r: f"{r['cold_lookup']['p50_ms']:.3f}/{r['cold_lookup']['p99_ms']:.3f}"),
            ("fetch p50/p99 ms", lambda r: f"{r['fetch']['p50_ms']:.3f}/{r['fetch']['p99_ms']:.3f}"),
            ("trips/fact cold", lambda r: f"{r['round_trips_per_fact_cold']} (max {r['round_trips_per_fact_cold_max']})"),
            ("trips/fact warm", lambda r: f"{r['round_trips_per_fact_warm']}")]
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(f(r) for _, f in cols) + " |" for r in results]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, nargs="+", default=[100_000], help="fact counts to measure")
    ap.add_argument("--kb", type=Path, default=None, help="knowledge source (default: KAMEL if present, else demo)")
    ap.add_argument("--inverse", action="store_true", help="add inverse facts")
    ap.add_argument("--model", default="smollm2-135m", help="tokenizer of this model")
    ap.add_argument("--dsn", default=os.environ.get("FACTWEAVE_PG_DSN"), help="PostgreSQL (default: throwaway cluster)")
    ap.add_argument("--walks", type=int, default=2000, help="random facts walked (a quarter of them cold)")
    ap.add_argument("--block-nodes", type=int, default=DEFAULT_BLOCK_NODES)
    ap.add_argument("--prefetch-nodes", type=int, default=DEFAULT_PREFETCH_NODES)
    ap.add_argument("--cache-rows", type=int, default=16384)
    ap.add_argument("--json", type=Path, default=RESULTS / "postgres_index.json")
    args = ap.parse_args()

    from agent.knowledge.kamel import demo_kamel_root
    from agent.models import load_tokenizer

    kb = args.kb or (KAMEL if KAMEL.is_dir() else demo_kamel_root())
    tokenizer = load_tokenizer(args.model)
    server = None
    dsn = args.dsn
    if not dsn:
        from agent.index.pg_local import LocalPostgres

        server = LocalPostgres().start()
        dsn = server.dsn
    results = []
    try:
        for count in args.facts:
            facts = real_ish_facts(kb, args.inverse, count)
            r = measure(facts, tokenizer, dsn, walks=args.walks, block_nodes=args.block_nodes,
                        prefetch_nodes=args.prefetch_nodes, cache_rows=args.cache_rows)
            r.update({"kb": str(kb), "inverse": args.inverse, "model": args.model,
                      "recombined": sum(1 for f in facts if f.source == "recombined")})
            results.append(r)
            print(_table([r]).splitlines()[-1], flush=True)
    finally:
        if server is not None:
            server.stop()
    print(_table(results))
    payload = {"benchmark": "postgres_index", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "load_avg_1m": os.getloadavg()[0]},
               "server": "throwaway cluster, TCP 127.0.0.1, fsync off" if server is not None else "given DSN",
               "results": results}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"-> {args.json}")


if __name__ == "__main__":
    main()
