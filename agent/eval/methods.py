"""The answering methods an evaluation compares, one class each, all on the same loaded model.

| name | knowledge | decoding |
|---|---|---|
| ``llm-only`` | none: the ReFactX prompt and examples only | free |
| ``refactx`` | the KB fact tree, no retrieval | every ``Fact:`` line constrained to the KB |
| ``web-rag`` | the top ``k`` web facts in the prompt (``prompts/web-rag/``) | free; the ``Answer:`` line is parsed |
| ``agent`` | web retrieval, a plan, the listed facts read and stated (or a step over two options), then the KB | constrained: per-question tree, then the KB; answers checked |
| ``rcd`` / ``rcd-static`` | KAMEL: the relation's objects (or every relation's) as candidates | a trie of candidates, ``;`` between answers |
| ``vd`` | none (the RCD prompt) | free, split at ``;`` |
| ``majority`` | the relation's most frequent object on other rows | no model |
| ``kgd`` and its variants | the question's top passage chunks (``agent.eval.kgd``) | logits nudged towards the chunks |

Each method answers a batch of questions (``answer_batch``) and says, per question, the
prediction, whether generation finished (not truncated), the facts it stated or was given, and
its tokens. Adding a method is one class and one line in :data:`METHODS`. Methods with
``grounds = True`` state facts or are given them, and their answers are checked against them
(the grounded-answer rate, ``agent.eval.run``).

A question with a conversation history (``EvalQuestion.history``, the earlier turns): ``llm-only``
and ``refactx`` are given the whole conversation as messages (history, then the question);
``web-rag`` searches the web with the last question alone and lists the facts above the
conversation; the agent gets ``history=`` (it makes the follow-up standalone itself). The KGD and
set-answer methods read the question alone.

Example (not run: needs a model)::

    method = ReFactXMethod(generator)                    # a FactGenerator with a KB index
    [a.prediction for a in method.answer_batch(questions)]
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .questions import EvalQuestion

if TYPE_CHECKING:
    from ..pipeline import FactAgent
    from ..baselines.web_rag import ListedFactsReader
    from ..decoding import FactGenerator
    from ..baselines.rcd import AnswerSetGenerator
    from ..web.web import KnowledgeWeb


@dataclass
class MethodAnswer:
    """One method's answer to one question. ``finished`` is False when generation stopped
    before an ``Answer:`` line (truncated: not an answer). ``facts`` are the facts the method
    stated (constrained spans) or, for web-RAG, was given; ``extra`` holds what is particular
    to the method (the agent's steps in brief)."""

    prediction: str
    finished: bool
    text: str
    facts: list[dict[str, Any]]
    tokens: int
    prompt_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {"prediction": self.prediction, "truncated": not self.finished, "text": self.text,
               "facts": self.facts, "tokens": self.tokens, "prompt_tokens": self.prompt_tokens}
        out.update(self.extra)
        return out


class EvalMethod(Protocol):
    """What the evaluation runner needs of a method."""

    name: str
    batched: bool  # False: answer_batch is called with one question at a time

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]: ...


def conversation(question: EvalQuestion) -> str | list[dict[str, str]]:
    """The question as a prompt: its text, or the messages of its history then the question."""
    if not question.history:
        return question.text
    return [*({"role": t["role"], "content": t["content"]} for t in question.history),
            {"role": "user", "content": question.text}]


def _from_answers(answers: Sequence[Any], facts: Sequence[list[dict[str, Any]]] | None = None) -> list[MethodAnswer]:
    out = []
    for i, a in enumerate(answers):
        stated = [f.as_dict() for f in a.facts] if facts is None else facts[i]
        out.append(MethodAnswer(a.answer, not a.truncated, a.text, stated, a.tokens, a.prompt_tokens))
    return out


class LLMOnlyMethod:
    """The ReFactX prompt on the same model, without the constraint (and without any facts)."""

    name = "llm-only"
    batched = True

    def __init__(self, generator: FactGenerator) -> None:
        self.generator = generator

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        return _from_answers(self.generator.answer_batch([conversation(q) for q in questions], constrained=False))


