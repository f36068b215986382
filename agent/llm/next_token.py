"""Next-token logits after a batch of prompts: what a scoring judge or re-ranker reads.

One forward pass per batch (no generation). When the prompts share an opening, the opening runs
once and its key/value cache serves each prompt's own rest (right-padded, so real tokens never
see the pads after them); the opening stands in for the prompt's first tokens only when it
tokenizes the same alone as inside the prompt, else the whole prompts run (left-padded, with
positions counted from each row's first real token).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from ..models import LoadedModel, cache_keyword, encode_padded


class NextTokenLogits:
    """``logits(prompts, prefix)``: the next-token logits after each prompt, one row each.

    Example (not run: needs a model)::

        scorer = NextTokenLogits(load_model("qwen2.5-coder-0.5b"))
        rows = scorer.logits(["Q: 2+2? A:", "Q: 3+3? A:"], prefix="Q: ")
    """

    def __init__(self, loaded: LoadedModel, *, batch_size: int = 16) -> None:
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.batch_size = batch_size
        self._cached: tuple[str, Any] | None = None  # (prefix text, its key/value cache)

    def ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prefix_fits(self, prefix: str, sample: str) -> bool:
        """Whether ``prefix`` tokenizes the same alone as at the start of ``sample``."""
        head, whole = self.ids(prefix), self.ids(sample)
        return bool(head) and whole[: len(head)] == head and whole[len(head):] == self.ids(sample[len(prefix):])

    def logits(self, prompts: Sequence[str], prefix: str = "") -> torch.Tensor:
        """``(len(prompts), vocab)`` float logits; ``prefix`` (optional) starts every prompt."""
        rows = []
        use_cache = bool(prefix) and all(p.startswith(prefix) for p in prompts)
        for first in range(0, len(prompts), self.batch_size):
            batch = list(prompts[first : first + self.batch_size])
            rows.append(self._cached_logits(prefix, batch) if use_cache else self._whole_logits(batch))
        return torch.cat(rows) if rows else torch.empty(0)

    def _decoder(self, **inputs: Any) -> Any:
        """The model without its output layer: the vocabulary projection of every position (151,936
        logits per token for Qwen) would cost more than the rest; only the last one is needed."""
        return self.model.get_decoder()(**inputs)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.get_output_embeddings()(hidden).float()

    def _device(self) -> torch.device:
        return getattr(self.model, "device", torch.device("cpu"))

    def _whole_logits(self, prompts: list[str]) -> torch.Tensor:
        enc = encode_padded(self.tokenizer, prompts, "left")
        mask = enc["attention_mask"].to(self._device())
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            hidden = self._decoder(input_ids=enc["input_ids"].to(self._device()), attention_mask=mask,
                                   position_ids=positions).last_hidden_state
            return self._head(hidden[:, -1])

    def _cached_logits(self, prefix: str, prompts: list[str]) -> torch.Tensor:
        device = self._device()
        with torch.inference_mode():
            if self._cached is None or self._cached[0] != prefix:
                ids = torch.tensor([self.ids(prefix)], device=device)
                out = self.model(input_ids=ids, use_cache=True)
                self._cached = (prefix, getattr(out, "cache", None) or out.past_key_values)
            enc = encode_padded(self.tokenizer, [p[len(prefix):] for p in prompts], "right")
            cache = copy.deepcopy(self._cached[1])
            cache.batch_repeat_interleave(len(prompts))
            start = cache.get_seq_length()
            suffix_mask = enc["attention_mask"].to(device)
            mask = torch.cat([torch.ones(len(prompts), start, dtype=suffix_mask.dtype, device=device), suffix_mask], 1)
            positions = start + torch.arange(suffix_mask.shape[1], device=device).expand(len(prompts), -1)
            hidden = self._decoder(input_ids=enc["input_ids"].to(device), attention_mask=mask, position_ids=positions,
                                   use_cache=True, **{cache_keyword(self.model): cache}).last_hidden_state
            last = suffix_mask.sum(1) - 1
            return self._head(hidden[torch.arange(len(prompts), device=device), last])
