"""Files uploaded into a knowledge web (the UI, `factweave web add`, :mod:`agent.web.workspace`):
checked whole first, then built into the web.

A file is either **triples** (``.tsv``, ``.nt``, or ``.jsonl`` whose first row has a
``subject``; any of them gzip-compressed) or **documents** (``.txt``, ``.md``, ``.json``,
``.jsonl`` rows with ``title``/``text``, or ``.pdf``, ``.html``/``.htm``, ``.docx``, converted by
:mod:`agent.web.converters`). Every file is read completely before anything is
written, so a bad row anywhere (reported as ``name:line: reason``) or a file over the size limit
rejects the whole upload and the web is left as it was.

Example (not run: needs the files)::

    batch = read_uploads([Path("facts.tsv"), Path("notes.md")], max_bytes=10_000_000)
    batch.triples, batch.documents           # parsed, nothing written yet
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import FactweaveError, InputError
from agent.knowledge.facts import Fact
from agent.knowledge.loaders import load_facts
from agent.web.converters import zip_sizes
from agent.web.documents import Document, read_documents
from agent.web.removal import check_file_source

TRIPLE_SUFFIXES = (".tsv", ".nt", ".tsv.gz", ".nt.gz", ".jsonl.gz")
DOCUMENT_SUFFIXES = (".txt", ".md", ".json", ".pdf", ".html", ".htm", ".docx")
ACCEPTED = (".tsv", ".nt", ".jsonl", ".gz", ".txt", ".md", ".json", ".pdf", ".html", ".htm", ".docx")
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
#: The most files one upload may hold.
MAX_FILES = 20
#: A DOCX file is a zip of XML: what it unpacks to may be this many times the upload limit (and
#: 16 MiB at least: python-docx's own empty template unpacks to 0.8 MB), no more; a zip bomb stops here.
ZIP_UNPACK_FACTOR = 10
ZIP_UNPACK_FLOOR = 16 * 1024 * 1024


def size_text(n: int) -> str:
    """``n`` bytes for people: "10 bytes", "64 KB", "20.0 MB"."""
    if n < 1000:
        return f"{n} bytes"
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


@dataclass
class UploadBatch:
    """What a set of uploaded files holds, parsed: triples per file and documents."""

    triples: dict[str, list[Fact]] = field(default_factory=dict)
    documents: list[Document] = field(default_factory=list)

    @property
    def triple_count(self) -> int:
        return sum(len(facts) for facts in self.triples.values())

    def describe(self) -> str:
        parts = []
        if self.triples:
            parts.append(f"{self.triple_count} triple(s) from {len(self.triples)} file(s)")
        if self.documents:
            parts.append(f"{len(self.documents)} document(s)")
        return ", ".join(parts) or "nothing"


def _is_triples_jsonl(path: Path) -> bool:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(path, number, f"not JSON: {exc.msg}") from None
                return isinstance(row, dict) and "subject" in row
    return False


def _zip_unpacked_size(path: Path) -> int:
    """What the members of a zip file (a DOCX) declare they unpack to (:func:`zip_sizes`)."""
    sizes = zip_sizes(path)
    if sizes is None:
        raise FactweaveError(f"{path.name}: not a readable DOCX file (not a zip archive)")
    return sizes[0]


def _unpacked_size(path: Path, limit: int) -> int:
    """The decompressed size of a gzip file, read in blocks and no further than just past ``limit``
    (a small file that unpacks to gigabytes stops there)."""
    total = 0
    try:
        with gzip.open(path, "rb") as f:
            while total <= limit:
                block = f.read(1 << 20)
                if not block:
                    break
                total += len(block)
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise FactweaveError(f"{path.name}: not a readable gzip file ({exc})") from None
    return total


def kind_of(path: Path) -> str:
    """``triples`` or ``documents`` for an uploaded file, by its name (and a JSONL file's first row)."""
    name = path.name.lower()
    if name.endswith(TRIPLE_SUFFIXES):
        return "triples"
    if name.endswith((".jsonl", ".ndjson")):
        return "triples" if _is_triples_jsonl(path) else "documents"
    if name.endswith(DOCUMENT_SUFFIXES):
        return "documents"
    raise FactweaveError(f"{path.name}: unsupported file type; upload triples (.tsv, .nt, .jsonl) or documents "
                         f"(.txt, .md, .json, .jsonl, .pdf, .html, .docx)")


def read_uploads(paths: list[Path], *, max_bytes: int = DEFAULT_MAX_BYTES) -> UploadBatch:
    """Parse every file completely (no writing); the first problem raises a one-line
    :class:`FactweaveError` naming the file (and line)."""
    if not paths:
        raise FactweaveError("no file uploaded")
    if len(paths) > MAX_FILES:
        raise FactweaveError(f"{len(paths)} files in one upload; upload at most {MAX_FILES} at a time")
    for path in paths:  # every name first: an upload that would alias a source reads nothing
        check_file_source(Path(path).name)
    batch = UploadBatch()
    for path in paths:
        path = Path(path)
        size = path.stat().st_size
        if size > max_bytes:
            raise FactweaveError(f"{path.name}: {size_text(size)} is over the upload limit of {size_text(max_bytes)}")
        if path.name.lower().endswith(".gz"):
            size = _unpacked_size(path, max_bytes)  # the limit holds for what is read, not what was sent
            if size > max_bytes:
                raise FactweaveError(f"{path.name}: unpacks to more than the upload limit of {size_text(max_bytes)}")
        elif path.name.lower().endswith(".docx"):
            unpacked, limit = _zip_unpacked_size(path), max(ZIP_UNPACK_FLOOR, ZIP_UNPACK_FACTOR * max_bytes)
            if unpacked > limit:
                raise FactweaveError(f"{path.name}: unpacks to {size_text(unpacked)}, more than the "
                                     f"{size_text(limit)} a DOCX upload may unpack to")
        if size == 0:
            raise FactweaveError(f"{path.name}: the file is empty")
        try:
            if kind_of(path) == "triples":
                # The upload's provenance is the file: a row cannot name another source (removing
                # the file goes by it).
                facts = list(load_facts(path, row_sources=False))
                if not facts:
                    raise FactweaveError(f"{path.name}: no triples in the file")
                batch.triples[path.name] = facts
            else:
                documents = list(read_documents([path]))
                if not documents:
                    raise FactweaveError(f"{path.name}: no documents in the file")
                batch.documents.extend(documents)
        except UnicodeDecodeError:
            raise FactweaveError(f"{path.name}: not UTF-8 text") from None
        except FactweaveError as exc:
            # The upload's temporary folder means nothing to the user: name the file only.
            raise FactweaveError(str(exc).replace(str(path), path.name)) from None
    return batch
