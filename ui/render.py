"""The agent's answers and traces as HTML for the chat and the trace view.

Everything here is a pure function of the agent's plain data (``FactAgent.stream`` events and
``AgentAnswer.trace``), and every piece of text is escaped: facts and documents are data, never
markup. Each constrained fact span is a ``<mark class="fw-fact">`` whose ``data-fact-id``,
``data-tree`` and ``title`` (fact and provenance, shown on hover) say where it comes from; a
click on it jumps to its row in the trace's fact list (``#fw-fact-<answer>-<n>``), which shows
the full provenance.

Example (not run: needs an agent's reply)::

    html = attempt_html("Fact: <A> <b> <C> .\\nAnswer: C", [fact], anchor="q1")
    panel = trace_html(reply["trace"], anchor="q1")
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from agent.pipeline.trace import describe_step

TREE_LABELS = {"question": "per-question tree", "kb": "whole knowledge base", "hops": "the hops joined"}


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def provenance_line(fact: dict[str, Any]) -> str:
    """Where a fact comes from, in one line: the source triple and its file, or the document,
    its page (PDF) or heading path (Markdown, HTML, DOCX), and character offsets."""
    p = fact.get("provenance") or {}
    kind = p.get("kind")
    if kind == "triple" or p.get("subject"):
        triple = f"({p.get('subject')}, {p.get('predicate')}, {p.get('object')})" if p.get("subject") else ""
        return " ".join(part for part in (f"triple {triple}" if triple else "triple",
                                           f"from {p.get('source') or fact.get('source', '')}") if part)
    if kind == "document" or p.get("doc_id") or p.get("title"):
        where = p.get("title") or p.get("source") or fact.get("source", "")
        place = "".join((f", page {p['page']}" if p.get("page") is not None else "",
                         f", under {p['heading']}" if p.get("heading") else ""))
        span = f", characters {p['start']}-{p['end']}" if p.get("start") is not None else ""
        return f"document {where!s}{place}{span}" + (f" ({p['source']})" if p.get("source") and p.get("title") else "")
    return str(fact.get("source") or "unknown source")


def step_line(step: dict[str, Any]) -> str:
    """One line for a trace step: :func:`~agent.pipeline.trace.describe_step`'s, and the
    follow-up rewrite and hop steps said here too (read defensively: a pipeline that writes
    them may add or lack keys)."""
    kind = step.get("step")
    if kind == "rewrite":
        standalone = step.get("standalone") or step.get("question", "")
        if standalone == step.get("question"):
            return f"question taken as asked ({step.get('how') or 'standalone'})"
        return f"understood as {standalone!r} ({step.get('how') or 'rewritten'})"
    if kind == "hop":
        added = step.get("added") or []
        return (f"hop: {step.get('entity', '?')!r} in a stated fact brought {len(added)} more "
                f"fact{'' if len(added) == 1 else 's'} into the tree")
    try:
        return describe_step(step)
    except (KeyError, TypeError):  # a step this UI does not know yet
        return f"{kind}: " + ", ".join(f"{k}={v}" for k, v in step.items() if k not in ("step", "seconds"))


def grounding(trace: dict[str, Any], facts: Sequence[dict[str, Any]] = ()) -> tuple[bool, int]:
    """Whether the answer is grounded (``trace["grounded"]``, else the older ``supported``) and
    in how many stated facts (``trace["grounding"]["facts"]`` when the pipeline says, else all)."""
    grounded = trace.get("grounded", trace.get("supported", False))
    rests_on = (trace.get("grounding") or {}).get("facts")
    return bool(grounded), len(rests_on) if isinstance(rests_on, list) and rests_on else len(facts)


def _fact_tip(fact: dict[str, Any]) -> str:
    where = TREE_LABELS.get(fact.get("tree", ""), fact.get("tree", ""))
    return f"{fact['text']}\n{provenance_line(fact)}\nfact id {fact.get('fact_id')} ({where})"


def _text(value: str) -> str:
    return _e(value).replace("\n", "<br>")


def attempt_html(text: str, facts: Sequence[dict[str, Any]], *, anchor: str = "", css_class: str = "") -> str:
    """``text`` with each fact span (``start``/``end`` offsets into it) highlighted; newlines
    become ``<br>`` so the block is one line (Markdown leaves it alone)."""
    out: list[str] = []
    at = 0
    for n, fact in enumerate(sorted(facts, key=lambda f: f["start"])):
        start, end = fact["start"], fact["end"]
        if start < at or end > len(text):
            continue  # a span that does not fit the text is not shown as a fact
        out.append(_text(text[at:start]))
        target = f' href="#fw-fact-{_e(anchor)}-{n}"' if anchor else ""
        tip = _e(_fact_tip(fact)).replace("\n", "&#10;")
        out.append(f'<a class="fw-fact-link"{target}><mark class="fw-fact" data-fact-id="{_e(fact.get("fact_id"))}" '
                   f'data-tree="{_e(fact.get("tree", ""))}" title="{tip}">{_text(text[start:end])}</mark></a>')
        at = end
    out.append(_text(text[at:]))
    return f'<div class="fw-text{" " + css_class if css_class else ""}">' + "".join(out) + "</div>"


def answer_header(reply: Mapping[str, Any]) -> str:
    """The answer line of a finished reply: a grounded answer with a badge saying in how many
    stated facts it is grounded; a withheld one with what the model said and why it was not
    given (styled apart); or "I don't know." and why."""
    trace = reply.get("trace", {})
    if trace.get("stopped"):
        return '<p class="fw-answer fw-stopped">Stopped.</p>'
    grounded, n = grounding(trace, reply.get("facts") or [])
    if grounded:
        how = (trace.get("grounding") or {}).get("how")
        tip = f' title="{_e(how)}"' if how else ""
        return (f'<p class="fw-answer fw-grounded"><b>Answer: {_e(reply["answer"])}</b> '
                f'<span class="fw-badge fw-grounded-badge"{tip}>grounded in {n} fact{"" if n == 1 else "s"}</span></p>')
    answer = reply.get("answer") or "I don't know."
    if trace.get("withheld"):
        because = trace.get("withheld_because") or "not proven by a stated fact"
        return (f'<p class="fw-answer fw-unknown"><b>Answer: {_e(answer)}</b></p>'
                f'<p class="fw-withheld">withheld: “{_e(trace["withheld"])}” — not proven by a stated fact '
                f'<span class="fw-support">({_e(because)})</span></p>')
    why = ' <span class="fw-support">(the token budget ended before an answer)</span>' if trace.get("truncated") else ""
    return f'<p class="fw-answer fw-unknown"><b>Answer: {_e(answer)}</b>{why}</p>'


def chat_message(attempts: Sequence[dict[str, Any]], reply: Mapping[str, Any] | None = None, *,
                 anchor: str = "", steps: Sequence[str] = ()) -> str:
    """The assistant's chat message: the answer (when finished), then each generation attempt's
    text with its facts highlighted, and the steps so far in one dim line each.

    ``attempts``: ``{"tree", "text", "facts"}`` per attempt (and ``hop``, ``{"hop", "question"}``, for
    a hop of a question asked again hop by hop), in order (the one being generated last).
    """
    parts: list[str] = []
    if reply is not None:
        parts.append(answer_header(reply))
    if steps:
        parts.append('<div class="fw-steps">' + "<br>".join(_e(s) for s in steps) + "</div>")
    for i, attempt in enumerate(attempts):
        if not attempt.get("text"):
            continue
        if len(attempts) > 1:
            label = TREE_LABELS.get(attempt.get("tree", ""), "")
            if attempt.get("hop"):  # a hop of the question asked again hop by hop
                label += f', hop {attempt["hop"]["hop"]}: {attempt["hop"]["question"]}'
            parts.append(f'<div class="fw-attempt-label">attempt {i + 1}, {_e(label)}</div>')
        final = reply is not None and i == reply.get("trace", {}).get("attempt", len(attempts) - 1)
        parts.append(attempt_html(attempt["text"], attempt.get("facts", []), anchor=anchor if final else "",
                                  css_class="fw-final" if final else ""))
    return "\n".join(parts) if parts else '<span class="fw-thinking">searching the knowledge…</span>'


def _hits_table(step: dict[str, Any], selected: set[str]) -> str:
    rows = []
    for i, hit in enumerate(step.get("hits", []), 1):
        picked = hit["id"] in selected
        rows.append(
            f'<tr class="{"fw-picked" if picked else ""}"><td>{i}</td><td>{"✓" if picked else ""}</td>'
            f'<td>{hit["score"]:.3f}</td><td>{hit["cosine"]:.3f}</td><td>{hit.get("ppr", 0.0):.3f}</td>'
            f'<td>{hit["degree"]}</td>'
            f'<td class="fw-fact-text">{_e(hit["text"])}</td><td>{_e(", ".join(hit.get("keywords", [])))}</td>'
            f'<td class="fw-source">{_e(provenance_line({"provenance": {"kind": hit.get("kind"), **hit.get("provenance", {})}, "source": ""}))}</td></tr>')
    return ('<table class="fw-table"><thead><tr><th>#</th><th>picked</th><th>score</th><th>cos</th><th>PageRank</th><th>degree</th>'
            '<th>fact</th><th>keywords</th><th>source</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _step_html(step: dict[str, Any], selected: set[str]) -> str:
    kind = step["step"]
    summary = _e(step_line(step))
    body = ""
    if kind == "rewrite":
        body = (f'<p>asked: “{_e(step.get("question", ""))}”<br>understood as: '
                f'<b class="fw-standalone">{_e(step.get("standalone") or step.get("question", ""))}</b></p>'
                f'<p class="fw-dim">{_e(step.get("how", ""))}</p>')
    elif kind == "hop":
        body = (f'<p>from the stated fact <span class="fw-fact-text">{_e(step.get("fact", ""))}</span>, '
                f'searched <b>{_e(step.get("entity", ""))}</b>'
                + (f' in the question\'s context (“{_e(step["query"])}”)' if step.get("query") else "")
                + ':</p><ul>'
                + "".join(f'<li class="fw-fact-text">{_e(t)}</li>' for t in step.get("added") or []) + "</ul>")
    elif kind == "retrieve":
        body = _hits_table(step, selected)
    elif kind == "rerank":
        body = (f'<p>question type <b>{_e(step["question_type"])}</b>; '
                + ("fallback to the top 3: " + _e(step.get("reason", "")) if step["used_fallback"]
                   else f'{len(step["selected"])} fact(s) picked by the chat model')
                + f'</p><p class="fw-dim">model reply: <code>{_e(step.get("reply") or "")}</code></p>')
    elif kind == "plan":
        how = step.get("how") or {}
        body = ("<ul>" + "".join(f"<li>{_e(part)}: {_e(said)}</li>" for part, said in how.items()) + "</ul>")
    elif kind == "subquery":
        body = "<ul>" + "".join(f"<li>{_e(q)}</li>" for q in step["queries"]) + f"</ul><p class='fw-dim'>{_e(step['how'])}</p>"
    elif kind == "generate":
        check = step.get("check") or {}
        said = (f'; check: <span class="fw-check fw-check-{"passed" if check.get("passed") else "failed"}">'
                f'{_e(check.get("how", ""))}</span>' if check else "")
        body = (attempt_html(step.get("text", ""), step.get("facts", []))
                + f'<p class="fw-dim">answer “{_e(step.get("answer", ""))}”{said}; '
                  f'{step.get("prompt_tokens", 0)} prompt + {step.get("tokens", 0)} generated tokens</p>')
    return f'<details class="fw-step fw-step-{_e(kind)}"><summary>{summary}</summary>{body}</details>'


def facts_list(facts: Sequence[dict[str, Any]], *, anchor: str = "") -> str:
    """The answer's facts, numbered as their spans, each with its provenance (the click target)."""
    if not facts:
        return '<p class="fw-dim">No fact was stated.</p>'
    items = []
    for n, fact in enumerate(sorted(facts, key=lambda f: f["start"])):
        where = TREE_LABELS.get(fact.get("tree", ""), "")
        items.append(f'<li id="fw-fact-{_e(anchor)}-{n}" class="fw-fact-row" data-fact-id="{_e(fact.get("fact_id"))}">'
                     f'<span class="fw-fact-text">{_e(fact["text"])}</span><br>'
                     f'<span class="fw-source">{_e(provenance_line(fact))} · id {_e(fact.get("fact_id"))} · '
                     f'{_e(where)}</span></li>')
    return '<ol class="fw-facts">' + "".join(items) + "</ol>"


