"""The local model reading which relation a question asks, among the knowledge's own labels.

Sentence embeddings read a question's relation well where its words are the label's ("What is
the voice type of X?") and badly where a few words decide ("Where did X die?" embeds closer to
``date of death`` than to ``place of death``; "What country is X located in?" closer to
``located in/on physical feature`` than to ``country``). The model reads those: after a few
examples written for this project (``prompts/check/relation.txt``, other wordings than any
set's), each candidate label is scored by the mean log-probability of its tokens as the
relation the question asks; the best scored is the model's reading. It prefers general labels
(``languages spoken, written or signed`` over ``writing language``), so it is a second reader
beside the embeddings (:class:`~agent.pipeline.asked.RelationMatcher`), not a replacement.

The examples' part of the prompt is read once and its key/value cache kept; the question and the
candidates' own tokens in one batch on transformers (on llama.cpp, stepping one sequence, each
candidate read the examples again: 0.7 s a label, against well under 0.1 s here).

Example::

    loaded = load_model("qwen2.5-coder-0.5b")
    reader = RelationReader(loaded.model, loaded.tokenizer)
    reader.best("Where did X die?", ["date of death", "place of death", "place of burial"])
    # "place of death"
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from string import Template
from typing import Any

import torch

from ..models import cache_keyword
from ..prompts import read_prompt

RELATION_PROMPT = "check/relation.txt"


class RelationReader:
    """``scores(question, labels)``: the mean log-probability of each label's tokens as the
    relation ``question`` asks (its names put as "X"); ``best(...)``: the highest scored."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        template = Template(read_prompt(RELATION_PROMPT))
        whole = template.substitute(question="\ue000")
        self._prefix, self._middle = whole.split("\ue000")
        self._lock = threading.Lock()  # one reading at a time (the kept cache)
        self._head_ids: list[int] | None = None
        self._cache: tuple[list[int], Any] | None = None  # the examples' tokens, their key/value cache

    def _head(self) -> list[int]:
        """The examples' tokens (tokenized once)."""
        if self._head_ids is None:
            self._head_ids = self._ids(self._prefix)
        return self._head_ids

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def scores(self, question: str, labels: Sequence[str]) -> list[float]:
        if not labels:
            return []
        text = self._prefix + " ".join(question.split()) + self._middle
        head, whole = self._head(), self._ids(text)
        if whole[: len(head)] != head:  # the question's first word joined the examples' last token
            head = []
        asked = whole[len(head):]
        tails = [self._ids(" " + label) for label in labels]
        with self._lock:
            rows = self._logits(head, asked, tails)
        out = []
        for tail, logits in zip(tails, rows):
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            out.append(float(sum(logprobs[i, t] for i, t in enumerate(tail)) / len(tail)))
        return out

    def _logits(self, head: list[int], asked: list[int], tails: list[list[int]]) -> list[torch.Tensor]:
        """The logits before each tail token: the examples' key/value cache (kept), the question
        read once on it, then every candidate's tail in one right-padded batch."""
        model = self.model
        device = getattr(model, "device", torch.device("cpu"))
        key = cache_keyword(model)

        def run(ids: list[int], cache: Any) -> tuple[torch.Tensor, Any]:
            out = model.get_decoder()(input_ids=torch.tensor([ids], device=device), use_cache=True,
                                      **({key: cache} if cache is not None else {}))
            return out.last_hidden_state[0, -1], getattr(out, "cache", None) or out.past_key_values

        with torch.inference_mode():
            if head and (self._cache is None or self._cache[0] != head):
                self._cache = (head, run(head, None)[1])
            last, cache = run(asked, copy.deepcopy(self._cache[1]) if head else None)
            first = model.get_output_embeddings()(last).float().cpu().reshape(1, -1)
            rests = [t[:-1] for t in tails]
            if not any(rests):
                return [first for _ in tails]
            start, width = len(head) + len(asked), max(len(r) for r in rests)
            cache.batch_repeat_interleave(len(tails))
            pad = self.tokenizer.pad_token_id or 0
            ids = torch.full((len(tails), width), pad, dtype=torch.long)
            mask = torch.zeros((len(tails), start + width), dtype=torch.long)
            mask[:, :start] = 1
            for row, rest in enumerate(rests):
                ids[row, : len(rest)] = torch.tensor(rest, dtype=torch.long)
                mask[row, start: start + len(rest)] = 1
            positions = start + torch.arange(width).expand(len(tails), -1)
            hidden = model.get_decoder()(input_ids=ids.to(device), attention_mask=mask.to(device),
                                         position_ids=positions.to(device), use_cache=True,
                                         **{key: cache}).last_hidden_state
            return [torch.cat([first, model.get_output_embeddings()(hidden[row, : len(rest)]).float().cpu()])
                    for row, rest in enumerate(rests)]

    @classmethod
    def of(cls, model: Any, tokenizer: Any) -> RelationReader | None:
        """A reader on ``model`` when it is a transformers causal LM, else None."""
        if not hasattr(model, "get_decoder") or not hasattr(model, "get_output_embeddings"):
            return None
        return cls(model, tokenizer)

    def best(self, question: str, labels: Sequence[str]) -> str:
        scored = self.scores(question, labels)
        return labels[max(range(len(labels)), key=scored.__getitem__)] if labels else ""
