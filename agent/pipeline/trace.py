"""An agent trace's records: a stated fact as the trace shows it, and one-line descriptions of
its step records.

A trace (``AgentAnswer.trace``) holds the steps in order; each is a plain dict whose ``step`` is
``rewrite``, ``retrieve``, ``rerank``, ``plan``, ``subquery``, ``hop`` or ``generate`` (see :mod:`agent.pipeline.fact_agent`).
"""
from __future__ import annotations

from typing import Any

from ..events import StatedFact


def question_fact(start: int, end: int, text: str, hit: Any | None, source: str = "") -> StatedFact:
    """A fact stated from the per-question tree, as the trace shows it: its offsets in the reply,
    its text, and where it came from (``hit``: the retrieved fact, a web hit; None when unknown,
    then ``source``)."""
    return {"start": start, "end": end, "text": text, "tree": "question",
            "fact_id": getattr(hit, "id", None), "source": hit.source if hit is not None else source,
            "provenance": {"kind": hit.kind, **hit.provenance} if hit is not None else {}}


def describe_step(step: dict[str, Any]) -> str:
    """One line saying what a trace step did (the CLI prints it, MCP sends it as progress)."""
    kind = step["step"]
    if kind == "rewrite":
        if step["standalone"] == step["question"]:
            return f"question kept as asked ({step['how']})"
        return f"standalone question: {step['standalone']!r} ({step['how']})"
    if kind == "hop":
        added = len(step["added"])
        return (f"hop: {step['entity']!r} from {step['fact']!r} brought {added} fact{'' if added == 1 else 's'} "
                f"into the tree in {step['seconds']:.2f} s")
    if kind == "retrieve":
        return (f"retrieved {len(step['hits'])} facts ({len(step['new'])} new) for "
                + "; ".join(repr(q) for q in step["queries"]) + f" in {step['seconds']:.2f} s")
    if kind == "rerank":
        how = f"fallback to the top 3 ({step['reason']})" if step["used_fallback"] else "picked by the chat model"
        return f"re-ranker: {step['question_type']} question, {len(step['selected'])} fact(s) {how}, {step['seconds']:.1f} s"
    if kind == "plan":
        if step["kind"] == "lookup":
            return "plan: a look-up"
        order = f", {step['order']}" if step.get("order") else ""
        role = f", by their {step['role']}" if step.get("role") else ""
        return f"plan: {step['kind']}{order} over " + " and ".join(repr(o) for o in step["options"]) + role
    if kind == "subquery":
        queries = "; ".join(repr(q) for q in step["queries"]) or "none"
        return f"sub-queries ({step['how']}): {queries}"
    n = step.get("tree_facts", 0)
    where = (f"the per-question tree ({n} fact{'' if n == 1 else 's'})" if step["tree"] == "question"
             else "the two hops joined" if step["tree"] == "hops" else "the whole knowledge base")
    if step.get("hop"):  # a hop of the question asked again hop by hop
        where += f", hop {step['hop']['hop']}: {step['hop']['question']!r}"
    if step.get("skipped"):
        return f"attempt {step['attempt'] + 1} on {where}: skipped, {step['skipped']}"
    if step.get("options") is not None:
        said = step.get("grounding", {}).get("how", "")
        return (f"attempt {step['attempt'] + 1} on {where}: a {step.get('kind', 'step')} over "
                + ", ".join(f"{o['option']!r} = {o['value']!r}" for o in step["options"])
                + f": {said} ({len(step['facts'])} fact(s) in {step['seconds']:.1f} s)")
    if step.get("continues") is not None:
        return (f"attempt {step['attempt'] + 1} on {where}: one more fact after those of attempt "
                f"{step['continues'] + 1}: answer {step['answer']!r}, {len(step['facts'])} fact(s) in "
                f"{step['seconds']:.1f} s")
    if step.get("stopped"):
        return f"attempt {step['attempt'] + 1} on {where}: stopped after {step['seconds']:.1f} s"
    cut = f" (cut: {step['cut']}; answered from the facts before it)" if step.get("cut") else ""
    check = step.get("check") or {}
    failed = f"; withheld: {check['how']}" if check and not check.get("passed") else ""
    return (f"attempt {step['attempt'] + 1} on {where}: answer {step['answer']!r}, "
            f"{len(step['facts'])} fact(s), {step['tokens']} tokens in {step['seconds']:.1f} s{cut}{failed}")
