"""The agent: knowledge-web retrieval, re-ranking and ReFactX constrained generation, joined."""
from __future__ import annotations

from .pipeline import TREE_MODES, AgentAnswer, FactAgent

__all__ = ["TREE_MODES", "AgentAnswer", "FactAgent"]
