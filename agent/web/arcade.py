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

* holds an exclusive ``flock`` on ``<folder>/server.lock`` for as long as it lives, so two
  servers never open one database; the kernel drops the lock when the process dies, so it can
  never go stale. Once Bolt is up it writes its port to ``<folder>/server.json``;
* is shared: a second factweave process on the same folder (the chat UI and ``factweave serve``
  on one web) finds the running server through ``server.json`` and attaches to it over loopback
  Bolt with the stored root password, instead of starting its own. Every process using the
  server, its parent included, holds a shared ``flock`` on ``<folder>/users.lock``; the server
  stops once its parent has let go *and* it can lock ``users.lock`` exclusively, i.e. when the
  last user leaves (a user killed with ``kill -9`` lets go with its process);
* runs with ``<folder>`` as its current directory (ArcadeDB's logs land there) and writes
  stderr to ``<folder>/server.log``;
* stops the server when its stdin reaches end-of-file and no other process is attached. The
  parent keeps the write end of that pipe, so however the parent ends (return, exception,
  SIGKILL) the child sees EOF, waits for the attached processes to leave, and shuts ArcadeDB
  down cleanly.

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
import io
import os
import secrets
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

from typing_extensions import Self  # typing's from Python 3.11; 3.10 is supported

if TYPE_CHECKING:
    from agent.web.graph import GraphStore

# The one database the embedded server serves; Bolt sessions without a database name get it.
DATABASE = "factweave"
ROOT_USER = "root"
BOLT_PLUGIN = "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"

_PASSWORD_FILE = "root_password"
_LOCK_FILE = "server.lock"
_USERS_FILE = "users.lock"
_ADDRESS_FILE = "server.json"
_LOG_FILE = "server.log"
_SERVER_ROOT = "server"  # ArcadeDB's own rootPath: config/, databases/, log/
_PASSWORD_ENV = "FACTWEAVE_ARCADE_ROOT_PASSWORD"  # not argv: argv is visible to every local user

# Child -> parent handshake lines on the child's stdout.
_READY = "READY"
_LOCKED = "LOCKED"
_FAILED = "FAILED"



def _error(message: str) -> Exception:
    # lazy: this file also runs as a bare script in the child, which needs none
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
        handle.flush()
        os.fsync(handle.fileno())  # on disk before the server creates its root user with it
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # and its name too
    finally:
        os.close(dir_fd)
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
        self._attached_pid = 0
        self._users: TextIO | None = None
        #: Whether this process uses a server another factweave process started on the folder.
        self.attached = False
        self.start()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Attach to the server another process runs on this folder, else spawn one; return
        once Bolt accepts connections."""
        if self.running:
            return
        began = time.monotonic()
        self._users = _hold_shared(self.folder / _USERS_FILE, began + self._start_timeout)
        try:
            if not self._attach(began):
                try:
                    self._spawn(began)
                except _FolderLocked:
                    # Another process's server took the folder while ours started: use it.
                    if not self._attach(began):
                        raise
        except _FolderLocked as exc:
            self.stop()
            raise _error(f"graph database in {self.folder} is in use by {exc}; stop that factweave or point "
                         "this one at another knowledge-base folder") from None
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _attach(self, began: float) -> bool:
        """Use the server another process runs on this folder, if one does."""
        address = _running_server(self.folder, began + self._start_timeout)
        if address is None:
            return False
        self.bolt_port = int(address["bolt_port"])
        self.uri = f"bolt://127.0.0.1:{self.bolt_port}"
        self.attached = True
        self._attached_pid = int(address.get("pid") or 0)
        atexit.register(self.stop)
        self._await_bolt(began)
        return True

    def _spawn(self, began: float) -> None:
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
        self._await_ready(began)
        self._await_bolt(began)

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
                    self._process = None  # ``process`` holds it
                    process.wait()
                    raise _FolderLocked(line[len(_LOCKED):].strip() or "another process")
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
        return self.attached or (self._process is not None and self._process.poll() is None)

    def alive(self) -> bool:
        """Whether the server process (ours, or the one we attached to) still runs."""
        if self._process is not None:
            return self._process.poll() is None
        if self.attached and self._attached_pid:
            try:
                os.kill(self._attached_pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return False

    def restart(self) -> str:
        """Start the server again after it stopped (killed, crashed): attach to another
        process's server on the folder, else spawn one on a new port. Returns its Bolt address."""
        self.stop(timeout=5.0)
        self.bolt_port = _free_port()
        self.uri = f"bolt://127.0.0.1:{self.bolt_port}"
        self.start()
        return self.uri

    def stop(self, timeout: float = 30.0) -> None:
        """Let go of the server: close the child's stdin (its signal to shut ArcadeDB down once
        no other process uses it) and wait for it, unless other processes still use it."""
        process, self._process = self._process, None
        self.attached = False
        atexit.unregister(self.stop)
        users, self._users = self._users, None
        if users is not None:
            users.close()  # our shared lock: the server may stop once every user let go
        if process is None:
            return
        # Asked before the child learns we left (it locks users.lock only after that).
        shared = _in_use(self.folder / _USERS_FILE)
        for stream in (process.stdin, process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if shared:
            return  # attached processes still use it: the child stops when the last one leaves
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
        state = "attached" if self.attached else "running" if self.running else "stopped"
        return f"EmbeddedGraphServer({str(self.folder)!r}, uri={self.uri!r}, {state})"


class _FolderLocked(Exception):
    """Another process's server holds the folder (the message names it)."""


def _hold_shared(path: Path, deadline: float) -> TextIO:
    """``path`` open with a shared ``flock``: this process uses the folder's server. Waits while
    a server that is shutting down holds it exclusively (about a second)."""
    import fcntl

    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - the lock lives as long as the file is open
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return handle
        except OSError:
            if time.monotonic() > deadline:
                handle.close()
                raise _error(f"graph database in {path.parent}: its server is still shutting down; try again") from None
            time.sleep(0.1)


def _in_use(path: Path) -> bool:
    """Whether some process holds a shared lock on ``path`` (uses the server)."""
    import fcntl

    try:
        with open(path, "a+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False  # (the lock goes with the file)
    except OSError:
        return True


def _running_server(folder: Path, deadline: float) -> dict | None:
    """The address (``pid``, ``bolt_port``) of the server another process runs on ``folder``, or
    None when the folder is free. A server still starting is waited for until ``deadline``."""
    import fcntl
    import json

    while True:
        with open(folder / _LOCK_FILE, "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return None  # nobody serves this folder (the lock goes with the file)
            except OSError:
                handle.seek(0)
                owner = handle.read().strip()
        try:
            address = json.loads((folder / _ADDRESS_FILE).read_text(encoding="utf-8"))
            if str(address.get("pid")) == owner:
                return address
        except (OSError, ValueError):
            pass  # not written yet: the server is starting
        if time.monotonic() > deadline:
            raise _FolderLocked(f"process {owner}" if owner else "another process")
        time.sleep(0.2)


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
    # lazy: this file also runs as a bare script in the child (see _error)
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
            alive=server.alive,
            restart=server.restart,
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

    address = folder / _ADDRESS_FILE
    _write_address(address, {"pid": os.getpid(), "bolt_port": bolt_port})
    print(_READY, flush=True)
    users = None
    try:
        # Polling, not a blocking read: a signal may land on a JVM thread, and Python only runs
        # its handler when the main thread executes bytecode again.
        stdin = cast("io.BufferedReader[io.FileIO]", sys.stdin.buffer).raw  # typeshed: BinaryIO; a pipe here
        with selectors.DefaultSelector() as selector:
            selector.register(stdin, selectors.EVENT_READ)
            while not selector.select(timeout=0.5) or stdin.read(4096):
                pass
        # The parent let go; other processes may still be attached: serve until the last leaves.
        users = _wait_for_last_user(folder / _USERS_FILE)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            address.unlink()
        except OSError:
            pass
        server.stop()
        lock.close()
        if users is not None:
            users.close()


def _write_address(path: Path, address: dict) -> None:
    # (Runs in the server's child process, started as a script: no package imports, so not
    # agent.files; the same write-aside-then-rename by hand.)
    import json

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(address), encoding="utf-8")
    os.replace(tmp, path)


def _wait_for_last_user(path: Path) -> TextIO:
    """Block until no process holds ``path`` shared; return it held exclusively, so that no one
    attaches while the server stops."""
    import fcntl

    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except OSError:
            time.sleep(0.2)


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
