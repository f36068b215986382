"""The scoring re-ranker: each candidate fact gets a relevance log-probability from the local model.

The FCKW re-ranker asks a chat model to *write* the numbers of the facts it picks; a small local
model does that badly (qwen2.5-coder-0.5b kept one fact in 28 of 30 PopQA questions and dropped
the gold one in 9) and slowly (a generation per question). Scoring instead: for each candidate,
the prompt ``prompts/rerank/score.txt`` (question, fact, "Answer Yes or No.") in the model's chat
template, and the score is log P("Yes") - log P("No") for the reply's first token. The question's
part of the prompt runs once and its key/value cache serves every fact (:class:`NextTokenLogits`),
so the whole list costs one batched forward pass over the facts' own tokens. Nothing is dropped:
the candidates come back reordered, best first (ties keep retrieval order), with their scores.

Example (not run: needs a model)::

    reranker = ScoringReranker.local("qwen2.5-coder-0.5b")
    ordered = reranker.rerank("Where was Mira Quell born?", hits)   # the same hits, best first
"""
from __future__ import annotations

from collections.abc import Sequence
from string import Template
from typing import TypeVar

import torch

from ..errors import ModelError
from ..llm.next_token import NextTokenLogits
from ..models import DEFAULT_MODEL, LoadedModel, load_model
from ..prompts import read_prompt
from .reranker import FactLike

F = TypeVar("F", bound=FactLike)
SCORE_PROMPT = "rerank/score.txt"
_FACT_MARK = "\ue000"


class ScoringReranker:
    """Reorders candidate facts by the local model's log P(Yes) - log P(No) that a fact helps."""

    def __init__(self, loaded: LoadedModel, *, prompt: str = SCORE_PROMPT, batch_size: int = 16) -> None:
        self.loaded = loaded
        self.name = loaded.name
        self.template = Template(read_prompt(prompt))
        self.next_token = NextTokenLogits(loaded, batch_size=batch_size)
        self.yes, self.no = self._answer_ids()

    @classmethod
    def local(cls, model: str | None = None) -> ScoringReranker:
        """The re-ranker on a preset, folder or Hub id (default: the settings' model)."""
        if model is None:
            model = DEFAULT_MODEL
        return cls(load_model(model))

    def _answer_ids(self) -> tuple[int, int]:
        yes, no = (self.next_token.ids(word)[0] for word in ("Yes", "No"))
        if yes == no:
            raise ModelError(f"{self.name}: 'Yes' and 'No' start with the same token; the scoring re-ranker "
                             "cannot tell them apart")
        return yes, no

    def render(self, question: str, fact: str) -> str:
        """The whole prompt for one (question, fact) pair, in the model's chat template."""
        content = self.template.substitute(question=" ".join(question.split()), fact=" ".join(fact.split()))
        tokenizer = self.loaded.tokenizer
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                 add_generation_prompt=True)
        return f"{content}\nAnswer:"

    def _prefix(self, question: str) -> str:
        """The prompt up to the fact (after the word before it), when it tokenizes the same alone
        (else ``""``): the part every fact shares."""
        probe = self.render(question, _FACT_MARK)
        cut = probe.index(_FACT_MARK)
        while cut and probe[cut - 1].isspace():  # tokenizers join a space to the word after it
            cut -= 1
        prefix = probe[:cut]
        return prefix if cut and self.next_token.prefix_fits(prefix, self.render(question, "A fact.")) else ""

    def scores(self, question: str, facts: Sequence[str]) -> list[float]:
        """log P(Yes) - log P(No) for each fact, in order."""
        if not facts:
            return []
        logits = self.next_token.logits([self.render(question, f) for f in facts], self._prefix(question))
        logprobs = torch.log_softmax(logits, dim=-1)
        return (logprobs[:, self.yes] - logprobs[:, self.no]).tolist()

    def rerank(self, question: str, candidates: Sequence[F]) -> list[F]:
        """The candidates, best-scored first; equal scores keep their given order."""
        scored = self.scores(question, [c.text for c in candidates])
        order = sorted(range(len(candidates)), key=lambda i: (-scored[i], i))
        return [candidates[i] for i in order]
