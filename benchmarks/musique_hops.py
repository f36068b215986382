"""MuSiQue one hop at a time: the agent on the dataset's own decompositions.

Why the agent proves no MuSiQue answer with the 0.5B preset, measured rather than guessed. Each
MuSiQue question comes with its decomposition into single-hop questions ("Who is the performer
of Decade?", then "Who is the sibling of #1?"). On the evaluation's questions (the same 30 as
``factweave eval musique --limit 30``, same web and KB tree) the agent answers, with its defaults:

- **each hop alone, given the gold bridge**: ``#k`` replaced by the gold answer of step k, so
  every single-hop question is asked as if the earlier hops had been answered right;
- **the chain**: ``#k`` replaced by the agent's own answer of step k, stopping at the first
  "I don't know.": what a decomposition into single hops could reach at best with this reader.

A step MuSiQue writes as ``X >> relation`` is asked as "What is the relation of X?" ("What is X
the capital of?" for a relation ending in "of"). Per hop position: how many were answered, right
(exact or approximate match with the step's gold answer) and proven (right and grounded: every
answer the agent gives is grounded), in how many the first reply stated no fact at all, and in
how many an attempt stated the right answer and it was withheld, by which check (each question's
half is saved beside it: read the dev half's rows, not the test half's).

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/musique_hops.py [--limit 30] [--half dev] [--model qwen2.5-coder-0.5b]
        [--json benchmarks/results/musique_hops.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.eval.datasets import data_path, load_questions
from agent.eval.halves import half_key, half_of, only_half
from agent.eval.knowledge import open_knowledge
from agent.eval.metrics import approximate_match, exact_match
from agent.models import load_model
from agent.pipeline import FactAgent
from agent.decoding import FactGenerator
from agent.settings import load_settings


def asked(step: str, answers: list[str]) -> str:
    """A decomposition step as a question: ``#k`` replaced by ``answers[k-1]``; ``X >> relation``
    as "What is the relation of X?" (or "What is X the relation?" for a relation ending in "of")."""
    for k in range(len(answers), 0, -1):
        step = step.replace(f"#{k}", answers[k - 1])
    if ">>" not in step:
        return step
    subject, relation = (part.strip() for part in step.split(">>", 1))
    if relation.endswith(" of"):
        return f"What is {subject} the {relation}?"
    return f"What is the {relation} of {subject}?"


def withheld_right(reply, gold: str) -> str:
    """Why the first attempt that stated facts and answered ``gold`` was withheld ("" when none
    did, or the reply was given; the evaluation's "right chains withheld" counts the same
    attempts): the check that failed (``check:<by>``: ``relation`` is the statement or relation
    check, ``name``, ``type``, ...) or the grounding's reason (``grounding: ...``)."""
    if reply.knows:
        return ""
    for step in reply.trace["steps"]:
        if step["step"] != "generate" or step.get("grounded") or not step.get("facts"):
            continue
        answer = step.get("answer") or ""
        if answer and (exact_match(answer, [gold]) or approximate_match(answer, [gold])):
            check = step.get("check") or {}
            if check and not check.get("passed", True):
                return f"check:{check.get('by')}"
            return "grounding: " + (step.get("grounding") or {}).get("how", "")[:60]
    return ""


