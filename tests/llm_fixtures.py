"""Fixtures for the LLM plumbing: the real SmolLM2 as a chat client, and the real
OpenAI-compatible server serving it on a free loopback port."""
from __future__ import annotations

import socket
import threading

import pytest


@pytest.fixture(scope="session")
def local_chat(smollm):
    """:class:`LocalChat` over the packaged SmolLM2-135M (real weights, CPU)."""
    from agent.llm import LocalChat

    return LocalChat(smollm)


@pytest.fixture(scope="session")
def openai_server(local_chat):
    """The real server from ``agent.serve`` serving ``local_chat``; yields its base_url."""
    from agent.serve import serve_in_thread

    base_url, stop = serve_in_thread(local_chat)
    yield base_url
    stop()


class ScriptedChat:
    """A real :class:`ChatClient` that always replies ``reply`` (or raises ``error``).

    Served through the real server and reached through the real ``openai`` SDK, it lets tests
    pin down the replies that a real model gives only sometimes (garbage, "none", an error).
    """

    def __init__(self, reply: str = "", *, name: str = "scripted", error: Exception | None = None,
                 release: threading.Event | None = None) -> None:
        self.name, self.reply, self.error = name, reply, error
        # When set, each call blocks until the event is set: a server that is too slow.
        self.release = release
        self.calls: list[list[dict[str, str]]] = []

    def complete(self, messages, *, max_tokens=256, temperature=0.0, stop=None) -> str:
        self.calls.append(messages)
        if self.release is not None:
            self.release.wait(timeout=30)
        if self.error is not None:
            raise self.error
        return self.reply


@pytest.fixture
def serve_chat():
    """Start the real server for any ChatClient: ``serve_chat(client, api_key=None) -> base_url``.

    Every server started is stopped when the test ends.
    """
    from agent.serve import serve_in_thread

    stops = []

    def start(client, **kwargs) -> str:
        base_url, stop = serve_in_thread(client, **kwargs)
        stops.append(stop)
        return base_url

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def closed_port_url() -> str:
    """A loopback base_url where nothing listens (a port bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