def timings_table(trace: dict[str, Any]) -> str:
    t = trace.get("timings", {})
    names = [("retrieve_s", "retrieval"), ("rerank_s", "re-ranking"), ("plan_s", "reading the question"),
             ("subquery_s", "sub-queries"),
             ("tree_build_s", "per-question trees"), ("generate_s", "generation"), ("total_s", "total")]
    cells = "".join(f"<tr><td>{label}</td><td>{t.get(key, 0.0):.2f} s</td></tr>" for key, label in names)
    tokens = trace.get("tokens", {})
    cells += f"<tr><td>tokens</td><td>{tokens.get('prompt', 0)} prompt, {tokens.get('generated', 0)} generated</td></tr>"
    return f'<table class="fw-table fw-timings">{cells}</table>'


def _final_text(trace: dict[str, Any]) -> str:
    attempts = [s for s in trace.get("steps", []) if s["step"] == "generate"]
    return attempts[-1].get("text", "") if attempts else ""


def understood_html(trace: dict[str, Any], history_turns: int = 0) -> str:
    """How the question was understood: as asked, or the standalone question a follow-up was
    rewritten into and how; and how many earlier turns of the conversation went with it."""
    rewrite = next((s for s in trace.get("steps", []) if s.get("step") == "rewrite"), None)
    asked = trace.get("question", "")
    standalone = trace.get("standalone") or (rewrite or {}).get("standalone") or asked
    turns = (f'{history_turns} earlier turn{"" if history_turns == 1 else "s"} of the conversation went with it'
             if history_turns else "no earlier turn went with it")
    how = (rewrite or {}).get("how") or ("" if rewrite else "the pipeline wrote no rewrite step")
    return (f'<div class="fw-understood" data-history-turns="{history_turns}">'
            f'<p>Understood as: <b class="fw-standalone">{_e(standalone)}</b>'
            + (f' <span class="fw-dim">(asked: “{_e(asked)}”)</span>' if standalone != asked else "")
            + f'</p><p class="fw-dim">{_e(how)}{"; " if how else ""}{_e(turns)}</p></div>')


