"""The JSON header every factweave index file starts with (after its magic bytes): read and
checked in one place for the file index (:mod:`.storage`) and the disk index (:mod:`.disk`)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import FactweaveError, IndexMismatchError


def read_json_header(path: str | Path, magic: bytes, version: int, *, kind: str) -> tuple[dict[str, Any], int]:
    """The JSON header after ``magic`` and its 8-byte length, and the header's end offset; bad
    magic, a missing file, a cut or corrupt header and another format version are one line."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            if f.read(len(magic)) != magic:
                raise FactweaveError(f"{path}: not a factweave {kind} (bad magic bytes)")
            size = int.from_bytes(f.read(8), "little")
            raw = f.read(min(size, os.fstat(f.fileno()).st_size))
    except FileNotFoundError:
        raise FactweaveError(f"{path}: no such index file (build one with `factweave index build`)") from None
    if len(raw) != size:
        raise FactweaveError(f"{path}: index file is truncated (header incomplete)")
    try:
        header = json.loads(raw)
    except ValueError:
        raise FactweaveError(f"{path}: index header is corrupt") from None
    if header.get("format_version") != version:
        raise IndexMismatchError(
            f"{path}: {kind} format version {header.get('format_version')} is not supported "
            f"(this factweave reads version {version}); rebuild it with `factweave index build`"
        )
    return header, len(magic) + 8 + size
