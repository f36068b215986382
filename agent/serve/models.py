"""What the server serves: models that turn a chat request into reply text, piece by piece.

A served model has an ``id`` (what ``/v1/models`` lists and requests name) and a ``reply``
method yielding the reply's text as it is produced (``""`` says "working, no new text yet"),
then one :class:`ReplyEnd` with the finish reason, token counts and extra response fields.
A plain :class:`~agent.llm.client.ChatClient` is served through :class:`ChatClientModel`;
the factweave agent through :class:`~agent.serve.agent_model.AgentModel`.

Example (not run: needs a model and a knowledge web)::

    models = served_models([LocalChat("smollm2-135m"), fact_agent])
    list(models)                     # ["smollm2-135m", "factweave"]
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

from agent.errors import FactweaveError

from ..llm.client import ChatClient
from .wire import ChatRequest


@dataclass
class ReplyEnd:
    """How a reply ended: ``finish_reason`` ("stop", or "length" when cut by the token budget),
    real token counts where the model knows them, ``extra`` top-level response fields, and
    whether the generation was ``stopped`` early (its client went away).

    Example::

        >>> ReplyEnd(finish_reason="stop", prompt_tokens=231, completion_tokens=26,
        ...          extra={"factweave": {"answer": "Oslo"}})
        ReplyEnd(finish_reason='stop', prompt_tokens=231, completion_tokens=26,
                 extra={'factweave': {'answer': 'Oslo'}}, stopped=False)
    """

    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False


ReplyPiece = Union[str, ReplyEnd]


class ReplyError(FactweaveError):
    """A reply that failed; ``status`` is the HTTP status answered when nothing was sent yet.

    Example::

        >>> raise ReplyError("the backend is down")           # HTTP 502, type server_error
        Traceback (most recent call last):
            ...
        agent.serve.models.ReplyError: the backend is down
    """

    status = 502
    kind = "server_error"


class BadReplyRequest(ReplyError):
    """A request this model cannot answer (e.g. a conversation without a user message).

    Example::

        >>> raise BadReplyRequest("messages: no user message with text to answer")   # HTTP 400
        Traceback (most recent call last):
            ...
        agent.serve.models.BadReplyRequest: messages: no user message with text to answer
    """

    status = 400
    kind = "invalid_request_error"


@runtime_checkable
class ServedModel(Protocol):
    """A model the server can serve.

    Example::

        >>> class Echo:
        ...     id = "echo"
        ...
        ...     def reply(self, request, stop):
        ...         yield request.question()
        ...         yield ReplyEnd()
    """

    id: str

    def reply(self, request: ChatRequest, stop: threading.Event) -> Iterator[ReplyPiece]: ...


class ChatClientModel:
    """A :class:`ChatClient` served as is: the whole conversation in, its reply out.

    The reply comes in one piece (``ChatClient.complete`` is not incremental). A local model
    (one with ``complete_counted``) stops when its client goes away and reports its token
    counts in ``usage``; a remote client's counts are not known, so its ``usage`` is zeros.

    Example (not run: needs a model)::

        ChatClientModel(LocalChat("smollm2-135m")).id      # "smollm2-135m"
    """

    def __init__(self, client: ChatClient, default_max_tokens: int = 256) -> None:
        self.client, self.id = client, client.name
        self.default_max_tokens = default_max_tokens

    def reply(self, request: ChatRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        asked: dict[str, Any] = {
            "max_tokens": request.max_completion_tokens or request.max_tokens or self.default_max_tokens,
            "temperature": request.temperature or 0.0, "stop": request.stop_strings()}
        counted = getattr(self.client, "complete_counted", None)
        if counted is None:
            yield self.client.complete(request.plain_messages(), **asked)
            yield ReplyEnd()
            return
        reply = counted(request.plain_messages(), cancel=stop, **asked)
        yield reply.text
        yield ReplyEnd(finish_reason=reply.finish_reason, prompt_tokens=reply.prompt_tokens,
                       completion_tokens=reply.completion_tokens, stopped=reply.cancelled)
