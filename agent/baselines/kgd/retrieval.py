"""KGD's passages: overlapping character chunks, a cached sentence encoder, dense chunk retrieval."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ...embeddings import Embedder
from ...errors import FactweaveError

# --- chunking ------------------------------------------------------------------------------


def chunk_spans(text: str, size: int = 500, overlap: int = 100) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the windows :func:`chunk_passages` cuts ``text`` into.

    A window is at most ``size`` characters. It ends before the last whitespace that leaves it
    longer than ``overlap`` (a word is cut only when none does) and the next window starts at the
    first word that begins less than ``overlap`` characters before that end, so neighbours share
    up to ``overlap`` characters of whole words; where no word begins there, it starts exactly
    ``overlap`` characters before the end (inside a long word). Leading and trailing whitespace
    is left out.

    Example::

        >>> chunk_spans("alpha beta gamma delta", size=11, overlap=5)   # "alpha beta", "beta gamma", "gamma delta"
        [(0, 10), (6, 16), (11, 22)]
    """
    _check_window(size, overlap)
    spans: list[tuple[int, int]] = []
    start = _skip_space(text, 0)
    while start < len(text):
        end = _window_end(text, start, size, overlap)
        spans.append((start, _trim_end(text, start, end)))
        if end >= len(text):
            break
        start = _next_start(text, start, end, overlap)
    return spans


def chunk_passages(texts: Sequence[str], size: int = 500, overlap: int = 100) -> list[str]:
    """Every passage of ``texts`` cut into overlapping character windows (see :func:`chunk_spans`),
    in order; a passage shorter than ``size`` is one chunk.

    Example::

        >>> chunk_passages(["Zorblax Station was founded by Mira Quell in 2091."], size=30, overlap=10)
        ['Zorblax Station was founded by', 'founded by Mira Quell in 2091.']
    """
    if isinstance(texts, str):
        raise FactweaveError("chunk_passages() takes a sequence of passages, not a single string: wrap it in a list")
    chunks: list[str] = []
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise FactweaveError(f"passage {position} is {type(text).__name__}, not str")
        chunks.extend(text[s:e] for s, e in chunk_spans(text, size, overlap))
    return chunks


def _check_window(size: int, overlap: int) -> None:
    if not isinstance(size, int) or size < 1:
        raise FactweaveError(f"chunk size must be a positive integer, got {size!r}")
    if not isinstance(overlap, int) or not 0 <= overlap < size:
        raise FactweaveError(f"chunk overlap must be an integer from 0 to size - 1 ({size - 1}), got {overlap!r}")


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _window_end(text: str, start: int, size: int, overlap: int) -> int:
    """Where the window from ``start`` ends: at the last whitespace that keeps it within ``size``
    characters and longer than ``overlap``, else a hard cut at ``size``."""
    hard = start + size
    if hard >= len(text):
        return len(text)
    for i in range(hard, start + overlap, -1):
        if text[i].isspace():
            return i
    return hard


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _next_start(text: str, start: int, end: int, overlap: int) -> int:
    """The first word start in ``[end - overlap, end)``, else ``end - overlap`` itself (a word
    longer than the overlap is cut); always after ``start``."""
    first = max(end - overlap, start + 1)
    for i in range(first, end):
        if not text[i].isspace() and (text[i - 1].isspace()):
            return i
    return first if first < end and not text[first].isspace() else _skip_space(text, end)


# --- embeddings and retrieval --------------------------------------------------------------


class CachedEncoder:
    """An :class:`~agent.embeddings.Embedder` that remembers the vector of every string it encoded
    (least recently used first out beyond ``max_entries``); texts not seen yet are encoded in one
    call. Share one between a :class:`ChunkRetriever` and a :class:`SimilarityScorer` so chunks
    are embedded once.

    Example (not run: needs an embedding model)::

        encoder = CachedEncoder(Embedder())
        encoder.encode(["a", "b"]); encoder.encode(["b", "c"])   # embeds "c" only
        encoder.hits, encoder.misses                            # (1, 3)
    """

    def __init__(self, embedder: Embedder, max_entries: int = 50_000) -> None:
        if isinstance(embedder, CachedEncoder):
            raise FactweaveError("CachedEncoder wraps an Embedder, not another CachedEncoder")
        if not hasattr(embedder, "encode") or not hasattr(embedder, "dim"):
            raise FactweaveError(f"expected an agent.embeddings.Embedder, got {type(embedder).__name__}")
        if not isinstance(max_entries, int) or max_entries < 1:
            raise FactweaveError(f"max_entries must be a positive integer, got {max_entries!r}")
        self.embedder, self.max_entries = embedder, max_entries
        self.hits = self.misses = self.encode_calls = 0
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # one encoder may serve several generate calls at once

    @property
    def dim(self) -> int:
        return int(self.embedder.dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` unit-length float32 rows, new texts embedded in one batch."""
        with self._lock:
            return self._encode(list(texts))

    def _encode(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        self.misses += len(new)
        self.hits += len(texts) - len(new)
        if new:
            self.encode_calls += 1
            for text, vector in zip(new, self.embedder.encode(new)):
                self._vectors[text] = vector
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            self._vectors.move_to_end(text)
            rows[i] = self._vectors[text]
        while len(self._vectors) > self.max_entries:
            self._vectors.popitem(last=False)
        return rows


def as_cached(embedder: Embedder | CachedEncoder) -> CachedEncoder:
    """``embedder`` itself when it already caches, else wrapped in a new :class:`CachedEncoder`."""
    return embedder if isinstance(embedder, CachedEncoder) else CachedEncoder(embedder)


class ChunkRetriever:
    """Dense retrieval over a fixed list of chunks, embedded once (in batches) when built.

    Example (not run: needs an embedding model)::

        retriever = ChunkRetriever(Embedder(), chunk_passages(passages))
        retriever.top("Who founded Zorblax Station?", 3)   # the 3 most similar chunks, best first
    """

    def __init__(self, embedder: Embedder | CachedEncoder, chunks: Sequence[str]) -> None:
        if isinstance(chunks, str):
            raise FactweaveError("ChunkRetriever takes a sequence of chunks, not a single string: wrap it in a list")
        self.chunks = list(chunks)
        if not self.chunks:
            raise FactweaveError("ChunkRetriever needs at least one chunk")
        for position, chunk in enumerate(self.chunks):
            if not isinstance(chunk, str):
                raise FactweaveError(f"chunk {position} is {type(chunk).__name__}, not str")
        self.encoder = as_cached(embedder)
        self.vectors = self.encoder.encode(self.chunks)

    def scores(self, question: str) -> np.ndarray:
        """Cosine similarity of ``question`` to every chunk, in chunk order."""
        if not isinstance(question, str):
            raise FactweaveError(f"question must be a string, got {type(question).__name__}")
        return self.vectors @ self.encoder.encode([question])[0]

    def top(self, question: str, n: int) -> list[str]:
        """The ``n`` chunks most similar to ``question``, best first (ties: earlier chunk first)."""
        if not isinstance(n, int) or n < 1:
            raise FactweaveError(f"n must be a positive integer, got {n!r}")
        order = np.argsort(-self.scores(question), kind="stable")[:n]
        return [self.chunks[i] for i in order]


# --- relevance scorers ---------------------------------------------------------------------
