"""The FastAPI app: ``GET /v1/models`` and ``POST /v1/chat/completions`` over any set of models.

Checks, in order: the request's ``Host``, ``Origin`` and content type (403/415, :mod:`.origins`:
no web page the user visits can drive the server), the bearer key (401), the body size (413, before parsing), the body (400),
the model (404 ``model_not_found``, naming the served ids), room to generate (429 with
Retry-After). Errors have OpenAI's error body, so SDKs raise their usual exceptions.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent.errors import FactweaveError, first_validation_error

from ..http.errors import ApiError, error_body
from ..http.origins import OriginGuard, OriginPolicy, key_refused

from ..llm.client import ChatClient
from ..pipeline import FactAgent
from . import wire
from .agent_model import AgentModel
from .limits import RequestGate, ServerLimits, read_body
from .models import ChatClientModel, ReplyEnd, ReplyError, ServedModel
from .worker import Generation

log = logging.getLogger(__name__)


def create_app(models: Any, api_key: str | None = None, *, limits: ServerLimits | None = None,
               default_max_tokens: int = 256, origins: OriginPolicy | None = None) -> FastAPI:
    """A FastAPI app serving ``models``: one or several :class:`~agent.llm.client.ChatClient`,
    :class:`~agent.pipeline.FactAgent` or :class:`ServedModel`; a request without ``model`` gets
    the first. With ``api_key`` every request needs that bearer key. ``origins``: the host names
    and web-page origins allowed beyond loopback (:class:`~.origins.OriginPolicy`).

    Example (not run: needs a model; starts a server)::

        app = create_app([fact_agent, LocalChat(loaded)], api_key="s3cret",
                         limits=ServerLimits(max_concurrency=2, max_queue=8))
        uvicorn.run(app, host="127.0.0.1", port=8000)
    """
    served = served_models(models, default_max_tokens)
    limits = limits or ServerLimits()
    gate = RequestGate(limits.max_concurrency, limits.max_queue)
    app = FastAPI(title="factweave OpenAI-compatible server", docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.models, app.state.gate, app.state.limits = served, gate, limits
    origins = origins or OriginPolicy()
    if origins.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(origins.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["authorization", "content-type"])
    app.add_middleware(OriginGuard, policy=origins)  # added last: runs first
    created = int(time.time())

    def check_key(request: Request) -> None:
        refused = key_refused(request.headers.get("authorization"), api_key)
        if refused is not None:
            raise refused

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(exc.detail), "invalid_request_error"), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        where, what = first_validation_error(exc.errors(), skip=("body",))
        return JSONResponse(error_body(f"{where}: {what}" if where else what, "invalid_request_error",
                                            param=where or None), status_code=400)

    @app.get("/v1/models", dependencies=[Depends(check_key)])
    def list_models() -> dict[str, Any]:
        return {"object": "list",
                "data": [{"id": model_id, "object": "model", "created": created, "owned_by": "factweave"}
                         for model_id in served]}

    @app.post("/v1/chat/completions", dependencies=[Depends(check_key)])
    async def chat_completions(request: Request) -> Any:
        body = _parse(await read_body(request, limits.max_request_bytes))
        if body.n != 1:
            raise ApiError(400, "n: only n=1 is supported", param="n")
        limits.check_reply_tokens(body.max_completion_tokens, "max_completion_tokens")
        limits.check_reply_tokens(body.max_tokens, "max_tokens")
        model = served.get(body.model) if body.model is not None else next(iter(served.values()))
        if model is None:
            raise ApiError(404, f"model {body.model!r} not found; served: {', '.join(served)}",
                                code="model_not_found", param="model")
        generation = Generation(lambda stop: model.reply(body, stop), gate.admit_or_refuse(),
                                name=f"factweave-generation-{model.id}")
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            # Wait for the model's first piece before answering, so that a request it refuses
            # or fails on at once gets a real HTTP status, streaming or not.
            first = await _next_unless_gone(generation, gone)
            if body.stream:
                gone.cancel()  # from here on the streaming response watches the connection
                return StreamingResponse(_stream(generation, first, completion_id, model.id, body),
                                         media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            pieces: list[str] = []
            piece = first
            while isinstance(piece, str):
                pieces.append(piece)
                piece = await _next_unless_gone(generation, gone)
            end = _ended(piece)
        except _ClientGone:
            log.info("%s: the client went away; stopping its generation with %s", completion_id, model.id)
            generation.cancel()
            return Response(status_code=499)  # nobody reads it (nginx's "client closed request")
        except Exception as exc:
            generation.stop.set()
            return _failure(exc, model.id)
        finally:
            gone.cancel()
        return wire.completion(completion_id, model.id, "".join(pieces), end.finish_reason,
                               wire.usage(end.prompt_tokens, end.completion_tokens), end.extra)

    return app


class _ClientGone(Exception):
    """The client disconnected before its reply was complete."""


async def _disconnected(request: Request) -> None:
    """Return once the client disconnects (the body has been read: nothing else arrives)."""
    try:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - a connection that broke is a client that went away
        return


async def _next_unless_gone(generation: Generation, gone: asyncio.Future) -> Any:
    """The generation's next piece, unless the client disconnects first (a request waiting in
    the queue, or a whole reply being written: either way nobody would read it)."""
    piece = asyncio.ensure_future(generation.next())
    await asyncio.wait({piece, gone}, return_when=asyncio.FIRST_COMPLETED)
    if piece.done():
        return piece.result()
    piece.cancel()
    raise _ClientGone


def _parse(raw: bytes) -> wire.ChatRequest:
    try:
        return wire.ChatRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        # The app's validation handler words it: "messages: List should have at least 1 item".
        raise RequestValidationError(exc.errors()) from None


def _ended(piece: Any) -> ReplyEnd:
    if not isinstance(piece, ReplyEnd):
        raise ReplyError("the model ended without finishing its reply")
    return piece


def _failure(exc: Exception, model_id: str) -> JSONResponse:
    """A failed reply as an HTTP error: the model's own status, 502 for a failing backend."""
    if not isinstance(exc, FactweaveError):
        log.error("model %s failed", model_id, exc_info=exc)
        return JSONResponse(error_body(f"internal error ({type(exc).__name__})", "server_error"),
                            status_code=500)
    status, kind = (exc.status, exc.kind) if isinstance(exc, ReplyError) else (502, "server_error")
    if status >= 500:
        log.warning("chat completion with %s failed: %s", model_id, exc)
    return JSONResponse(error_body(str(exc), kind), status_code=status)


