"""KGD's relevance scores of a continuation against retrieved chunks: similarity, entailment, both."""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ...embeddings import Embedder
from ...errors import FactweaveError, ModelError
from .judges import CONTRADICTION, ENTAILMENT, NLI_LABELS, NLIJudge
from .retrieval import CachedEncoder, as_cached


class RelevanceScorer(Protocol):
    """Scores candidate texts against chunks: ``score(texts, chunk_lists)[i]`` is ``r`` of
    ``texts[i]`` given ``chunk_lists[i]``."""

    def score(self, texts: Sequence[str], chunk_lists: Sequence[Sequence[str]]) -> np.ndarray: ...

    def cache_counts(self) -> tuple[int, int]:
        """(hits, misses) of the scorer's caches so far."""
        ...


def _check_pairs(texts: Sequence[str], chunk_lists: Sequence[Sequence[str]]) -> None:
    if len(texts) != len(chunk_lists):
        raise FactweaveError(f"got {len(texts)} texts but {len(chunk_lists)} chunk lists; give one list per text")


class SimilarityScorer:
    """``r = max over chunks of cos(emb(text), emb(chunk))``; 0 for a blank text or no chunks.
    All texts and chunks of one call not embedded yet are embedded in one batch, and every
    vector is kept by string (:class:`CachedEncoder`).

    Example (not run: needs an embedding model)::

        scorer = SimilarityScorer(Embedder())
        scorer.score(["founded by Mira"], [["Zorblax Station was founded by Mira Quell."]])
    """

    def __init__(self, embedder: Embedder | CachedEncoder) -> None:
        self.encoder = as_cached(embedder)

    def score(self, texts: Sequence[str], chunk_lists: Sequence[Sequence[str]]) -> np.ndarray:
        _check_pairs(texts, chunk_lists)
        keys = [t.strip() for t in texts]
        wanted = [k for k in keys if k] + [c for cs, k in zip(chunk_lists, keys) if k for c in cs]
        unique = list(dict.fromkeys(wanted))
        rows = {text: i for i, text in enumerate(unique)}
        vectors = self.encoder.encode(unique) if unique else np.zeros((0, self.encoder.dim), np.float32)
        r = np.zeros(len(texts), dtype=np.float32)
        for i, (key, chunks) in enumerate(zip(keys, chunk_lists)):
            if key and len(chunks):
                r[i] = float(np.max(vectors[[rows[c] for c in chunks]] @ vectors[rows[key]]))
        return r

    def cache_counts(self) -> tuple[int, int]:
        return self.encoder.hits, self.encoder.misses


class EntailmentScorer:
    """``r = +alpha`` when some chunk entails the text, else ``-beta`` when some chunk contradicts
    it, else 0 (also for a blank text). Each (chunk, text) label is judged once and kept; the
    pairs of one call not judged yet go to the judge in one call.

    Only the ``top_m`` tokens get ``weight * r``, so a negative ``r`` for all of them hands the
    step to the best token outside them. A judge that calls every pair a contradiction (as
    SmolLM2-135M does, see :class:`LocalLMJudge`) therefore derails generation: measured on 5
    short questions, it wrote digits and unrelated words where greedy decoding wrote sentences.

    Example (not run: needs a model)::

        scorer = EntailmentScorer(LocalLMJudge(loaded), alpha=5.0, beta=10.0)
        scorer.score(["founded by Mira Quell"], [["Zorblax Station was founded by Mira Quell."]])
    """

    def __init__(self, judge: NLIJudge, alpha: float = 5.0, beta: float = 10.0, max_entries: int = 50_000) -> None:
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise FactweaveError(f"{name} must be a finite number, got {value!r}")
        self.judge, self.alpha, self.beta, self.max_entries = judge, float(alpha), float(beta), max_entries
        self.hits = self.misses = self.judge_calls = 0
        self._labels: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def labels(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The label of each (premise, hypothesis), judging only pairs not seen before."""
        with self._lock:
            return self._judged(list(pairs))

    def _judged(self, pairs: list[tuple[str, str]]) -> list[str]:
        new = [p for p in dict.fromkeys(pairs) if p not in self._labels]
        self.misses += len(new)
        self.hits += len(pairs) - len(new)
        if new:
            self.judge_calls += 1
            for pair, label in zip(new, self.judge.judge(new)):
                if label not in NLI_LABELS:
                    raise ModelError(f"the NLI judge answered {label!r}, not one of {', '.join(NLI_LABELS)}")
                self._labels[pair] = label
        found = [self._labels[p] for p in pairs]
        for pair in pairs:
            self._labels.move_to_end(pair)
        while len(self._labels) > self.max_entries:
            self._labels.popitem(last=False)
        return found

    def score(self, texts: Sequence[str], chunk_lists: Sequence[Sequence[str]]) -> np.ndarray:
        _check_pairs(texts, chunk_lists)
        keys = [t.strip() for t in texts]
        pairs = [(c, k) for k, cs in zip(keys, chunk_lists) if k for c in cs]
        judged = dict(zip(pairs, self.labels(pairs)))
        r = np.zeros(len(texts), dtype=np.float32)
        for i, (key, chunks) in enumerate(zip(keys, chunk_lists)):
            found = {judged[(c, key)] for c in chunks} if key else set()
            r[i] = self.alpha if ENTAILMENT in found else -self.beta if CONTRADICTION in found else 0.0
        return r

    def cache_counts(self) -> tuple[int, int]:
        return self.hits, self.misses


class CombinedScorer:
    """``r = r_sim + gamma * r_nli``: similarity plus ``gamma`` times the entailment score
    (gamma=1.5 as in the paper; its exact combination formula was not available here, so this
    is the plain weighted sum). The NLI term keeps its own scale (+alpha / -beta / 0), so with
    alpha=5 it dominates; pass an :class:`EntailmentScorer` with alpha=1, beta=2 to weigh them
    alike.

    Example (not run: needs an embedding model and a judge model)::

        CombinedScorer(SimilarityScorer(embedder), EntailmentScorer(judge), gamma=1.5)
    """

    def __init__(self, similarity: SimilarityScorer, entailment: EntailmentScorer, gamma: float = 1.5) -> None:
        if not isinstance(gamma, (int, float)) or not math.isfinite(gamma):
            raise FactweaveError(f"gamma must be a finite number, got {gamma!r}")
        self.similarity, self.entailment, self.gamma = similarity, entailment, float(gamma)

    def score(self, texts: Sequence[str], chunk_lists: Sequence[Sequence[str]]) -> np.ndarray:
        return self.similarity.score(texts, chunk_lists) + self.gamma * self.entailment.score(texts, chunk_lists)

    def cache_counts(self) -> tuple[int, int]:
        (h1, m1), (h2, m2) = self.similarity.cache_counts(), self.entailment.cache_counts()
        return h1 + h2, m1 + m2


# --- the logits processor ------------------------------------------------------------------
