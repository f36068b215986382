"""Multi-hop chaining: the per-question tree grows along the facts the model states.

A two-hop question ("the official language of the country X is a citizen of") needs a fact the
question does not name: retrieval on the question finds X's citizenship, not the country's
language. IRCoT-style interleaving closes the gap with the guarantee intact: when a ``Fact:`` line
completes, the entities it adds (a triple's subject or object that the question does not name; a
statement's names that the question does not name) are searched in the knowledge web, and their
facts join the tree (:class:`~agent.index.union.GrowingFactIndex`) before the next ``Fact:`` line
of the same generation. Hops are bounded (``max_hops`` searches per attempt, ``k`` facts each,
``max_facts`` added in all).

The callback runs in the generating thread; the hop records it writes are read by the pipeline
between tokens (``take_hops``), which emits them as trace steps.

Example::

    tree = ChainingTree(hits, generator.tokenizer, web, "What is the official language of ...?")
    answer = generator.answer(question, index=tree.index, on_fact=tree.on_fact)
    tree.hit(answer.facts[1].id), tree.take_hops()
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from collections.abc import Callable

from ..index.trie import FactIndex
from ..index.union import GrowingFactIndex
from ..knowledge.facts import Fact

if TYPE_CHECKING:
    from ..decoding.spans import CompletedFact
    from ..web.retrieval import FactHit
    from ..web.web import KnowledgeWeb

_TRIPLE = re.compile(r"^\s*<([^<>]*)>\s*<([^<>]*)>\s*<([^<>]*)>\s*\.?\s*$")


def bridge_entities(fact: str, question: str, limit: int = 2) -> list[str]:
    """The entities ``fact`` adds to ``question``: for a triple its subject and object not named
    in the question (object first: the chain goes on from what the fact found); for a statement
    its names (capitalized keywords) not in the question.

    >>> bridge_entities("<Edith Frank-Holländer> <country of citizenship> <Germany> .",
    ...                 "What is the official language of the country Edith Frank-Holländer is a citizen of?")
    ['Germany']
    """
    from ..eval.metrics import normalize_answer
    from ..web.keywords import extract_keywords

    asked = f" {normalize_answer(question)} "
    m = _TRIPLE.match(fact)
    if m:
        candidates = [m.group(3).strip(), m.group(1).strip()]
    else:
        candidates = [k for k in extract_keywords(fact, limit=20) if any(c.isupper() for c in k)]
    out: list[str] = []
    for entity in candidates:
        norm = normalize_answer(entity)
        if norm and f" {norm} " not in asked and norm not in {normalize_answer(e) for e in out}:
            out.append(entity)
    return out[:limit]


class ChainingTree:
    """The per-question tree over ``hits`` that grows as facts are stated (see the module
    docstring). ``hit(fact_id)`` is the web hit behind a fact of the tree, found by id."""

    def __init__(self, hits: Sequence[FactHit], tokenizer: Any, web: KnowledgeWeb | None, question: str, *,
                 max_hops: int = 3, k: int = 5, max_facts: int = 60) -> None:
        unique: dict[str, FactHit] = {}
        for h in hits:
            unique.setdefault(h.text, h)
        self._hits: list[FactHit] = list(unique.values())
        base = FactIndex.build([Fact.from_statement(h.text, h.source) for h in self._hits], tokenizer)
        self.index = GrowingFactIndex(base, tokenizer, max_facts=max_facts)
        self.web, self.question = web, question
        self.max_hops, self.k = max_hops, k
        self._texts = set(unique)
        self._searched: set[str] = set()
        self._hops: list[dict[str, Any]] = []
        self._taken = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self._hits)

    def hit(self, fact_id: int) -> FactHit | None:
        return self._hits[fact_id] if 0 <= fact_id < len(self._hits) else None

    def on_fact(self, done: CompletedFact) -> None:
        """Search the entities ``done`` adds and grow the tree with their facts (bounded)."""
        if self.web is None:
            return
        for entity in bridge_entities(done.text, self.question):
            with self._lock:
                if len(self._searched) >= self.max_hops or entity.casefold() in self._searched:
                    continue
                self._searched.add(entity.casefold())
            t = time.perf_counter()
            found = list({h.text: h for h in self.web.search(entity, self.k).hits
                          if h.text not in self._texts}.values())
            ids = self.index.grow(Fact.from_statement(h.text, h.source) for h in found) if found else []
            added = found[: len(ids)]
            with self._lock:
                # grow() keeps the order it was given and adds from the front, so ids align.
                self._hits.extend(added)
                self._texts.update(h.text for h in added)
                self._hops.append({"step": "hop", "fact": done.text, "entity": entity,
                                   "added": [h.text for h in added], "added_ids": [h.id for h in added],
                                   "seconds": round(time.perf_counter() - t, 4)})

    def take_hops(self) -> list[dict[str, Any]]:
        """Hop records written since the last call (for the trace, in order)."""
        with self._lock:
            new = self._hops[self._taken:]
            self._taken = len(self._hops)
        return new


class ChainGuard:
    """Ends a generation when a stated fact breaks away from the chain: it names no entity of the
    question and shares none with the facts before it (:func:`~.grounding.connected_prefix`).
    A small model made to write ``Fact:`` lines goes on stating whatever the tree offers once the
    facts it needs are said; those lines prove nothing and cost seconds each. Facts that stay on
    the chain are handed on to ``then`` (the hop search), so only the chain is followed.

    One sequence: with beam search, facts of different beams would mix (do not use it there).
    """

    def __init__(self, question: str, then: Callable[[CompletedFact], None] | None = None) -> None:
        self.question, self.then = question, then
        self.stated: list[str] = []
        self.broken = threading.Event()

    def on_fact(self, done: CompletedFact) -> None:
        from .grounding import connected_prefix

        if self.broken.is_set():
            return
        self.stated.append(done.text)
        if connected_prefix(self.question, self.stated) < len(self.stated):
            self.broken.set()
        elif self.then is not None:
            self.then(done)
