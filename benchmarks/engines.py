"""Benchmark: the engines that compute a model's logits, on the same prompts in one run.

Per preset and installed engine (transformers float32, llama.cpp on the preset's GGUF file):
free and constrained decoding speed (tokens/s of the decode phase, prefill apart; constrained
counts the fact tokens the tree forces, fed in one pass, as the reader sees them written), time to
the first token (the prompt read), and the agent's latency and answers on the 20 questions of
``benchmarks/agent_latency.py`` (its settings' defaults: both trees, re-ranking by the same local
model). Medians and p95 over the questions; ratios against transformers on the same preset. The
machine's load average is recorded before and after: compare ratios, and run it alone.

Example::

    python benchmarks/engines.py --preset qwen2.5-coder-0.5b --preset qwen2.5-coder-1.5b
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

from agent_latency import _p, _right, ask_agent, fixed_questions  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_features() -> dict[str, Any]:
    """The CPU's model name and the vector extensions llama.cpp's kernels use (the figures
    depend on them: the same 2 cores with AVX-512 decode faster than with AVX2 alone)."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return {}
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    return {"model": model, "extensions": [f for f in wanted if f in flags]}


def decode_speed(generator: Any, questions: list[dict[str, Any]], *, constrained: bool,
                 max_new_tokens: int) -> list[dict[str, float]]:
    """Each question's prompt decoded greedily by ``generator``: tokens, decode tokens/s, first token."""
    rows = []
    for q in questions:
        answer = generator.answer(q["text"], constrained=constrained, max_new_tokens=max_new_tokens)
        decode_s = answer.timings["generate_s"] - answer.timings["prefill_s"]
        rows.append({"tokens": answer.tokens, "first_token_s": answer.timings["prefill_s"],
                     "tokens_per_s": round(answer.tokens / decode_s, 2) if decode_s > 0 else 0.0,
                     "right": _right(answer.answer, q["answers"])})
    return rows


def generate_step(steps: list[dict[str, float]]) -> dict[str, float]:
    """The agent's generate steps over the questions: seconds per question (p50, p95, sum), and the
    prompt read and the decode apart (tokens/s over all questions: sums, not a median of ratios)."""
    gen = [s["generate_s"] for s in steps]
    prefill = sum(s["prefill_s"] for s in steps)
    decode = sum(s["generate_s"] - s["prefill_s"] for s in steps)
    return {"seconds_p50": _p(gen, 0.5), "seconds_p95": _p(gen, 0.95), "seconds_sum": round(sum(gen), 3),
            "prefill_s_sum": round(prefill, 3), "decode_s_sum": round(decode, 3),
            "prompt_tokens_read": sum(s["prompt_read"] for s in steps), "tokens": sum(s["tokens"] for s in steps),
            "prompt_read_tokens_per_s": round(sum(s["prompt_read"] for s in steps) / prefill, 1) if prefill else 0.0,
            "decode_tokens_per_s": round(sum(s["tokens"] for s in steps) / decode, 1) if decode else 0.0,
            "tokens_per_s": round(sum(s["tokens"] for s in steps) / sum(gen), 2) if sum(gen) else 0.0}


