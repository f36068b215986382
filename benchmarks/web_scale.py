"""Benchmark: knowledge-web search latency as the web grows to 1M facts (the retrieval bound).

Builds one web in steps (``--sizes``, default 10k, 100k, 1M facts) through
``KnowledgeWeb.add_triples`` on the embedded graph server and local vectors, and after each step
times ``web.search`` (the default graph search and the paper's keyword route, k=10) on
``--questions`` questions about facts of the web: p50/p95/max per method, the facts each search
scored, and the build's facts/s. Facts: KAMEL triples with their inverses (``../shared/data/kamel``,
else the demo KB), padded with recombined real labels as ``benchmarks/postgres_index.py`` does,
so keyword degrees are real ones ("United States" links to tens of thousands of facts).

Vectors: the real embedder (all-MiniLM-L6-v2) encodes ~130-320 short texts a second on the 2
shared cores here, so 1M facts and their keywords would take hours to embed before anything is
timed. ``--embedder hashing`` (the default) stands in for it: a bag of words, each word a fixed
pseudo-random 384-d vector, summed and normalized; a name gets the same vector wherever it
appears, so the question's keywords find their stored keywords as with the real model. What it
times is therefore the web's own work at that size (vector search over 1M facts and their
keywords, the bounded graph queries, PageRank, fetching vectors), not the embedding of the
question, which is measured separately with the real model (``question_embedding_ms``) and adds
to every search. Answer quality is not measured here (``benchmarks/web_retrieval.py`` does that
with the real embedder); the share of questions whose fact is in the top 10 is printed as a check
that searches do real work.

    PYTHONPATH=. .venv/bin/python benchmarks/web_scale.py                  # 10k, 100k, 1M
    PYTHONPATH=. .venv/bin/python benchmarks/web_scale.py --sizes 20000 --questions 50

Writes ``benchmarks/results/web_scale.json`` (with the machine's load) and prints a table.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.postgres_index import KAMEL, real_ish_facts  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DIM = 384
_WORD = re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=500_000)
def _word_vector(word: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


class HashingEmbedder:
    """A stand-in for the sentence embedder at scale (see the module docstring): same dimension,
    deterministic, a text's vector the normalized sum of its words' fixed random vectors."""

    name = "hashing-bag-of-words-384"
    fingerprint = "hashing-bag-of-words-384-v1"
    dim = DIM

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()) or [text]:  # a name of symbols only ("+"): itself
                out[i] += _word_vector(word)
            norm = float(np.linalg.norm(out[i]))
            if norm:
                out[i] /= norm
        return out


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)) * 1e3, 1) if values else 0.0


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure_search(web, questions: list[tuple[str, str]], method: str) -> dict:
    times, found, scored = [], 0, []
    for question, fact_text in questions:
        t = time.perf_counter()
        result = web.search(question, k=10, method=method)
        times.append(time.perf_counter() - t)
        found += any(hit.text == fact_text for hit in result.hits)
        scored.append(len(result.hits))
    return {"p50_ms": _pct(times, 50), "p95_ms": _pct(times, 95), "max_ms": _pct(times, 100),
            "questions": len(questions), "fact_in_top10": round(found / len(questions), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--embedder", default="hashing", help="'hashing' (default) or a sentence-transformers name")
    ap.add_argument("--kb", type=Path, default=KAMEL if KAMEL.is_dir() else None)
    ap.add_argument("--work", type=Path, default=None, help="folder for the web (default: a temporary one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "web_scale.json")
    args = ap.parse_args()

    from agent.knowledge.kamel import demo_kamel_root
    from agent.web.web import KnowledgeWeb

    kb = args.kb or demo_kamel_root()
    sizes = sorted(args.sizes)
    facts = real_ish_facts(kb, inverse=True, count=sizes[-1], seed=args.seed)
    print(f"{len(facts):,} facts from {kb} (with inverses; recombined padding where it has fewer)", flush=True)
    if args.embedder == "hashing":
        embedder = HashingEmbedder()
    else:
        from agent.embeddings import Embedder
        embedder = Embedder(args.embedder)

    question_ms = None
    try:  # what the real model adds to every search: encoding the question and its keywords
        from agent.embeddings import Embedder
        from agent.knowledge.keywords import extract_keywords
        real = Embedder()
        sample = "Where was Laurie Graff born?"
        real.encode([sample, *extract_keywords(sample)])
        runs = []
        for _ in range(20):
            t = time.perf_counter()
            real.encode([sample, *extract_keywords(sample)])
            runs.append(time.perf_counter() - t)
        question_ms = _pct(runs, 50)
    except Exception as exc:  # noqa: BLE001 - the embedder is not installed: report without it
        print(f"(no real embedder for the question's encoding time: {exc})", file=sys.stderr)

    work = args.work or Path(tempfile.mkdtemp(prefix="web-scale-"))
    rng = random.Random(args.seed)
    rows, done = [], 0
    web = KnowledgeWeb.open(work / "web", embedder=embedder)
    try:
        for size in sizes:
            load_before = _load()
            started = time.perf_counter()
            report = web.add_triples(facts[done:size], source="kamel", batch=2000, progress=True,
                                    replace=False)  # added in slices
            build_s = time.perf_counter() - started
            added, done = size - done, size
            real_facts = [f for f in facts[:size] if f.source != "recombined"]
            asked = [(f"What is the {f.predicate} of {f.subject}?", f.text)
                     for f in rng.sample(real_facts, min(args.questions, len(real_facts)))]
            web.search(asked[0][0], k=10)  # warm the caches once
            row = {"facts": size, "facts_in_web": web.stats().get("facts"), "added": added, "build_s": round(build_s, 1),
                   "build_facts_per_s": round(added / build_s), "report": report.as_dict(),
                   "stats": web.stats(), "graph": measure_search(web, asked, "graph"),
                   "keywords": measure_search(web, asked, "keywords"), "load_before": load_before,
                   "load_after": _load()}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("facts", "build_facts_per_s", "graph", "keywords")}), flush=True)
    finally:
        web.close()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    result = {"benchmark": "web_scale", "embedder": embedder.name, "question_embedding_ms": question_ms,
              "kb": str(kb), "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("\n| facts | build facts/s | graph search p50 / p95 / max ms | keyword route p50 / p95 / max ms | load |")
    print("|---|---|---|---|---|")
    for r in rows:
        g, k = r["graph"], r["keywords"]
        print(f"| {r['facts']:,} | {r['build_facts_per_s']:,} | {g['p50_ms']} / {g['p95_ms']} / {g['max_ms']} | "
              f"{k['p50_ms']} / {k['p95_ms']} / {k['max_ms']} | {r['load_before'][0]}-{r['load_after'][0]} |")
    if question_ms is not None:
        print(f"(plus the question's embedding with the real model: {question_ms} ms p50)")


if __name__ == "__main__":
    main()
