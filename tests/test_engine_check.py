"""An engine cannot take the app down: a llama.cpp library that dies on its first decode is
caught by the engine check (agent/engines/probe.py) and the model answers on transformers, with
one line saying why; a serving process that dies mid-answer is restarted by its supervisor
(agent/supervisor.py), which says so.

The broken library here is a stand-in package named ``llama_cpp`` whose ``Llama`` dies of a real
SIGSEGV in native code (a read of address 0 through ctypes), as a build for instructions the
machine refuses does (AMX tiles in a VM: a general-protection fault at ``ldtilecfg``). Everything
else is real: the command line, the child process, the signal, the fallback, the answer.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import REPO
from ui_fixtures import free_port

from agent.engines import installed

pytestmark = pytest.mark.model

BROKEN_LLAMA = '''"""A llama.cpp that dies of SIGSEGV when a model is loaded (tests/test_engine_check.py)."""
import ctypes


class Llama:
    def __init__(self, *args, **kwargs):
        ctypes.string_at(0)
'''


def _env(cache: Path, *paths: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join([*(str(p) for p in paths), str(REPO)])
    return {**os.environ, "FACTWEAVE_CACHE": str(cache), "PYTHONPATH": path, **extra}


@pytest.fixture
def broken_llama(tmp_path) -> Path:
    folder = tmp_path / "broken"
    (folder / "llama_cpp").mkdir(parents=True)
    (folder / "llama_cpp" / "__init__.py").write_text(BROKEN_LLAMA, encoding="utf-8")
    return folder


def test_a_llama_cpp_that_crashes_falls_back_to_transformers_with_one_line(broken_llama, cache_dir):
    """``factweave ask`` on a preset with the broken library: the answer comes (from transformers),
    stderr holds one line naming the engine, the signal and the rebuild."""
    question = "What is the original language of Kalakalappu 2?"
    args = [sys.executable, "-m", "agent.cli", "ask", "--model", "smollm2-135m", "--engine", "llama.cpp",
            "--tree", "kb", "--json", question]
    out = subprocess.run(args, capture_output=True, text=True, env=_env(cache_dir, broken_llama), cwd=REPO,
                         timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    said = [line for line in out.stderr.splitlines() if "llama.cpp" in line]
    assert len(said) == 1, out.stderr
    assert "failed its check" in said[0] and "SIGSEGV" in said[0] and "make llama" in said[0]
    assert said[0].endswith("answering on transformers")
    reply = json.loads(out.stdout)
    assert reply["answer"] == "Tamil" and reply["facts"], reply  # answered, with its fact


@pytest.mark.skipif(not installed("llama.cpp"), reason="the llama.cpp engine is not installed")
@pytest.mark.llama
def test_the_installed_llama_cpp_passes_its_check_once(cache_dir):
    """The build `make test` installed decodes here: the preset opens on llama.cpp, and the check's
    outcome is kept, so the next open does not run the child again (a fraction of its time)."""
    from agent.engines.probe import llama_refused
    from agent.models import PRESETS, load_model, preset_gguf

    loaded = load_model("smollm2-135m", cache_dir=cache_dir, engine="auto")
    assert loaded.engine == "llama.cpp" and loaded.engine_note == ""
    loaded.steps.close()
    gguf = preset_gguf(PRESETS["smollm2-135m"], cache_dir)
    fresh = cache_dir / "fresh-check"
    started = time.perf_counter()
    assert llama_refused(gguf, fresh) is None
    first = time.perf_counter() - started
    started = time.perf_counter()
    assert llama_refused(gguf, fresh) is None
    assert time.perf_counter() - started < first / 10


def _wait_up(url: str, process: subprocess.Popen, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not come up")


def _child_of(pid: int, seconds: float = 60) -> int:
    """The process ``pid`` started (the supervised server)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.2)
    raise AssertionError("no child process")


def _ask(base: str, question: str) -> dict:
    reply = httpx.post(f"{base}/v1/chat/completions", timeout=600,
                       json={"model": "factweave", "messages": [{"role": "user", "content": question}]})
    assert reply.status_code == 200, reply.text
    return reply.json()["factweave"]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc to find the child")
@pytest.mark.llama
def test_a_server_that_dies_mid_answer_is_restarted_and_says_so(cache_dir, tmp_path):
    """``factweave serve`` on llama.cpp: its serving process killed by SIGSEGV while it answers (a
    native crash); the supervisor prints one line and starts it again, on transformers; the next
    question is answered; SIGTERM then stops both processes."""
    if not installed("llama.cpp"):
        pytest.skip("the llama.cpp engine is not installed")
    engine = "llama.cpp"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "agent.cli", "serve", "--model", "smollm2-135m", "--engine",
                                   engine, "--tree", "kb", "--port", str(port)], cwd=REPO, env=_env(cache_dir),
                                  stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _wait_up(f"{base}/v1/models", server)
        child = _child_of(server.pid)
        with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=600, json={
                "model": "factweave", "stream": True,
                "messages": [{"role": "user", "content": "Where was Laurie Graff born?"}]}) as stream:
            lines = stream.iter_lines()
            next(lines)  # answering now
            os.kill(child, signal.SIGSEGV)
            with pytest.raises(httpx.HTTPError):
                for _ in lines:
                    pass
        _wait_up(f"{base}/v1/models", server)
        assert _child_of(server.pid) != child
        said = [line for line in log.read_text().splitlines() if "died of" in line]
        assert len(said) == 1 and "SIGSEGV" in said[0] and "restarting it" in said[0], log.read_text()
        assert "on the transformers engine" in said[0]
        assert _ask(base, "Where was Laurie Graff born?")["answer"] == "New York"
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) is not None
    assert not [line for line in log.read_text().splitlines() if line.startswith("Error")], log.read_text()
