"""Knowledge-web retrieval on MuSiQue and HotpotQA: recall of supporting paragraphs, vs dense chunks.

For each dataset (in ``../shared/data``) one run:

1. builds a knowledge web of the dataset's passages (embedded graph server and vectors, a fresh
   folder), timing the build (chunks/s, facts/s);
2. for every question, retrieves the top facts (``KnowledgeWeb.search``) and counts a supporting
   paragraph as found when a retrieved fact comes from it: recall@5 and @10, averaged over
   questions, and the share of questions with every supporting paragraph found;
3. also ranks with the paper's degree weight (1 instead of the default 0.1);
   re-ranks the top 20 with the fact re-ranker for the first ``--rerank-questions`` questions
   (the chat model picks facts; picked facts go first, the rest keep their order) and reports
   the same recalls on those questions, with and without re-ranking;
4. the baseline: plain dense retrieval over the same chunks with the same embedder (exact
   cosine), recall@5/@10 of supporting paragraphs;
5. latencies p50/p95 of web search, dense search and re-ranking.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/web_retrieval.py [--datasets musique hotpotqa]
        [--questions 100] [--rerank-questions 20] [--decomposer sentences|llm] [--llm-model M]
        [--json benchmarks/results/web_retrieval.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.web.documents import Document, chunk_document

SHARED = REPO.parent / "shared" / "data"


def musique(limit: int) -> tuple[list[Document], list[dict]]:
    rows = json.loads((SHARED / "musique" / "musique_train100_with_paragraphs.json").read_text())
    corpus = json.loads((SHARED / "musique" / "musique_train100_corpus.json").read_text())
    docs = [Document(p["title"].strip(), p["text"].strip(), f"musique#{i}") for i, p in enumerate(corpus)]
    questions = []
    for row in rows[:limit]:
        support = {Document(p["title"].strip(), p["paragraph_text"].strip(), "").id
                   for p in row["paragraphs"] if p["is_supporting"]}
        questions.append({"question": row["question"], "support": support})
    return docs, questions


def hotpotqa(limit: int) -> tuple[list[Document], list[dict]]:
    rows = json.loads((SHARED / "hotpotqa" / "hotpotqa_train100_with_context.json").read_text())
    corpus = json.loads((SHARED / "hotpotqa" / "hotpotqa_train100_corpus.json").read_text())
    docs = [Document(title.strip(), "".join(sents).strip(), f"hotpotqa#{title}") for title, sents in corpus.items()]
    by_title = {d.title: d.id for d in docs}
    questions = []
    for row in rows[:limit]:
        support = {by_title[t.strip()] for t, _ in row["supporting_facts"] if t.strip() in by_title}
        questions.append({"question": row["question"], "support": support})
    return docs, questions


DATASETS = {"musique": musique, "hotpotqa": hotpotqa}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def recall(found_docs: list[str], support: set[str], k: int) -> float:
    return len(set(found_docs[:k]) & support) / len(support) if support else 0.0


def doc_ranking(doc_ids: list[str]) -> list[str]:
    """Paragraphs in the order their first fact appears (a fact list ranks paragraphs)."""
    seen: dict[str, None] = {}
    for d in doc_ids:
        seen.setdefault(d, None)
    return list(seen)


def fact_recall(hits: list, support: set[str], k: int) -> float:
    """Share of the supporting paragraphs that one of the first ``k`` facts comes from."""
    return recall(doc_ranking([h.provenance.get("doc_id", "") for h in hits[:k]]), support, k)


def run_dataset(name: str, args: argparse.Namespace, embedder, client) -> dict:
    from agent.rerank.reranker import Candidate, Reranker
    from agent.web.decompose import LLMDecomposer, SentenceDecomposer
    from agent.web.web import KnowledgeWeb

    docs, questions = DATASETS[name](args.questions)
    result: dict = {"dataset": name, "documents": len(docs), "questions": len(questions)}
    with tempfile.TemporaryDirectory(prefix=f"fw-bench-{name}-") as tmp:
        web = KnowledgeWeb.open(Path(tmp) / "web", embedder=embedder)
        try:
            decomposer = LLMDecomposer(client) if args.decomposer == "llm" else SentenceDecomposer()
            build_docs = docs[: args.max_docs] if args.max_docs else docs
            report = web.add_documents(build_docs, decomposer, progress=True)
            result["build"] = {"decomposer": decomposer.fingerprint, "documents": len(build_docs),
                               "chunks": report.chunks, "facts": report.facts, "seconds": report.seconds,
                               "facts_per_s": round(report.facts / report.seconds, 1),
                               "chunks_per_s": round(report.chunks / report.seconds, 2), "stats": web.stats()}
            print(f"{name}: built {report.facts} facts from {report.chunks} chunks in {report.seconds:.1f} s",
                  file=sys.stderr)
            web_lat, rerank_lat = [], []
            web_r5, web_r10, web_all10 = [], [], []
            paper_lat, paper_r5, paper_r10, paper_all10 = [], [], [], []
            rr_rows = []
            reranker = Reranker(client) if client is not None else None
            for i, q in enumerate(questions):
                t = time.perf_counter()
                hits = web.search(q["question"], k=20).hits
                web_lat.append(time.perf_counter() - t)
                web_r5.append(fact_recall(hits, q["support"], 5))
                web_r10.append(fact_recall(hits, q["support"], 10))
                web_all10.append(float(web_r10[-1] == 1.0))
                t = time.perf_counter()  # the paper's weight, same candidates, same run
                paper = web.search(q["question"], k=20, degree_weight=1.0).hits
                paper_lat.append(time.perf_counter() - t)
                paper_r5.append(fact_recall(paper, q["support"], 5))
                paper_r10.append(fact_recall(paper, q["support"], 10))
                paper_all10.append(float(paper_r10[-1] == 1.0))
                if reranker is not None and i < args.rerank_questions:
                    t = time.perf_counter()
                    rr = reranker.rerank(q["question"], [Candidate(h.id, h.text, h.score) for h in hits])
                    rerank_lat.append(time.perf_counter() - t)
                    picked = {c.id for c in rr.selected}
                    order = [h for h in hits if h.id in picked] + [h for h in hits if h.id not in picked]
                    rr_rows.append({
                        "without": (fact_recall(hits, q["support"], 5), fact_recall(hits, q["support"], 10)),
                        "with": (fact_recall(order, q["support"], 5), fact_recall(order, q["support"], 10)),
                        "selected_only": fact_recall(order, q["support"], len(picked)),
                        "selected": len(picked), "fallback": rr.used_fallback, "type": rr.question_type,
                    })
            result["web"] = {"recall@5": statistics.mean(web_r5), "recall@10": statistics.mean(web_r10),
                             "all_support@10": statistics.mean(web_all10),
                             "latency_ms_p50": pct(web_lat, 50) * 1e3, "latency_ms_p95": pct(web_lat, 95) * 1e3}
            result["web_paper_weight"] = {
                "recall@5": statistics.mean(paper_r5), "recall@10": statistics.mean(paper_r10),
                "all_support@10": statistics.mean(paper_all10),
                "latency_ms_p50": pct(paper_lat, 50) * 1e3, "latency_ms_p95": pct(paper_lat, 95) * 1e3}
            if rr_rows:
                result["rerank"] = {
                    "questions": len(rr_rows),
                    "model": client.name,
                    "recall@5_without": statistics.mean(r["without"][0] for r in rr_rows),
                    "recall@10_without": statistics.mean(r["without"][1] for r in rr_rows),
                    "recall@5_with": statistics.mean(r["with"][0] for r in rr_rows),
                    "recall@10_with": statistics.mean(r["with"][1] for r in rr_rows),
                    "recall_of_selected": statistics.mean(r["selected_only"] for r in rr_rows),
                    "mean_selected": statistics.mean(r["selected"] for r in rr_rows),
                    "fallbacks": sum(r["fallback"] for r in rr_rows),
                    "latency_ms_p50": pct(rerank_lat, 50) * 1e3, "latency_ms_p95": pct(rerank_lat, 95) * 1e3,
                }
        finally:
            web.close()

    # Dense baseline: the same chunks, the same embedder, exact cosine.
    chunks = [(d.id, c.text) for d in docs for c in chunk_document(d)]
    t = time.perf_counter()
    matrix = embedder.encode([text for _, text in chunks])
    dense_build = time.perf_counter() - t
    dense_lat, d5, d10, dall = [], [], [], []
    for q in questions:
        t = time.perf_counter()
        scores = matrix @ embedder.encode([q["question"]])[0]
        top = np.argsort(-scores)[:10]
        dense_lat.append(time.perf_counter() - t)
        d5.append(recall(doc_ranking([chunks[j][0] for j in top[:5]]), q["support"], 5))
        d10.append(recall(doc_ranking([chunks[j][0] for j in top]), q["support"], 10))
        dall.append(float(d10[-1] == 1.0))
    result["dense"] = {"chunks": len(chunks), "embed_seconds": round(dense_build, 2),
                       "recall@5": statistics.mean(d5), "recall@10": statistics.mean(d10),
                       "all_support@10": statistics.mean(dall),
                       "latency_ms_p50": pct(dense_lat, 50) * 1e3, "latency_ms_p95": pct(dense_lat, 95) * 1e3}
    return result


def print_table(results: list[dict]) -> None:
    head = f"{'dataset':9} {'method':26} {'R@5':>6} {'R@10':>6} {'all@10':>7} {'p50 ms':>8} {'p95 ms':>8}"
    print(head)
    print("-" * len(head))
    for r in results:
        for label, key in (("knowledge web (w=0.1)", "web"), ("knowledge web (w=1, paper)", "web_paper_weight"),
                           ("dense chunks (baseline)", "dense")):
            m = r[key]
            print(f"{r['dataset']:9} {label:26} {m['recall@5']:6.3f} {m['recall@10']:6.3f} "
                  f"{m['all_support@10']:7.3f} {m['latency_ms_p50']:8.1f} {m['latency_ms_p95']:8.1f}")
        if "rerank" in r:
            m = r["rerank"]
            n = m["questions"]
            print(f"{r['dataset']:9} {f'web (w=0.1), first {n} q':26} {m['recall@5_without']:6.3f} "
                  f"{m['recall@10_without']:6.3f} {'':7} {'':8} {'':8}")
            print(f"{r['dataset']:9} {f'web + re-ranker, {n} q':26} {m['recall@5_with']:6.3f} "
                  f"{m['recall@10_with']:6.3f} {'':7} {m['latency_ms_p50']:8.0f} {m['latency_ms_p95']:8.0f}")
    print()
    for r in results:
        b = r["build"]
        print(f"{r['dataset']}: build {b['documents']} docs -> {b['chunks']} chunks -> {b['facts']} facts in "
              f"{b['seconds']:.1f} s ({b['facts_per_s']} facts/s, {b['chunks_per_s']} chunks/s, {b['decomposer']})")
        if "rerank" in r:
            m = r["rerank"]
            print(f"{r['dataset']}: re-ranker ({m['model']}) picked {m['mean_selected']:.1f} facts on average, "
                  f"{m['fallbacks']} fallback(s) of {m['questions']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=sorted(DATASETS), default=["musique", "hotpotqa"])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rerank-questions", type=int, default=20)
    parser.add_argument("--decomposer", choices=["sentences", "llm"], default="sentences")
    parser.add_argument("--max-docs", type=int, default=0, help="Build from the first N passages only.")
    parser.add_argument("--llm-model", default=None, help="Re-ranker / decomposer model (default: local preset).")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--no-rerank", action="store_true")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "web_retrieval.json")
    args = parser.parse_args()

    from agent.embeddings import Embedder
    from agent.llm.client import chat_client_from_env

    embedder = Embedder()
    client = None if args.no_rerank and args.decomposer != "llm" else chat_client_from_env(
        model=args.llm_model, base_url=args.base_url)
    if args.no_rerank:
        args.rerank_questions = 0
    results = [run_dataset(name, args, embedder, client) for name in args.datasets]
    print_table(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    out = {"benchmark": "web_retrieval", "settings": {k: str(v) for k, v in vars(args).items()},
           "environment": {"python": platform.python_version(), "machine": platform.machine()},
           "results": [{**r} for r in results]}
    args.json.write_text(json.dumps(out, indent=2, default=lambda o: sorted(o) if isinstance(o, set) else str(o)))
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
