"""The embedded graph server: ArcadeDB with its Bolt plugin, started and stopped by factweave.

Why a child process and not the JVM inside our own process
----------------------------------------------------------
``arcadedb_embedded`` runs ArcadeDB in a JVM loaded into Python through JPype. That works
(measured here: server up in ~3 s, stop in ~0.1 s, a second server in the same JVM also
works), but the JVM then lives in the factweave process for good: it can never be unloaded
or restarted with other settings (JPype allows one JVM per process), it adds ~300 MB RSS and
a 4 GB default heap ceiling next to the language model, and ArcadeDB writes its ``./log``
folder into whatever the current directory is. So the server runs as a child Python process
(``python -P arcade.py --serve ...``) that:

* holds an exclusive ``flock`` on ``<folder>/server.lock`` for as long as it lives, so a
  second factweave on the same folder gets a clear one-line error instead of a corrupt
  database; the kernel drops the lock when the process dies, so it can never go stale;
* runs with ``<folder>`` as its current directory (ArcadeDB's logs land there) and writes
  stderr to ``<folder>/server.log``;
* stops the server when its stdin reaches end-of-file. The parent keeps the write end of
  that pipe, so however the parent ends (return, exception, SIGKILL) the child sees EOF and
  shuts ArcadeDB down cleanly: the server dies with its parent without any polling.

Measured on the 2-core build machine: Bolt accepts connections 3-3.6 s after spawn (1.5-3 s
when the files are in the page cache); the child's RSS is ~175 MB idle and ~355 MB after
writing 6,000 facts (JVM heap capped at ``heap``, default 1 GB); a clean stop takes 0.5-1 s,
and a child orphaned by ``kill -9`` of its parent has stopped ArcadeDB and exited ~2.5 s later.
After a ``kill -9`` of the child itself the next start reopens the database without help.

Bolt and HTTP listen on 127.0.0.1 only (``host`` applies to every listener; see
``arcadedb_embedded.server``). The HTTP port is needed by ArcadeDB itself; it is picked free
like the Bolt port and otherwise unused.

The root password is generated once and stored in ``<folder>/root_password`` (mode 0600):
ArcadeDB keeps the root user it created on first start, so a restart must present the same
password to reopen the same database.
"""
from __future__ import annotations

import atexit
import os
import secrets
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Self, TextIO

if TYPE_CHECKING:
    from agent.web.graph import GraphStore

# The one database the embedded server serves; Bolt sessions without a database name get it.
DATABASE = "factweave"
ROOT_USER = "root"
BOLT_PLUGIN = "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"

_PASSWORD_FILE = "root_password"
_LOCK_FILE = "server.lock"
_LOG_FILE = "server.log"
_SERVER_ROOT = "server"  # ArcadeDB's own rootPath: config/, databases/, log/
_PASSWORD_ENV = "FACTWEAVE_ARCADE_ROOT_PASSWORD"  # not argv: argv is visible to every local user

# Child -> parent handshake lines on the child's stdout.
_READY = "READY"
_LOCKED = "LOCKED"
_FAILED = "FAILED"



def _error(message: str) -> Exception:
    # Imported late: this file also runs as a bare script in the child, which needs none
    # of factweave.
    from agent.errors import FactweaveError

    return FactweaveError(message)


def _free_port() -> int:
    """A loopback port that was free a moment ago (the child fails loudly if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _read_or_create_password(folder: Path) -> str:
    path = folder / _PASSWORD_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    if (folder / _SERVER_ROOT / "config").exists():
        # The server already has a root user whose password is gone: a new one would be
        # refused, and silently wiping the database is not ours to do.
        raise _error(
            f"graph database in {folder}: {path} is missing, so the existing server cannot be "
            f"opened; restore that file or delete {folder / _SERVER_ROOT} to rebuild the graph"
        )
    password = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(password)
    return password


def _tail(path: Path, lines: int = 200) -> str:
    """The last meaningful log line, so a start failure says why in one line."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    for line in reversed(text):
        stripped = line.strip()
        is_trace = stripped.startswith(("at ", "..."))
        if not is_trace and any(mark in stripped for mark in ("Exception", "Error", "SEVER")):
            return _one_line(stripped, 200)
    return ""


