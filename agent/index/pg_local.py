"""A throwaway PostgreSQL cluster in a temporary folder, for tests and benchmarks.

Uses the server binaries already installed (Debian's ``postgresql`` package puts them in
``/usr/lib/postgresql/<version>/bin``; ``$FACTWEAVE_PG_BIN`` overrides). The cluster listens on
127.0.0.1 at a free port and on a unix socket in its own folder, with trust authentication and
durability off (its data is thrown away). PostgreSQL refuses to run as root, so as root the
folder is handed to the ``postgres`` user and the binaries run as that user.

Example (not run: needs PostgreSQL server binaries)::

    with LocalPostgres() as pg:
        load_fact_index(pg.dsn, index, name="kb")
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from ..errors import FactweaveError


def find_pg_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    env = os.environ.get("FACTWEAVE_PG_BIN")
    if env:
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """Start with :meth:`start` (or ``with``), read :attr:`dsn`, stop with :meth:`stop`."""

    def __init__(self, bin_dir: str | Path | None = None, port: int | None = None) -> None:
        found = Path(bin_dir) if bin_dir else find_pg_bin()
        if found is None or not (found / "initdb").exists():
            raise FactweaveError("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")
        self.bin = found
        self.port = port or _free_port()
        self.folder: Path | None = None
        self._as_user: list[str] = []

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    @property
    def socket_dsn(self) -> str:
        """The same server through its unix socket (no TCP)."""
        return f"host={self.folder} port={self.port} user=postgres dbname=postgres"

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as_user, *args], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FactweaveError(f"{Path(args[0]).name} failed: {tail[0]}")

    def start(self) -> LocalPostgres:
        # Under /tmp, not pytest's private 0700 folder: the postgres user must reach it.
        self.folder = Path(tempfile.mkdtemp(prefix="factweave-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        self._start_server()
        return self

    def _start_server(self) -> None:
        assert self.folder is not None
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")

    def restart(self) -> None:
        """Restart the server as an operator does (``pg_ctl -m fast``: every client's connection is
        closed) on the same data and port."""
        if self.folder is None:
            raise FactweaveError("the server was never started")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")
        self._start_server()

    def stop(self) -> None:
        if self.folder is None:
            return
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        except FactweaveError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
