"""Benchmark: how fast facts go into a knowledge web, against the embedder alone on the same texts.

Two workloads, each ingested into a fresh web (a temporary folder, the embedded graph server and
local vectors, as ``factweave web build`` uses them):

- **triples**: the first ``--facts`` KAMEL triples (``--kb``: the demo KAMEL shipped in
  ``agent/data/demo/kamel`` by default, ``../shared/data/kamel`` for all of it; ``--facts 0``
  takes every triple) through ``KnowledgeWeb.add_triples``;
- **passages**: the first ``--passages`` MuSiQue paragraphs (``--corpus``) through
  ``KnowledgeWeb.add_documents`` with the sentence decomposer.

In the same run the embedder alone encodes the same fact texts (the web's facts, same batch
size); embedding is almost all of a build's work, so the ratio ingest / embed-only says what the
rest costs (keywords embedded beside the facts, graph writes, vector flushes), and, both being
timed on the same machine moments apart, it moves much less with the machine's load than either
rate. On a machine shared with other work the wall-clock rates swing with the load, so the same
figures are also given per CPU second (this process's, plus the graph server's for the ingest),
which the load moves much less. Each repeat alternates which of the two goes first; medians are
reported.

A second ratio compares the ingest with the embedder alone on every text the ingest embedded
(facts, their new keywords, the chunks), replaying its ``encode`` calls one by one after it
(with ``--embed-sample``, evenly spaced calls holding about that many texts, scaled by text
count): what everything but the embedding costs. The first ratio also charges the ingest for
the keywords and chunks it must embed, which the embedder alone on the facts does not. Also:
texts embedded per fact, where the ingest time went (embedding, vector insertion and flushes, graph writes),
peak RSS of this process and of it with the graph server (sampled with psutil).

    PYTHONPATH=. .venv/bin/python benchmarks/web_ingest.py                       # demo KAMEL 2,000 + 150 passages, 3 repeats
    PYTHONPATH=. .venv/bin/python benchmarks/web_ingest.py --kb ../shared/data/kamel --facts 0 \\
        --passages 0 --repeats 1 --embed-sample 20000 --out benchmarks/results/web_ingest_kamel.json

For a whole-KB run, ``--embed-sample N`` times the embedder alone on N of the facts' texts
(evenly spaced) instead of all of them. Writes ``benchmarks/results/web_ingest.json`` (machine,
load average before and after) and prints a table.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

RESULTS = REPO / "benchmarks" / "results"
MUSIQUE = REPO.parent / "shared" / "data" / "musique" / "musique_train100_corpus.json"
DEMO_CORPUS = REPO / "agent" / "data" / "demo" / "web" / "corpus.json"


class CountingEmbedder:
    """The real embedder, counting the texts it encodes and the seconds it takes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.fingerprint, self.dim = inner.name, inner.fingerprint, inner.dim
        self.texts = 0
        self.seconds = 0.0
        self.calls: list[list[str]] = []  # every call's texts, for the embedder alone to replay

    @property
    def batch_size(self) -> int:
        return self.inner.batch_size

    def __getattr__(self, name: str) -> Any:  # anything else the web asks of an embedder
        return getattr(self.inner, name)

    def encode(self, texts, *args: Any, **kwargs: Any):
        started = time.perf_counter()
        try:
            return self.inner.encode(texts, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)
            self.calls.append(list(texts))


class PeakRSS:
    """Peak resident memory of this process, and of it plus its children (the graph server),
    sampled every ``interval`` seconds while in a ``with`` block."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.own = self.total = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                own = me.memory_info().rss
                children = sum(c.memory_info().rss for c in me.children(recursive=True))
            except psutil.Error:
                own, children = self.own, 0
            self.own, self.total = max(self.own, own), max(self.total, own + children)
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:  # noqa: PYI034 (not meant to be subclassed)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        # psutil missing: the kernel's own peak for this process (KiB on Linux)
        self.own = self.own or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _timed(obj: Any, name: str, totals: dict[str, float], key: str) -> None:
    """Wrap ``obj.name`` so that its seconds add up in ``totals[key]``."""
    inner = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[key] = totals.get(key, 0.0) + time.perf_counter() - started

    setattr(obj, name, wrapper)


def _commit() -> str:
    """The code measured: the commit, "+changes" when the tree differs from it."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown (not a git checkout)"
    return f"{head}+changes" if git("status", "--porcelain", "--untracked-files=no") else head


