"""Answering from listed facts: the web-RAG prompt, and the agent's evidence attempt.

The web-RAG method lists the retrieved facts in the prompt (``prompts/web-rag/``) and lets the
model answer freely. The agent uses the same reading as a *candidate* when its constrained
attempts on the per-question tree gave no grounded answer: the model reads the listed facts and
answers; the candidate is kept only when a connected chain of the listed facts contains it
(:func:`~.grounding.ground`, as if the listed facts had been stated) and a fact holding it says
what the question asks; then the model states that chain's facts, constrained to a tree of those
facts alone, and the candidate stands when the facts it stated hold it (:func:`reading_holds`).
Free reading finds the answer among facts a small model does not pick on its own; constrained
stating proves it. Nothing stands that was not stated.

Example::

    reader = ListedFactsReader(generator)           # the agent's FactGenerator
    candidate = reader.read("Where is Toad Hall?", ["Toad Hall is a hall of the ANU in Canberra."])
    support = evidence_chain("Where is Toad Hall?", candidate.answer, listed_texts)
"""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from string import Template
from typing import TYPE_CHECKING

from ..prompts import FewShotPrompt, read_prompt
from .comparison import asks_comparison
from .grounding import Grounding, ground, holds_answer, names_question_entity, says_what_is_asked

if TYPE_CHECKING:
    from ..decoding import FactGenerator
    from ..decoding.generate import Answer

LISTED_FACTS_PROMPT = "web-rag"
# The agent's reading: the candidate answer is one short line.
READ_TOKENS = 64  # as measured (the evaluation runs of d1c5d5f)


class ListedFactsReader:
    """The model answering from facts listed in its prompt (the web-RAG prompt), unconstrained.

    ``generator``'s model and tokenizer are shared; no index (nothing constrained).
    """

    def __init__(self, generator: FactGenerator, *, max_new_tokens: int | None = None) -> None:
        from ..decoding import FactGenerator

        self.generator = FactGenerator(generator.model, generator.tokenizer, None,
                                       prompt=FewShotPrompt.load(LISTED_FACTS_PROMPT), beams=generator.beams,
                                       max_new_tokens=max_new_tokens or generator.max_new_tokens,
                                       prefix_cache=False,  # the listed facts open its prompt
                                       vocab=generator.vocab)
        self.facts_template = Template(read_prompt(f"{LISTED_FACTS_PROMPT}/facts.txt"))

    def conversation(self, question: str | Sequence[Mapping[str, str]], facts: Sequence[str]) -> list[dict[str, str]]:
        """The messages for ``question`` (a text, or the conversation's messages ending with it)
        with ``facts`` listed, numbered, best first, in a system message above them."""
        listed = "\n".join(f"[{i}] {text}" for i, text in enumerate(facts, 1)) or "(none)"
        turns = [{"role": "user", "content": question}] if isinstance(question, str) else list(question)
        return [{"role": "system", "content": self.facts_template.safe_substitute(facts=listed)}, *turns]

    def read_batch(self, questions: Sequence[str | Sequence[Mapping[str, str]]],
                   facts: Sequence[Sequence[str]], *, cancel: threading.Event | None = None) -> list[Answer]:
        """Each question answered from its listed facts; ``cancel``: set it to stop early."""
        prompts = [self.conversation(q, f) for q, f in zip(questions, facts)]
        return self.generator.answer_batch(prompts, constrained=False, cancel=cancel)

    def read(self, question: str, facts: Sequence[str], *, cancel: threading.Event | None = None) -> Answer:
        return self.read_batch([question], [facts], cancel=cancel)[0]


def reading_holds(question: str, reading: str, stated: Sequence[str]) -> Grounding:
    """Whether the ``stated`` facts ground the reading's answer: grounded, and (unless computed
    from them: a comparison, a difference, a shared value for "yes") a stated fact that holds it
    says what the question asks."""
    held = ground(question, reading, stated)
    if not held.grounded or held.computed:
        return held
    if any(holds_answer(f, reading) and says_what_is_asked(question, f) for f in stated):
        return held
    return Grounding(False, "no stated fact that holds it says what the question asks", held.facts)


def evidence_chain(question: str, answer: str, listed: Sequence[str]) -> tuple[Grounding, list[int]]:
    """Whether ``answer`` is grounded in a connected chain of the ``listed`` facts, and the
    fewest facts to state for it (indices into ``listed``, in listed order): the chain's facts
    that hold the answer and say what the question asks (:func:`~.grounding.says_what_is_asked`;
    none: not kept), if they ground it alone; else those and the facts that name an entity of
    the question; else the whole chain (a bridge fact between them is needed)."""
    check = ground(question, answer, listed)
    if not check.grounded:
        return check, []
    chain = list(check.facts)
    if check.short and asks_comparison(question):  # a comparison: the facts its dates came from
        return check, chain
    holding = [i for i in chain if holds_answer(listed[i], answer)]
    if holding:
        # "Mira Quell" is in the station's founding fact, but the question asks its director.
        holding = [i for i in holding if says_what_is_asked(question, listed[i])]
        if not holding:
            return Grounding(False, "no listed fact that holds it says what the question asks", check.facts), []
    anchored = [i for i in chain if i in holding or names_question_entity(question, listed[i])]
    for facts in (holding, anchored):
        if facts and ground(question, answer, [listed[i] for i in facts]).grounded:
            return check, facts
    return check, chain
