"""The proof of an answer as a small picture: entities as nodes, stated facts as labelled edges.

:func:`proof_graph_html` reads an answer's trace (``AgentAnswer.trace``: its stated ``facts``,
``grounding``, ``answer``, ``withheld``) and returns an inline SVG in a ``<div class="fw-proof">``:

- nodes: the entities of the stated facts (a triple's subject and object; a statement's names,
  found as the grounding check finds them: keywords with a capital letter or a digit); those the
  question names wear ``fw-node-question``, the answer ``fw-node-answer`` (a computed answer also
  ``fw-node-computed``, with the step's line on hover), a withheld answer ``fw-node-withheld``;
- edges: one per stated fact (``fw-edge``, ``data-fact-index`` into ``trace["facts"]``), labelled
  with a triple's predicate or a statement shortened to what it says between its two names (the
  whole fact on hover, an SVG ``<title>``); the chain the answer rests on ``fw-edge-chain``, other
  facts ``fw-edge-aside``;
- a withheld answer: the chain drawn, and the fact where it broke ``fw-edge-broken`` (the one that
  failed the "does it say what was asked" check, ``grounding["check"]``; else
  ``grounding["broken_at"]``; else the first stated fact outside the chain), with a caption saying
  why ("the fact says 'field of work'; the question asks 'instrument'").

Layout: networkx (already installed: torch requires it) holds the graph and gives the columns,
breadth-first layers from the question's entities (:func:`networkx.bfs_layers`) per connected
component, so a chain reads left to right from the question to the answer; the SVG is written
here, not by a drawing library, because it must be self-contained markup with data attributes the
UI and its tests read (matplotlib's SVG has neither, and Graphviz is no Python package here).
Every piece of text is escaped: facts are data, never markup. Pure: the trace in, a string out.

Example (not run: needs an agent's answer)::

    html = proof_graph_html(answer.trace)
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

import networkx as nx

from agent.knowledge.keywords import extract_keywords
from agent.knowledge.normalize import normalize_answer
from agent.pipeline.grounding import holds_answer

MAX_NODES = 12  # a proof is a few facts; more would be a picture of the retrieval, not of the proof
NODE_LABEL_CHARS = 28
EDGE_LABEL_CHARS = 26
_NODE_H = 26
_ROW_H = 58
_MARGIN = 14
_CHAR_W = 6.9  # 12 px sans-serif, average advance (labels are sized from it, not measured)
_EDGE_CHAR_W = 6.1  # 11 px
_MIN_GAP = 56
_PARALLEL = 36  # bow between parallel edges: their labels' midpoints 18 px apart
LEGEND = ('<span class="fw-key fw-key-question"></span> named by the question · '
          '<span class="fw-key fw-key-answer"></span> the answer · '
          '<span class="fw-key fw-key-chain"></span> the chain it rests on · '
          '<span class="fw-key fw-key-broken"></span> where it broke; hover an edge for its fact')
_TRIPLE = re.compile(r"^\s*<([^<>]*)>\s*<([^<>]*)>\s*<([^<>]*)>\s*\.?\s*$")
_POSSESSIVE = re.compile(r"([^\W_])['’]s?(?![^\W_])")  # "Buck Owens's" names Buck Owens (as grounding reads it)

# Colours: the UI's own (amber for facts of the knowledge, green for grounded, blue for the
# question, red for withheld), as presentation attributes so the SVG stands alone.
_NODE_STYLE = {"question": ("#dbeafe", "#3b82f6"), "answer": ("#d1fae5", "#059669"),
               "withheld": ("#fef2f2", "#dc2626"), "entity": ("#f9fafb", "#9ca3af")}
_EDGE_STYLE = {"chain": ("#d97706", 2.2, ""), "aside": ("#9ca3af", 1.3, ""), "broken": ("#dc2626", 2.2, "6 4"),
               "computed": ("#059669", 1.4, "3 3"), "missing": ("#dc2626", 1.4, "3 3")}


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def _key(name: str) -> str:
    return normalize_answer(name) or name.strip().casefold()


def _contains(outer: Sequence[str], inner: Sequence[str]) -> bool:
    n = len(inner)
    return n > 0 and any(list(outer[i:i + n]) == list(inner) for i in range(len(outer) - n + 1))


@dataclass
class _Node:
    key: str
    label: str
    order: int
    roles: set[str] = field(default_factory=set)  # question, answer, withheld, computed, statement
    tip: str = ""


@dataclass
class _Edge:
    source: str
    target: str
    kind: str  # chain, aside, broken (a stated fact); computed, missing (a link, no fact)
    label: str
    tip: str
    fact: int | None = None


class _Proof:
    """The graph being built: nodes by normalized name, in the order first named."""

    def __init__(self, question: str) -> None:
        plain = _POSSESSIVE.sub(r"\1", question)
        self.question_words = normalize_answer(plain).split()
        self.nodes: dict[str, _Node] = {}
        self.edges: list[_Edge] = []

    def find(self, name: str, loose: bool = False) -> str | None:
        """The node ``name`` is: the same normalized name; ``loose`` (a statement's names): also
        one holding it or held by it word for word ("Owens" and "Buck Owens")."""
        key = _key(name)
        if key in self.nodes:
            return key
        if loose:
            words = key.split()
            for other in self.nodes:
                if _contains(other.split(), words) or _contains(words, other.split()):
                    return other
        return None

    def add(self, name: str, *roles: str, loose: bool = False) -> str:
        key = self.find(name, loose) or _key(name)
        node = self.nodes.setdefault(key, _Node(key, name.strip() or "?", len(self.nodes)))
        node.roles.update(roles)
        if self.is_question(name):
            node.roles.add("question")
        return key

    def dot(self, i: int, fact: dict[str, Any], end: str) -> str:
        key = f"\x00fact {i} {end}"
        self.nodes.setdefault(key, _Node(key, "", len(self.nodes), {"statement"}, str(fact.get("text", ""))))
        return key

    def new_names(self, names: Sequence[str]) -> int:
        """How many nodes ``names`` would add."""
        seen: set[str] = set()
        for name in names:
            if self.find(name, loose=True) is None:
                seen.add(_key(name))
        return len(seen)

    def is_question(self, name: str) -> bool:
        return _contains(self.question_words, _key(name).split())


def _statement_names(text: str) -> list[str]:
    """A statement's entities as the grounding check reads them: keywords with a capital or a digit."""
    return [k for k in extract_keywords(text, limit=40) if any(c.isupper() or c.isdigit() for c in k)]


def _statement_label(text: str, ends: Sequence[str]) -> str:
    """What a statement says between its two ends: the words between their names when it names
    them in that order ("was founded in 1987 by"), else the sentence without their names."""
    spans = [re.search(re.escape(name), text, flags=re.IGNORECASE) if name else None for name in ends]
    said = ""
    found = [s for s in spans if s is not None]
    if len(found) == len(spans) and found[0].end() <= found[1].start():
        said = text[found[0].end():found[1].start()]
    if not said.strip(" .,;:"):
        said = text
        for name in ends:
            if name:
                said = re.sub(re.escape(name), " ", said, flags=re.IGNORECASE)
    said = " ".join(said.split()).strip(" .,;:")
    return _short(said or text, EDGE_LABEL_CHARS)


def _fact_ends(proof: _Proof, fact: dict[str, Any], answer: str, later: Sequence[str]) -> tuple[str, str, str]:
    """The two names a fact is drawn between and its label: a triple's subject and object and
    predicate; a statement from the question's entity (else a name already drawn, else its first)
    to the answer when it holds it, else to a name a later fact names, else to its next name."""
    p = fact.get("provenance") or {}
    text = str(fact.get("text", ""))
    if p.get("subject") and p.get("object"):
        return str(p["subject"]), str(p["object"]), _short(str(p.get("predicate") or ""), EDGE_LABEL_CHARS)
    m = _TRIPLE.match(text)
    if m:
        s, pred, o = (part.strip() for part in m.groups())
        return s, o, _short(pred, EDGE_LABEL_CHARS)
    names = _statement_names(text)
    source = (next((n for n in names if proof.is_question(n)), None)
              or next((n for n in names if proof.find(n, loose=True)), None)
              or (names[0] if names else ""))
    rest = [n for n in names if _key(n) != _key(source)]
    target = None
    if answer and _key(answer) != _key(source) and holds_answer(text, answer):
        words = _key(answer).split()
        target = next((n for n in rest if _contains(_key(n).split(), words)), answer)
    if target is None:
        later_keys = {_key(n) for n in later}
        target = (next((n for n in rest if _key(n) in later_keys), None)
                  or next((n for n in rest if not proof.find(n, loose=True)), None)
                  or (rest[0] if rest else ""))
    return source, target, _statement_label(text, [source, target])


def _answer_of(trace: dict[str, Any]) -> tuple[str, str]:
    """The answer to mark and how: ("grounded"|"withheld"|"", text)."""
    grounding = trace.get("grounding") or {}
    if trace.get("grounded", trace.get("supported")):
        return "grounded", str(grounding.get("short") or trace.get("answer") or "")
    if trace.get("withheld"):
        return "withheld", str(trace["withheld"])
    return "", ""


def _broken_fact(trace: dict[str, Any], n_facts: int) -> int | None:
    """The stated fact where a withheld answer's chain broke (see the module docstring)."""
    grounding = trace.get("grounding") or {}
    check = grounding.get("check")
    if isinstance(check, dict) and check.get("passed") is False and isinstance(check.get("fact"), int):
        return check["fact"] if 0 <= check["fact"] < n_facts else None
    at = grounding.get("broken_at")
    if isinstance(at, int) and 0 <= at < n_facts:
        return at
    chain = set(grounding.get("facts") or [])
    outside = [i for i in range(n_facts) if i not in chain]
    return outside[0] if outside else None


def _caption(trace: dict[str, Any], state: str, answer: str, skipped: int) -> list[tuple[str, str]]:
    """(css class, text) lines under the picture."""
    grounding = trace.get("grounding") or {}
    lines: list[tuple[str, str]] = []
    if state == "grounded":
        how = grounding.get("how") or "the answer is in a stated fact of the chain"
        lines.append(("fw-proof-ok", f"{'computed' if grounding.get('computed') else 'grounded'}: {how}"))
    elif state == "withheld":
        check = grounding.get("check")
        if isinstance(check, dict) and check.get("passed") is False:
            why = f"the fact says “{check.get('says', '?')}”; the question asks “{check.get('asks', '?')}”"
            if check.get("how"):
                why += f" ({check['how']})"
        else:
            why = trace.get("withheld_because") or grounding.get("how") or "not proven by a stated fact"
        lines.append(("fw-proof-broken", f"withheld “{answer}”: {why}"))
    elif trace.get("stopped"):
        lines.append(("fw-dim", "stopped before an answer"))
    else:
        lines.append(("fw-dim", "no answer: the facts stated prove nothing asked"))
    if skipped:
        lines.append(("fw-dim", f"{skipped} more stated fact{'' if skipped == 1 else 's'} not drawn "
                                f"(at most {MAX_NODES} entities)"))
    return lines


def _build(trace: dict[str, Any]) -> tuple[_Proof, str, str, int]:
    facts: list[dict[str, Any]] = list(trace.get("facts") or [])
    grounding = trace.get("grounding") or {}
    proof = _Proof(str(trace.get("standalone") or trace.get("question") or ""))
    state, answer = _answer_of(trace)
    chain = [i for i in grounding.get("facts") or [] if isinstance(i, int) and 0 <= i < len(facts)]
    broken = _broken_fact(trace, len(facts)) if state == "withheld" else None
    order = [*chain, *(i for i in range(len(facts)) if i not in chain)]
    ends = {}
    for pos, i in enumerate(order):
        later = [n for j in order[pos + 1:] for n in _statement_names(str(facts[j].get("text", "")))]
        ends[i] = _fact_ends(proof, facts[i], answer if state else "", later)
        source, target, _ = ends[i]
        if proof.new_names([n for n in (source, target) if n]) + len(proof.nodes) > MAX_NODES:
            del ends[i]
            continue
        text = str(facts[i].get("text", ""))
        statement = not ((facts[i].get("provenance") or {}).get("subject") or _TRIPLE.match(text))
        # A statement naming one entity (or none) ends in a dot of its own, the fact on hover.
        s_key = proof.add(source, loose=statement) if source else proof.dot(i, facts[i], "from")
        t_key = proof.add(target, loose=statement) if target else proof.dot(i, facts[i], "to")
        kind = "broken" if i == broken else "chain" if i in chain else "aside"
        tip = f"fact {i + 1}: {text}" + (f"\n{facts[i]['source']}" if facts[i].get("source") else "")
        proof.edges.append(_Edge(s_key, t_key, kind, ends[i][2], tip, i))
    skipped = len(facts) - len(ends)
    if state and answer and len(proof.nodes) <= MAX_NODES:
        _mark_answer(proof, trace, state, answer, chain)
    return proof, state, answer, skipped


def _mark_answer(proof: _Proof, trace: dict[str, Any], state: str, answer: str, chain: Sequence[int]) -> None:
    """Mark the node the answer is; an answer no node is (a computed "yes", a count; a withheld
    name no fact states) gets its own, linked to the chain's ends by dashed links (no fact)."""
    grounding = trace.get("grounding") or {}
    role = "answer" if state == "grounded" else "withheld"
    key = proof.find(answer) or next((k for k in proof.nodes if "statement" not in proof.nodes[k].roles
                                      and _contains(k.split(), _key(answer).split())
                                      and len(_key(answer)) >= 3), None)
    computed = state == "grounded" and bool(grounding.get("computed"))
    if key is not None:
        node = proof.nodes[key]
        node.roles.add(role)
        if computed:
            node.roles.add("computed")
            node.tip = f"{node.label}\ncomputed: {grounding.get('how', '')}"
        return
    key = _key(answer)
    proof.nodes[key] = _Node(key, answer, len(proof.nodes), {role, *(("computed",) if computed else ())})
    proof.nodes[key].tip = f"{answer}\n" + (f"computed: {grounding.get('how', '')}" if computed else "the answer"
                                            if state == "grounded" else "withheld: no stated fact proves it")
    fact_edges = [e for e in proof.edges if e.fact is not None]
    ends = [e.target for e in fact_edges if e.fact in chain] or [e.target for e in fact_edges[-1:]]
    kind = "computed" if state == "grounded" else "missing"
    label = "computed" if computed else "" if state == "grounded" else "not stated"
    for end in list(dict.fromkeys(ends))[-3:]:
        proof.edges.append(_Edge(end, key, kind, label, grounding.get("how", "") if computed else label))


def _layout(proof: _Proof) -> tuple[dict[str, tuple[float, float]], dict[str, float], float, float]:
    """Node centres (px), node widths, and the picture's size: one column per breadth-first
    layer from the question's entities, one band of rows per connected component."""
    graph = nx.MultiGraph()
    graph.add_nodes_from(sorted(proof.nodes, key=lambda k: proof.nodes[k].order))
    graph.add_edges_from((e.source, e.target) for e in proof.edges)
    widths = {k: min(len(n.label), NODE_LABEL_CHARS) * _CHAR_W + 18 if "statement" not in n.roles else 12.0
              for k, n in proof.nodes.items()}
    order = {k: n.order for k, n in proof.nodes.items()}
    components = sorted(nx.connected_components(graph),  # the question's first, then as first named
                        key=lambda c: (not any("question" in proof.nodes[k].roles for k in c),
                                       min(order[k] for k in c)))
    layer: dict[str, int] = {}
    bands: list[list[list[str]]] = []
    for comp in components:
        sources = sorted((k for k in comp if "question" in proof.nodes[k].roles), key=order.__getitem__) \
            or [min(comp, key=order.__getitem__)]
        layers = [sorted(nodes, key=order.__getitem__) for nodes in nx.bfs_layers(graph.subgraph(comp), sources)]
        for depth, nodes in enumerate(layers):
            for k in nodes:
                layer[k] = depth
        bands.append(layers)
    n_cols = max(layer.values()) + 1
    col_w = [0.0] * n_cols
    for k, depth in layer.items():
        col_w[depth] = max(col_w[depth], widths[k])
    gaps = [float(_MIN_GAP)] * n_cols
    for e in proof.edges:
        a, b = sorted((layer[e.source], layer[e.target]))
        if b == a + 1:
            gaps[a] = max(gaps[a], len(e.label) * _EDGE_CHAR_W + 40)  # a stub of line shows either side
    xs, x = [], float(_MARGIN)
    for depth in range(n_cols):
        xs.append(x + col_w[depth] / 2)
        x += col_w[depth] + gaps[depth]
    width = x - gaps[-1] + _MARGIN
    pos: dict[str, tuple[float, float]] = {}
    top = float(_MARGIN + 10)
    for layers in bands:
        rows = max(len(nodes) for nodes in layers)
        for depth, nodes in enumerate(layers):
            if depth:  # under the nodes they hang from (fewer crossings)
                def centre(k: str) -> float:
                    ys = [pos[n][1] for n in graph.neighbors(k) if n in pos]
                    return sum(ys) / len(ys) if ys else math.inf
                nodes = sorted(nodes, key=lambda k: (centre(k), order[k]))
            offset = (rows - len(nodes)) / 2
            for r, k in enumerate(nodes):
                pos[k] = (xs[depth], top + (offset + r) * _ROW_H + _NODE_H / 2)
        top += rows * _ROW_H
    same_column = any(layer[e.source] == layer[e.target] and e.source != e.target for e in proof.edges)
    loops = any(e.source == e.target for e in proof.edges)
    return (pos, widths, width + (60 if same_column else 0),
            top - _ROW_H + _NODE_H + _MARGIN + 10 + (34 if loops else 0))


def _clip(centre: tuple[float, float], half: tuple[float, float], toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from a node's centre toward a point leaves its box."""
    dx, dy = toward[0] - centre[0], toward[1] - centre[1]
    if dx == 0 and dy == 0:
        return centre
    t = min(half[0] / abs(dx) if dx else math.inf, half[1] / abs(dy) if dy else math.inf)
    return centre[0] + dx * t, centre[1] + dy * t


def _svg(proof: _Proof, uid: str) -> str:
    pos, widths, width, height = _layout(proof)
    out: list[str] = []
    defs = "".join(
        f'<marker id="fw-arrow-{uid}-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
        f'markerWidth="9" markerHeight="9" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        for kind, (colour, _, _) in _EDGE_STYLE.items())
    out.append(f"<defs>{defs}</defs>")
    pairs: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(proof.edges):
        pairs.setdefault((min(e.source, e.target), max(e.source, e.target)), []).append(i)
    labels: list[str] = []
    for i, e in enumerate(proof.edges):
        pair = (min(e.source, e.target), max(e.source, e.target))
        group = pairs[pair]
        p0, p2 = pos[e.source], pos[e.target]
        # The normal of the pair's canonical direction: parallel edges keep their sides whichever
        # way each is written.
        c0, c2 = pos[pair[0]], pos[pair[1]]
        dx, dy = c2[0] - c0[0], c2[1] - c0[1]
        length = math.hypot(dx, dy) or 1.0
        nx_, ny_ = -dy / length, dx / length
        bow = (group.index(i) - (len(group) - 1) / 2) * _PARALLEL
        if abs(dx) < 1:  # same column: bow out to the right, past the nodes between
            if nx_ < 0:
                nx_, ny_ = -nx_, -ny_
            bow += 30 + abs(dy) / 4
        if e.source == e.target:  # a fact from an entity to itself: a loop under the node
            x, y = p0
            below = y + _NODE_H / 2 + 2 + 4 * group.index(i)
            path = (f"M{x - 10:.1f},{below:.1f} C{x - 34:.1f},{below + 30:.1f} "
                    f"{x + 34:.1f},{below + 30:.1f} {x + 10:.1f},{below:.1f}")
            label_at = (x, below + 22)
        else:
            # The curve's midpoint lies ``bow`` px off the straight line; the label sits on it.
            aim = ((p0[0] + p2[0]) / 2 + nx_ * bow, (p0[1] + p2[1]) / 2 + ny_ * bow)
            a = _clip(p0, (widths[e.source] / 2 + 2, _NODE_H / 2 + 2), aim)
            b = _clip(p2, (widths[e.target] / 2 + 3, _NODE_H / 2 + 3), aim)
            label_at = ((a[0] + b[0]) / 2 + nx_ * bow, (a[1] + b[1]) / 2 + ny_ * bow)
            ctrl = (2 * label_at[0] - (a[0] + b[0]) / 2, 2 * label_at[1] - (a[1] + b[1]) / 2)
            path = f"M{a[0]:.1f},{a[1]:.1f} Q{ctrl[0]:.1f},{ctrl[1]:.1f} {b[0]:.1f},{b[1]:.1f}"
        colour, stroke, dash = _EDGE_STYLE[e.kind]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        cls = f"fw-edge fw-edge-{e.kind}" if e.fact is not None else f"fw-link fw-link-{e.kind}"
        data = f' data-fact-index="{e.fact}"' if e.fact is not None else ""
        data += f' data-from="{_e(proof.nodes[e.source].label)}" data-to="{_e(proof.nodes[e.target].label)}"'
        out.append(f'<g class="{cls}"{data}><title>{_e(e.tip)}</title>'
                   f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="{stroke}"{dash_attr} '
                   f'marker-end="url(#fw-arrow-{uid}-{e.kind})"/>')
        if e.label:
            w = len(e.label) * _EDGE_CHAR_W + 8
            text_colour = "#991b1b" if e.kind in ("broken", "missing") else "#374151"
            # Labels after every path and node-free gap, so no line crosses one.
            labels.append(f'<g class="fw-edge-label" data-fact-index="{e.fact if e.fact is not None else ""}">'
                          f'<title>{_e(e.tip)}</title>'
                          f'<rect x="{label_at[0] - w / 2:.1f}" y="{label_at[1] - 8:.1f}" width="{w:.1f}" height="15" '
                          f'rx="3" fill="#ffffff" fill-opacity="0.9"/>'
                          f'<text x="{label_at[0]:.1f}" y="{label_at[1] + 3.5:.1f}" text-anchor="middle" '
                          f'font-size="11" fill="{text_colour}">{_e(e.label)}</text></g>')
        out.append("</g>")
    out.extend(labels)
    for key, node in sorted(proof.nodes.items(), key=lambda kv: kv[1].order):
        x, y = pos[key]
        roles = node.roles
        if "statement" in roles:  # a statement naming one entity ends here: a dot, the fact on hover
            out.append(f'<g class="fw-node fw-node-statement" data-entity=""><title>{_e(node.tip)}</title>'
                       f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#9ca3af"/></g>')
            continue
        style = ("answer" if "answer" in roles else "withheld" if "withheld" in roles
                 else "question" if "question" in roles else "entity")
        fill, outline = _NODE_STYLE[style]
        classes = ["fw-node", *(f"fw-node-{r}" for r in ("question", "answer", "withheld", "computed") if r in roles)]
        w = widths[key]
        thick = 2.4 if style in ("answer", "withheld") else 1.3
        dash = ' stroke-dasharray="5 3"' if style == "withheld" else ""
        tip = node.tip or node.label
        weight = ' font-weight="600"' if style in ("answer", "withheld") else ""
        if "question" in roles:
            tip += "\nnamed by the question"
        if "answer" in roles and not node.tip:
            tip += "\nthe answer"
        out.append(f'<g class="{" ".join(classes)}" data-entity="{_e(node.label)}"><title>{_e(tip)}</title>'
                   f'<rect x="{x - w / 2:.1f}" y="{y - _NODE_H / 2:.1f}" width="{w:.1f}" height="{_NODE_H}" rx="13" '
                   f'fill="{fill}" stroke="{outline}" stroke-width="{thick}"{dash}/>'
                   f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-size="12" fill="#111827"{weight}>'
                   f'{_e(_short(node.label, NODE_LABEL_CHARS))}</text>')
        if "computed" in roles:  # the step's mark: a small "=" badge on the node's corner
            out.append(f'<circle cx="{x + w / 2 - 2:.1f}" cy="{y - _NODE_H / 2 + 1:.1f}" r="7" fill="#059669"/>'
                       f'<text x="{x + w / 2 - 2:.1f}" y="{y - _NODE_H / 2 + 5:.1f}" text-anchor="middle" '
                       f'font-size="11" fill="#ffffff">=</text>')
        out.append("</g>")
    w, h = math.ceil(width), math.ceil(height)
    return (f'<svg class="fw-proof-svg" xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {w} {h}" '
            f'width="{w}" height="{h}" font-family="ui-sans-serif, system-ui, sans-serif" '
            f'style="max-width:100%;height:auto;min-width:{min(w, 320)}px">'
            f"<title>the proof: {sum(e.fact is not None for e in proof.edges)} stated fact(s) between "
            f"{sum('statement' not in n.roles for n in proof.nodes.values())} entities</title>"
            + "".join(out) + "</svg>")


def proof_graph_html(trace: dict[str, Any] | None) -> str:
    """The proof of an answer as a picture (see the module docstring): inline SVG and a caption
    in a ``<div class="fw-proof">``; with no stated fact, one line and no SVG."""
    if not trace:
        return '<div class="fw-proof fw-dim">Ask a question: the proof of its answer is drawn here.</div>'
    if trace.get("partial"):
        return '<div class="fw-proof fw-dim">The proof is drawn when the answer is finished…</div>'
    facts = trace.get("facts") or []
    state, answer = _answer_of(trace)
    if not facts:
        said = f" (withheld “{_e(answer)}”)" if state == "withheld" else ""
        return (f'<div class="fw-proof" data-facts="0" data-drawn="0" data-state="{state or "none"}">'
                f'<p class="fw-proof-caption fw-dim">No fact was stated{said}.</p></div>')
    proof, state, answer, skipped = _build(trace)
    # Marker ids are page-wide: one suffix per drawn proof.
    uid = hashlib.sha1(repr((trace.get("question"), [f.get("text") for f in facts])).encode()).hexdigest()[:8]
    caption = "".join(f'<p class="fw-proof-caption {cls}">{_e(text)}</p>'
                      for cls, text in _caption(trace, state, answer, skipped))
    drawn = len(facts) - skipped
    return (f'<div class="fw-proof" data-facts="{len(facts)}" data-drawn="{drawn}" data-state="{state or "none"}">'
            f'<div class="fw-proof-scroll">{_svg(proof, uid)}</div>{caption}'
            f'<p class="fw-proof-caption fw-dim">{LEGEND}</p></div>')
