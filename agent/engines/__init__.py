"""Engines: what computes a model's next-token logits under ReFactX decoding. ``transformers``
(always there: any Hugging Face model, CPU or GPU, batches and beams) and ``llama.cpp`` (the
presets' GGUF files on CPUs, the ``[llama]`` extra: :mod:`.llama_cpp`). The decoding rule is the
same for both (:mod:`agent.decoding.greedy`)."""
from __future__ import annotations

import importlib.util

ENGINES = ("transformers", "llama.cpp")


def installed(engine: str) -> bool:
    """Whether ``engine`` can run here (its package is installed)."""
    if engine == "transformers":
        return True
    if engine == "llama.cpp":
        return importlib.util.find_spec("llama_cpp") is not None
    return False


def default_engine(*, preset: bool, on_cpu: bool) -> str:
    """The engine ``auto`` picks: llama.cpp for a preset (its GGUF file) on the CPU where it is
    installed, else transformers (``benchmarks/engines.py`` measures both)."""
    return "llama.cpp" if preset and on_cpu and installed("llama.cpp") else "transformers"