async def _stream(generation: Generation, first: Any, completion_id: str, model_id: str,
                  body: wire.ChatRequest) -> AsyncIterator[str]:
    """The reply as OpenAI stream chunks: the role, each piece of text as it comes, the finish
    (with the model's extra fields; after it the usage chunk when asked for), then ``[DONE]``.
    A failure after the first chunk is sent in-band as an error event, as OpenAI does."""
    created = int(time.time())
    done = False
    try:
        yield wire.sse(wire.chunk(completion_id, model_id, created, {"role": "assistant", "content": ""}))
        piece = first
        while isinstance(piece, str):
            if piece:
                yield wire.sse(wire.chunk(completion_id, model_id, created, {"content": piece}))
            piece = await generation.next()
        end = _ended(piece)
        last = wire.chunk(completion_id, model_id, created, {}, end.finish_reason)
        options = body.stream_options
        if options is not None and options.include_usage:
            yield wire.sse(last)
            last = wire.chunk(completion_id, model_id, created, None)
            last["usage"] = wire.usage(end.prompt_tokens, end.completion_tokens)
        yield wire.sse({**last, **end.extra})
        yield wire.sse("[DONE]")
        done = True
    except Exception as exc:
        message = str(exc) if isinstance(exc, FactweaveError) else f"internal error ({type(exc).__name__})"
        log.warning("streamed chat completion with %s failed: %s", model_id, message)
        yield wire.sse(error_body(message, "server_error"))
        yield wire.sse("[DONE]")
        done = True
    finally:
        if not done:
            # The client disconnected mid-stream (the response task was cancelled): the model
            # stops generating for nobody.
            log.info("%s: the client went away; stopping its generation with %s", completion_id, model_id)
            generation.cancel()


def served_models(models: Any, default_max_tokens: int = 256) -> dict[str, ServedModel]:
    """``models`` (one, or an iterable of: :class:`ServedModel`, :class:`ChatClient`,
    :class:`~agent.pipeline.FactAgent`) as served models by id, in the given order."""
    items = [models] if not isinstance(models, Iterable) or isinstance(models, (str, bytes)) else list(models)
    if not items:
        raise ValueError("give at least one model to serve")
    served: dict[str, ServedModel] = {}
    for item in items:
        model = _as_served(item, default_max_tokens)
        if model.id in served:
            raise ValueError(f"two served models have the id {model.id!r}")
        served[model.id] = model
    return served


def _as_served(item: Any, default_max_tokens: int) -> ServedModel:
    if isinstance(item, FactAgent):
        return AgentModel(item)
    if isinstance(item, ServedModel):
        return item
    if isinstance(item, ChatClient):
        return ChatClientModel(item, default_max_tokens)
    raise TypeError(f"cannot serve {item!r}: give a ChatClient, a FactAgent or a ServedModel")
