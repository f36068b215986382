"""Answering from listed facts: the web-RAG baseline's reader.

The web-RAG method lists the retrieved facts in the prompt (``prompts/web-rag/``) and lets the
model answer freely. (The agent reads listed facts too, but states the ones it uses under the
fact constraint in the same reply: :mod:`agent.pipeline.replies`, ``prompts/agent/``.) A baseline
the evaluation alone uses (:class:`~agent.eval.methods.WebRAGMethod`), not part of the agent.

Example (not run: needs a model)::

    reader = ListedFactsReader(generator)           # a FactGenerator on the same model
    answer = reader.read("Where is Toad Hall?", ["Toad Hall is a hall of the ANU in Canberra."])
"""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from string import Template
from typing import TYPE_CHECKING

from ..prompts import FewShotPrompt, read_prompt

if TYPE_CHECKING:
    from ..decoding import FactGenerator
    from ..decoding.generate import Answer

LISTED_FACTS_PROMPT = "web-rag"


class ListedFactsReader:
    """The model answering from facts listed in its prompt (the web-RAG prompt), unconstrained.

    ``generator``'s model and tokenizer are shared; no index (nothing constrained).
    """

    def __init__(self, generator: FactGenerator, *, max_new_tokens: int | None = None) -> None:
        # lazy: agent.decoding pulls torch (this module is imported without it)
        from ..decoding import FactGenerator

        self.generator = FactGenerator(generator.model, generator.tokenizer, None,
                                       prompt=FewShotPrompt.load(LISTED_FACTS_PROMPT), beams=generator.beams,
                                       max_new_tokens=max_new_tokens or generator.max_new_tokens,
                                       prefix_cache=False,  # the listed facts open its prompt
                                       vocab=generator.vocab, steps=generator.steps)
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