def cold_asks(preset: str, engine: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """Each question as the first answer of a new process (``factweave ask --json``, what a user of
    the command line meets): the generate steps' seconds, prompt read and decode. The first ask
    of the run is dropped (it fills what a process keeps for the next: converted model, indexes,
    llama.cpp's kept fixed starts)."""
    import subprocess

    rows = []
    for q in [questions[0], *questions]:
        out = subprocess.run([sys.executable, "-m", "agent.cli", "ask", "--json", "--model", preset, "--engine", engine,
                              q["text"]], capture_output=True, text=True, cwd=REPO, check=True)
        trace = json.loads(out.stdout)["trace"]
        t = trace["timings"]
        rows.append({"generate_s": t["generate_s"], "prefill_s": t["prefill_s"], "tokens": trace["tokens"]["generated"],
                     "prompt_read": trace["tokens"]["prompt"] - trace["tokens"].get("prompt_cached", 0),
                     "total_s": t["total_s"], "answer": json.loads(out.stdout)["answer"]})
    return {"preset": preset, "engine": engine, "generate_step": generate_step(rows[1:]), "rows": rows[1:]}


def run_engine(preset: str, engine: str, questions: list[dict[str, Any]], max_new_tokens: int,
               agent_questions: int, decode: bool = True) -> dict[str, Any]:
    from agent.runtime import load_settings_model, open_agent
    from agent.settings import load_settings

    settings = load_settings(model=preset, engine=engine)
    started = time.perf_counter()
    loaded = load_settings_model(settings)
    load_s = time.perf_counter() - started
    with open_agent(settings, loaded=loaded, progress=False) as agent:
        generator = agent.generator
        generator.answer("What is the official language of Damascus?")  # warm
        agent.answer("What is the official language of Damascus?")
        free = decode_speed(generator, questions, constrained=False, max_new_tokens=max_new_tokens) if decode else []
        constrained = (decode_speed(generator, questions, constrained=True, max_new_tokens=max_new_tokens)
                       if decode else [])
        answered = [ask_agent(agent, q) for q in questions[:agent_questions]]
    for row, q in zip(answered, questions):
        row["right"] = _right(row["answer"], q["answers"])
    if loaded.steps is not None:
        loaded.steps.close()

    def speed(rows: list[dict[str, Any]]) -> dict[str, float]:
        return {"tokens_per_s_p50": _p([r["tokens_per_s"] for r in rows], 0.5),
                "first_token_s_p50": _p([r["first_token_s"] for r in rows], 0.5),
                "first_token_s_p95": _p([r["first_token_s"] for r in rows], 0.95),
                "tokens_p50": _p([r["tokens"] for r in rows], 0.5), "right": sum(r["right"] for r in rows)}

    totals = [r["timings"]["total_s"] for r in answered]
    # The agent's generate steps (its attempts), prompt read and decode apart: where an engine's
    # speed reaches the answer (the prompt's listed facts are read at prefill speed).
    steps = [{"generate_s": r["timings"].get("generate_s", 0.0), "prefill_s": r["timings"].get("prefill_s", 0.0),
              "tokens": r["tokens"], "prompt_read": r["prompt_tokens"] - r["prompt_cached"]} for r in answered]
    return {"preset": preset, "engine": engine, "load_s": round(load_s, 2), "free": speed(free),
            "constrained": speed(constrained),
            "agent": {"n": len(answered), "total_s_p50": _p(totals, 0.5), "total_s_p95": _p(totals, 0.95),
                      "total_s_mean": round(statistics.mean(totals), 3) if totals else 0.0,
                      "first_token_s_p50": _p([r["timings"]["first_token_s"] for r in answered], 0.5),
                      "right": sum(r["right"] for r in answered),
                      "grounded": sum(bool(r["grounded"]) for r in answered)},
            "generate_step": generate_step(steps),
            "rows": {"free": free, "constrained": constrained, "agent": answered}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", action="append", default=None, help="repeatable; default qwen2.5-coder-0.5b")
    parser.add_argument("--engine", action="append", default=None,
                        help="repeatable; default every installed engine (transformers, llama.cpp)")
    parser.add_argument("--per-kind", type=int, default=5, help="questions of each kind (agent_latency.py's four)")
    parser.add_argument("--agent-questions", type=int, default=20, help="how many of them the agent answers")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--agent-only", action="store_true", help="skip the bare decoding runs (free, constrained)")
    parser.add_argument("--cold", type=int, default=0,
                        help="also ask this many questions each in a new `factweave ask` process (its first answer)")
    parser.add_argument("--json", type=Path, default=None, help="default: results/engines-<presets>.json")
    args = parser.parse_args()
    if args.json is None:
        args.json = RESULTS / f"engines-{'+'.join(args.preset or ['qwen2.5-coder-0.5b'])}.json"

    from agent.engines import ENGINES, installed

    presets = args.preset or ["qwen2.5-coder-0.5b"]
    engines = args.engine or [e for e in ENGINES if installed(e)]
    questions = fixed_questions(args.per_kind)
    load_before = os.getloadavg()[0]
    runs = []
    for preset in presets:
        for engine in engines:
            print(f"{preset} on {engine} ...", flush=True)
            runs.append(run_engine(preset, engine, questions, args.max_new_tokens, args.agent_questions,
                                   decode=not args.agent_only))
            r = runs[-1]
            print(f"  free {r['free']['tokens_per_s_p50']} tok/s, constrained {r['constrained']['tokens_per_s_p50']} "
                  f"tok/s, first token {r['constrained']['first_token_s_p50']} s; agent p50 {r['agent']['total_s_p50']} s "
                  f"p95 {r['agent']['total_s_p95']} s, right {r['agent']['right']}/{r['agent']['n']}", flush=True)
    cold = []
    for preset in presets if args.cold else []:
        for engine in engines:
            print(f"{preset} on {engine}, {args.cold} questions each in a new process ...", flush=True)
            cold.append(cold_asks(preset, engine, questions[:args.cold]))
    cold_base = {c["preset"]: c for c in cold if c["engine"] == "transformers"}
    for c in cold:
        ref = cold_base.get(c["preset"])
        if ref is not None:
            c["generate_step_speedup"] = round(ref["generate_step"]["seconds_sum"]
                                               / max(c["generate_step"]["seconds_sum"], 1e-9), 2)
    load_after = os.getloadavg()[0]
    base = {r["preset"]: r for r in runs if r["engine"] == "transformers"}
    for r in runs:
        ref = base.get(r["preset"])
        if ref is not None:
            r["vs_transformers"] = {
                "constrained_tokens_per_s": round(r["constrained"]["tokens_per_s_p50"]
                                                  / max(ref["constrained"]["tokens_per_s_p50"], 1e-9), 2),
                "free_tokens_per_s": round(r["free"]["tokens_per_s_p50"] / max(ref["free"]["tokens_per_s_p50"], 1e-9), 2),
                "agent_total_p50": round(r["agent"]["total_s_p50"] / max(ref["agent"]["total_s_p50"], 1e-9), 2),
                # >1: this engine's generate steps took that many times less (sums over the questions)
                "generate_step_speedup": round(ref["generate_step"]["seconds_sum"]
                                               / max(r["generate_step"]["seconds_sum"], 1e-9), 2)}
        r["constrained_vs_free"] = round(r["constrained"]["tokens_per_s_p50"]
                                         / max(r["free"]["tokens_per_s_p50"], 1e-9), 2)
    result = {"cpus": os.cpu_count(), "machine": platform.machine(), "cpu": cpu_features(),
              "python": platform.python_version(),
              "loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(load_after, 2),
              "questions": len(questions), "max_new_tokens": args.max_new_tokens, "runs": runs, "cold": cold}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print("\n| preset | engine | free tok/s | constrained tok/s | constrained / free | first token p50 | "
          "agent p50 | agent p95 | agent right | x transformers (constrained tok/s, agent p50) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        vs = r.get("vs_transformers", {})
        print(f"| {r['preset']} | {r['engine']} | {r['free']['tokens_per_s_p50']} | {r['constrained']['tokens_per_s_p50']} | "
              f"{r['constrained_vs_free']} | {r['constrained']['first_token_s_p50']} s | {r['agent']['total_s_p50']} s | "
              f"{r['agent']['total_s_p95']} s | {r['agent']['right']}/{r['agent']['n']} | "
              f"{vs.get('constrained_tokens_per_s', '-')}x, {vs.get('agent_total_p50', '-')}x |")
    print("\n| preset | engine | generate step p50 | p95 | sum | prompt read (tokens, tok/s) | decode tok/s | "
          "x transformers (generate steps) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        g = r["generate_step"]
        print(f"| {r['preset']} | {r['engine']} | {g['seconds_p50']} s | {g['seconds_p95']} s | {g['seconds_sum']} s | "
              f"{g['prompt_tokens_read']}, {g['prompt_read_tokens_per_s']} | {g['decode_tokens_per_s']} | "
              f"{r.get('vs_transformers', {}).get('generate_step_speedup', '-')}x |")
    for c in cold:
        g = c["generate_step"]
        print(f"| {c['preset']} | {c['engine']}, first answer of a process | {g['seconds_p50']} s | {g['seconds_p95']} s | "
              f"{g['seconds_sum']} s | {g['prompt_tokens_read']}, {g['prompt_read_tokens_per_s']} | "
              f"{g['decode_tokens_per_s']} | {c.get('generate_step_speedup', '-')}x |")
    print(f"\nload {result['loadavg_1m_before']} -> {result['loadavg_1m_after']}; {args.json}")


if __name__ == "__main__":
    main()
