"""Proving the llama.cpp engine before it is trusted: one decode in a child process, once per
installed build, CPU and model file.

A llama.cpp library may hold an instruction the machine refuses: pip's default build compiles
for what the build machine *advertises* (``-march=native``), and a CPU may advertise AMX tiles
that its virtual machine or kernel does not let a process use, or the library may have been built
on a newer CPU and copied here. Such a library does not fail politely: the process dies of a
signal (SIGSEGV at ``ldtilecfg``, SIGILL) at its first matrix product, taking the chat UI or the
server with it. So before :func:`agent.models.load_model` opens the engine, a child process loads
the same GGUF file with the same settings and reads a full batch of tokens, then decodes two more
(the batched and the one-token kernels the agent uses); if the child dies or fails, the model
runs on transformers and one line says why (:func:`llama_refused`).

The outcome is kept under ``<cache>/engines/`` keyed by :func:`agent.engines.llama_build.build_key`: the installed library's files (name,
size, modification time), this CPU's model name and flags, the Python executable and the GGUF
file: a rebuild, a new CPU (an environment copied to another machine) or another model proves it
again; otherwise the check costs nothing after the first time. Only a success or a death by signal
is kept: an error or a check that ran out of time may be the moment's (memory, a busy machine).

Run directly (what the child runs): ``python -m agent.engines.probe MODEL.gguf``.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..files import write_json
from .llama_build import advertises_amx, build_key

#: Tokens read in one batch by the check: the engine's batch size, so the batched matrix kernels
#: run as they will for the agent's prompts (``agent.engines.llama_cpp``, ``n_batch=512``).
BATCH = 512
#: Seconds the child may take (loading a 1 GB GGUF and reading 512 tokens on 2 cores: ~10 s).
TIMEOUT = 300
#: Where a rebuild that chooses the CPU's extensions explicitly comes from.
REBUILD = "rebuild it with `make llama` (tools/build-llama: explicit CPU extensions, no AMX)"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _why(result: subprocess.CompletedProcess) -> str:
    """One line: how the child failed."""
    if result.returncode < 0:
        cause = (" (this CPU advertises AMX, which a virtual machine may refuse a process: a build for "
                 "-march=native uses it)") if advertises_amx() else ""
        return f"llama.cpp died of {_signal_name(result.returncode)} in its first decode{cause}; {REBUILD}"
    lines = [line.strip() for line in (result.stderr or "").splitlines() if line.strip()]
    return f"llama.cpp failed its first decode ({lines[-1][:200] if lines else f'exit {result.returncode}'})"


def llama_refused(gguf: Path, cache_dir: Path, *, threads: int | None = None) -> str | None:
    """Why the llama.cpp engine must not be used here for ``gguf`` (one line), or None when a
    child process decoded with it (now or in an earlier check of the same build, CPU and file)."""
    record = cache_dir / "engines" / f"llama-probe-{build_key(gguf)}.json"
    try:
        kept = json.loads(record.read_text(encoding="utf-8"))
        return None if kept.get("ok") else str(kept["why"])
    except (OSError, ValueError, KeyError):
        pass
    command = [sys.executable, "-m", "agent.engines.probe", str(gguf)]
    if threads:
        command += ["--threads", str(threads)]
    started = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT,
                                env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    except subprocess.TimeoutExpired:
        return f"llama.cpp did not finish its first decode in {TIMEOUT} s"  # not kept: may be a busy machine
    ok = result.returncode == 0 and result.stdout.strip().endswith("ok")
    why = None if ok else _why(result)
    if ok or result.returncode < 0:  # a crash is the build's; an error may be the moment's (memory, a file)
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json(record, {"ok": ok, "why": why, "seconds": round(time.monotonic() - started, 2),
                            "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return why


def _decode(gguf: str, threads: int) -> None:
    """Open ``gguf`` as the engine does, read a batch of :data:`BATCH` tokens, decode two more."""
    from .llama_cpp import LlamaCppSteps

    steps = LlamaCppSteps.open(gguf, context=BATCH + 16, threads=threads, contexts=1)
    text = " ".join(f"Fact {i}: <Subject {i}> <relation> <Object {i}> ." for i in range(200))
    tokens = steps.llama.tokenize(text.encode(), add_bos=False)[:BATCH]
    logits, state = steps.feed(tokens, None)
    for _ in range(2):
        logits, state = steps.feed([int(logits.argmax())], state)
    steps.close()


def main(argv: list[str] | None = None) -> None:
    import argparse

    faulthandler.enable()  # a crash prints where it happened (the parent keeps the last line)
    parser = argparse.ArgumentParser(description="Prove the llama.cpp engine with one decode")
    parser.add_argument("gguf")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    options = parser.parse_args(argv)
    _decode(options.gguf, options.threads)
    print("ok", flush=True)


if __name__ == "__main__":
    main()
