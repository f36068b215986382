"""Benchmark: the cost of ReFactX constrained decoding against free generation.

Same model, same prompts (demo KB dev questions in the ReFactX few-shot prompt), greedy, batch 1,
and exactly ``--tokens`` new tokens in both modes (``min_new_tokens == max_new_tokens``), so the
two modes do the same model work and differ only by the logits processor. Runs alternate between
the modes and the order flips from one (prompt, repeat) to the next, to cancel thermal or
background drift; a short warm-up of each mode comes first.

Reported per mode: median tokens/s and seconds; the overhead of constrained decoding as the ratio
of median times and as the median of per-pair ratios; the processor's own time per step (the
project processor wrapped in a timing processor defined here); and how many generated tokens fell
inside ``Fact:`` lines (constrained) versus free text.

Examples::

    python benchmarks/overhead.py                                    # smollm2-135m, 1000 tokens
    python benchmarks/overhead.py --model qwen2.5-coder-0.5b --tokens 400 --prompts 2
    python benchmarks/overhead.py --kb /work/shared/data/kamel --json /tmp/overhead.json
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch
from transformers import LogitsProcessor, LogitsProcessorList

RESULTS = Path(__file__).resolve().parent / "results"
WARMUP_TOKENS = 32


class TimedLogitsProcessor(LogitsProcessor):
    """Calls ``inner`` (none: passes scores through) and records when each call started and how
    long it took, in seconds. Both modes get one, so the gap between successive calls (one
    decoding step) is measured the same way in each and the wrapper's own cost cancels."""

    def __init__(self, inner: LogitsProcessor | None = None) -> None:
        self.inner = inner
        self.starts: list[float] = []
        self.seconds: list[float] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        start = time.perf_counter()
        out = scores if self.inner is None else self.inner(input_ids, scores)
        self.seconds.append(time.perf_counter() - start)
        self.starts.append(start)
        return out


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def active_flags(tracker: Any, prompt_text: str, tokens: list[int]) -> tuple[list[bool], int]:
    """For each generated token, whether it was chosen inside a ``Fact:`` line (its state before the
    token was active, i.e. the processor constrained that step); and the number of facts completed."""
    state = tracker.start(prompt_text)
    flags = []
    for pos, tok in enumerate(tokens):
        flags.append(bool(state.active))
        state = tracker.advance(state, int(tok), pos)
    return flags, len(state.spans)


