"""Chat clients and the OpenAI-compatible server: the real SmolLM2, real HTTP, the real SDK."""
from __future__ import annotations

import logging
import socket
import sys
import threading
import time

import httpx
import pytest
from llm_fixtures import ScriptedChat
from openai import OpenAI

from agent.errors import FactweaveError
from agent.llm import ChatClient, ChatError, LocalChat, OpenAIChat, chat_client_from_env
from agent.llm.client import OPENAI_DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL

SECRET = "sk-test-0123456789abcdefSECRET"
HELLO = [{"role": "user", "content": "Say hello."}]
COUNT = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]


@pytest.fixture
def no_openai_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FACTWEAVE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


# --- the local model ----------------------------------------------------------------------


@pytest.mark.model
def test_local_chat_is_greedy_and_honours_stop(local_chat):
    assert isinstance(local_chat, ChatClient)
    full = local_chat.complete(COUNT, max_tokens=8)
    assert full == local_chat.complete(COUNT, max_tokens=8)  # greedy: deterministic
    assert "," in full, full  # the model does count with commas; the stop below must cut it
    cut = local_chat.complete(COUNT, max_tokens=8, stop=[","])
    assert "," not in cut
    assert full.startswith(cut)


@pytest.mark.model
def test_concurrent_local_chat_calls_each_get_their_own_reply(local_chat):
    """Six calls of different prompts and lengths started together on one loaded model (and one
    tokenizer) each get the reply they get alone: nothing of one call's prompt, state or output
    leaks into another's."""
    prompts = [HELLO, COUNT, *([{"role": "user", "content": f"Name {n} colours, comma-separated."}] for n in (2, 5)),
               [{"role": "user", "content": "Spell the word 'lighthouse' backwards." * 3}],
               [{"role": "user", "content": "What is 12 times 12?"}]]
    expected = [local_chat.complete(p, max_tokens=24) for p in prompts]
    results: dict[int, str] = {}
    start = threading.Barrier(len(prompts))

    def call(i: int) -> None:
        start.wait()
        results[i] = local_chat.complete(prompts[i], max_tokens=24)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(len(prompts))] == expected
    assert len(set(expected)) > 1  # different prompts, different replies: a mix-up would show


# --- the server, through the real openai SDK ----------------------------------------------


@pytest.mark.model
def test_openai_sdk_talks_to_the_server(openai_server, local_chat):
    sdk = OpenAI(base_url=openai_server, api_key="unused", max_retries=0)
    assert [m.id for m in sdk.models.list()] == [local_chat.name]
    reply = sdk.chat.completions.create(model=local_chat.name, messages=HELLO, max_tokens=4)
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == local_chat.complete(HELLO, max_tokens=4)
    # OpenAIChat over HTTP gives what LocalChat gives in-process.
    chat = OpenAIChat(local_chat.name, base_url=openai_server, max_retries=0)
    assert chat.complete(COUNT, max_tokens=8, stop=[","]) == local_chat.complete(
        COUNT, max_tokens=8, stop=[","])


