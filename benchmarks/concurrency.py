"""Benchmark: should two questions generate at once on one loaded model?

The server admits ``max_concurrency`` requests and the UI ``--concurrency`` sessions at a time;
what matters is what happens to their generations on one set of weights. Three ways to answer
the same questions with the same model (constrained to the demo KB, greedy, ``--tokens`` new
tokens at most), in one run:

- ``sequential``: one generation at a time (what one lock per loaded model gives);
- ``overlapped``: two threads, each generating its own question at the same time on the shared
  weights (what two clients of one model without a common lock did);
- ``batched``: the questions two at a time in one ``generate`` call (padding, one forward pass).

Reported: wall seconds for all questions per way (median of ``--repeats``), the throughput
ratio against sequential, whether each way's answers equal the sequential ones token for token,
and the machine's load. The machine's load must be low for the figures to mean anything.

Example::

    python benchmarks/concurrency.py --model qwen2.5-coder-0.5b --questions 8 --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RESULTS = Path(__file__).resolve().parent / "results"


def _sequential(generator, questions, tokens):
    return [generator.answer(q, max_new_tokens=tokens) for q in questions]


def _overlapped(generator, questions, tokens):
    answers = [None] * len(questions)

    def worker(indices):
        for i in indices:
            answers[i] = generator.answer(questions[i], max_new_tokens=tokens)

    threads = [threading.Thread(target=worker, args=(range(k, len(questions), 2),)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def _batched(generator, questions, tokens):
    out = []
    for i in range(0, len(questions), 2):
        out += generator.answer_batch(questions[i:i + 2], max_new_tokens=tokens)
    return out


WAYS = {"sequential": _sequential, "overlapped": _overlapped, "batched": _batched}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="default: benchmarks/results/concurrency-<model>.json")
    args = parser.parse_args()

    import torch

    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.runtime import open_generator

    generator = open_generator(args.model, max_new_tokens=args.tokens, progress=False)
    questions = [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=args.questions)]
    _sequential(generator, questions[:2], 8)  # warm-up
    load_before = os.getloadavg()[0]
    seconds = {way: [] for way in WAYS}
    reference = None
    same = {}
    for repeat in range(args.repeats):
        order = list(WAYS) if repeat % 2 == 0 else list(reversed(WAYS))
        for way in order:
            started = time.perf_counter()
            answers = WAYS[way](generator, questions, args.tokens)
            seconds[way].append(time.perf_counter() - started)
            texts = [a.text for a in answers]
            if way == "sequential" and reference is None:
                reference = texts
            same.setdefault(way, []).append(texts)
    rows = []
    base = statistics.median(seconds["sequential"])
    for way in WAYS:
        median = statistics.median(seconds[way])
        equal = all(texts == reference for texts in same[way])
        rows.append({"way": way, "median_s": round(median, 2), "all_s": [round(s, 2) for s in seconds[way]],
                     "speedup_vs_sequential": round(base / median, 3), "answers_equal_sequential": equal})
    result = {"model": args.model, "questions": len(questions), "tokens": args.tokens, "repeats": args.repeats,
              "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(), "machine": platform.machine(),
              "python": platform.python_version(), "torch": torch.__version__,
              "loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(os.getloadavg()[0], 2),
              "rows": rows}
    path = args.json or RESULTS / f"concurrency-{args.model}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"| way | median s ({len(questions)} questions) | speed-up | answers equal |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['way']} | {row['median_s']} | {row['speedup_vs_sequential']} | {row['answers_equal_sequential']} |")
    print(f"load {result['loadavg_1m_before']} -> {result['loadavg_1m_after']}; {path}")


if __name__ == "__main__":
    main()
