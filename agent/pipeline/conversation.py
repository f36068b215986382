"""A conversation as the agent takes it: the question, and the earlier turns, bounded.

Every entry point (the UI, the OpenAI-compatible server, the LangChain runnable, the MCP ``ask``
tool, the CLI) turns what it was given into ``(question, history)`` here, so the bound on how
much of a conversation reaches the agent lives in one place: the last ``MAX_TURNS`` messages,
within ``MAX_CHARS`` characters. A follow-up needs the turn or two before it; a long history
would only slow the rewriting and drown the entities it looks for.

A message is ``{"role": ..., "content": ...}`` (OpenAI's roles), a LangChain message, or a
``(role, content)`` pair. ``user``/``human`` and ``assistant``/``ai`` messages are turns;
system and tool messages are not part of what was said, and are dropped.

Example::

    question, history = split_conversation([
        {"role": "user", "content": "Where did Buck Owens die?"},
        {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\\nAnswer: Bakersfield"},
        {"role": "user", "content": "What instrument did he play?"}])
    question    # "What instrument did he play?"
    history     # the two earlier turns, oldest first
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import FactweaveError

MAX_TURNS = 6
"""Earlier messages (user or assistant, each one a turn) the agent gets at most."""
MAX_CHARS = 4000
"""Characters of earlier turns the agent gets at most (the newest turns are kept)."""

_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}


def as_turn(message: Any) -> dict[str, str] | None:
    """``message`` as ``{"role": "user" | "assistant", "content": str}``, or None for a message
    that is not a turn (system, tool). Raises :class:`FactweaveError` for what is no message."""
    if isinstance(message, Mapping):
        role, content = message.get("role", message.get("type")), message.get("content")
    elif isinstance(message, (tuple, list)) and len(message) == 2:
        role, content = message
    elif hasattr(message, "type") and hasattr(message, "content"):  # a LangChain message
        role, content = message.type, getattr(message, "text", message.content)
    else:
        raise FactweaveError(f"a conversation message is {{\"role\", \"content\"}}, not {type(message).__name__}")
    if not isinstance(role, str):
        raise FactweaveError(f"a conversation message needs a role, got {role!r}")
    if role not in _ROLES:
        return None
    if isinstance(content, list):  # OpenAI's / LangChain's list of content parts: the text ones
        content = "".join(p if isinstance(p, str) else str(p.get("text") or "") for p in content
                          if isinstance(p, str) or isinstance(p, Mapping) and p.get("type", "text") == "text")
    if not isinstance(content, str):
        content = "" if content is None else str(content)
    return {"role": _ROLES[role], "content": content}


def trim_history(history: Iterable[Any] | None, max_turns: int = MAX_TURNS,
                 max_chars: int = MAX_CHARS) -> list[dict[str, str]]:
    """The newest turns of ``history`` (oldest first, as ``{"role", "content"}``): at most
    ``max_turns`` of them, within ``max_chars`` characters of content. Empty turns and non-turns
    (system, tool) are dropped. When even the newest turn is longer than ``max_chars``, its last
    ``max_chars`` characters are kept (an agent's reply ends with its answer).

    >>> trim_history([{"role": "user", "content": "a" * 10}, {"role": "assistant", "content": "b" * 10}],
    ...              max_chars=15)
    [{'role': 'assistant', 'content': 'bbbbbbbbbb'}]
    """
    if max_turns < 0 or max_chars < 0:
        raise ValueError("max_turns and max_chars must be >= 0")
    turns = [t for t in (as_turn(m) for m in history or []) if t is not None and t["content"].strip()]
    kept: list[dict[str, str]] = []
    used = 0
    for turn in reversed(turns[-max_turns:] if max_turns else []):
        size = len(turn["content"])
        if used + size > max_chars:
            if not kept and max_chars:
                kept.append({"role": turn["role"], "content": turn["content"][-max_chars:]})
            break
        kept.append(turn)
        used += size
    return kept[::-1]


def assistant_turn(reply: Mapping[str, Any]) -> str:
    """What the agent said in a finished reply (``AgentAnswer.as_dict()`` or the stream's answer
    event), as an assistant turn for the next question's history: the generated text, its
    ``Fact:`` lines and all; when the answer was withheld, a last line ``Answer: I don't know.``
    says so (as the server's reply does)."""
    from .fact_agent import DONT_KNOW

    text = (reply.get("text") or "").strip()
    answer = reply.get("answer") or DONT_KNOW
    if not text:
        return f"Answer: {answer}"
    trace = reply.get("trace") or {}
    if trace.get("withheld") or answer == DONT_KNOW and f"Answer: {DONT_KNOW}" not in text:
        text += f"\nAnswer: {DONT_KNOW}"
    return text


def split_conversation(messages: Sequence[Any], max_turns: int = MAX_TURNS,
                       max_chars: int = MAX_CHARS) -> tuple[str, list[dict[str, str]]]:
    """``(question, history)`` from a conversation: the question is the last user message's
    text; the history, the turns before it, trimmed by :func:`trim_history`. Raises
    :class:`FactweaveError` when no user message has text."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise FactweaveError(f"a conversation is a list of messages, not {type(messages).__name__}")
    turns = [as_turn(m) for m in messages]
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if turn is not None and turn["role"] == "user" and turn["content"].strip():
            return turn["content"].strip(), trim_history([t for t in turns[:i] if t], max_turns, max_chars)
    raise FactweaveError("the conversation has no user message with text to answer")
