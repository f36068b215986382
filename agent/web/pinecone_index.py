"""A Pinecone index behind :class:`agent.web.vectors.VectorIndex`, through the official SDK.

A thin adapter: ids, vectors and metadata are checked the same way as for the local index,
then sent with ``pinecone.Index`` (REST data plane): upserts in batches of ``batch_size``,
fetches in chunks (ids travel in the URL), filters passed through unchanged (both backends
speak Pinecone's filter language), ``query_many`` as one query per row.

Retries: the SDK's transport already retries a single HTTP request a few times. Failures that
outlast it (a longer 429 throttle, a 5xx burst, a connection refused while a proxy restarts)
reach this adapter, which retries the whole call up to ``max_retries`` times with exponential
backoff (``backoff_s * 2**attempt``, jittered, capped at 30 s). Replaying is safe because every
call is idempotent: an upsert of the same id replaces it, a delete of a missing id is a no-op.
Other errors (bad key, unknown index, bad request) fail at once with one line naming the
index, the host and what to do. The API key never appears in a message or a log line.

The index must use the cosine metric, so that scores are cosine similarities as with the
local index; vectors are sent L2-normalized. Writes are durable on Pinecone when the call
returns, so :meth:`flush` has nothing to do (Pinecone is eventually consistent: a query right
after an upsert may not see it yet on the hosted service).
"""
from __future__ import annotations

import functools
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from agent.errors import FactweaveError, IndexMismatchError
from agent.extras import require
from agent.web.vector_checks import check_ids, check_k, check_matrix, check_upsert
from agent.web.vector_filters import check_filter
from agent.web.vectors import VectorHit

log = logging.getLogger(__name__)

