"""Opening the pieces together: a model, the index of a knowledge source, and a generator."""
from __future__ import annotations

from pathlib import Path

from .decoding.generate import FactGenerator
from .index.files import open_index
from .knowledge.kamel import demo_kamel_root
from .models import default_cache_dir, load_model

# Chosen by measurement on the demo KB (README, "Model presets"): the best accuracy per second
# of the three packaged models on a 2-core CPU.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def open_generator(model: str = DEFAULT_MODEL, kb: str | Path | None = None, *, index: str | Path | None = None,
                   inverse: bool = False, beams: int = 1, max_new_tokens: int = 160, device: str | None = None,
                   dtype: str | None = None, cache_dir: Path | None = None, progress: bool = True) -> FactGenerator:
    """A ready :class:`FactGenerator`: ``model`` (preset, folder or HF id) over the knowledge
    source ``kb`` (default: the bundled demo KB), its index cached under ``cache_dir``.

    >>> gen = open_generator("smollm2-135m")                      # doctest: +SKIP
    >>> gen.answer("What is the original language of Kalakalappu 2?").answer   # doctest: +SKIP
    """
    cache_dir = cache_dir or default_cache_dir()
    loaded = load_model(model, device=device, dtype=dtype, cache_dir=cache_dir)
    fact_index = open_index(kb or demo_kamel_root(), loaded.tokenizer, cache_dir, index_path=index,
                            inverse=inverse, model_name=loaded.name, progress=progress)
    return FactGenerator(loaded.model, loaded.tokenizer, fact_index, beams=beams, max_new_tokens=max_new_tokens)