def first_states_nothing(reply) -> bool:
    attempts = [s for s in reply.trace["steps"] if s["step"] == "generate"]
    return bool(attempts) and not attempts[0]["facts"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--half", choices=("dev", "test"), default=None,
                        help="only this half of the sample (build and debug on dev)")
    parser.add_argument("--json", default=str(REPO / "benchmarks" / "results" / "musique_hops.json"))
    args = parser.parse_args()

    settings = load_settings(model=args.model)
    path = data_path("musique")
    rows = {f"musique/{row['id']}": row for row in json.loads(path.read_text(encoding="utf-8"))}
    questions = only_half(load_questions("musique", limit=args.limit, seed=args.seed), args.half)
    loaded = load_model(settings.model, device=settings.device, dtype=settings.dtype,
                        cache_dir=settings.cache_dir(), engine=settings.engine)
    knowledge = open_knowledge("musique", path, settings, loaded.tokenizer, model_name=loaded.name)
    generator = FactGenerator(loaded.model, loaded.tokenizer, knowledge.kb, max_new_tokens=96, steps=loaded.steps)
    agent = FactAgent(generator, knowledge.web, options=settings.agent_options(tree="both"))

    records = []
    started = time.perf_counter()
    for q in tqdm(questions, desc="musique hops", unit="q"):
        steps = rows[q.id]["question_decomposition"]
        golds = [s["answer"] for s in steps]
        alone, chain = [], []
        for i, step in enumerate(steps):
            text = asked(step["question"], golds[:i])
            reply = agent.answer(text)
            right = exact_match(reply.answer, [golds[i]]) or approximate_match(reply.answer, [golds[i]])
            alone.append({"question": text, "gold": golds[i], "answer": reply.answer, "answered": reply.knows,
                          "right": reply.knows and right, "no_fact_first": first_states_nothing(reply),
                          "withheld_right": withheld_right(reply, golds[i]),
                          "facts": [f["text"] for f in reply.facts]})
        own: list[str] = []
        for i, step in enumerate(steps):
            if i == 0:  # the first hop names no earlier answer: asked alone above
                text, reply_answer, knows = alone[0]["question"], alone[0]["answer"], alone[0]["answered"]
            else:
                text = asked(step["question"], own)
                reply = agent.answer(text)
                reply_answer, knows = reply.answer, reply.knows
            chain.append({"question": text, "answer": reply_answer})
            if not knows:
                break
            own.append(reply_answer)
        final = own[-1] if len(own) == len(steps) else "I don't know."
        records.append({"id": q.id, "half": half_of(half_key(q)), "question": q.text, "gold": list(q.answers),
                        "hops": len(steps),
                        "alone": alone, "chain": chain, "final": final,
                        "final_right": exact_match(final, q.answers) or approximate_match(final, q.answers)})
    seconds = time.perf_counter() - started

    by_hop: dict[int, dict[str, int]] = {}
    withheld_why: dict[str, int] = {}
    for r in records:
        for i, hop in enumerate(r["alone"], 1):
            row = by_hop.setdefault(i, {"asked": 0, "answered": 0, "right": 0, "no_fact_first": 0,
                                        "withheld_right": 0})
            row["asked"] += 1
            row["answered"] += hop["answered"]
            row["right"] += hop["right"]
            row["no_fact_first"] += hop["no_fact_first"]
            row["withheld_right"] += bool(hop["withheld_right"])
            if hop["withheld_right"]:
                why = hop["withheld_right"].split(": ")[0]  # "check:relation", or "grounding" less its reason
                withheld_why[why] = withheld_why.get(why, 0) + 1
    summary = {"questions": len(records), "chain_right": sum(r["final_right"] for r in records),
               "chain_reached_hop_2": sum(len(r["chain"]) >= 2 for r in records),
               "by_hop": by_hop, "withheld_right_by": withheld_why}
    print("\n| hop | asked | answered | right and proven | first reply states no fact | right answer withheld |")
    print("|---|---|---|---|---|---|")
    for i, row in sorted(by_hop.items()):
        print(f"| {i} | {row['asked']} | {row['answered']} | {row['right']} | {row['no_fact_first']} "
              f"| {row['withheld_right']} |")
    print("right answers withheld, by what withheld them:", withheld_why)
    print(f"\nthe chain (the agent's own answers): {summary['chain_right']} of {len(records)} right; "
          f"{summary['chain_reached_hop_2']} reached a second hop")
    out = {"benchmark": "musique_hops", "model": loaded.name, "engine": loaded.engine, "seconds": round(seconds, 1),
           "load_average": os.getloadavg(), "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
           "summary": summary, "questions": records}
    Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"-> {args.json}")
    knowledge.close()


if __name__ == "__main__":
    main()
