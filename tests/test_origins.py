"""The request checks of ``factweave serve`` and the UI (:mod:`agent.http.origins`) on a real
uvicorn server over real sockets: the ``Host`` header read whole, and WebSocket handshakes held
to the same ``Host``/``Origin`` rules as HTTP requests (no model needed: a scripted chat model)."""
from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
from llm_fixtures import ScriptedChat

from agent.errors import FactweaveError
from agent.http.origins import OriginGuard, OriginPolicy


def _get(base_url: str, path: str, host: str) -> int:
    """The status of ``GET path`` sent with this exact ``Host`` header."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.putrequest("GET", parts.path + path, skip_host=True)
    connection.putheader("Host", host)
    connection.endheaders()
    status = connection.getresponse().status
    connection.close()
    return status


def test_a_host_header_is_read_whole_not_up_to_a_bracket(serve_chat):
    """The review's request: ``Host: [::1]@evil.example`` was served as ``::1`` (everything after
    ``]`` ignored). A host is a bracketed IPv6 address or a name, then an optional ``:port`` of
    digits; anything else is refused."""
    base_url = serve_chat(ScriptedChat("hi"))
    port = urlsplit(base_url).port
    for host in ["[::1]@evil.example", f"[::1]:{port}@evil.example", "[::1]evil.example", f"[::1]:{port}x",
                 "[evil.example]", f"localhost:{port}:1", "localhost:http", "127.0.0.1 evil.example",
                 f"evil.example@127.0.0.1:{port}", ""]:
        assert _get(base_url, "/models", host) == 403, host
    for host in [f"[::1]:{port}", "[::1]", f"127.0.0.1:{port}", f"localhost:{port}", "localhost.",
                 f"[0:0:0:0:0:0:0:1]:{port}"]:
        assert _get(base_url, "/models", host) == 200, host


def test_allowed_host_names_are_read_as_hosts():
    policy = OriginPolicy.of(["Factweave.LAN", ".example.org", "::1", "[fe80::1]"])
    assert policy.allowed_hosts == ("factweave.lan", ".example.org", "::1", "fe80::1")
    assert policy.host_refused("factweave.lan:8000") is None and policy.host_refused("a.example.org") is None
    with pytest.raises(FactweaveError, match="not a host name"):
        OriginPolicy.of(["evil.example/path"])


async def _echo(scope, receive, send) -> None:
    """An ASGI app with one WebSocket route that accepts and echoes, and one HTTP route."""
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    assert scope["type"] == "websocket"
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    message = await receive()
    if message["type"] == "websocket.receive":
        await send({"type": "websocket.send", "text": message.get("text") or ""})
    await send({"type": "websocket.close", "code": 1000})


@pytest.fixture
def guarded_ws_url():
    """``ws://127.0.0.1:<port>/`` of a uvicorn server running :func:`_echo` behind the guard."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = OriginGuard(_echo, OriginPolicy(), json_posts=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"ws://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(10)


def _handshake(url: str, host: str | None = None, **headers: str) -> str | int:
    """What the server at ``url`` says to a WebSocket opened with ``headers`` (and naming
    ``host`` in its ``Host``): the echo of "hi", or the HTTP status the handshake was refused with."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    parts = urlsplit(url)
    named = f"ws://{host}/" if host else url

    async def run() -> str | int:
        try:
            async with connect(named, host=parts.hostname, port=parts.port, additional_headers=headers,
                               open_timeout=10) as ws:
                await ws.send("hi")
                return await ws.recv()
        except InvalidStatus as exc:
            return exc.response.status_code

    return asyncio.run(run())


def test_a_websocket_from_another_site_is_refused_before_it_is_accepted(guarded_ws_url):
    """The review's request: the guard checked HTTP requests only, so any page (whose browser
    sends its own ``Origin``) or a rebinding ``Host`` could open a WebSocket. Both are refused
    before the handshake completes (403); the server's own page and clients without an Origin
    go on."""
    port = urlsplit(guarded_ws_url).port
    assert _handshake(guarded_ws_url, Origin="http://evil.example") == 403
    assert _handshake(guarded_ws_url, host=f"evil.example:{port}") == 403
    assert _handshake(guarded_ws_url) == "hi"
    assert _handshake(guarded_ws_url, Origin=f"http://127.0.0.1:{port}") == "hi"
