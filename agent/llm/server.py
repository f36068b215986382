"""A minimal OpenAI-compatible HTTP server over any :class:`ChatClient`.

Endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions`` (non-streaming, and
``stream=true`` as server-sent events). The real ``openai`` SDK talks to it, so anything that
speaks the OpenAI API (LangChain, the SDK, curl) can use a local model or the product's agent.
Binds 127.0.0.1 unless told otherwise; an optional bearer key guards every endpoint.

Example::

    from agent.llm import LocalChat
    from agent.llm.server import serve_in_thread

    base_url, stop = serve_in_thread(LocalChat("smollm2-135m"))
    # OpenAI(base_url=base_url, api_key="unused").chat.completions.create(...)
    stop()
"""
from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from agent.errors import FactweaveError

from .client import ChatClient

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_STARTUP_TIMEOUT_S = 10.0


class _ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = "text"
    text: str | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[_ContentPart] | None = None

    def plain(self) -> dict[str, str]:
        """The message as ``{"role", "content"}`` with multi-part text joined."""
        if isinstance(self.content, list):
            text = "".join(p.text or "" for p in self.content if p.type == "text")
        else:
            text = self.content or ""
        return {"role": self.role, "content": text}


class _ChatRequest(BaseModel):
    # Unknown OpenAI parameters (top_p, seed, user, ...) are accepted and ignored, as many
    # compatible servers do, so ordinary SDK calls never fail on them.
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[_Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stop: str | list[str] | None = None
    stream: bool = False
    n: int = 1


def _error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def create_app(client: ChatClient, api_key: str | None = None, *,
               default_max_tokens: int = 256) -> FastAPI:
    """A FastAPI app serving ``client``; with ``api_key`` every request needs that bearer key.

    Example::

        app = create_app(LocalChat("smollm2-135m"), api_key="s3cret")
        uvicorn.run(app, host="127.0.0.1", port=8000)
    """
    app = FastAPI(title="factweave OpenAI-compatible server", docs_url=None, redoc_url=None)
    created = int(time.time())

    def check_key(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        # Constant-time comparison, so the key cannot be guessed from response timings.
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), api_key.encode()):
            raise HTTPException(status_code=401, detail="invalid or missing API key")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = "authentication_error" if exc.status_code == 401 else "invalid_request_error"
        return JSONResponse(_error_body(str(exc.detail), kind), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        message = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request"
        return JSONResponse(_error_body(message, "invalid_request_error"), status_code=400)

    @app.get("/v1/models", dependencies=[Depends(check_key)])
    def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": client.name, "object": "model", "created": created,
                      "owned_by": "factweave"}],
        }

    # A plain `def`: FastAPI runs it in a worker thread, so a slow generation never blocks
    # the event loop (other requests, /v1/models, shutdown).
    @app.post("/v1/chat/completions", dependencies=[Depends(check_key)])
    def chat_completions(body: _ChatRequest) -> Any:
        if body.n != 1:
            raise HTTPException(status_code=400, detail="n: only n=1 is supported")
        stop = [body.stop] if isinstance(body.stop, str) else body.stop
        try:
            text = client.complete(
                [m.plain() for m in body.messages],
                max_tokens=body.max_completion_tokens or body.max_tokens or default_max_tokens,
                temperature=body.temperature or 0.0,
                stop=stop or None,
            )
        except FactweaveError as exc:
            log.warning("chat completion failed: %s", exc)
            return JSONResponse(_error_body(str(exc), "server_error"), status_code=502)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if body.stream:
            return StreamingResponse(
                _sse_chunks(completion_id, client.name, text), media_type="text/event-stream"
            )
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": client.name,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": text}}],
            # Token counts would need the client's tokenizer; zeros keep the shape valid.
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    return app


def _sse_chunks(completion_id: str, model: str, text: str) -> Iterator[str]:
    """The reply as OpenAI streaming chunks: role, content, finish, then ``[DONE]``.

    The text is complete before the first chunk (``ChatClient.complete`` is not
    incremental), so streaming here is about compatibility with streaming callers.
    """
    base = {"id": completion_id, "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    deltas = [({"role": "assistant", "content": ""}, None), ({"content": text}, None), ({}, "stop")]
    for delta, finish in deltas:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def _warn_if_exposed(host: str, api_key: str | None) -> None:
    if host not in (LOOPBACK, "localhost", "::1") and api_key is None:
        log.warning("serving on %s without an API key: anyone who reaches it can use the model",
                    host)


def serve_in_thread(client: ChatClient, host: str = LOOPBACK, port: int = 0, *,
                    api_key: str | None = None) -> tuple[str, Callable[[], None]]:
    """Start the server in a daemon thread; return its ``base_url`` (``.../v1``) and a stop.

    ``port=0`` picks a free port. Returns once the server accepts connections.

    Example::

        base_url, stop = serve_in_thread(client)
        try:
            OpenAIChat(client.name, base_url=base_url).complete(messages)
        finally:
            stop()
    """
    import uvicorn

    _warn_if_exposed(host, api_key)
    # Binding here (not inside uvicorn) gives the real port of port=0 before the thread runs.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise FactweaveError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(client, api_key), log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"factweave-llm-server-{bound_port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise FactweaveError(f"the chat server on {host}:{bound_port} did not start")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()

    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{bound_port}/v1", stop


def run(client: ChatClient, host: str = LOOPBACK, port: int = 8000,
        api_key: str | None = None) -> None:
    """Serve ``client`` in the foreground until interrupted (what ``factweave llm serve`` runs).

    Example::

        run(LocalChat("qwen2.5-coder-0.5b"), port=8000, api_key=os.environ.get("FACTWEAVE_API_KEY"))
    """
    import uvicorn

    _warn_if_exposed(host, api_key)
    log.info("serving %s at http://%s:%d/v1", client.name, host, port)
    uvicorn.run(create_app(client, api_key), host=host, port=port, log_level="info")
