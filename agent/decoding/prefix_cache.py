"""The key/value cache of the prompt's fixed start, prefilled once per generator and reused.

Every question's prompt begins with the same tokens: the system prompt and the worked examples
(357 of the 369 prompt tokens of "Where was Laurie Graff born?" with qwen2.5-coder's chat
template). Prefilling them once and giving each generation its own copy of their key/value cache
(the public ``past_key_values`` input of transformers' ``generate``) means a question pays only
for its own tokens. A causal model's cache of a token sequence depends on those tokens alone,
so the cache is used exactly when the prompt's token ids start with the cached ones (checked on
every call); the greedy tokens are the same as without it (``tests/test_prefix_cache.py``).
The time saved is measured in ``benchmarks/agent_latency.py``.

It serves one prompt at a time, without beams: a batch is padded on the left, which moves the
fixed start, and beam search grows its own cache.

Example (not run: needs a model)::

    cache = PrefixCache(model, tokenizer, generator.render)
    past, cached = cache.lookup(input_ids[0].tolist())   # (a private copy, 357) or (None, 0)
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..models import cache_keyword

# Questions that share nothing after the prompt's fixed start: their prompts' common token
# prefix is that start. One is a plain question, the other one with facts listed above it
# (the listed-facts prompts): the start ends where the question's message begins, so both
# kinds of prompt find it.
_PROBES = ("Question: Where was Ada born?", "Facts:\n[1] 1 + 1 = 2\nQuestion: 1 + 1 = ?")


def fixed_start(encode: Callable[[str], list[int]], render: Callable[[str], str]) -> tuple[int, ...]:
    """The token ids every prompt ``render`` makes starts with (empty when they share none)."""
    first, second = (encode(render(q)) for q in _PROBES)
    n = 0
    while n < min(len(first), len(second)) and first[n] == second[n]:
        n += 1
    return tuple(first[:n])


class PrefixCache:
    """The cache of the tokens every prompt ``render`` makes starts with.

    ``render(question)`` is the full prompt text for a question; ``encode(text)`` its token ids
    (default: the tokenizer without special tokens, as generation encodes prompts). Built on
    first use; if the model cannot build one (an unusual cache type), it stays off.
    """

    def __init__(self, model: Any, tokenizer: Any, render: Callable[[str], str], *,
                 encode: Callable[[str], list[int]] | None = None) -> None:
        self.model, self.tokenizer, self.render = model, tokenizer, render
        self._encode = encode or (lambda text: tokenizer(text, add_special_tokens=False)["input_ids"])
        self._lock = threading.Lock()
        self._ids: tuple[int, ...] | None = None
        self._cache: Any | None = None
        self._failed = False

    @property
    def ids(self) -> tuple[int, ...]:
        """The fixed start's token ids (empty when the prompts share none)."""
        self._build()
        return self._ids or ()

    def lookup(self, ids: Sequence[int]) -> tuple[Any | None, int]:
        """A private copy of the cache and the number of tokens it holds when ``ids`` (a
        prompt's token ids) start with the fixed start and go past it; else ``(None, 0)``."""
        self._build()
        start = self._ids
        if self._cache is None or not start or len(ids) <= len(start) or tuple(ids[: len(start)]) != start:
            return None, 0
        with torch.inference_mode():
            return copy.deepcopy(self._cache), len(start)

    def _build(self) -> None:
        if self._ids is not None or self._failed:
            return
        with self._lock:
            if self._ids is not None or self._failed:
                return
            first = self._encode(self.render(_PROBES[0]))
            n = len(fixed_start(self._encode, self.render))
            if n == 0:
                self._ids = ()
                return
            try:
                from transformers import DynamicCache

                cache = DynamicCache(config=self.model.config)
                device = getattr(self.model, "device", torch.device("cpu"))
                with torch.inference_mode():
                    self.model(input_ids=torch.tensor([first[:n]], device=device), use_cache=True,
                               **{cache_keyword(self.model): cache})
            except Exception:  # noqa: BLE001 - a model whose cache is not a DynamicCache: generate without
                self._failed = True
                return
            self._cache, self._ids = cache, tuple(first[:n])
