"""The copies of uploaded files that Gradio keeps: deleted once an upload is done. (Reading and
checking uploaded files is the core's: :mod:`agent.web.uploads`.)"""
from __future__ import annotations

from pathlib import Path


def forget_uploads(paths: list[Path], folder: Path) -> int:
    """Delete the copies of uploaded files that Gradio keeps under ``folder`` (its upload
    cache: one folder per file) once an upload is done, kept or refused: without this the
    cache grows with every upload for as long as the UI runs. Paths outside ``folder`` are
    left alone. Returns how many files were deleted."""
    root = folder.resolve()
    deleted = 0
    for path in paths:
        try:
            path = Path(path).resolve()
            if root not in path.parents or not path.is_file():
                continue
            path.unlink()
            deleted += 1
            parent = path.parent
            if parent != root and not any(parent.iterdir()):
                parent.rmdir()
        except OSError:
            continue  # another session's upload of the same file may have taken it already
    return deleted