class ReFactXMethod:
    """ReFactX: every ``Fact:`` line constrained to the generator's KB index; nothing retrieved.
    A question whose facts break away from its chain is answered again from the connected ones
    (:func:`~agent.pipeline.chaining.answer_on_chain`), as the product's constrained generation is."""

    name = "refactx"
    batched = True
    grounds = True

    def __init__(self, generator: FactGenerator) -> None:
        if generator.index is None:
            raise ValueError("refactx needs a generator with a knowledge-base index")
        self.generator = generator

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        # lazy: agent.pipeline.chaining pulls numpy (the CLI imports this module at start)
        from ..pipeline.chaining import answer_on_chain

        return _from_answers(answer_on_chain(self.generator, [conversation(q) for q in questions], constrained=True))


class WebRAGMethod:
    """Retrieve the top ``k`` facts from the web, list them in the prompt, generate freely
    (:class:`~agent.baselines.web_rag.ListedFactsReader`: the web-RAG prompt, whose system text
    the facts are appended to, ``prompts/web-rag/facts.txt``)."""

    name = "web-rag"
    batched = True
    grounds = True

    def __init__(self, reader: ListedFactsReader, web: KnowledgeWeb, k: int = 10) -> None:
        self.reader, self.web, self.k = reader, web, k

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        hits = [self.web.search(q.text, self.k).hits for q in questions]
        answers = self.reader.read_batch([conversation(q) for q in questions],
                                         [[h.text for h in found] for found in hits])
        given = [[{"id": h.id, "text": h.text, "source": h.source, "score": h.score} for h in found]
                 for found in hits]
        return _from_answers(answers, given)


class AgentMethod:
    """The whole agent pipeline (:class:`~agent.pipeline.FactAgent`), one question at a time."""

    name = "agent"
    batched = False
    grounds = True

    def __init__(self, agent: FactAgent) -> None:
        self.agent = agent

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        return [self._answer(q) for q in questions]

    def _answer(self, question: EvalQuestion) -> MethodAnswer:
        from ..pipeline.grounding import holds_answer

        reply = self.agent.answer(question.text, history=list(question.history))
        trace = reply.trace
        attempts = [s for s in trace["steps"] if s["step"] == "generate"]
        retrieved = {h["id"]: h for s in trace["steps"] if s["step"] == "retrieve" for h in s["hits"]}
        chosen = [s["selected"] for s in trace["steps"] if s["step"] == "rerank"]
        extra = {
            **({"grounded": trace["grounded"]} if isinstance(trace.get("grounded"), bool) else {}),
            "supported": trace["supported"],
            "withheld": trace.get("withheld"),
            "attempts": [{"tree": a["tree"], "answer": a["answer"], "facts": len(a["facts"]),
                          # its answer in a fact it stated (a stated chain that holds it)
                          "in_facts": any(holds_answer(f["text"], a["answer"]) for f in a["facts"])
                          if a["answer"] else False,
                          "tokens": a["tokens"], "grounded": bool(a.get("grounded")),
                          **({"continues": a["continues"]} if "continues" in a else {}),
                          **({"hop": a["hop"]} if "hop" in a else {}),
                          **({"kind": a["kind"]} if "kind" in a else {}),
                          **({"check": a["check"]} if "check" in a else {}),
                          "how": (a.get("grounding") or {}).get("how", "")}
                         for a in attempts],
            "plan": trace.get("plan") or {},
            "subqueries": trace["subqueries"],
            "reranked": [{"id": i, "text": retrieved[i]["text"]} for i in (chosen[-1] if chosen else [])
                         if i in retrieved],
            "timings": trace["timings"],
        }
        return MethodAnswer(reply.answer, not trace["truncated"], reply.text, [dict(f) for f in reply.facts],
                            trace["tokens"]["generated"], trace["tokens"]["prompt"], extra)


class _SetAnswers:
    """Shared by the set-answer methods: answers joined by ``; `` as the prediction, the set in
    ``extra["answers"]`` (scored by :func:`agent.eval.metrics.set_score`)."""

    @staticmethod
    def _answers(results: Sequence[Any]) -> list[MethodAnswer]:
        return [MethodAnswer("; ".join(r.answers), r.finished, r.text, [], r.tokens, r.prompt_tokens,
                             {"answers": r.answers}) for r in results]


