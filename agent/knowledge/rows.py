"""What every fact reader shares: numbered lines from plain or gzip text, and the label check.

Lines are numbered from 1, as editors show them, so an error can name ``file:line``. A file whose
name ends in ``.gz`` is decompressed while it is read; nothing is unpacked to disk.
"""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from agent.errors import FactweaveError, InputError
from agent.knowledge.facts import Fact, clean_label

_BOM = "\ufeff"


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each line of a UTF-8 file, without its line ending.

    A leading byte order mark is dropped. Undecodable bytes and damaged gzip data raise
    :class:`InputError` naming the line where reading stopped.
    """
    path = Path(path)
    try:
        # Binary lines decoded one by one: a text stream decodes ahead in chunks, which would
        # blame the wrong line for a bad byte.
        stream = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115 (closed by the `with` below)
    except FileNotFoundError:
        raise FactweaveError(f"{path}: no such file") from None
    except OSError as error:
        raise FactweaveError(f"{path}: cannot open: {error.strerror or error}") from None
    with stream:
        line_number = 0
        while True:
            try:
                raw = stream.readline()
            except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
                raise InputError(path, line_number + 1, f"cannot read: {error}") from None
            if not raw:
                return
            line_number += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                message = f"not UTF-8 text (byte {error.start + 1} of the line)"
                raise InputError(path, line_number, message) from None
            if line_number == 1 and text.startswith(_BOM):
                text = text[1:]
            yield line_number, text.rstrip("\r\n")


def json_objects(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSON Lines file; a line that
    is not valid JSON, or not an object, is an :class:`InputError`."""
    path = Path(path)
    for line_number, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            message = f"invalid JSON: {error.msg} (column {error.colno})"
            raise InputError(path, line_number, message) from None
        if not isinstance(row, dict):
            raise InputError(path, line_number, f"expected a JSON object, got {type(row).__name__}")
        yield line_number, row


def checked_fact(
    subject: str, predicate: str, obj: str, *, source: str, path: str | Path, line: int | None
) -> Fact:
    """Build a :class:`Fact`, refusing a label that is empty once whitespace is folded.

    An empty label would verbalize as ``<>``, which no question can reach and no reader of the
    proof can interpret, so it is an input error rather than a fact.
    """
    for role, label in (("subject", subject), ("predicate", predicate), ("object", obj)):
        if not clean_label(label):
            raise InputError(path, line, f"empty {role} label")
    return Fact(subject=subject, predicate=predicate, object=obj, source=source)
