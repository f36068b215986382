"""The model's reading of a question into a relation path (:class:`agent.pipeline.relation_reading.PathReader`),
scored against gold paths, dev and test halves side by side.

Sets:

- ``written``: ``benchmarks/data/paths.jsonl``, 48 questions written for this project (fictional
  names; kinship and role compositions, one to three steps, several wordings), each with the gold
  path(s) over Wikidata's relation labels; read among all 234 bundled labels
  (``agent/data/relations/property-labels.tsv``).
- ``kb-two-hop``: the KAMEL two-hop chains of the bundled demo KB (``factweave eval kamel-chat``'s
  questions, the chain's two relations are the gold path), sampled per half; read among the KB's
  own 30 labels (``labels``), and among the relations the KB holds along the way from the
  question's subject (``graph``: the first step one of the subject's relations, the next one of
  the relations of what that step leads to).
- ``kb-two-hop-reworded``: the same questions in the wording a model wrote
  (``benchmarks/data/wordings/kamel-chat-two-hop-test.jsonl``, test half only).

The halves are :mod:`agent.eval.halves` (a hash of the id); without ``--test`` only dev is read.
A path is right when it equals one of the gold paths. Results: ``benchmarks/results/path_reading-<model>.json``
(with ``--test``), per case ``benchmarks/results/path_reading.jsonl``.

Usage::

    python benchmarks/path_reading.py --model qwen2.5-coder-0.5b              # dev halves
    python benchmarks/path_reading.py --model qwen2.5-coder-0.5b --test       # both, to report
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tqdm import tqdm  # noqa: E402

WRITTEN = REPO / "benchmarks" / "data" / "paths.jsonl"
REWORDED = REPO / "benchmarks" / "data" / "wordings" / "kamel-chat-two-hop-test.jsonl"
OUT = REPO / "benchmarks" / "results" / "path_reading-{model}.json"
CASES = REPO / "benchmarks" / "results" / "path_reading.jsonl"


def written_cases(halves: tuple[str, ...]) -> list[dict]:
    from agent.eval.halves import half_of

    rows = [json.loads(line) for line in WRITTEN.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"set": "written", "id": r["id"], "half": half_of(r["id"]), "question": r["question"],
             "names": r["names"], "paths": r["paths"], "labels": "all"} for r in rows if half_of(r["id"]) in halves]


def kb_cases(halves: tuple[str, ...], limit: int) -> list[dict]:
    from agent.eval.datasets import load_questions
    from agent.knowledge.kamel import demo_kamel_root, property_labels

    labels = property_labels(demo_kamel_root())
    out = []
    for half in halves:
        for q in load_questions("kamel-chat", kind="two-hop", half=half, limit=limit):
            out.append({"set": "kb-two-hop", "id": q.id, "half": half, "question": q.text,
                        "names": [q.meta["subject"]], "paths": [[labels[r] for r in q.meta["relations"]]]})
    if "test" in halves and REWORDED.exists():
        gold = {c["id"]: c for c in out}
        for row in map(json.loads, REWORDED.read_text(encoding="utf-8").splitlines()):
            if row["id"] in gold:
                out.append({**gold[row["id"]], "set": "kb-two-hop-reworded", "question": row["text"]})
    return out


def graph_steps():
    """The demo KB's relations along a path (:class:`HeldRelations`)."""
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts
    from agent.pipeline.relation_reading import HeldRelations

    return HeldRelations((f.subject, f.predicate, f.object) for f in load_facts(demo_kamel_root()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--limit", type=int, default=40, help="KB two-hop questions per half")
    parser.add_argument("--width", type=int, default=4, help="the beam's readings")
    parser.add_argument("--test", action="store_true", help="also the test halves (only to report)")
    args = parser.parse_args()
    from agent.models import load_model
    from agent.pipeline.relation_reading import PathReader

    halves = ("dev", "test") if args.test else ("dev",)
    loaded = load_model(args.model)
    every = [line.split("\t")[1] for line in
             (REPO / "agent" / "data" / "relations" / "property-labels.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    held = graph_steps()
    readers = {"all": PathReader(loaded.model, loaded.tokenizer, every, width=args.width),
               "kb": PathReader(loaded.model, loaded.tokenizer, held.labels, width=args.width)}
    cases = written_cases(halves) + kb_cases(halves, args.limit)
    runs = []
    for case in tqdm(cases, desc="paths", unit="question"):
        modes = [("labels", "all", None)] if case["set"] == "written" else \
            [("labels", "kb", None), ("graph", "kb", held.after(case["names"][0]))]
        for mode, reader, steps in modes:
            start = time.perf_counter()
            path = readers[reader].read(case["question"], case["names"], steps)
            runs.append({**case, "mode": mode, "path": list(path), "right": list(path) in case["paths"],
                         "seconds": round(time.perf_counter() - start, 3)})
    CASES.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in runs), encoding="utf-8")
    table: dict = {"model": args.model, "width": args.width, "machine": platform.processor() or platform.machine(),
                   "cpus": os.cpu_count(), "load": os.getloadavg(), "rows": []}
    print("| set | labels | half | questions | right | share | median s | p95 s |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted({(r["set"], r["mode"]) for r in runs}):
        for half in halves:
            rows = [r for r in runs if (r["set"], r["mode"]) == key and r["half"] == half]
            if not rows:
                continue
            seconds = sorted(r["seconds"] for r in rows)
            row = {"set": key[0], "labels": key[1], "half": half, "questions": len(rows),
                   "right": sum(r["right"] for r in rows), "share": round(sum(r["right"] for r in rows) / len(rows), 3),
                   "median_s": round(statistics.median(seconds), 2),
                   "p95_s": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 2)}
            table["rows"].append(row)
            print(f"| {row['set']} | {row['labels']} | {half} | {row['questions']} | {row['right']} | {row['share']} | "
                  f"{row['median_s']} | {row['p95_s']} |")
    if args.test:
        out = Path(str(OUT).format(model=args.model))
        out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
