"""Files written all or nothing, the one home of write-aside-then-rename.

:func:`replacing` opens a temporary file beside the target (or in ``folder``, on the same file
system), and when the block ends without an error flushes it, fsyncs it and renames it over the
target: a reader sees the old file or the new one, never half of one, and a crash or a kill
leaves at most a temporary file (named ``.<target>.<pid>.<random>.tmp`` unless a ``prefix`` is
given, so a sweeper can tell a dead writer's leftovers from a live one's). An error in the block
removes the temporary file and leaves the target as it was.

:func:`file_stamp` tells a reader cheaply whether such a file changed (another process wrote it).

:func:`locked` is the one home of a lock file: an exclusive ``flock`` that writers in other
processes (and on other handles of this one) wait for; the kernel drops it with its process, so
it never goes stale.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

TMP_SUFFIX = ".tmp"


@contextmanager
def replacing(path: str | Path, *, binary: bool = False, prefix: str | None = None, suffix: str = TMP_SUFFIX,
              folder: str | Path | None = None, mode: int = 0o644) -> Iterator[IO[Any]]:
    """A file handle whose content replaces ``path`` when the block ends without an error (see
    the module docstring); ``mode``: the new file's permissions (mkstemp's are 0600)."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=folder if folder is not None else path.parent,
                                prefix=prefix if prefix is not None else f".{path.name}.{os.getpid()}.", suffix=suffix)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str, **options: Any) -> None:
    """Replace ``path`` with ``text`` all or nothing (``options``: those of :func:`replacing`)."""
    with replacing(path, **options) as handle:
        handle.write(text)


def write_json(path: str | Path, data: Any, *, indent: int | None = 1, **options: Any) -> None:
    """Replace ``path`` with ``data`` as JSON (UTF-8, a final newline) all or nothing."""
    write_text(path, json.dumps(data, ensure_ascii=False, indent=indent) + "\n", **options)


def fsync_file(path: str | Path) -> None:
    """Make a file written by another library (e.g. an index's ``save``) durable before a rename
    points at it."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_folder(path: str | Path) -> None:
    """Make the renames in a folder durable (POSIX: the folder's entries; not possible on Windows)."""
    if os.name != "posix":
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def locked(path: str | Path, wait_s: float) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (created) for the block, across processes and across
    handles of one process; waits up to ``wait_s`` seconds for its holder (0: not at all). Yields
    whether it was had: the block runs either way, and says what it does without it."""
    with open(path, "a+", encoding="utf-8") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.1)
        yield True  # (closing the handle lets go)


def file_stamp(path: str | Path) -> tuple[int, int, int] | None:
    """A cheap stamp of ``path``'s version: its inode, modification time (ns) and size, or None
    when it does not exist. A file replaced by :func:`replacing` gets a new inode, so a rewrite
    within the clock's resolution, of the same size, still changes it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
