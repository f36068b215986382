"""Constrained vs free decoding with transformers on a GPU: the cost of ReFactX's rule per token
at GPU speed, before an engine (vLLM, llama.cpp) runs it (issue: generation at engine speed).

A model of a real size with random weights (no weights can be brought to the GPU machine: it
has no network and takes 64 MiB), the real tokenizer and the bundled demo KB's fact tree. Every
reply starts with ``Fact:`` so the rule is on from the first token; random weights then wander
the tree until a fact ends and write free text after it. Batches of 1, 8 and 32 questions; the
same prompts, the same token budget, free and constrained in one run; medians of ``--repeats``.

    python benchmarks/gpu_constrained.py --model-dir gpu/qwen2.5-1.5b --out $OUT/gpu_constrained.json
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="a folder with config.json and the tokenizer files")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", default="1,8,32")
    args = parser.parse_args()

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from agent.decoding import FactGenerator
    from agent.index import FactIndex
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.knowledge.loaders import load_facts
    from agent.models import stateless_tokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to(device).eval()
    tokenizer = stateless_tokenizer(AutoTokenizer.from_pretrained(args.model_dir))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    started = time.perf_counter()
    facts = list(load_facts(demo_kamel_root()))
    index = FactIndex.build(facts, tokenizer)
    build_s = time.perf_counter() - started
    questions = [q.text for q in kamel_questions(demo_kamel_root(), split="dev")][:64]
    generator = FactGenerator(model, tokenizer, index, max_new_tokens=args.tokens, prefix_cache=False)

    def run(batch: list[str], constrained: bool) -> tuple[float, int, int]:
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        answers = generator.answer_batch(batch, constrained=constrained, max_new_tokens=args.tokens,
                                         reply_prefix="Fact:")
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t
        samples[constrained] = answers[0].text[:160]
        return seconds, sum(a.tokens for a in answers), sum(len(a.facts) for a in answers)

    rows, samples = [], {}
    for size in [int(b) for b in args.batches.split(",")]:
        batch = questions[:size]
        run(batch, True)  # warm-up: kernels, the tree's first walks
        run(batch, False)
        for constrained in (False, True):
            timings = [run(batch, constrained) for _ in range(args.repeats)]
            rates = [tokens / seconds for seconds, tokens, _ in timings]
            rows.append({"batch": size, "constrained": constrained, "median_tok_s": round(statistics.median(rates), 1),
                         "tok_s": [round(r, 1) for r in rates], "tokens": [t for _, t, _ in timings],
                         "facts": [f for _, _, f in timings],
                         "median_s": round(statistics.median(s for s, _, _ in timings), 3)})
            print(json.dumps(rows[-1]), flush=True)
    ratios = {}
    for size in {r["batch"] for r in rows}:
        free = next(r for r in rows if r["batch"] == size and not r["constrained"])
        fixed = next(r for r in rows if r["batch"] == size and r["constrained"])
        ratios[str(size)] = round(fixed["median_tok_s"] / free["median_tok_s"], 3)
    report = {"what": "constrained vs free decoding, transformers, random weights", "model": config.model_type,
              "hidden_size": config.hidden_size, "layers": config.num_hidden_layers,
              "params_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 2),
              "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
              "torch": torch.__version__, "transformers": __import__("transformers").__version__,
              "kb_facts": len(index.facts), "tree_build_s": round(build_s, 1), "tokens_per_reply": args.tokens,
              "rows": rows, "constrained_over_free": ratios,
              "sample_reply": {"free": samples.get(False), "constrained": samples.get(True)}}
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps({"constrained_over_free": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
