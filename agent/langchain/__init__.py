"""factweave the LangChain way: thin adapters over the core objects.

- :class:`ChatFactweave`: the ReFactX-constrained local model as a ``BaseChatModel``;
- :class:`KnowledgeWebRetriever`: the knowledge web as a ``BaseRetriever``;
- :class:`FactAgentRunnable`: the agent as a ``Runnable`` (invoke, stream of events, batch);
- :class:`FactweaveTool`: the agent as a ``BaseTool`` another LangChain agent can call.
"""
from __future__ import annotations

from .chat_model import ChatFactweave
from .retriever import KnowledgeWebRetriever
from .runnable import FactAgentRunnable
from .tool import FactweaveQuestion, FactweaveTool

__all__ = ["ChatFactweave", "FactAgentRunnable", "FactweaveQuestion", "FactweaveTool", "KnowledgeWebRetriever"]
