"""Readers that stream facts out of knowledge files, and :func:`load_facts` to pick one.

Formats (each file may also be gzip-compressed, with ``.gz`` appended to its name):

* ``.tsv``: ``subject<TAB>predicate<TAB>object`` per line.
* ``.jsonl`` / ``.ndjson``: ``{"subject": ..., "predicate": ..., "object": ..., "source": ...}``
  per line, ``source`` optional.
* ``.nt``: N-Triples (see :mod:`agent.knowledge.ntriples`).
* a folder with ``relations/``: the KAMEL layout (see :mod:`agent.knowledge.kamel`).

Readers are generators: nothing is read until the first fact is asked for, and a malformed row
raises :class:`InputError` (``file:line: reason``) when iteration reaches it. A fact's ``source``
is ``"<file name>:<line>"`` unless the row names its own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from agent.errors import FactweaveError, InputError
from agent.knowledge.facts import Fact
from agent.knowledge.kamel import DEFAULT_SPLITS, read_kamel
from agent.knowledge.ntriples import read_ntriples
from agent.knowledge.rows import checked_fact, json_objects, numbered_lines

__all__ = [
    "SUPPORTED_FORMATS",
    "load_facts",
    "read_jsonl",
    "read_kamel",
    "read_ntriples",
    "read_tsv",
]

_TSV_FIELDS = ("subject", "predicate", "object")
_JSON_KEYS = ("subject", "predicate", "object")


def read_tsv(path: str | Path) -> Iterator[Fact]:
    """Yield a fact per ``subject<TAB>predicate<TAB>object`` line.

    Blank lines and lines whose first character is ``#`` are skipped (so a subject cannot start
    with ``#``). Whitespace around a field is dropped; a row with other than three fields, or an
    empty field, is an :class:`InputError`.
    """
    path = Path(path)
    for line_number, line in numbered_lines(path):
        if not line.strip() or line.startswith("#"):
            continue
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) != 3:
            message = f"expected 3 tab-separated fields (subject, predicate, object), got {len(fields)}"
            raise InputError(path, line_number, message)
        for number, (name, value) in enumerate(zip(_TSV_FIELDS, fields), start=1):
            if not value:
                raise InputError(path, line_number, f"field {number} ({name}) is empty")
        yield checked_fact(*fields, source=f"{path.name}:{line_number}", path=path, line=line_number)


def read_jsonl(path: str | Path, *, row_sources: bool = True) -> Iterator[Fact]:
    """Yield a fact per JSON object line with string keys ``subject``, ``predicate``, ``object``
    and optionally ``source``; blank lines are skipped, anything else is an :class:`InputError`.
    ``row_sources=False``: a row's own ``source`` is checked but not used, every fact's source is
    the file's line (an upload: its provenance, and what removing the file goes by, is the file)."""
    path = Path(path)
    for line_number, row in json_objects(path):
        for key in _JSON_KEYS:
            if key not in row:
                raise InputError(path, line_number, f"missing key {key!r}")
            if not isinstance(row[key], str):
                kind = type(row[key]).__name__
                raise InputError(path, line_number, f"key {key!r} must be a string, got {kind}")
        source = row.get("source", f"{path.name}:{line_number}")
        if not isinstance(source, str):
            kind = type(source).__name__
            raise InputError(path, line_number, f"key 'source' must be a string, got {kind}")
        if not row_sources:
            source = f"{path.name}:{line_number}"
        subject, predicate, obj = (row[key] for key in _JSON_KEYS)
        yield checked_fact(subject, predicate, obj, source=source, path=path, line=line_number)


Reader = Callable[[Path], Iterator[Fact]]

_READERS: dict[str, Reader] = {
    ".tsv": read_tsv,
    ".jsonl": read_jsonl,
    ".ndjson": read_jsonl,
    ".nt": read_ntriples,
}
SUPPORTED_FORMATS = ".tsv, .jsonl, .ndjson, .nt (each also as .gz) or a KAMEL folder (with relations/)"


def _reader_for(path: Path) -> Reader | None:
    name = path.name.lower()
    name = name.removesuffix(".gz")
    return _READERS.get(Path(name).suffix)


def _with_inverses(facts: Iterable[Fact]) -> Iterator[Fact]:
    for fact in facts:
        yield fact
        inverse = fact.inverse()
        yield replace(inverse, source=f"{inverse.source} (inverse)")


def load_facts(
    path: str | Path, *, inverse: bool = False, splits: Iterable[str] = DEFAULT_SPLITS, row_sources: bool = True
) -> Iterator[Fact]:
    """Facts from a file or KAMEL folder, the reader chosen by the name's suffix.

    The format is checked now, so an unknown one raises :class:`FactweaveError` before anything
    is read; rows are read, and their errors raised, while the result is iterated. With
    ``inverse=True`` each fact is followed by its inverse (source suffixed ``" (inverse)"``).
    ``splits`` applies to KAMEL folders only; ``row_sources=False`` makes every fact's source the
    file's line even where a JSONL row names its own (:func:`read_jsonl`).
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "relations").is_dir():
            message = "a folder of facts must be in the KAMEL layout (relations/P*/*.jsonl)"
            raise FactweaveError(f"{path}: {message}")
        facts = read_kamel(path, splits=splits)
    else:
        reader = _reader_for(path)
        if reader is None:
            raise FactweaveError(f"{path}: unknown fact format; supported: {SUPPORTED_FORMATS}")
        if not path.exists():
            raise FactweaveError(f"{path}: no such file")
        facts = read_jsonl(path, row_sources=False) if reader is read_jsonl and not row_sources else reader(path)
    return _with_inverses(facts) if inverse else facts
