"""The KGD logits processor and generation with it (and the paper's baseline decoding settings)."""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, cast

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from ...errors import FactweaveError
from ...models import LoadedModel, encode_padded
from .scorers import RelevanceScorer

# Baseline decoding settings of the paper, as ``generate`` keyword arguments.
BASELINES: dict[str, dict[str, Any]] = {
    "greedy": {"do_sample": False, "num_beams": 1},
    "beam": {"do_sample": False, "num_beams": 4},
    "contrastive": {"do_sample": False, "num_beams": 1, "penalty_alpha": 0.6, "top_k": 4},
}


class KnowledgeGuidedLogitsProcessor(LogitsProcessor):
    r"""Adds ``weight * r`` to the scores of each row's ``top_m`` tokens, where ``r`` is the
    scorer's relevance of (the row's text generated since the prompt + the token) to the row's
    chunks; every other token, and a top token already at ``-inf``, is left unchanged. All
    candidates of all rows are scored in one scorer call per step. Rows that have already
    produced the end-of-sequence token are skipped.

    ``chunks_per_row`` holds one chunk list per batch item; the rows of an item (its beams, or
    ``num_return_sequences``) share it. Under beam search the scores it receives are
    log-probabilities, so the bonus is added to those. Works with greedy search, sampling, beam
    search and batches through the public ``logits_processor`` argument; use one instance per
    ``generate`` call.

    Counters for reports: ``steps``, ``scorer_calls``, ``candidates`` (texts scored),
    ``cache_hits`` / ``cache_misses`` (of the scorer, during this processor's calls),
    ``scoring_seconds`` (decoding candidate texts plus scoring); :meth:`stats` gives them all.

    Args:
        tokenizer: the model's tokenizer (decodes the candidates).
        scorer: a :class:`SimilarityScorer`, :class:`EntailmentScorer` or :class:`CombinedScorer`.
        chunks_per_row: the retrieved chunks of each batch item.
        top_m: candidate tokens per row and step (paper: 4).
        weight: ``w`` in ``w * r`` (paper: 2).
        prompt_len: prompt length in tokens (left-padded); by default the length at the first call.

    Example (not run: needs a model and an embedding model)::

        proc = KnowledgeGuidedLogitsProcessor(tokenizer, SimilarityScorer(embedder), [chunks])
        out = model.generate(**inputs, num_beams=4, logits_processor=LogitsProcessorList([proc]))
        proc.stats()   # {'steps': 32, 'scorer_calls': 32, 'candidates': 512, ...}
    """

    def __init__(self, tokenizer: Any, scorer: RelevanceScorer, chunks_per_row: Sequence[Sequence[str]],
                 top_m: int = 4, weight: float = 2.0, *, prompt_len: int | None = None) -> None:
        if not isinstance(top_m, int) or top_m < 1:
            raise FactweaveError(f"top_m must be a positive integer, got {top_m!r}")
        if not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise FactweaveError(f"weight must be a finite number, got {weight!r}")
        self.tokenizer, self.scorer, self.top_m, self.weight = tokenizer, scorer, top_m, float(weight)
        self.chunks = _chunk_lists(chunks_per_row)
        self._prompt_len = prompt_len
        self._eos = _eos_ids(tokenizer)
        self.steps = self.scorer_calls = self.candidates = self.cache_hits = self.cache_misses = 0
        self.scoring_seconds = 0.0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._prompt_len is None or input_ids.shape[1] < self._prompt_len:
            self._prompt_len = input_ids.shape[1]
        rows = input_ids.shape[0]
        if rows % len(self.chunks):
            raise FactweaveError(f"{rows} rows cannot be split evenly over {len(self.chunks)} chunk lists")
        self.steps += 1
        started = time.perf_counter()
        values, top = scores.topk(min(self.top_m, scores.shape[-1]), dim=-1)
        texts, chunk_lists, where = self._candidates(input_ids, values, top, rows // len(self.chunks))
        bonus = torch.zeros_like(values)
        if texts:
            before = self.scorer.cache_counts()
            r = self.scorer.score(texts, chunk_lists)
            after = self.scorer.cache_counts()
            self.scorer_calls += 1
            self.candidates += len(texts)
            self.cache_hits += after[0] - before[0]
            self.cache_misses += after[1] - before[1]
            rows_idx, cols_idx = zip(*where)
            bonus[list(rows_idx), list(cols_idx)] = torch.as_tensor(self.weight * r, dtype=bonus.dtype,
                                                                    device=bonus.device)
        self.scoring_seconds += time.perf_counter() - started
        return cast(torch.FloatTensor, scores.scatter_add(1, top, bonus))

    def _candidates(self, input_ids: torch.Tensor, values: torch.Tensor, top: torch.Tensor,
                    rows_per_item: int) -> tuple[list[str], list[tuple[str, ...]], list[tuple[int, int]]]:
        """The text of each live row's finite top tokens, its chunks, and its (row, column)."""
        texts, chunk_lists, where = [], [], []
        finite = torch.isfinite(values).tolist()
        candidates = top.tolist()
        for row, generated in enumerate(input_ids[:, self._prompt_len :].tolist()):
            if self._eos.intersection(generated):
                continue
            for col, token in enumerate(candidates[row]):
                if finite[row][col]:
                    texts.append(self.tokenizer.decode(generated + [token], skip_special_tokens=True))
                    chunk_lists.append(self.chunks[row // rows_per_item])
                    where.append((row, col))
        return texts, chunk_lists, where

    def stats(self) -> dict[str, float]:
        """The counters, and the mean scoring time per step in milliseconds."""
        return {"steps": self.steps, "scorer_calls": self.scorer_calls, "candidates": self.candidates,
                "cache_hits": self.cache_hits, "cache_misses": self.cache_misses,
                "scoring_seconds": round(self.scoring_seconds, 4),
                "scoring_ms_per_step": round(1000 * self.scoring_seconds / self.steps, 3) if self.steps else 0.0}


def _chunk_lists(chunks_per_row: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    if isinstance(chunks_per_row, str) or not len(chunks_per_row):
        raise FactweaveError("chunks_per_row needs one list of chunks per batch item")
    lists = []
    for item, chunks in enumerate(chunks_per_row):
        if isinstance(chunks, str) or not all(isinstance(c, str) for c in chunks):
            raise FactweaveError(f"the chunks of batch item {item} must be a list of strings")
        lists.append(tuple(chunks))
    return lists


def _eos_ids(tokenizer: Any) -> set[int]:
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        return set()
    return set(eos) if isinstance(eos, (list, tuple)) else {int(eos)}


# --- generation ----------------------------------------------------------------------------


def kgd_generate(loaded: LoadedModel, prompts: Sequence[str], chunks_per_prompt: Sequence[Sequence[str]],
                 scorer: RelevanceScorer | None, *, max_new_tokens: int, num_beams: int = 1, top_m: int = 4,
                 weight: float = 2.0, stats: dict[str, Any] | None = None, **generate_kwargs: Any) -> list[str]:
    """Generate from each prompt text (used as is: render a chat template first if wanted) with
    KGD over its chunks, in one batched ``generate`` call; the decoded new text of each row.

    ``scorer=None`` decodes without KGD (the baselines). Other ``generate`` arguments pass
    through, e.g. ``**BASELINES["contrastive"]``; a caller's own ``logits_processor`` list runs
    before KGD. When ``stats`` is a dict it receives the processor's counters plus
    ``generate_seconds``, ``new_tokens`` and ``tokens_per_s``.

    Example (not run: needs a model and an embedding model)::

        texts = kgd_generate(loaded, ["Question: Who founded Zorblax Station?\\nAnswer:"],
                             [retriever.top("Who founded Zorblax Station?", 3)],
                             SimilarityScorer(embedder), max_new_tokens=16, num_beams=4)
    """
    if isinstance(prompts, str) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise FactweaveError("prompts must be a non-empty list of strings")
    if len(chunks_per_prompt) != len(prompts):
        raise FactweaveError(f"got {len(prompts)} prompts but {len(chunks_per_prompt)} chunk lists")
    model, tokenizer = loaded.model, loaded.tokenizer
    enc = encode_padded(tokenizer, list(prompts), "left")
    device = getattr(model, "device", torch.device("cpu"))
    inputs = {k: v.to(device) for k, v in enc.items()}
    prompt_len = int(inputs["input_ids"].shape[1])
    processors = LogitsProcessorList(generate_kwargs.pop("logits_processor", None) or [])
    proc = None
    if scorer is not None:
        proc = KnowledgeGuidedLogitsProcessor(tokenizer, scorer, chunks_per_prompt, top_m, weight,
                                              prompt_len=prompt_len)
        processors.append(proc)
    kwargs = {"do_sample": False, "num_beams": num_beams, "max_new_tokens": max_new_tokens,
              "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
              **generate_kwargs, "logits_processor": processors}
    started = time.perf_counter()
    out = _generate(model, inputs, kwargs)
    seconds = time.perf_counter() - started
    rows = out[:, prompt_len:]
    if stats is not None:
        new_tokens = int(sum(_length(row, _eos_ids(tokenizer), tokenizer.pad_token_id) for row in rows.tolist()))
        stats.update(proc.stats() if proc is not None else {})
        stats.update({"generate_seconds": round(seconds, 4), "new_tokens": new_tokens,
                      "tokens_per_s": round(new_tokens / seconds, 2) if seconds > 0 else 0.0})
    return [tokenizer.decode(row, skip_special_tokens=True) for row in rows]


def _generate(model: Any, inputs: dict[str, torch.Tensor], kwargs: dict[str, Any]) -> torch.Tensor:
    try:
        with torch.inference_mode():
            return model.generate(**inputs, **kwargs)
    except (OSError, ValueError) as error:
        if kwargs.get("penalty_alpha"):
            text = " ".join(str(error).split())[:200]
            raise FactweaveError(f"contrastive search is not available in this transformers version ({text})") from None
        raise


def _length(row: list[int], eos: set[int], pad: int | None) -> int:
    """Tokens generated in one row: up to and including its first end token, padding excluded."""
    for i, token in enumerate(row):
        if token in eos:
            return i + 1
    return sum(1 for token in row if token != pad)
