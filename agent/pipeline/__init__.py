"""The agent: knowledge-web retrieval, re-ranking and ReFactX constrained generation, joined."""
from __future__ import annotations

from .fact_agent import DONT_KNOW, TREE_MODES, AgentAnswer, FactAgent, knows
from .trace import describe_step

__all__ = ["DONT_KNOW", "TREE_MODES", "AgentAnswer", "FactAgent", "describe_step", "knows"]
