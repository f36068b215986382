"""Private work folders for index builds, next to the index, that a killed build does not leave behind.

A disk index build sorts runs in ``<index>.<random>.sort/`` and writes sections in
``<index>.<random>.parts/`` beside the target (same file system: the result is renamed into
place). A build killed with ``kill -9`` cannot remove them, and a large build's runs take
gigabytes. Each folder therefore holds an exclusive ``flock`` on its ``.owner`` file while its
build runs; the next build of the same index removes every such folder whose lock is free (its
builder is gone) before it starts. A folder with no ``.owner`` yet is only removed once it is a
minute old (its builder may be creating it).

Example (not run: writes folders next to kb.fwd)::

    work = WorkDir(Path("kb.fwd"), ".sort")   # earlier killed builds' folders are gone now
    (work.path / "run-0").write_bytes(b"...")
    work.remove()
"""
from __future__ import annotations

import fcntl
import shutil
import tempfile
import time
from pathlib import Path
from typing import TextIO

_OWNER = ".owner"
_UNOWNED_GRACE_S = 60.0


class WorkDir:
    """A fresh folder ``<target>.<random><suffix>`` beside ``target``, owned by this process
    until :meth:`remove`."""

    def __init__(self, target: Path, suffix: str) -> None:
        target = Path(target)
        remove_abandoned(target, suffix)
        self.path = Path(tempfile.mkdtemp(prefix=target.name + ".", suffix=suffix, dir=target.parent))
        self._owner: TextIO | None = open(self.path / _OWNER, "w", encoding="utf-8")  # noqa: SIM115 - held until remove
        fcntl.flock(self._owner, fcntl.LOCK_EX)

    def remove(self) -> None:
        """Delete the folder and what is in it."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._owner is not None:
            self._owner.close()
            self._owner = None


def remove_abandoned(target: Path, suffix: str) -> list[Path]:
    """Remove the work folders of ``target``'s builds that are no longer running; returns them."""
    removed = []
    for folder in Path(target).parent.glob(f"{Path(target).name}.*{suffix}"):
        if folder.is_dir() and _abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _abandoned(folder: Path) -> bool:
    owner = folder / _OWNER
    if not owner.exists():
        try:
            return time.time() - folder.stat().st_mtime > _UNOWNED_GRACE_S
        except FileNotFoundError:
            return False
    try:
        with open(owner, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True  # nobody holds it (the lock goes with the file)
    except OSError:
        return False
