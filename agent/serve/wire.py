"""The OpenAI chat-completions wire format: the request body, replies, stream chunks and errors.

Only what the server needs, with OpenAI's field names, so the ``openai`` SDK (and anything
else that speaks the API) reads the replies as it reads OpenAI's own.

Example::

    >>> request = ChatRequest.model_validate_json(b'{"model": "factweave", "messages": '
    ...                                           b'[{"role": "user", "content": "Hi"}]}')
    >>> request.question()
    'Hi'
    >>> request.conversation()      # the question and the earlier turns (the agent bounds them)
    ('Hi', [])
"""
from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.errors import FactweaveError
from agent.pipeline.conversation import split_conversation


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = "text"
    text: str | None = None


class Message(BaseModel):
    """One chat message; ``content`` may be a string or OpenAI's list of text parts.

    Example::

        >>> Message(role="user", content=[{"type": "text", "text": "Hi"}]).plain()
        {'role': 'user', 'content': 'Hi'}
    """

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None

    def plain(self) -> dict[str, str]:
        """The message as ``{"role", "content"}`` with multi-part text joined."""
        if isinstance(self.content, list):
            text = "".join(p.text or "" for p in self.content if p.type == "text")
        else:
            text = self.content or ""
        return {"role": self.role, "content": text}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """A ``POST /v1/chat/completions`` body.

    Unknown OpenAI parameters (top_p, seed, user, ...) are accepted and ignored, as many
    compatible servers do, so ordinary SDK calls never fail on them.

    Example::

        >>> ChatRequest(messages=[{"role": "user", "content": "Hi"}], stream=True).stream
        True
    """

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1

    def plain_messages(self) -> list[dict[str, str]]:
        return [m.plain() for m in self.messages]

    def stop_strings(self) -> list[str] | None:
        return ([self.stop] if isinstance(self.stop, str) else self.stop) or None

    def question(self) -> str:
        """The text of the last user message ("" when there is none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.plain()["content"].strip()
        return ""

    def conversation(self) -> tuple[str, list[dict[str, str]]]:
        """The last user message's text and the user and assistant turns before it, oldest first
        (:func:`agent.pipeline.conversation.split_conversation`; the agent bounds them by its own
        options); ``("", [])`` when no user message has text."""
        try:
            return split_conversation(self.plain_messages())
        except FactweaveError:
            return "", []


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion(completion_id: str, model: str, content: str, finish_reason: str,
               token_usage: dict[str, int], extra: dict[str, Any]) -> dict[str, Any]:
    """A whole ``chat.completion`` reply; ``extra`` adds top-level fields (e.g. ``factweave``)."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                     "message": {"role": "assistant", "content": content}}],
        "usage": token_usage,
        **extra,
    }


def chunk(completion_id: str, model: str, created: int, delta: dict[str, Any] | None,
          finish_reason: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta=None`` gives the usage chunk (no choices)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    return {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices}


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event; OpenAI streams end with the literal ``[DONE]``."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n"
