"""Benchmark: where an agent's answer spends its time, step by step, against bare constrained generation.

A fixed set of questions of four kinds over the demo knowledge (``--per-kind`` each, 5 by
default, 20 in all): ``single-hop`` (demo KB dev questions), ``follow-up`` (a pronoun question
after a first turn, built by ``factweave eval kamel-chat``'s rules), ``two-hop`` (a chain of two
KB facts asked in one question), ``document`` (the demo corpus's questions, MuSiQue). Each is
answered by the agent with the settings' defaults (the default preset, warm: loaded and one
question answered first), streamed as the UI and the server stream it, and in the same run by the
floor: bare constrained generation of the same prompt on the same model over the whole KB (the
``refactx`` method). Reported per step, over all questions: p50 and p95 seconds of rewrite,
retrieval, re-ranking, tree building, hops, evidence reading, generation (and the prefill part of
it), the first event and first streamed token, the total, tokens/s; per kind the agent's total
against the floor's as a ratio. With ``--ablate-prefix-cache`` every question is also answered
with the prompt's fixed start not cached (both orders alternate), so the cache's gain is measured
in the same run.

The machine's load average is recorded before and after: on a busy machine compare ratios only.

Example::

    python benchmarks/agent_latency.py --per-kind 5 --ablate-prefix-cache
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

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("single-hop", "follow-up", "two-hop", "document")
STEPS = ("rewrite_s", "retrieve_s", "rerank_s", "tree_build_s", "hop_s", "evidence_s", "subquery_s",
         "generate_s", "prefill_s", "first_event_s", "first_token_s", "total_s")


def fixed_questions(per_kind: int) -> list[dict[str, Any]]:
    """``per_kind`` questions of each kind, the same ones every run."""
    from agent.eval.conversations import kamel_chat_questions
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions

    root = demo_kamel_root()
    out = [{"kind": "single-hop", "text": q.text, "history": [], "answers": list(q.answers)}
           for q in kamel_questions(root, split="dev", limit=per_kind)]
    follow = [q for q in kamel_chat_questions(root, kind="follow-up", limit=per_kind * 2)
              if q.meta["kind"] == "follow-up"][:per_kind]
    out += [{"kind": "follow-up", "text": q.text, "history": list(q.history), "answers": list(q.answers)}
            for q in follow]
    out += [{"kind": "two-hop", "text": q.text, "history": [], "answers": list(q.answers)}
            for q in kamel_chat_questions(root, kind="two-hop", limit=per_kind)]
    corpus = json.loads((REPO / "agent" / "data" / "demo" / "web" / "questions.json").read_text(encoding="utf-8"))
    out += [{"kind": "document", "text": q["question"], "history": [],
             "answers": [q["answer"], *q.get("answer_aliases", [])]} for q in corpus[:per_kind]]
    return out


def ask_agent(agent: Any, q: dict[str, Any]) -> dict[str, Any]:
    """The agent's streamed answer to ``q``: step timings, first event and token, total."""
    started = time.perf_counter()
    first_event = first_token = None
    final: dict[str, Any] = {}
    for event in agent.stream(q["text"], history=q["history"] or None):
        now = time.perf_counter() - started
        if first_event is None:
            first_event = now
        if event["event"] == "token" and first_token is None and event["text"].strip():
            first_token = now
        if event["event"] == "answer":
            final = event
    total = time.perf_counter() - started
    trace = final["trace"]
    timings = {k: trace["timings"].get(k, 0.0) for k in STEPS if k in trace["timings"]}
    timings.update(first_event_s=round(first_event or total, 4), first_token_s=round(first_token or total, 4),
                   total_s=round(total, 4))
    generated = trace["tokens"]["generated"]
    return {"answer": final["answer"], "grounded": trace["grounded"], "timings": timings,
            "tokens": generated, "prompt_tokens": trace["tokens"]["prompt"],
            "prompt_cached": trace["tokens"].get("prompt_cached", 0),
            "tokens_per_s": round(generated / timings["generate_s"], 2) if timings.get("generate_s") else 0.0,
            "attempts": sum(1 for s in trace["steps"] if s["step"] == "generate")}


def ask_floor(generator: Any, q: dict[str, Any]) -> dict[str, Any]:
    """Bare constrained generation over the whole KB (the refactx method) of the same prompt."""
    prompt = [*q["history"], {"role": "user", "content": q["text"]}] if q["history"] else q["text"]
    started = time.perf_counter()
    answer = generator.answer(prompt)
    total = time.perf_counter() - started
    return {"answer": answer.answer, "tokens": answer.tokens,
            "timings": {"generate_s": answer.timings["generate_s"], "prefill_s": answer.timings["prefill_s"],
                        "total_s": round(total, 4)},
            "prompt_cached": answer.timings.get("cached_prompt_tokens", 0)}


def _p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(q * (len(values) - 1))))], 3)


