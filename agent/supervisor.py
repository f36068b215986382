"""Keeping the chat UI and the server up when the process serving them dies of a signal.

The engines run native code in the serving process (llama.cpp's kernels, torch's), and native
code fails by killing the process (SIGSEGV, SIGILL, SIGBUS, SIGABRT), not with an exception.
The engine check (:mod:`agent.engines.probe`) catches a library that cannot run here before it
is used; what is left is a crash mid-answer. So ``factweave ui`` and ``factweave serve`` run as a
small supervisor and a child that serves (:func:`supervise`): the same command line, in a child
process. When the child dies of a signal, the supervisor prints one line saying so (which signal,
whether it died inside llama.cpp, where its crash report is) and starts it again, on the
transformers engine when the child ran on llama.cpp; a child that dies three times within
:data:`WINDOW_S` is not started again (one line, exit 1). Any other exit of the child (Ctrl-C, a
refused option, an error) is the command's exit: same status, nothing restarted.

The child writes its crash report to a file the supervisor names (``FACTWEAVE_CRASH_LOG``):
the engine it opened (:func:`note_engine`, from :func:`agent.models.load_model`), then on a crash
Python's ``faulthandler`` dump of every thread's stack. Ctrl-C reaches both (the terminal signals
the process group); SIGTERM and SIGHUP sent to the supervisor are passed on to the child.

``FACTWEAVE_SUPERVISE=0`` runs the command in one process (no restarts).
"""
from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

#: Set in the child's environment: it serves (no supervisor of its own).
CHILD_ENV = "FACTWEAVE_SUPERVISED"
#: The child's crash report (its engine, then faulthandler's dump).
CRASH_LOG_ENV = "FACTWEAVE_CRASH_LOG"
#: "0" turns the supervisor off.
SWITCH_ENV = "FACTWEAVE_SUPERVISE"
#: Restarts allowed within this many seconds.
RESTARTS, WINDOW_S = 3, 600
#: Signals a process dies of when its native code fails (a kill -9 by the OOM killer too).
CRASHES = frozenset({signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT, signal.SIGKILL})

_log_handle = None
#: Set by the ``factweave`` entry point (:func:`agent.cli.main.main`): only a command started there
#: is supervised (not one invoked from Python, e.g. by click's test runner).
from_command_line = False


def note_engine(engine: str) -> None:
    """In a supervised child: record the engine it opened (the supervisor reads it after a crash)."""
    path = os.environ.get(CRASH_LOG_ENV)
    if not path or not os.environ.get(CHILD_ENV):
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"engine: {engine}\n")
    except OSError:
        pass


def _as_child() -> None:
    """The child's side: crash reports go to the supervisor's file."""
    global _log_handle
    path = os.environ.get(CRASH_LOG_ENV)
    if path:
        _log_handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the process's life)
        faulthandler.enable(file=_log_handle, all_threads=True)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def crash_cause(report: str) -> tuple[str, bool]:
    """(the engine the child had opened, whether its stacks were inside llama.cpp) from its report."""
    engines = [line.split(":", 1)[1].strip() for line in report.splitlines() if line.startswith("engine:")]
    return (engines[-1] if engines else ""), "llama_cpp" in report


def supervise(name: str, argv: Sequence[str] | None = None) -> None:
    """Run ``factweave ARGV`` (default: this process's arguments) in a child and keep it up (see the
    module docstring); returns at once in the child itself or where supervising is off, else exits
    with the child's status when it ends without a crash."""
    if os.environ.get(CHILD_ENV):
        _as_child()
        return
    if not from_command_line or os.environ.get(SWITCH_ENV, "1") == "0":
        return
    args = list(sys.argv[1:] if argv is None else argv)
    handle, path = tempfile.mkstemp(prefix=f"factweave-{name}-", suffix=".crash.log")
    os.close(handle)
    report = Path(path)
    env = {**os.environ, CHILD_ENV: "1", CRASH_LOG_ENV: str(report)}
    stopping: list[int] = []
    child: subprocess.Popen | None = None

    def forward(number: int, _frame) -> None:
        stopping.append(number)
        if child is not None and child.poll() is None:
            child.send_signal(number)

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, forward)
    crashes: list[float] = []
    while True:
        report.write_text("", encoding="utf-8")
        child = subprocess.Popen([sys.executable, "-m", "agent.cli", *args], env=env)
        code = _wait(child)
        if code >= 0 or stopping or -code not in CRASHES:
            report.unlink(missing_ok=True)
            sys.exit(code if code >= 0 else 128 - code)
        now = time.monotonic()
        crashes = [t for t in crashes if now - t < WINDOW_S] + [now]
        engine, in_llama = crash_cause(report.read_text(encoding="utf-8", errors="replace"))
        kept = report.with_name(f"{report.stem}.{len(crashes)}.log")
        report.replace(kept)
        where = " inside llama.cpp" if in_llama else ""
        if len(crashes) > RESTARTS:
            print(f"Error: factweave {name} died of {_signal_name(-code)}{where} {len(crashes)} times in "
                  f"{WINDOW_S // 60} minutes; not restarting it (its crash report: {kept})", file=sys.stderr, flush=True)
            sys.exit(1)
        switch = engine == "llama.cpp"
        if switch:
            args += ["--engine", "transformers"]  # click keeps an option's last value
        print(f"factweave {name}: its process died of {_signal_name(-code)}{where}"
              f"{' on the llama.cpp engine' if switch and not in_llama else ''}; restarting it"
              f"{' on the transformers engine' if switch else ''} (crash report: {kept})", file=sys.stderr, flush=True)


def _wait(child: subprocess.Popen) -> int:
    while True:
        try:
            return child.wait()
        except InterruptedError:  # pragma: no cover (PEP 475 retries; kept for old platforms)
            continue
