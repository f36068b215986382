"""Opening a vector index by kind: the embedded usearch folder or a Pinecone index (the
interface and the comparison behind the default: :mod:`agent.web.vectors`)."""
from __future__ import annotations

import inspect
from typing import Any

from ..errors import FactweaveError
from .local_vectors import LocalVectorIndex
from .pinecone_index import PineconeVectorIndex
from .vectors import VectorIndex


def open_vector_index(kind: str = "local", **options: Any) -> VectorIndex:
    """Open a vector index by kind.

    * ``"local"``: ``folder``, ``dim``, ``fingerprint`` (and :class:`LocalVectorIndex`'s tuning
      options);
    * ``"pinecone"``: ``index_name``, ``dim`` and optionally ``namespace``, ``api_key`` (else
      ``PINECONE_API_KEY``), ``host``, ``batch_size``, ``max_retries`` (see
      :class:`agent.web.pinecone_index.PineconeVectorIndex`).
    """
    if kind == "local":

        factory: Any = LocalVectorIndex
    elif kind == "pinecone":
        factory = PineconeVectorIndex
    else:
        raise FactweaveError(f"unknown vector index kind {kind!r}; use 'local' or 'pinecone'")
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as error:
        raise FactweaveError(f"vector index {kind!r}: {error}") from None
    return factory(**options)