class Bench:
    def __init__(self, loaded: Any, generator: Any, tokens: int) -> None:
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.generator, self.tracker = generator, generator.tracker
        self.tokens = tokens

    def run(self, prompt_text: str, constrained: bool, tokens: int | None = None) -> dict[str, Any]:
        from agent.decoding import FactConstrainedLogitsProcessor

        n = tokens or self.tokens
        enc = self.tokenizer(prompt_text, return_tensors="pt", add_special_tokens=False)
        prompt_len = enc["input_ids"].shape[1]
        inner = FactConstrainedLogitsProcessor(self.tracker, [prompt_text], num_beams=1) if constrained else None
        timed = TimedLogitsProcessor(inner)
        processors = LogitsProcessorList([timed])
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                **enc, do_sample=False, num_beams=1, min_new_tokens=n, max_new_tokens=n,
                logits_processor=processors, pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
            )
        seconds = time.perf_counter() - start
        generated = out[0, prompt_len:].tolist()
        if len(generated) != n:
            raise RuntimeError(f"generated {len(generated)} tokens, expected {n}")
        row: dict[str, Any] = {
            "constrained": constrained, "prompt_tokens": prompt_len, "new_tokens": len(generated),
            "seconds": seconds, "tokens_per_s": len(generated) / seconds,
        }
        flags, facts = active_flags(self.tracker, prompt_text, generated)
        row["tokens_in_fact_lines"] = sum(flags)
        row["tokens_free"] = len(flags) - sum(flags)
        row["facts_completed"] = facts
        # The gap between successive processor calls is one decoding step (forward pass,
        # processors, token selection); the first call comes after the prompt's prefill.
        gaps = [b - a for a, b in zip(timed.starts, timed.starts[1:])]
        row["step_interval_s_median"] = statistics.median(gaps) if gaps else float("nan")
        row["step_interval_s"] = gaps
        row["prefill_s"] = timed.starts[0] - start if timed.starts else float("nan")
        if constrained:
            steps = timed.seconds
            row["processor_calls"] = len(steps)
            row["processor_s_total"] = sum(steps)
            row["step_s"] = steps
            row["step_active"] = flags[: len(steps)]
        row["text_head"] = self.tokenizer.decode(generated[:120], skip_special_tokens=True)
        # A 1-minute load well above the thread count means another process shared the CPUs.
        row["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
        return row


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    con = [r for r in runs if r["constrained"]]
    free = [r for r in runs if not r["constrained"]]
    med_c = statistics.median(r["seconds"] for r in con)
    med_f = statistics.median(r["seconds"] for r in free)
    pairs = {}
    for r in runs:
        pairs.setdefault((r["prompt"], r["repeat"]), {})[r["constrained"]] = r["seconds"]
    pair_ratios = [p[True] / p[False] for p in pairs.values() if True in p and False in p]
    steps = [s for r in con for s in r["step_s"]]
    active = [s for r in con for s, a in zip(r["step_s"], r["step_active"]) if a]
    inactive = [s for r in con for s, a in zip(r["step_s"], r["step_active"]) if not a]
    first = [s for r in con for s in r["step_s"][:100]]
    last = [s for r in con for s in r["step_s"][-100:]]

    def ms(values: list[float], q: float = 0.5) -> float | None:
        return round(_percentile(values, q) * 1e3, 4) if values else None

    def step_ms(rows: list[dict[str, Any]]) -> float:
        return round(statistics.median(r["step_interval_s_median"] for r in rows) * 1e3, 3)

    return {
        "constrained": {
            "median_seconds": round(med_c, 3),
            "median_step_ms": step_ms(con),
            "median_tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in con), 2),
            "tokens_in_fact_lines": sum(r["tokens_in_fact_lines"] for r in con),
            "tokens_free": sum(r["tokens_free"] for r in con),
            "facts_completed": sum(r["facts_completed"] for r in con),
        },
        "unconstrained": {
            "median_seconds": round(med_f, 3),
            "median_step_ms": step_ms(free),
            "median_tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in free), 2),
            # What the tracker would call fact lines in free text (not constrained there).
            "tokens_in_fact_lines": sum(r["tokens_in_fact_lines"] for r in free),
            "tokens_free": sum(r["tokens_free"] for r in free),
        },
        "overhead_pct_of_medians": round((med_c / med_f - 1) * 100, 2),
        "overhead_pct_median_pair": round((statistics.median(pair_ratios) - 1) * 100, 2),
        "overhead_pct_pairs": [round((x - 1) * 100, 2) for x in pair_ratios],
        "processor_share_pct": round(100 * sum(r["processor_s_total"] for r in con)
                                     / sum(r["seconds"] for r in con), 2),
        "processor_ms_per_step": {
            "median": ms(steps), "p90": ms(steps, 0.9), "max": ms(steps, 1.0),
            "mean": round(statistics.fmean(steps) * 1e3, 4),
            "median_in_fact_lines": ms(active), "median_free": ms(inactive),
            "median_first_100_steps": ms(first), "median_last_100_steps": ms(last),
            "steps": len(steps), "steps_in_fact_lines": len(active),
        },
    }


def print_table(summary: dict[str, Any], settings: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    c, u, p = summary["constrained"], summary["unconstrained"], summary["processor_ms_per_step"]
    table = Table(title=f"constrained vs free: {settings['model']}, {settings['tokens']} tokens x "
                        f"{settings['prompts']} prompts x {settings['repeats']} repeats, "
                        f"{settings['torch_threads']} threads")
    table.add_column("measure")
    table.add_column("constrained", justify="right")
    table.add_column("unconstrained", justify="right")
    table.add_row("median seconds", f"{c['median_seconds']:.2f}", f"{u['median_seconds']:.2f}")
    table.add_row("median ms per decoding step", f"{c['median_step_ms']:.2f}", f"{u['median_step_ms']:.2f}")
    table.add_row("median tokens/s", f"{c['median_tokens_per_s']:.2f}", f"{u['median_tokens_per_s']:.2f}")
    table.add_row("tokens in Fact: lines", f"{c['tokens_in_fact_lines']:,}", f"{u['tokens_in_fact_lines']:,} (not constrained)")
    table.add_row("tokens in free text", f"{c['tokens_free']:,}", f"{u['tokens_free']:,}")
    table.add_row("facts completed", f"{c['facts_completed']:,}", "-")
    table.add_row("overhead (ratio of medians)", f"{summary['overhead_pct_of_medians']:+.2f}%", "")
    table.add_row("overhead (median of pairs)", f"{summary['overhead_pct_median_pair']:+.2f}%", "")
    table.add_row("processor share of constrained time", f"{summary['processor_share_pct']:.2f}%", "")
    table.add_row("processor ms/step: median (p90, max)", f"{p['median']} ({p['p90']}, {p['max']})", "")
    table.add_row("  median in Fact: lines / free", f"{p['median_in_fact_lines']} / {p['median_free']}", "")
    table.add_row("  median first / last 100 steps", f"{p['median_first_100_steps']} / {p['median_last_100_steps']}", "")
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Constrained (ReFactX) vs free generation time for the same prompts and token count.",
        epilog="example: python benchmarks/overhead.py --model qwen2.5-coder-0.5b --tokens 400",
    )
    parser.add_argument("--model", default="smollm2-135m", help="preset, folder or Hub id")
    parser.add_argument("--tokens", type=int, default=1000, help="new tokens per run (both modes)")
    parser.add_argument("--prompts", type=int, default=2, help="demo questions used as prompts")
    parser.add_argument("--repeats", type=int, default=2, help="runs per prompt and mode")
    parser.add_argument("--kb", help="fact file or KAMEL folder for the index and questions (default: demo KB)")
    parser.add_argument("--json", help="output JSON (default benchmarks/results/overhead-<model>.json)")
    args = parser.parse_args(argv)
    if args.tokens < 1 or args.prompts < 1 or args.repeats < 1:
        parser.error("--tokens, --prompts and --repeats must be at least 1")

    from agent.decoding import FactGenerator
    from agent.index import FactIndex
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.knowledge.loaders import load_facts
    from agent.models import load_model

    kb = Path(args.kb) if args.kb else demo_kamel_root()
    loaded = load_model(args.model)
    t0 = time.perf_counter()
    index = FactIndex.build(load_facts(kb), loaded.tokenizer)
    index_s = time.perf_counter() - t0
    generator = FactGenerator(loaded.model, loaded.tokenizer, index, beams=1)
    if kb.is_dir():
        questions = [q.text for q in kamel_questions(kb, split="dev", limit=args.prompts)]
    else:
        # A plain fact file has no questions: ask about its first subjects.
        questions = []
        for fact in load_facts(kb):
            q = f"What is the {fact.predicate} of {fact.subject}?"
            if q not in questions:
                questions.append(q)
            if len(questions) == args.prompts:
                break
    prompts = [generator.render(q) for q in questions]
    bench = Bench(loaded, generator, args.tokens)
    settings = {
        "model": args.model, "tokens": args.tokens, "prompts": len(prompts), "repeats": args.repeats,
        "kb": str(kb), "index_facts": len(index), "index_nodes": index.node_count,
        "index_build_s": round(index_s, 2), "model_load_s": round(loaded.load_seconds, 2),
        "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
        "transformers": __import__("transformers").__version__, "python": platform.python_version(),
        "cpus": os.cpu_count(), "machine": platform.machine(),
        "device": str(getattr(loaded.model, "device", "cpu")), "questions": questions,
    }
    print(f"{args.model}: index of {len(index):,} facts built in {index_s:.1f} s; "
          f"{len(prompts)} prompts x {args.repeats} repeats x 2 modes x {args.tokens} tokens", flush=True)

    for constrained in (True, False):  # warm-up: allocator, kernels, caches
        bench.run(prompts[0], constrained, tokens=min(WARMUP_TOKENS, args.tokens))

    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        for p, prompt in enumerate(prompts):
            order = (True, False) if (rep + p) % 2 == 0 else (False, True)
            for constrained in order:
                row = bench.run(prompt, constrained)
                row.update(prompt=p, repeat=rep)
                runs.append(row)
                print(f"  repeat {rep} prompt {p} {'constrained  ' if constrained else 'unconstrained'}: "
                      f"{row['seconds']:.2f} s, {row['tokens_per_s']:.2f} tok/s, "
                      f"{row['tokens_in_fact_lines']} tokens in fact lines, load {row['loadavg_1m_after']}",
                      flush=True)

    summary = summarize(runs)
    print_table(summary, settings)
    out = Path(args.json) if args.json else RESULTS / f"overhead-{Path(args.model).name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    for r in runs:  # per-step lists are long; keep them compact in the JSON
        if "step_s" in r:
            r["step_ms"] = [round(s * 1e3, 4) for s in r.pop("step_s")]
            r["step_active"] = [int(a) for a in r["step_active"]]
        r["seconds"] = round(r["seconds"], 4)
        r["step_interval_ms_median"] = round(r.pop("step_interval_s_median") * 1e3, 4)
        r["step_interval_ms"] = [round(s * 1e3, 3) for s in r.pop("step_interval_s")]
        r["prefill_s"] = round(r["prefill_s"], 4)
        r["tokens_per_s"] = round(r["tokens_per_s"], 3)
    out.write_text(json.dumps({"benchmark": "overhead", "settings": settings, "summary": summary,
                               "runs": runs}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
