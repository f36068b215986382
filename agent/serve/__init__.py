"""An OpenAI-compatible HTTP server for any set of models: plain chat clients and the agent.

Endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions`` (whole replies, and
``stream=true`` as server-sent events). The real ``openai`` SDK talks to it, so anything that
speaks the OpenAI API (LangChain, the SDK, curl) can use a local model or the factweave agent.
It binds 127.0.0.1 unless told otherwise; an optional bearer key guards every endpoint; request
size and the number of generations running and waiting are limited (413, 429).

- ``wire``: the OpenAI request, reply, chunk and error formats;
- ``models``: what is served (:class:`ServedModel`; a plain :class:`ChatClientModel`);
- ``agent_model``: the factweave agent as a served model (id ``factweave``);
- ``limits``: body size and the concurrency gate; ``worker``: a generation's thread;
- ``app``: the FastAPI app; ``serving``: serving it in the foreground or a thread;
- ``vllm_server``: ``factweave serve --engine vllm`` (vLLM's server, the rule inside, these checks).

The names below load on first use (PEP 562), so vLLM's server can import the request checks
(:mod:`.vllm_server`, :mod:`agent.http.origins`) without the agent and its dependencies. (No module is
named like a name it exports: importing it would bind the package's name to the module.)

Example (not run: needs a model; starts a server)::

    from agent.llm import LocalChat
    from agent.serve import serve_in_thread

    base_url, stop = serve_in_thread(LocalChat("smollm2-135m"))   # or [fact_agent, local_chat]
    # OpenAI(base_url=base_url, api_key="unused").chat.completions.create(...)
    stop()
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..extras import require

require("serve", "agent.serve (factweave serve)")

if TYPE_CHECKING:
    from .agent_model import AGENT_MODEL_ID, AgentModel
    from .app import create_app, served_models
    from .limits import RequestGate, ServerLimits
    from .models import BadReplyRequest, ChatClientModel, ReplyEnd, ReplyError, ServedModel
    from .serving import base_url, bind_socket, run, serve_in_thread

_HOMES = {"AGENT_MODEL_ID": "agent_model", "AgentModel": "agent_model", "create_app": "app",
          "served_models": "app", "RequestGate": "limits", "ServerLimits": "limits", "BadReplyRequest": "models",
          "ChatClientModel": "models", "ReplyEnd": "models", "ReplyError": "models", "ServedModel": "models",
          "base_url": "serving", "bind_socket": "serving",
          "run": "serving", "serve_in_thread": "serving"}
__all__ = ["AGENT_MODEL_ID", "AgentModel", "BadReplyRequest", "ChatClientModel", "ReplyEnd",
           "ReplyError", "RequestGate", "ServedModel", "ServerLimits", "base_url", "bind_socket",
           "create_app", "run", "serve_in_thread", "served_models"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_HOMES[name]}", __name__), name)