def _right(answer: str, gold: list[str]) -> bool:
    from agent.knowledge.normalize import normalize_answer

    got = normalize_answer(answer)
    return bool(got) and any(normalize_answer(g) and normalize_answer(g) in got for g in gold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="default: the settings' model (the default preset)")
    parser.add_argument("--per-kind", type=int, default=5)
    parser.add_argument("--ablate-prefix-cache", action="store_true",
                        help="also answer every question without the cached prompt start")
    parser.add_argument("--json", type=Path, default=None, help="default: benchmarks/results/agent_latency-<model>.json")
    args = parser.parse_args()

    import torch

    from agent.runtime import open_agent
    from agent.settings import load_settings

    settings = load_settings(**({"model": args.model} if args.model else {}))
    questions = fixed_questions(args.per_kind)
    with open_agent(settings) as agent:
        generator = agent.generator
        cache = generator.prefix_cache
        agent.answer("What is the official language of Damascus?")  # warm: model, web, prefix cache
        generator.answer("What is the official language of Damascus?")
        load_before = os.getloadavg()[0]
        variants = ["cached", "uncached"] if args.ablate_prefix_cache else ["cached"]
        rows = []
        for i, q in enumerate(questions):
            row = {**q, "agent": {}, "floor": {}}
            for variant in (variants if i % 2 == 0 else list(reversed(variants))):
                generator.prefix_cache = cache if variant == "cached" else None
                row["agent"][variant] = ask_agent(agent, q)
                row["floor"][variant] = ask_floor(generator, q)
            generator.prefix_cache = cache
            for side in ("agent", "floor"):
                for result in row[side].values():
                    result["right"] = _right(result["answer"], q["answers"])
            rows.append(row)
            a, f = row["agent"]["cached"], row["floor"]["cached"]
            print(f"[{i + 1}/{len(questions)}] {q['kind']}: agent {a['timings']['total_s']:.1f} s "
                  f"(first token {a['timings']['first_token_s']:.1f} s) {a['answer']!r}; "
                  f"floor {f['timings']['total_s']:.1f} s {f['answer']!r}", flush=True)
        load_after = os.getloadavg()[0]

    summary: dict[str, Any] = {}
    for variant in variants:
        steps = {}
        for step in STEPS:
            values = [r["agent"][variant]["timings"].get(step, 0.0) for r in rows]
            steps[step] = {"p50": _p(values, 0.5), "p95": _p(values, 0.95)}
        per_kind = {}
        for kind in ("all", *KINDS):
            mine = [r for r in rows if kind in ("all", r["kind"])]
            agent_total = statistics.median(r["agent"][variant]["timings"]["total_s"] for r in mine)
            floor_total = statistics.median(r["floor"][variant]["timings"]["total_s"] for r in mine)
            per_kind[kind] = {
                "n": len(mine), "agent_total_p50": round(agent_total, 3), "floor_total_p50": round(floor_total, 3),
                "ratio_p50": round(agent_total / floor_total, 3) if floor_total else None,
                "first_token_p50": _p([r["agent"][variant]["timings"]["first_token_s"] for r in mine], 0.5),
                "rerank_share_p50": _p([r["agent"][variant]["timings"].get("rerank_s", 0.0)
                                        / r["agent"][variant]["timings"]["total_s"] for r in mine], 0.5),
                "tokens_per_s_p50": _p([r["agent"][variant]["tokens_per_s"] for r in mine], 0.5),
                "agent_right": sum(r["agent"][variant]["right"] for r in mine),
                "floor_right": sum(r["floor"][variant]["right"] for r in mine)}
        summary[variant] = {"steps": steps, "per_kind": per_kind}
    result = {"model": settings.model, "tree": settings.effective_tree(), "rerank": settings.effective_rerank(),
              "per_kind": args.per_kind, "questions": len(rows), "torch_threads": torch.get_num_threads(),
              "cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
              "torch": torch.__version__, "loadavg_1m_before": round(load_before, 2),
              "loadavg_1m_after": round(load_after, 2), "summary": summary, "rows": rows}
    path = args.json or RESULTS / f"agent_latency-{settings.model.replace('/', '_')}.json"
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    for variant in variants:
        s = summary[variant]
        print(f"\nprompt start {variant}: seconds per step over {len(rows)} questions")
        print("| step | p50 | p95 |\n|---|---|---|")
        for step in STEPS:
            print(f"| {step[:-2]} | {s['steps'][step]['p50']} | {s['steps'][step]['p95']} |")
        print("\n| kind | n | agent total p50 | floor total p50 | ratio | first token p50 | re-ranking share | "
              "tokens/s | right agent / floor |\n|---|---|---|---|---|---|---|---|---|")
        for kind, k in s["per_kind"].items():
            print(f"| {kind} | {k['n']} | {k['agent_total_p50']} | {k['floor_total_p50']} | {k['ratio_p50']} | "
                  f"{k['first_token_p50']} | {k['rerank_share_p50']} | {k['tokens_per_s_p50']} | "
                  f"{k['agent_right']} / {k['floor_right']} |")
    print(f"\nload {result['loadavg_1m_before']} -> {result['loadavg_1m_after']}; {path}")


if __name__ == "__main__":
    main()
