"""Running the server: in the foreground (the CLI) or in a background thread (tests, notebooks)."""
from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from agent.errors import FactweaveError

from .app import create_app
from .limits import ServerLimits
from ..http.origins import LOOPBACK, OriginPolicy, refuse_if_exposed

log = logging.getLogger(__name__)

_STARTUP_TIMEOUT_S = 10.0


def bind_socket(host: str = LOOPBACK, port: int = 0) -> socket.socket:
    """A listening-ready socket bound to ``host:port`` (``port=0``: a free one), or one line
    saying why not. Binding before a model loads makes a taken port fail at once."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise FactweaveError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def base_url(sock: socket.socket) -> str:
    """``http://host:port/v1`` of a bound socket."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def _server(models: Any, api_key: str | None, limits: ServerLimits | None, log_level: str,
            origins: OriginPolicy | None = None) -> Any:
    import uvicorn

    config = uvicorn.Config(create_app(models, api_key, limits=limits, origins=origins), log_level=log_level,
                            access_log=log_level == "info", lifespan="off", timeout_graceful_shutdown=2)
    return uvicorn.Server(config)


def serve_in_thread(models: Any, host: str = LOOPBACK, port: int = 0, *, api_key: str | None = None,
                    limits: ServerLimits | None = None, origins: OriginPolicy | None = None,
                    insecure: bool = False) -> tuple[str, Callable[[], None]]:
    """Serve ``models`` (see :func:`create_app`) from a daemon thread; return its ``base_url``
    (``.../v1``) and a function that stops it. ``port=0`` picks a free port. Returns once the
    server accepts connections.

    Example (not run: needs a model; starts a server)::

        base_url, stop = serve_in_thread([fact_agent, local_chat], limits=ServerLimits(max_queue=0))
        try:
            OpenAIChat(local_chat.name, base_url=base_url).complete(messages)
        finally:
            stop()
    """
    refuse_if_exposed(host, api_key, insecure)
    sock = bind_socket(host, port)
    try:
        server = _server(models, api_key, limits, "warning", origins)
    except BaseException:
        sock.close()
        raise
    url = base_url(sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"factweave-server-{url.rsplit(':', 1)[1]}", daemon=True)
    thread.start()
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise FactweaveError(f"the server at {url} did not start")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()

    return url, stop


def run(models: Any, host: str = LOOPBACK, port: int = 8000, api_key: str | None = None, *,
        limits: ServerLimits | None = None, sock: socket.socket | None = None,
        origins: OriginPolicy | None = None, insecure: bool = False) -> None:
    """Serve ``models`` in the foreground until interrupted (``factweave serve``, ``factweave llm
    serve``); ``sock``: an already bound socket (see :func:`bind_socket`).

    Example (not run: needs a model; starts a server)::

        run(LocalChat("qwen2.5-coder-0.5b"), port=8000, api_key=os.environ.get("FACTWEAVE_API_KEY"))
    """
    refuse_if_exposed(host, api_key, insecure)
    sock = sock or bind_socket(host, port)
    try:
        server = _server(models, api_key, limits, "info", origins)
        # uvicorn announces its address only for sockets it binds itself; say it in its format.
        logging.getLogger("uvicorn.error").info(
            "Serving %s at %s%s (Ctrl-C stops)", ", ".join(server.config.app.state.models), base_url(sock),
            " with a bearer key" if api_key else "")
        server.run(sockets=[sock])
    finally:
        sock.close()