class EmbeddedGraphServer:
    """ArcadeDB + Bolt on 127.0.0.1 in a child process, with data under ``folder``."""

    def __init__(
        self,
        folder: Path,
        bolt_port: int | None = None,
        *,
        heap: str = "1g",
        start_timeout: float = 120.0,
        lock_wait: float = 15.0,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.user = ROOT_USER
        self.password = _read_or_create_password(self.folder)
        self.database = DATABASE
        self.bolt_port = bolt_port or _free_port()
        self.uri = f"bolt://127.0.0.1:{self.bolt_port}"
        self.startup_seconds: float | None = None
        self._heap = heap
        self._start_timeout = start_timeout
        self._lock_wait = lock_wait
        self._process: subprocess.Popen[str] | None = None
        self.start()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the child and return once Bolt accepts connections."""
        if self.running:
            return
        began = time.monotonic()
        env = dict(os.environ)
        env[_PASSWORD_ENV] = self.password
        command = [
            sys.executable,
            "-P",  # keep agent/web off sys.path: its module names must not shadow anything
            str(Path(__file__).resolve()),
            "--serve",
            str(self.folder),
            str(self.bolt_port),
            str(_free_port()),
            self._heap,
            str(self._lock_wait),
        ]
        # Append, not truncate: if the folder is in use, the log is the running server's. The
        # child empties it once it holds the folder lock.
        log = open(self.folder / _LOG_FILE, "a", encoding="utf-8")  # noqa: SIM115 - child owns it
        try:
            self._process = subprocess.Popen(
                command,
                cwd=self.folder,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        finally:
            log.close()
        atexit.register(self.stop)
        try:
            self._await_ready(began)
            self._await_bolt(began)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _await_ready(self, began: float) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        try:
            while True:
                remaining = self._start_timeout - (time.monotonic() - began)
                if remaining <= 0:
                    raise _error(
                        f"embedded graph server in {self.folder} did not start within "
                        f"{self._start_timeout:.0f} s; see {self.folder / _LOG_FILE}"
                    )
                if not selector.select(timeout=min(remaining, 1.0)):
                    continue
                line = process.stdout.readline()
                if line.startswith(_READY):
                    return
                if line.startswith(_LOCKED):
                    owner = line[len(_LOCKED):].strip() or "another process"
                    raise _error(
                        f"graph database in {self.folder} is in use by {owner}; stop that "
                        "factweave or point this one at another knowledge-base folder"
                    )
                if line.startswith(_FAILED) or not line:
                    reason = line[len(_FAILED):].strip() if line else ""
                    reason = reason or _tail(self.folder / _LOG_FILE) or "exited during startup"
                    raise _error(
                        f"embedded graph server in {self.folder} failed to start ({reason}); "
                        f"see {self.folder / _LOG_FILE}"
                    )
        finally:
            selector.close()

    def _await_bolt(self, began: float) -> None:
        """READY comes after ArcadeDB's start(); this proves the Bolt port really answers."""
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.bolt_port), timeout=1.0):
                    return
            except OSError as exc:
                if time.monotonic() - began > self._start_timeout:
                    raise _error(
                        f"embedded graph server in {self.folder}: Bolt port {self.bolt_port} "
                        f"does not accept connections ({exc}); see {self.folder / _LOG_FILE}"
                    ) from None
                if not self.running:
                    raise _error(
                        f"embedded graph server in {self.folder} exited during startup; "
                        f"see {self.folder / _LOG_FILE}"
                    ) from None
                time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """Close the child's stdin (its signal to shut ArcadeDB down) and wait for it."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is None:
            return
        for stream in (process.stdin, process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedGraphServer({str(self.folder)!r}, uri={self.uri!r}, {state})"


def open_graph(
    folder: Path,
    uri: str | None = None,
    user: str = "neo4j",
    password: str = "",
    database: str | None = None,
) -> tuple[GraphStore, EmbeddedGraphServer | None]:
    """The graph store for a knowledge base: the given server, or the embedded one when uri is None.

    ``folder`` is where the embedded server keeps its data (e.g. ``<web folder>/graph``);
    unused when ``uri`` is given. ``user``/``password`` are ignored for the embedded server
    (it has its own stored root password). Both stores are verified before returning, so a
    server that is down fails here in one line. The caller owns both results: close the
    store, then stop the server (if any).
    """
    from agent.web.graph import GraphStore

    if uri is not None:
        store = GraphStore(uri, user, password, database)
        try:
            store.verify()
        except BaseException:
            store.close()
            raise
        return store, None
    server = EmbeddedGraphServer(Path(folder))
    try:
        store = GraphStore(
            server.uri,
            server.user,
            server.password,
            server.database,
            start_hint=f"the embedded server (data in {server.folder}) stopped; run factweave again",
        )
        store.verify()
    except BaseException:
        server.stop()
        raise
    return store, server


# -- the child process -------------------------------------------------------------------


def _lock_folder(folder: Path, wait: float) -> TextIO:
    """The folder's lock file, locked: the lock lasts as long as the file stays open.

    Waits a while for it: an orphaned child whose parent was killed a moment ago may
    still be shutting down cleanly."""
    import fcntl

    handle = open(folder / _LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                handle.seek(0)
                owner = handle.read().strip()
                print(f"{_LOCKED} process {owner}" if owner else _LOCKED, flush=True)
                sys.exit(3)
            time.sleep(0.2)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _serve(folder: Path, bolt_port: int, http_port: int, heap: str, lock_wait: float) -> None:
    """Child main: run ArcadeDB until stdin closes (the parent went away or called stop)."""
    import signal

    lock = _lock_folder(folder, lock_wait)
    try:
        os.ftruncate(sys.stderr.fileno(), 0)  # this run's log only; stderr is opened for append
    except OSError:
        pass
    password = os.environ.pop(_PASSWORD_ENV, "")

    # SIGTERM/SIGINT end the stdin wait below like EOF does, so the server still stops cleanly.
    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)

    server = None
    try:
        import arcadedb_embedded
        from arcadedb_embedded.jvm import start_jvm

        start_jvm(heap_size=heap)
        server = arcadedb_embedded.create_server(
            str(folder / _SERVER_ROOT),
            root_password=password,
            config={
                "host": "127.0.0.1",
                "http_port": http_port,
                "server_plugins": BOLT_PLUGIN,
                "bolt_port": bolt_port,
                "bolt_host": "127.0.0.1",
                "bolt_defaultDatabase": DATABASE,
            },
        )
        server.start()
        server.create_database(DATABASE)  # "get, creating if missing" in the engine
    except Exception as exc:  # noqa: BLE001 - any failure: the parent shows this line to the user
        print(f"{_FAILED} {_one_line(str(exc), 200)}", flush=True)
        if server is not None:
            server.stop()
        sys.exit(2)

    print(_READY, flush=True)
    try:
        # Polling, not a blocking read: a signal may land on a JVM thread, and Python only runs
        # its handler when the main thread executes bytecode again.
        stdin = sys.stdin.buffer.raw
        with selectors.DefaultSelector() as selector:
            selector.register(stdin, selectors.EVENT_READ)
            while not selector.select(timeout=0.5) or stdin.read(4096):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        server.stop()
        lock.close()


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