def _children_cpu_s() -> float:
    """CPU seconds of this process's children (the embedded graph server), 0 without psutil."""
    try:
        import psutil
    except ImportError:
        return 0.0
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _mib(n: int) -> float:
    return round(n / 2**20, 1)


def _until(items: list, deadline: float | None, given: list[int]):
    """``items`` until ``deadline`` (``time.monotonic()``) passes (a whole-KB run cut to a time
    limit), counting them in ``given[0]``."""
    for item in items:
        if deadline is not None and time.monotonic() > deadline:
            return
        given[0] += 1
        yield item


def ingest(kind: str, items: list, embedder: Any, work: Path, time_limit: float | None = None) -> dict:
    """Ingest ``items`` into a fresh web under ``work``; the timing excludes opening the web.
    With ``time_limit`` (seconds), no item is given to the web after that long."""
    from agent.web.decompose import SentenceDecomposer
    from agent.web.web import KnowledgeWeb

    counting = CountingEmbedder(embedder)
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=work))
    web = KnowledgeWeb.open(folder, embedder=counting)
    parts: dict[str, float] = {}
    for vectors in (web.keyword_vectors, web.fact_vectors, web.chunk_vectors):
        _timed(vectors, "flush", parts, "vector_flush_s")
        _timed(vectors, "upsert", parts, "vector_insert_s")  # the index's own insertion (HNSW for usearch)
    for method in ("write_triples", "write_chunk"):
        _timed(web.graph, method, parts, "graph_write_s")
    try:
        with PeakRSS() as peak:
            cpu, server_cpu = time.process_time(), _children_cpu_s()
            started = time.perf_counter()
            count = [0]
            given = _until(items, time.monotonic() + time_limit if time_limit else None, count)
            if kind == "triples":
                report = web.add_triples(given, source="kamel", progress=True)
            else:
                report = web.add_documents(given, SentenceDecomposer(), progress=True)
            seconds = time.perf_counter() - started
            cpu, server_cpu = time.process_time() - cpu, _children_cpu_s() - server_cpu
        stats = web.stats()
    finally:
        web.close()
        shutil.rmtree(folder, ignore_errors=True)
    return {"items": count[0], "seconds": round(seconds, 2), "facts": report.facts, "keywords_new": report.keywords_new,
            "facts_per_s": round(report.facts / seconds, 1), "cpu_s": round(cpu, 2),
            "graph_server_cpu_s": round(server_cpu, 2),
            "facts_per_cpu_s": round(report.facts / max(cpu + server_cpu, 1e-9), 1),
            "texts_embedded": counting.texts,
            "texts_per_fact": round(counting.texts / max(report.facts, 1), 2),
            "embed_s": round(counting.seconds, 2), "_calls": counting.calls, **{k: round(v, 2) for k, v in parts.items()},
            "peak_rss_mib": _mib(peak.own), "peak_rss_with_graph_server_mib": _mib(peak.total),
            "stats": {k: stats.get(k) for k in ("facts", "keywords", "mentions", "fact_vectors", "keyword_vectors")}}


def embed_only(texts: list[str], embedder: Any) -> dict:
    with PeakRSS() as peak:
        cpu = time.process_time()
        started = time.perf_counter()
        embedder.encode(texts, progress=False)
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
    return {"seconds": round(seconds, 2), "texts": len(texts), "facts_per_s": round(len(texts) / seconds, 1),
            "cpu_s": round(cpu, 2), "facts_per_cpu_s": round(len(texts) / max(cpu, 1e-9), 1),
            "peak_rss_mib": _mib(peak.own)}


