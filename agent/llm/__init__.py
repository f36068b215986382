"""Chat models behind one small interface, and an OpenAI-compatible server for any of them.

Example (not run: needs a model or an OpenAI endpoint)::

    from agent.llm import chat_client_from_env

    chat = chat_client_from_env()          # GPT when OPENAI_API_KEY is set, else the local model
    chat.complete([{"role": "user", "content": "Say hi."}], max_tokens=8)
"""
from __future__ import annotations

from .client import (
    ChatClient,
    ChatError,
    LocalChat,
    OpenAIChat,
    chat_client_from_env,
)

__all__ = ["ChatClient", "ChatError", "LocalChat", "OpenAIChat", "chat_client_from_env"]
