"""Question -> knowledge-web facts -> re-ranked facts -> constrained answer, with a trace.

The fact tree used while generating (``tree``):

- ``"kb"``: the generator's own index (the whole knowledge base);
- ``"question"``: a tree built for this question over the re-ranked facts (about a millisecond
  for a few dozen facts), so every ``Fact:`` line is one of the facts found for it;
- ``"both"``: the per-question tree first; when that answer says "I don't know." or cites no
  fact, the whole knowledge base is tried.

The trace is plain data (JSON-serializable): retrieved facts with score parts and provenance,
the re-ranker's question type and choice (or fallback), every generation attempt with its fact
spans, the answer, and timings per step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..index import FactIndex
from ..knowledge.facts import Fact

if TYPE_CHECKING:
    from ..decoding import FactGenerator
    from ..rerank import Reranker
    from ..web.retrieval import FactHit
    from ..web.web import KnowledgeWeb

TREE_MODES = ("kb", "question", "both")
DONT_KNOW = "i don't know"


@dataclass
class AgentAnswer:
    """The answer, the generated text, its constrained fact spans, and the trace."""

    question: str
    answer: str
    text: str
    facts: list[dict[str, Any]]
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def knows(self) -> bool:
        return knows(self.answer)

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "text": self.text, "facts": self.facts,
                "trace": self.trace}


class FactAgent:
    """Answer questions from facts that exist, and say which.

    Example::

        agent = FactAgent(open_generator("qwen2.5-coder-0.5b"), KnowledgeWeb.open("my-web"),
                          Reranker(chat_client_from_env()), tree="both")
        reply = agent.answer("Who founded Zorblax Station?")
        reply.answer, [f["text"] for f in reply.facts], reply.trace["steps"]
    """

    def __init__(self, generator: FactGenerator, web: KnowledgeWeb | None = None,
                 reranker: Reranker | None = None, *, tree: str = "both", k: int = 10) -> None:
        if tree not in TREE_MODES:
            raise ValueError(f"tree must be one of {', '.join(TREE_MODES)}, not {tree!r}")
        if tree != "kb" and web is None:
            raise ValueError(f"tree={tree!r} builds a tree from retrieved facts: give a knowledge web")
        if tree != "question" and generator.index is None:
            raise ValueError(f"tree={tree!r} needs the generator's knowledge-base index")
        self.generator, self.web, self.reranker = generator, web, reranker
        self.tree, self.k = tree, k

    def answer(self, question: str, *, beams: int | None = None) -> AgentAnswer:
        steps: dict[str, Any] = {}
        timings: dict[str, float] = {}
        chosen: list[FactHit] = []
        if self.web is not None:
            t = time.perf_counter()
            hits = self.web.search(question, self.k).hits
            timings["retrieve_s"] = round(time.perf_counter() - t, 4)
            steps["retrieved"] = [h.as_dict() for h in hits]
            chosen = hits
            if self.reranker is not None and hits:
                from ..rerank import Candidate

                t = time.perf_counter()
                picked = self.reranker.rerank(question, [Candidate(h.id, h.text, h.score) for h in hits])
                timings["rerank_s"] = round(time.perf_counter() - t, 4)
                by_id = {h.id: h for h in hits}
                chosen = [by_id[c.id] for c in picked.selected]
                steps["rerank"] = {"question_type": picked.question_type, "used_fallback": picked.used_fallback,
                                   "reason": picked.reason, "selected": [c.id for c in picked.selected]}

        attempts = []
        result = None
        if self.tree in ("question", "both") and chosen:
            t = time.perf_counter()
            small = FactIndex.build([Fact.from_statement(h.text, h.source) for h in chosen],
                                    self.generator.tokenizer)
            timings["tree_build_s"] = round(time.perf_counter() - t, 4)
            result = self._generate(question, beams, small, "question", attempts)
            provenance = {h.text: h.as_dict() for h in chosen}
            for span in attempts[-1]["facts"]:
                hit = provenance.get(span["text"], {})
                span["web_fact_id"], span["provenance"] = hit.get("id"), hit.get("provenance", {})
        if self.tree != "question" and (result is None or not knows(result.answer) or not result.facts):
            result = self._generate(question, beams, None, "kb", attempts)
        if result is None:  # tree="question" and nothing retrieved: nothing to constrain to
            attempts.append({"tree": "question", "skipped": "no fact retrieved"})
            last = {"answer": "I don't know.", "text": "", "facts": []}
        else:
            last = attempts[-1]
        timings["generate_s"] = round(sum(a.get("timings", {}).get("generate_s", 0.0) for a in attempts), 4)
        steps["attempts"] = attempts
        trace = {"question": question, "tree": self.tree, "steps": steps, "answer": last["answer"],
                 "timings": timings, "tokens": sum(a.get("tokens", 0) for a in attempts)}
        return AgentAnswer(question, last["answer"], last["text"], last["facts"], trace)

    def _generate(self, question: str, beams: int | None, index: FactIndex | None, tree: str,
                  attempts: list[dict[str, Any]]):
        result = self.generator.answer(question, beams=beams, index=index)
        attempt = {"tree": tree, "answer": result.answer, "text": result.text,
                   "facts": [f.as_dict() for f in result.facts], "truncated": result.truncated,
                   "tokens": result.tokens, "timings": result.timings}
        if index is not None:
            attempt["tree_facts"] = len(index.facts)
        attempts.append(attempt)
        return result


def knows(answer: str) -> bool:
    """Whether ``answer`` is an answer, not empty or "I don't know."."""
    return bool(answer.strip()) and not answer.strip().lower().startswith(DONT_KNOW)