def grounding_html(trace: dict[str, Any]) -> str:
    """Whether the answer is grounded and how, or what was withheld and why."""
    facts = trace.get("facts") or []
    grounded, n = grounding(trace, facts)
    if trace.get("stopped"):
        return '<p class="fw-dim">Stopped before an answer.</p>'
    if grounded:
        how = (trace.get("grounding") or {}).get("how") or "the answer is in a stated fact about the question"
        return (f'<p class="fw-grounding"><span class="fw-badge fw-grounded-badge">grounded in {n} '
                f'fact{"" if n == 1 else "s"}</span> {_e(how)}</p>')
    if trace.get("withheld"):
        return (f'<p class="fw-withheld">withheld: “{_e(trace["withheld"])}” — not proven by a stated fact '
                f'<span class="fw-support">({_e(trace.get("withheld_because", ""))})</span></p>')
    return '<p class="fw-dim">No answer: nothing to ground.</p>'


def trace_html(trace: dict[str, Any] | None, *, anchor: str = "", history_turns: int = 0) -> str:
    """The trace view: how the question was understood (the standalone question of a
    follow-up), whether the answer is grounded or withheld, the answer's facts with provenance,
    each step (the rewrite, retrieved facts with score parts and the re-ranker's picks,
    sub-queries, hops, each attempt's text), timings, and the raw JSON trace. ``history_turns``:
    how many earlier turns of the conversation were given to the agent."""
    if not trace:
        return '<div class="fw-trace fw-dim">Ask a question: its trace appears here.</div>'
    selected = {i for s in trace.get("steps", []) if s["step"] == "rerank" for i in s.get("selected", [])}
    steps = "".join(_step_html(s, selected) for s in trace.get("steps", []))
    understood = understood_html(trace, history_turns)
    if trace.get("partial"):  # while answering: the steps so far
        return (f'<div class="fw-trace fw-partial" data-question="{_e(trace.get("question", ""))}">{understood}'
                f'<h4>Steps so far</h4>{steps or "<p class=fw-dim>retrieving…</p>"}</div>')
    raw = _e(json.dumps(trace, ensure_ascii=False, indent=1))
    return (f'<div class="fw-trace" data-question="{_e(trace.get("question", ""))}">'
            f'{understood}{grounding_html(trace)}'
            f'<h4>Generated text</h4>{attempt_html(_final_text(trace), trace.get("facts", []), css_class="fw-generated")}'
            f'<h4>Facts of the answer</h4>{facts_list(trace.get("facts", []), anchor=anchor)}'
            f'<h4>Steps</h4>{steps}'
            f'<h4>Timings</h4>{timings_table(trace)}'
            f'<details class="fw-raw"><summary>raw trace (JSON)</summary><pre class="fw-trace-json">{raw}</pre></details>'
            f"</div>")