def test_streaming_returns_the_same_text(serve_chat):
    base_url = serve_chat(ScriptedChat("[2, 5]"))
    sdk = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    chunks = sdk.chat.completions.create(model="scripted", messages=HELLO, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "[2, 5]"


def test_server_binds_loopback_only(serve_chat):
    base_url = serve_chat(ScriptedChat("hi"))
    host, port = httpx.URL(base_url).host, httpx.URL(base_url).port
    assert host == "127.0.0.1"
    with socket.create_connection((host, port), timeout=2):
        pass
    if sys.platform.startswith("linux"):
        # All of 127/8 is loopback on Linux: a socket bound to 127.0.0.1 alone refuses .2.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.2", port), timeout=2).close()


def test_server_rejects_bad_requests(serve_chat):
    base_url = serve_chat(ScriptedChat("hi"))
    r = httpx.post(f"{base_url}/chat/completions", json={"model": "x", "messages": []})
    assert r.status_code == 400
    assert "messages" in r.json()["error"]["message"]
    r = httpx.post(f"{base_url}/chat/completions",
                   json={"messages": [{"role": "user", "content": "hi"}], "n": 2})
    assert r.status_code == 400


def test_server_reports_a_failing_client_as_one_line(serve_chat):
    base_url = serve_chat(ScriptedChat(error=ChatError("backend is down")))
    chat = OpenAIChat("scripted", base_url=base_url, max_retries=0)
    with pytest.raises(ChatError) as err:
        chat.complete(HELLO)
    message = str(err.value)
    assert "\n" not in message
    assert "HTTP 502" in message and "backend is down" in message
    assert base_url in message and "'scripted'" in message


def test_server_checks_the_bearer_key(serve_chat, caplog):
    caplog.set_level(logging.DEBUG)
    base_url = serve_chat(ScriptedChat("ok"), api_key=SECRET)
    assert OpenAIChat("scripted", base_url=base_url, api_key=SECRET).complete(HELLO) == "ok"
    r = httpx.get(f"{base_url}/models")
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    with pytest.raises(ChatError) as err:
        OpenAIChat("scripted", base_url=base_url, api_key="sk-wrong-key-000000", max_retries=0
                   ).complete(HELLO)
    assert "HTTP 401" in str(err.value)
    assert "sk-wrong-key" not in str(err.value)
    assert SECRET not in caplog.text


# --- errors: one line, naming endpoint and model, never the key ---------------------------


def test_closed_port_is_one_readable_line(closed_port_url, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    chat = OpenAIChat("some-model", base_url=closed_port_url, max_retries=1, timeout=2)
    with pytest.raises(FactweaveError) as err:
        chat.complete(HELLO)
    message = str(err.value)
    assert "\n" not in message
    assert closed_port_url in message and "'some-model'" in message
    assert "could not connect" in message
    assert err.value.__cause__ is None and err.value.__suppress_context__
    # The key appears nowhere: not in the error, the repr, or any log record (SDK included).
    assert any(r.name.startswith("openai") for r in caplog.records)  # SDK debug logs captured
    for text in (message, repr(chat), caplog.text):
        assert SECRET not in text


def test_timeout_is_honoured(serve_chat):
    release = threading.Event()
    slow = ScriptedChat("late", release=release)
    base_url = serve_chat(slow)
    chat = OpenAIChat("scripted", base_url=base_url, timeout=0.5, max_retries=1)
    started = time.perf_counter()
    try:
        with pytest.raises(ChatError, match="timed out after 0.5 s"):
            chat.complete(HELLO)
    finally:
        release.set()
    elapsed = time.perf_counter() - started
    # Two attempts of 0.5 s plus the SDK's backoff, far below the server's 30 s wait.
    assert 1.0 <= elapsed < 6, elapsed
    assert len(slow.calls) == 2  # the retry reached the server


def test_missing_key_without_base_url_says_what_to_set(no_openai_env):
    with pytest.raises(ChatError, match="OPENAI_API_KEY is not set"):
        OpenAIChat("gpt-4o-mini")


# --- choosing a client from the environment -----------------------------------------------


@pytest.mark.model
def test_from_env_prefers_base_url_then_key_then_local(no_openai_env, monkeypatch, smollm,
                                                      openai_server, local_chat):
    local = chat_client_from_env(local_model=smollm)
    assert isinstance(local, LocalChat) and local.name == smollm.name

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    remote = chat_client_from_env(local_model=smollm)
    assert isinstance(remote, OpenAIChat)
    assert (remote.base_url, remote.name) == (OPENAI_DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL)
    assert SECRET not in repr(remote)

    # A base_url wins over the key, and the model defaults to the one the server lists.
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server)
    served = chat_client_from_env()
    assert isinstance(served, OpenAIChat)
    assert (served.base_url, served.name) == (openai_server, local_chat.name)
    assert chat_client_from_env(model="named").name == "named"
