"""Vector indexes for keyword embeddings: one interface, an embedded default and Pinecone.

:class:`VectorIndex` is what the knowledge web talks to. Two implementations:

* :class:`agent.web.local_vectors.LocalVectorIndex` (the default): a folder on disk, approximate nearest-neighbour
  search with `usearch <https://github.com/unum-cloud/usearch>`_ (HNSW).
* :class:`agent.web.pinecone_index.PineconeVectorIndex`: a Pinecone index through the
  official ``pinecone`` SDK.

Why usearch: ``benchmarks/vector_backends.py`` compared usearch, faiss (HNSW), hnswlib and
LanceDB on the demo KB's 49k labels embedded with all-MiniLM-L6-v2 (2 shared cores; results in
``benchmarks/results/vector_backends.json``). At M=16 / ef=64 the three HNSW libraries reach the
same recall@10 (0.94-0.95) with sub-millisecond queries when the cores are free (hnswlib and faiss
about 0.25 ms, usearch 0.5 ms), all far below the ~10-100 ms it takes to embed the query. What
decided it: faiss's HNSW cannot delete or replace a vector (and its OpenMP threads slowed single
queries to ~8 ms when the cores were busy); hnswlib has no wheels for its last release (0.8.0, 2023:
a compiler at install time), a fixed capacity, tombstones for deletes and was the slowest to
replace vectors; LanceDB was ten times slower per query with lower recall. usearch removes and
re-adds by key, ships wheels, saves and loads 49k vectors in under 0.1 s, and has an exact mode.
Collections under ``exact_below`` records are scanned with numpy instead (0.05 ms for 2k rows,
perfect recall).

Scores are cosine similarities (higher is better); vectors are stored L2-normalized.

Input checks shared by both backends live in :mod:`agent.web.vector_checks`, the filter language
in :mod:`agent.web.vector_filters`.

Filters follow Pinecone's metadata filter language, so a query runs unchanged on both
backends: ``{"field": value}``, ``{"field": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" |
"$in" | "$nin" | "$exists": ...}}``, ``{"$and": [...]}``, ``{"$or": [...]}``. Metadata values
are strings, numbers, booleans or lists of strings (Pinecone's rule); on a list field ``$eq``
and ``$in`` match when any element does.

Example (not run: needs an embedding model; :func:`agent.web.vector_stores.open_vector_index` opens one by kind)::

    index = open_vector_index("local", folder=Path("kb.vectors"), dim=embedder.dim,
                              fingerprint=embedder.fingerprint)
    index.upsert(["k1", "k2"], embedder.encode(["Paris", "Berlin"]), [{"kind": "city"}] * 2)
    index.flush()
    index.query(embedder.encode(["capital of France"])[0], k=1)
    # [VectorHit(id='k1', score=0.6, metadata={'kind': 'city'})]
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["VectorHit", "VectorIndex"]

@dataclass(frozen=True)
class VectorHit:
    """One search result: the record's id, its cosine similarity to the query, its metadata."""

    id: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class VectorIndex(Protocol):
    """What the knowledge web needs from a vector store. Implementations must be idempotent:
    upserting an id that exists replaces its vector and metadata."""

    dim: int

    def upsert(self, ids: Sequence[str], vectors: np.ndarray,
               metadata: Sequence[dict] | None = None) -> None: ...

    def query(self, vector: np.ndarray, k: int, filter: dict | None = None) -> list[VectorHit]: ...

    def query_many(self, vectors: np.ndarray, k: int,
                   filter: dict | None = None) -> list[list[VectorHit]]: ...

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def count(self) -> int: ...

    def flush(self) -> None: ...

    def refresh(self) -> bool: ...

    def close(self) -> None: ...