def search_html(hits: Sequence[Any]) -> str:
    """The knowledge tab's search results: score, fact and source of each web hit, best first."""
    if not hits:
        return '<p class="fw-dim">No fact found.</p>'
    rows = "".join(
        f'<tr><td>{h.score:.3f}</td><td class="fw-fact-text">{_e(h.text)}</td>'
        f'<td class="fw-source">{_e(provenance_line({"provenance": {"kind": h.kind, **h.provenance}}))}</td></tr>'
        for h in hits)
    return ('<table class="fw-table fw-search"><thead><tr><th>score</th><th>fact</th><th>source</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def sources_html(sources: Sequence[dict[str, Any]]) -> str:
    """The knowledge tab's documents table: one row per source (a document file, a corpus, a triple
    file) with its documents and facts, and whether it was uploaded here."""
    if not sources:
        return '<p class="fw-dim">The knowledge web holds no documents yet.</p>'
    rows = "".join(
        f'<tr data-source="{_e(s["source"])}"><td class="fw-source">{_e(s["source"])}</td>'
        f'<td>{s["documents"]:,}</td><td>{s["facts"]:,}</td><td>{"yes" if s.get("uploaded") else ""}</td></tr>'
        for s in sources)
    return ('<table class="fw-table fw-sources"><thead><tr><th>source</th><th>documents</th><th>facts</th>'
            f"<th>uploaded</th></tr></thead><tbody>{rows}</tbody></table>")