def replay(calls: list[list[str]], embedder: Any, sample: int) -> dict:
    """The embedder alone on the very texts the ingest embedded (facts, new keywords, chunks),
    call by call as the ingest made them; with ``sample``, evenly spaced calls holding at least
    that many texts, the time scaled to all of them by text count."""
    total = sum(len(c) for c in calls)
    chosen = calls[:: max(1, total // sample)] if sample and sample < total else calls
    texts = sum(len(c) for c in chosen)
    cpu = time.process_time()
    started = time.perf_counter()
    for call in chosen:
        embedder.encode(call, progress=False)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    scale = total / max(texts, 1)
    return {"calls": len(chosen), "of_calls": len(calls), "texts": texts, "of_texts": total,
            "seconds_all": round(seconds * scale, 2), "cpu_s_all": round(cpu * scale, 2)}


def fact_texts(kind: str, items: list, chunk_size: int) -> list[str]:
    """The texts a web stores as facts for ``items`` (what ``ingest`` embeds as facts)."""
    if kind == "triples":
        return list(dict.fromkeys(t.text for t in items))
    from agent.web.decompose import SentenceDecomposer
    from agent.web.documents import chunk_document

    decomposer = SentenceDecomposer()
    return [f.text for doc in items for chunk in chunk_document(doc, chunk_size)
            for f in decomposer.decompose(doc.title, doc.text, chunk)]


def run_workload(kind: str, items: list, embedder: Any, repeats: int, sample: int, work: Path,
                 time_limit: float | None = None) -> dict:
    from agent.web.web import WebSettings

    texts = fact_texts(kind, items, WebSettings().chunk_size)
    if sample and sample < len(texts):
        step = len(texts) / sample
        texts = [texts[int(i * step)] for i in range(sample)]
    runs = []
    for r in range(repeats):
        order = ("embed", "ingest") if r % 2 == 0 else ("ingest", "embed")
        load_before = [round(x, 2) for x in os.getloadavg()]
        row: dict[str, Any] = {}
        for step_name in order:
            if step_name == "embed":
                row["embed_only"] = embed_only(texts, embedder)
            else:
                row["ingest"] = ingest(kind, items, embedder, work, time_limit)
                row["embed_same_texts"] = replay(row["ingest"].pop("_calls"), embedder, sample)
        row["ratio"] = round(row["ingest"]["facts_per_s"] / row["embed_only"]["facts_per_s"], 3)
        row["cpu_ratio"] = round(row["ingest"]["facts_per_cpu_s"] / row["embed_only"]["facts_per_cpu_s"], 3)
        same, done = row["embed_same_texts"], row["ingest"]
        row["same_texts_ratio"] = round(same["seconds_all"] / done["seconds"], 3)
        row["same_texts_cpu_ratio"] = round(same["cpu_s_all"] / (done["cpu_s"] + done["graph_server_cpu_s"]), 3)
        row["load_before"], row["load_after"] = load_before, [round(x, 2) for x in os.getloadavg()]
        runs.append(row)
        print(f"{kind} repeat {r + 1}/{repeats}: ingest {row['ingest']['facts_per_s']} facts/s, "
              f"embedder alone {row['embed_only']['facts_per_s']} texts/s, ratio {row['ratio']} "
              f"(by CPU time {row['cpu_ratio']}); against the embedder alone on all the texts it embedded "
              f"{row['same_texts_ratio']} (by CPU time {row['same_texts_cpu_ratio']}), "
              f"load {load_before[0]}-{row['load_after'][0]}", flush=True)

    def med(f) -> float:
        return round(statistics.median(f(run) for run in runs), 3)

    return {"workload": kind, "items": len(items), "items_ingested": min(x["ingest"]["items"] for x in runs),
            "facts": runs[0]["ingest"]["facts"],
            "embed_texts": len(texts), "ingest_facts_per_s": med(lambda x: x["ingest"]["facts_per_s"]),
            "embed_only_facts_per_s": med(lambda x: x["embed_only"]["facts_per_s"]),
            "ratio": med(lambda x: x["ratio"]),
            "ingest_facts_per_cpu_s": med(lambda x: x["ingest"]["facts_per_cpu_s"]),
            "embed_only_facts_per_cpu_s": med(lambda x: x["embed_only"]["facts_per_cpu_s"]),
            "cpu_ratio": med(lambda x: x["cpu_ratio"]),
            "same_texts_ratio": med(lambda x: x["same_texts_ratio"]),
            "same_texts_cpu_ratio": med(lambda x: x["same_texts_cpu_ratio"]), "texts_per_fact": runs[0]["ingest"]["texts_per_fact"],
            "embed_share": med(lambda x: x["ingest"]["embed_s"] / x["ingest"]["seconds"]),
            "peak_rss_mib": max(x["ingest"]["peak_rss_mib"] for x in runs),
            "peak_rss_with_graph_server_mib": max(x["ingest"]["peak_rss_with_graph_server_mib"] for x in runs),
            "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=Path, default=None, help="KAMEL folder (default: the demo KAMEL)")
    ap.add_argument("--facts", type=int, default=2000, help="triples to ingest (0: all of --kb; -1: none)")
    ap.add_argument("--corpus", type=Path, default=MUSIQUE if MUSIQUE.exists() else DEMO_CORPUS,
                    help="passages: a {title, text} JSON corpus (default: MuSiQue's)")
    ap.add_argument("--passages", type=int, default=150, help="passages to ingest (0: none)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="embedder batch size (default: the Embedder's)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                    help="the embedder's matrix products (default: $FACTWEAVE_EMBED_PRECISION, else fp32)")
    ap.add_argument("--embed-sample", type=int, default=0,
                    help="time the embedder alone on this many of the fact texts (0: all of them)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds: stop giving the web triples or passages after this long (a partial whole-KB run)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the webs (default: a temporary one)")
    ap.add_argument("--out", type=Path, default=RESULTS / "web_ingest.json")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")

    from agent.embeddings import Embedder
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts
    from agent.web.documents import read_documents

    embedder = Embedder(precision=args.precision, **({} if args.batch_size is None else {"batch_size": args.batch_size}))
    embedder.encode(["warm up the model"])
    kb = args.kb or demo_kamel_root()
    workloads: list[tuple[str, list]] = []
    if args.facts >= 0:
        triples = load_facts(kb)
        workloads.append(("triples", list(triples if args.facts == 0 else itertools.islice(triples, args.facts))))
    if args.passages > 0:
        workloads.append(("passages", list(itertools.islice(read_documents([args.corpus]), args.passages))))

    load_before = [round(x, 2) for x in os.getloadavg()]
    commit = _commit()
    work = args.work or Path(tempfile.mkdtemp(prefix="web-ingest-"))
    work.mkdir(parents=True, exist_ok=True)
    import torch

    out = {"benchmark": "web_ingest", "commit": commit, "embedder": embedder.name, "precision": embedder.precision,
           "batch_size": embedder.batch_size,
           "kb": str(kb), "corpus": str(args.corpus), "repeats": args.repeats,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version(), "torch": torch.__version__,
                       "torch_threads": torch.get_num_threads()},
           "load_before": load_before, "results": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = out["results"]
    try:
        for kind, items in workloads:  # the JSON is rewritten after each workload: a cut-short run keeps what it did
            results.append(run_workload(kind, items, embedder, args.repeats, args.embed_sample, work, args.time_limit))
            out["load_after"] = [round(x, 2) for x in os.getloadavg()]
            args.out.write_text(json.dumps(out, indent=2) + "\n")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| workload | facts | ingest facts/s | embedder alone facts/s | ratio | by CPU time: ingest / alone "
          "facts per CPU-s, ratio | against the embedder alone on every text the ingest embedded: ratio (by CPU time) "
          "| texts embedded per fact | embedding share of ingest | peak RSS (+ graph server) MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        cut = f" of {r['items']:,}" if r["items_ingested"] < r["items"] else ""
        print(f"| {r['workload']} ({r['items_ingested']:,}{cut} {'triples' if r['workload'] == 'triples' else 'passages'}) | "
              f"{r['facts']:,} | {r['ingest_facts_per_s']} | {r['embed_only_facts_per_s']} | {r['ratio']} | "
              f"{r['ingest_facts_per_cpu_s']} / {r['embed_only_facts_per_cpu_s']}, {r['cpu_ratio']} | "
              f"{r['same_texts_ratio']} ({r['same_texts_cpu_ratio']}) | "
              f"{r['texts_per_fact']} | {r['embed_share']:.0%} | {r['peak_rss_mib']:,} ({r['peak_rss_with_graph_server_mib']:,}) |")
    print(f"(medians of {args.repeats} repeat(s); load {load_before[0]}-{out['load_after'][0]} on "
          f"{os.cpu_count()} CPUs; JSON: {args.out})")


if __name__ == "__main__":
    main()
