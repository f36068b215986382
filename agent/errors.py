"""Errors that the CLI prints as one readable line (no traceback)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class FactweaveError(Exception):
    """Base class: the message is meant for a user and fits on one line."""


class InputError(FactweaveError):
    """A malformed input row, named by file and line."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class IndexMismatchError(FactweaveError):
    """A fact index that was built for another tokenizer or format."""


class ModelError(FactweaveError):
    """A model that cannot be found, assembled, verified or loaded."""


def first_validation_error(errors: Sequence[Mapping[str, Any]], *, skip: tuple[str, ...] = ()) -> tuple[str, str]:
    """Where (the dotted location, parts in ``skip`` left out) and what of the first of a pydantic
    ``ValidationError``'s ``errors()``: the parts of a one-line message."""
    first = errors[0] if errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in skip)
    return where, str(first.get("msg", "invalid"))
