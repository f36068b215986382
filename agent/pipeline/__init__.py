"""The agent: knowledge-web retrieval, re-ranking and ReFactX constrained generation, joined.

The names below are loaded on first use (PEP 562): :class:`FactAgent` imports torch, and the
settings and the command line import :class:`AgentOptions` and the conversation limits from this
package without paying for it.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent_options import REWRITE_MODES, TREE_MODES, AgentOptions
    from .fact_agent import AgentAnswer, FactAgent
    from .grounding import DONT_KNOW, Grounding, ground, knows
    from .trace import describe_step

_HOMES = {"REWRITE_MODES": "agent_options", "TREE_MODES": "agent_options", "AgentOptions": "agent_options",
          "AgentAnswer": "fact_agent", "FactAgent": "fact_agent", "DONT_KNOW": "grounding", "Grounding": "grounding",
          "ground": "grounding", "knows": "grounding", "describe_step": "trace"}
__all__ = ["DONT_KNOW", "REWRITE_MODES", "TREE_MODES", "AgentAnswer", "AgentOptions", "FactAgent", "Grounding",
           "describe_step", "ground", "knows"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_HOMES[name]}", __name__), name)
