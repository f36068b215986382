"""Input checks shared by every vector backend (local and Pinecone), so that bad input fails the
same way everywhere: ids, vectors, metadata, ``k``."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agent.errors import FactweaveError

MAX_ID_LENGTH = 512  # Pinecone's limit; kept here too so both backends accept the same ids.

def check_ids(ids: Sequence[str], what: str = "id") -> list[str]:
    if isinstance(ids, str):
        raise FactweaveError(f"ids must be a sequence of strings, not one string: wrap {ids[:40]!r} in a list")
    ids = list(ids)
    for position, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            raise FactweaveError(f"{what} {position} must be a non-empty string, got {item!r}")
        if len(item) > MAX_ID_LENGTH:
            raise FactweaveError(f"{what} {position} is {len(item)} characters long; the limit is {MAX_ID_LENGTH}")
    return ids


def check_matrix(vectors: Any, dim: int, rows: int | None = None) -> np.ndarray:
    """A finite float32 (n, dim) matrix with unit-length rows, or a one-line error."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError):
        raise FactweaveError(f"vectors must be numeric arrays of shape (n, {dim})") from None
    if matrix.ndim == 1 and rows in (None, 1) and matrix.shape[0] == dim:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise FactweaveError(f"vectors must have shape (n, {dim}), got {tuple(matrix.shape)}")
    if rows is not None and matrix.shape[0] != rows:
        raise FactweaveError(f"got {matrix.shape[0]} vectors for {rows} ids")
    if not np.isfinite(matrix).all():
        raise FactweaveError("vectors contain NaN or infinite values")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        row = int(np.flatnonzero(norms[:, 0] == 0)[0])
        raise FactweaveError(f"vector {row} is all zeros: cosine similarity is undefined for it")
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def _check_metadata_value(key: str, value: Any, position: int) -> None:
    if isinstance(value, bool | str) or (isinstance(value, int | float) and math.isfinite(value)):
        return
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return
    raise FactweaveError(
        f"metadata {position} key {key!r}: values must be strings, finite numbers, booleans or "
        f"lists of strings, got {type(value).__name__}"
    )


def check_metadata(metadata: Sequence[dict] | None, count: int) -> list[dict[str, Any]]:
    if metadata is None:
        return [{} for _ in range(count)]
    metadata = list(metadata)
    if len(metadata) != count:
        raise FactweaveError(f"got {len(metadata)} metadata entries for {count} ids")
    checked = []
    for position, entry in enumerate(metadata):
        if entry is None:
            entry = {}
        if not isinstance(entry, Mapping):
            raise FactweaveError(f"metadata {position} must be a dict, got {type(entry).__name__}")
        for key, value in entry.items():
            if not isinstance(key, str) or not key:
                raise FactweaveError(f"metadata {position} has a key that is not a non-empty string: {key!r}")
            _check_metadata_value(key, value, position)
        checked.append(dict(entry))
    return checked


def check_upsert(ids: Sequence[str], vectors: Any, metadata: Sequence[dict] | None,
                 dim: int) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
    """Checked ids, unit-length vectors and metadata; a repeated id keeps its last occurrence
    (as if the rows were upserted one after another)."""
    ids = check_ids(ids)
    matrix = check_matrix(vectors, dim, rows=len(ids))
    entries = check_metadata(metadata, len(ids))
    last = {item: position for position, item in enumerate(ids)}
    if len(last) != len(ids):
        keep = sorted(last.values())
        ids = [ids[i] for i in keep]
        matrix = matrix[keep]
        entries = [entries[i] for i in keep]
    return ids, matrix, entries


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise FactweaveError(f"k must be a positive integer, got {k!r}")
    return int(k)