class RCDMethod(_SetAnswers):
    """Retrieval-constrained decoding: the answers are written from a trie of the question's
    candidates, every object of its relation in the KB (``static``: one trie over the objects
    of every relation, the paper's ablation)."""

    batched = True

    def __init__(self, generator: AnswerSetGenerator, candidates: dict[str, list[str]], *,
                 static: bool = False) -> None:
        # lazy: pulls torch (the CLI imports this module at start)
        from ..baselines.rcd import AnswerTrie

        self.generator, self.candidates, self.static = generator, candidates, static
        self.name = "rcd-static" if static else "rcd"
        self._build = lambda names: AnswerTrie.build(names, generator.tokenizer)
        self._tries: dict[str, Any] = {}

    def trie(self, relation: str) -> Any:
        key = "*" if self.static else relation
        if key not in self._tries:
            if self.static:
                names = [n for objs in self.candidates.values() for n in objs]
            elif relation in self.candidates:
                names = self.candidates[relation]
            else:
                raise ValueError(f"no candidate answers for relation {relation}")
            self._tries[key] = self._build(names)
        return self._tries[key]

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        tries = [self.trie(q.meta["relation"]) for q in questions]
        return self._answers(self.generator.answer_batch([q.text for q in questions], tries))


class VanillaSetMethod(_SetAnswers):
    """Vanilla decoding (VD): the RCD prompt, the answer line written freely and split at ``;``."""

    name = "vd"
    batched = True

    def __init__(self, generator: AnswerSetGenerator) -> None:
        self.generator = generator

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        return self._answers(self.generator.answer_batch([q.text for q in questions], None))


class MajorityMethod:
    """The majority baseline: each question gets its relation's most frequent object, counted
    on rows the questions do not come from. No model."""

    name = "majority"
    batched = True

    def __init__(self, majority: dict[str, str]) -> None:
        self.majority = majority

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        out = []
        for q in questions:
            guess = self.majority.get(q.meta["relation"], "")
            out.append(MethodAnswer(guess, True, guess, [], 0, 0, {"answers": [guess] if guess else []}))
        return out


# The methods ``factweave eval --method`` offers, in the order they are run and reported.
METHODS: dict[str, str] = {
    "llm-only": "same model and prompt, no facts, no constraint",
    "refactx": "constrained to the KB fact tree, no retrieval",
    "web-rag": "top-k web facts in the prompt, no constraint",
    "agent": "retrieve, plan; read the listed facts and state them constrained (or compute a step over two "
             "options), then the KB; every answer checked",
    "rcd": "KAMEL only: answers from a trie of the relation's objects, several split by ';'",
    "rcd-static": "KAMEL only: the same from one trie over every relation's objects",
    "vd": "KAMEL only: the RCD prompt without the constraint",
    "majority": "KAMEL only: the relation's most frequent object (no model)",
    "kgd": "knowledge-guided decoding: the question's top passage chunks (KAMEL: its web facts) in the prompt, "
           "decoding nudged towards them by similarity",
    "kgd-nli": "the same with NLI entailment rewards (--nli-model, else the local model judges)",
    "kgd-guide": "KGD by similarity with the chunks guiding decoding only, not in the prompt",
    "chunks-greedy": "KGD baseline: the same chunks in the prompt, greedy",
    "chunks-beam": "KGD baseline: the same chunks in the prompt, beam search (4 beams)",
    "greedy": "KGD baseline: the short-answer prompt, no chunks, greedy",
    "beam": "KGD baseline: the short-answer prompt, no chunks, beam search (4 beams)",
}
# Methods that need KAMEL's relations (their candidates are a relation's objects).
KAMEL_ONLY = frozenset({"rcd", "rcd-static", "vd", "majority"})
# Run only when asked for: KGD's ablations and baselines.
OPT_IN = frozenset({"kgd-nli", "kgd-guide", "chunks-greedy", "chunks-beam", "greedy", "beam"})


# The methods that take a conversation's history (the others would read the follow-up alone).
CONVERSATIONAL = ("llm-only", "refactx", "web-rag", "agent")


def default_methods(dataset: str) -> tuple[str, ...]:
    """The methods run when none is named: every one that applies to ``dataset`` except KGD's
    ablations and baselines (:data:`OPT_IN`), in :data:`METHODS` order; for conversations
    (``kamel-chat``) the ones that take a history (:data:`CONVERSATIONAL`)."""
    if dataset == "kamel-chat":
        return CONVERSATIONAL
    return tuple(m for m in METHODS if m not in OPT_IN and (dataset == "kamel" or m not in KAMEL_ONLY))