T = TypeVar("T")
_MAX_BACKOFF_S = 30.0
_FETCH_CHUNK = 100  # ids per fetch request: they are query parameters, and URLs have limits
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class PineconeVectorIndex:
    """One namespace of a Pinecone index.

    Args:
        index_name: the Pinecone index (used to look up its host when ``host`` is not given, and
            in messages).
        namespace: records live in this namespace (``""`` is Pinecone's default one).
        api_key: the project's API key; ``None`` reads ``PINECONE_API_KEY``.
        host: the index's data-plane host (skips the describe-index lookup).
        dim: dimension of the vectors; checked against the index when it reports one.
        batch_size: vectors per upsert request.
        max_retries: retries of a failed call on 429/5xx/connection errors.
        backoff_s: first retry delay; it doubles per retry.
        control_host: the control-plane URL (``None``: Pinecone's own, or
            ``PINECONE_CONTROLLER_HOST``).
        timeout_s: per-request timeout.
    """

    def __init__(self, index_name: str, namespace: str = "", api_key: str | None = None,
                 host: str | None = None, *, dim: int, batch_size: int = 100, max_retries: int = 5,
                 backoff_s: float = 0.5, control_host: str | None = None, timeout_s: float = 30.0) -> None:
        if not isinstance(index_name, str) or not index_name:
            raise FactweaveError("Pinecone index_name must be a non-empty string")
        if not isinstance(namespace, str):
            raise FactweaveError(f"Pinecone namespace must be a string, got {type(namespace).__name__}")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise FactweaveError(f"dim must be a positive integer, got {dim!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 1000:
            raise FactweaveError(f"batch_size must be an integer from 1 to 1000, got {batch_size!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise FactweaveError(f"max_retries must be a non-negative integer, got {max_retries!r}")
        self.index_name = index_name
        self.namespace = namespace
        self.dim = dim
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._api_key = api_key or os.environ.get("PINECONE_API_KEY", "")
        if not self._api_key:
            raise FactweaveError(
                f"Pinecone index {index_name!r}: no API key; pass api_key or set PINECONE_API_KEY"
            )
        self.host = host or f"{control_host or 'the Pinecone control plane'} (looking up the host)"
        self._client, self._index = self._connect(host, control_host, timeout_s)
        self.host = self._index.host
        self._check_dimension()

    # -- plumbing ---------------------------------------------------------------------------

    def _connect(self, host: str | None, control_host: str | None, timeout_s: float):
        require("pinecone", "a Pinecone vector index")
        from pinecone import Pinecone

        def connect():
            client = Pinecone(api_key=self._api_key, host=control_host, timeout=timeout_s)
            return client, client.index(name=self.index_name, host=host or "")

        return self._call("connect", connect)

    def _check_dimension(self) -> None:
        stats = self._call("describe index stats", lambda: self._index.describe_index_stats())
        if stats.dimension and stats.dimension != self.dim:
            raise IndexMismatchError(
                f"Pinecone index {self.index_name!r} at {self.host} has dimension {stats.dimension}, "
                f"the embedder makes {self.dim}; use an index created for this embedding model"
            )

    def _scrub(self, text: object) -> str:
        text = " ".join(str(text).split())
        return text.replace(self._api_key, "***") if self._api_key else text

    def _describe(self, error: BaseException) -> tuple[bool, str]:
        """(worth retrying, one-line reason) for an exception from the SDK."""
        from pinecone.errors.exceptions import (
            ApiError,
            PineconeConnectionError,
            PineconeTimeoutError,
        )

        if isinstance(error, ApiError):
            status = error.status_code
            reason = self._scrub(getattr(error, "message", "") or str(error))[:200]
            if status in (401, 403):
                return False, f"the API key was refused (HTTP {status}); set PINECONE_API_KEY to a key of this project"
            if status == 404:
                return False, f"not found (HTTP 404: {reason}); check the index name and host"
            return status in _RETRYABLE_STATUS, f"HTTP {status}: {reason}"
        if isinstance(error, PineconeConnectionError | PineconeTimeoutError):
            return True, f"cannot reach the server ({self._scrub(error)[:200]}); check the host and network"
        return False, f"{type(error).__name__}: {self._scrub(error)[:200]}"

    def _call(self, operation: str, action: Callable[[], T]) -> T:
        """Run ``action``, retrying transient failures with exponential backoff."""
        from pinecone.errors.exceptions import PineconeError

        attempt = 0
        while True:
            try:
                return action()
            except PineconeError as error:
                retryable, reason = self._describe(error)
            if not retryable:
                raise FactweaveError(
                    f"Pinecone index {self.index_name!r} at {self.host}: {operation} failed: {reason}"
                ) from None
            if attempt >= self.max_retries:
                raise FactweaveError(
                    f"Pinecone index {self.index_name!r} at {self.host}: {operation} failed after "
                    f"{attempt + 1} attempts ({reason}); wait and retry, or raise max_retries"
                ) from None
            delay = min(_MAX_BACKOFF_S, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
            log.warning("Pinecone %s on %s: %s; retry %d/%d in %.2fs", operation, self.host, reason,
                        attempt + 1, self.max_retries, delay)
            time.sleep(delay)
            attempt += 1

    # -- the VectorIndex interface ------------------------------------------------------------

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadata: Sequence[dict] | None = None) -> None:
        """Insert or replace records, ``batch_size`` per request; each batch is retried alone."""
        ids, matrix, entries = check_upsert(ids, vectors, metadata, self.dim)
        for start in range(0, len(ids), self.batch_size):
            batch = []
            for item, row, entry in zip(ids[start:start + self.batch_size],
                                        matrix[start:start + self.batch_size],
                                        entries[start:start + self.batch_size]):
                record: dict[str, Any] = {"id": item, "values": row.tolist()}
                if entry:
                    record["metadata"] = entry
                batch.append(record)
            self._call(f"upsert of {len(batch)} vectors",
                       functools.partial(self._index.upsert, vectors=batch, namespace=self.namespace,
                                         show_progress=False))

    def query(self, vector: np.ndarray, k: int, filter: dict | None = None) -> list[VectorHit]:
        matrix = check_matrix(vector, self.dim, rows=1)
        return self.query_many(matrix, k, filter)[0]

    def query_many(self, vectors: np.ndarray, k: int, filter: dict | None = None) -> list[list[VectorHit]]:
        """One query request per row (Pinecone's query takes a single vector)."""
        k = check_k(k)
        flt = check_filter(filter) or None  # Pinecone rejects an empty filter; {} means no filter
        matrix = check_matrix(vectors, self.dim)
        results = []
        for row in matrix:
            response = self._call("query", functools.partial(
                self._index.query, vector=row.tolist(), top_k=k, namespace=self.namespace, filter=flt,
                include_metadata=True, include_values=False))
            results.append([VectorHit(match.id, float(match.score), dict(match.metadata or {}))
                            for match in response.matches])
        return results

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        ids = list(dict.fromkeys(check_ids(ids)))
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), _FETCH_CHUNK):
            chunk = ids[start:start + _FETCH_CHUNK]
            response = self._call("fetch", functools.partial(self._index.fetch, ids=chunk, namespace=self.namespace))
            for item, record in response.vectors.items():
                found[item] = np.asarray(record.values, dtype=np.float32)
        return {item: found[item] for item in ids if item in found}

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(check_ids(ids)))
        for start in range(0, len(ids), 1000):  # Pinecone deletes at most 1000 ids per request
            chunk = ids[start:start + 1000]
            self._call("delete", functools.partial(self._index.delete, ids=chunk, namespace=self.namespace))

    def count(self) -> int:
        stats = self._call("describe index stats", lambda: self._index.describe_index_stats())
        summary = stats.namespaces.get(self.namespace)
        return int(summary.vector_count) if summary else 0

    def flush(self) -> None:
        """Nothing to do: Pinecone has stored each write when its call returned."""

    def refresh(self) -> bool:
        """Nothing to do: every read asks the service, so it sees every process's writes."""
        return False

    def close(self) -> None:
        for closable in (self._index, self._client):
            try:
                closable.close()
            except Exception as error:  # noqa: BLE001 - closing must not mask the caller's work
                log.debug("closing Pinecone client: %s", self._scrub(error))

    def __enter__(self) -> PineconeVectorIndex:  # noqa: PYI034 (not meant to be subclassed)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PineconeVectorIndex(index_name={self.index_name!r}, namespace={self.namespace!r}, "
                f"host={self.host!r}, dim={self.dim})")
