"""The agent: knowledge-web retrieval, re-ranking and ReFactX constrained generation, joined."""
from __future__ import annotations

from .fact_agent import REWRITE_MODES, TREE_MODES, AgentAnswer, FactAgent
from .grounding import DONT_KNOW, Grounding, ground, knows
from .trace import describe_step

__all__ = ["DONT_KNOW", "REWRITE_MODES", "TREE_MODES", "AgentAnswer", "FactAgent", "Grounding", "describe_step", "ground", "knows"]
