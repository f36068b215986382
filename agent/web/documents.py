"""Documents for the knowledge web, read from text, Markdown, JSON, PDF, HTML and DOCX, and cut into chunks.

A document's id is a hash of its title and text, so adding the same document twice finds the same
id and changes nothing; a chunk's id is a hash of its document id and its offsets. Offsets are
character positions in the document's text, so every fact can point back to the words it came
from.

Accepted inputs (``read_documents``):

- ``.txt`` / ``.md``: one document; the title is the first Markdown heading, else the file name.
- ``.json``: a list of ``{"title", "text"}`` objects (MuSiQue's corpus), or an object mapping
  titles to a text or to a list of sentences (HotpotQA's corpus).
- ``.jsonl``: one ``{"title", "text"}`` object per line.
- ``.pdf`` (pypdf), ``.html`` / ``.htm`` (beautifulsoup4 + markdownify), ``.docx`` (mammoth):
  one document each, converted by :mod:`agent.web.converters` (why those libraries: there); the
  title is the page's ``<title>``, else the first heading, else the file name.
- a folder: every file of those kinds inside it, in sorted order.

Where a fact was found, beyond its offsets: a PDF's document keeps where each page starts, so a
fact's page is the page holding its first character (:meth:`Document.page_at`, 1-based); a
Markdown document (and HTML or DOCX, which arrive as Markdown) keeps where each heading starts
and its path, so a fact under ``## Linux`` inside ``# Install`` is under ``"Install > Linux"``
(:meth:`Document.heading_at`). Neither changes a document's id.

Sentences and chunks are cut by the rules below (:func:`sentence_spans`, :func:`chunk_document`),
kept after a comparison with libraries (``benchmarks/nlp_libraries.py``; MB new to factweave's
dependencies). "tricky": 43 passages of the MuSiQue, HotpotQA and 2Wiki corpora split by hand
(``benchmarks/data/tricky_sentences.json``: "d. 1093", "Op. 23", "U.S.", initials, "Corp." ending
a sentence, "Who Dat? is", quotes); "HotpotQA": boundary F1 against HotpotQA's own sentence lists
(994 paragraphs); "disagree": where a library and ours place a boundary differently, how often
HotpotQA sides with ours / with it::

    sentences           tricky F1  exact  HotpotQA F1  disagree  kchars/CPU s  MB new
    factweave               0.782  26/43        0.986               55,744          0
    sentencex               0.959  39/43        0.984     56/43     83,019        4.2
    syntok                  0.902  33/43        0.974    103/24      1,465        0.2
    pysbd                   0.825  33/43        0.977     97/39        273        0.4
    spaCy sentencizer       0.689  24/43        0.968    156/42      2,235      197.9

- **Sentences: ours.** sentencex (Wikimedia's, in Rust, no dependencies) splits the hand-split
  passages better: it knows a lowercase abbreviation before a number ("(d. 1093)", "vol. 89, no.
  11", "Jan. 1968"), which ours cuts, and a sentence ending in "Corp." or "Jr.", which ours joins
  to the next. But on HotpotQA's 994 paragraphs, the larger set that nobody picked, it is not
  better (F1 0.984 against 0.986; ours right at 56 of the 99 places they differ): it does not
  split inside an unclosed bracket or quote, so "Silas Daniels III (born September 22, 1981 in
  Jacksonville, Florida is ..." runs 4 sentences into one of 741 characters. The passages were
  picked in part where ours or pysbd went wrong, so they favour neither of those two. A switch
  changes the facts of every web (and can miss the demo's shipped decomposition cache, keyed by
  each chunk's text) for no gain measured on the broad set. syntok and pysbd are 38 and 200 times slower and less accurate on HotpotQA;
  spaCy's rule-based sentencizer knows only its tokenizer's abbreviations and weighs 198 MB.
- **Chunks: ours**, because it cuts only between sentences. On HotpotQA's paragraphs at 800
  characters (the web's size) it cuts 4 of HotpotQA's 4,137 sentences (in paragraphs where ours
  and HotpotQA split differently) against 186 for langchain-text-splitters'
  ``RecursiveCharacterTextSplitter`` with its default separators (11 with ``". "`` added); at
  300 characters 26 against 1,243 (172). The price: a sentence longer than the size is a chunk of
  its own (1 chunk over 800, 120 over 300), which the decomposer needs whole anyway.
"""
from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import FactweaveError, InputError
from ..knowledge.keywords import normalize_keyword
from ..knowledge.rows import json_objects
from . import converters
from .removal import check_file_source

SUFFIXES = (".txt", ".md", ".json", ".jsonl", ".pdf", ".html", ".htm", ".docx")
#: Between heading titles in a heading path.
HEADING_SEPARATOR = " > "


def stable_id(*parts: str) -> str:
    """A short content hash: equal inputs give equal ids on every machine."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:24]


def keyword_id(keyword: str) -> str:
    """A keyword node's id in the web: the same for every spelling of one keyword
    (:func:`agent.knowledge.keywords.normalize_keyword`)."""
    return stable_id("kw", normalize_keyword(keyword))


@dataclass(frozen=True)
class Document:
    """A titled text and the place it was read from (``file`` or ``file:line``).

    ``pages``: where each page starts in ``text`` (page 1 first; PDF only). ``headings``:
    ``(offset, path)`` pairs in text order, each path holding from its offset to the next.
    """

    title: str
    text: str
    source: str
    pages: tuple[int, ...] = ()
    headings: tuple[tuple[int, str], ...] = ()

    @property
    def id(self) -> str:
        return stable_id("doc", self.title, self.text)

    def page_at(self, offset: int) -> int | None:
        """The 1-based page holding character ``offset`` (None without pages)."""
        if not self.pages:
            return None
        return max(1, bisect_right(self.pages, offset))

    def heading_at(self, offset: int) -> str | None:
        """The heading path ``offset`` lies under (None before the first heading or without any)."""
        i = bisect_right(self.headings, offset, key=lambda pair: pair[0])
        return self.headings[i - 1][1] if i else None


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: ``document.text[start:end] == text``."""

    doc_id: str
    index: int
    start: int
    end: int
    text: str

    @property
    def id(self) -> str:
        return stable_id("chunk", self.doc_id, str(self.start), str(self.end))


def _document(title: object, text: object, where: str, path: Path, line: int | None,
              pages: tuple[int, ...] = ()) -> Document:
    if isinstance(text, list) and all(isinstance(s, str) for s in text):
        text = "".join(text)  # HotpotQA keeps each sentence's leading space
    if not isinstance(title, str) or not isinstance(text, str):
        raise InputError(path, line, 'expected "title" and "text" strings')
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    if not text:
        raise InputError(path, line, f"document {title!r} has no text")
    pages = tuple(max(0, min(start - lead, len(text))) for start in pages)
    return Document(title=title.strip(), text=text, source=where, pages=pages)


def heading_paths(markdown: str) -> tuple[tuple[int, str], ...]:
    """``(offset, path)`` for each Markdown heading (ATX or underlined, not inside code), the
    path joining the titles of the headings it lies under with :data:`HEADING_SEPARATOR`."""
    from markdown_it import MarkdownIt

    line_starts = [0]
    for line in markdown.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    tokens = MarkdownIt("commonmark").parse(markdown)
    found: list[tuple[int, str]] = []
    open_: list[tuple[int, str]] = []  # (level, title) of the headings above
    for token, inline in zip(tokens, tokens[1:]):
        if token.type != "heading_open" or token.map is None:
            continue
        level = int(token.tag[1:])
        title = " ".join("".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline")).split())
        if not title:
            continue
        while open_ and open_[-1][0] >= level:
            open_.pop()
        open_.append((level, title))
        found.append((line_starts[token.map[0]], HEADING_SEPARATOR.join(t for _, t in open_)))
    return tuple(found)


def with_headings(doc: Document) -> Document:
    """``doc`` with the heading paths of its (Markdown) text."""
    return replace(doc, headings=heading_paths(doc.text))


def read_json(path: Path) -> Any:
    """A JSON file's value; invalid JSON or text that is not UTF-8 is an :class:`InputError`
    naming the file and line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise InputError(path, error.lineno, f"invalid JSON: {error.msg}") from None
    except UnicodeDecodeError:
        raise InputError(path, 1, "not UTF-8 text") from None


def _read_json(path: Path) -> Iterator[Document]:
    data = read_json(path)
    if isinstance(data, dict):
        for title, text in data.items():
            yield _document(title, text, f"{path.name}#{title}", path, 1)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise InputError(path, 1, f"item {i}: expected an object with title and text")
            yield _document(item.get("title", ""), item.get("text"), f"{path.name}#{i}", path, 1)
    else:
        raise InputError(path, 1, "expected a list of {title, text} objects or a title->text object")


def _read_jsonl(path: Path) -> Iterator[Document]:
    for line, obj in json_objects(path):
        yield _document(obj.get("title", ""), obj.get("text"), f"{path.name}:{line}", path, line)


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _read_text(path: Path) -> Iterator[Document]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(path, 1, "not UTF-8 text") from None
    markdown = path.suffix.lower() == ".md"
    heading = _HEADING.search(text) if markdown else None
    title = heading.group(1) if heading else path.stem
    doc = _document(title, text, path.name, path, 1)
    yield with_headings(doc) if markdown else doc


def _read_converted(path: Path) -> Iterator[Document]:
    read = {".pdf": converters.read_pdf, ".docx": converters.read_docx}.get(path.suffix.lower(), converters.read_html)
    converted = read(path)
    heading = _HEADING.search(converted.text)
    title = converted.title or (heading.group(1) if heading else path.stem)
    doc = _document(title, converted.text, path.name, path, None, converted.pages)
    yield doc if converted.pages else with_headings(doc)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not path.exists():
        raise FactweaveError(f"{path}: no such file or folder")
    if path.suffix.lower() not in SUFFIXES:
        raise FactweaveError(f"{path}: unsupported document file (use {', '.join(SUFFIXES)})")
    return [path]


def read_documents(paths: Iterable[str | Path]) -> Iterator[Document]:
    """Every document in ``paths`` (files or folders), in order."""
    readers = {".json": _read_json, ".jsonl": _read_jsonl, ".txt": _read_text, ".md": _read_text}
    for given in paths:
        for path in _files(Path(given)):
            check_file_source(path.name)  # its documents are stored under its name
            yield from readers.get(path.suffix.lower(), _read_converted)(path)


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# A period after these does not end a sentence: "G. Stanley Hall", "Dr. Quell", "St. Louis".
_ABBREVIATION = re.compile(
    r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|Ft|Gen|Col|Lt|Capt|Sgt|Rev|Hon|Gov|Sen|Rep|"
    r"Inc|Ltd|Co|Corp|No|Vol|vs|etc|approx|ca|c|e\.g|i\.e|U\.S|U\.K))\.$"
)


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text[start:end]``, whitespace trimmed."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    cursor = start
    # A blank line ends a sentence too (a heading or a list has no final period).
    breaks = [(m.start(), m.end()) for m in _PARAGRAPH_BREAK.finditer(text, start, end)]
    for match in _SENTENCE_END.finditer(text, start, end):
        if _ABBREVIATION.search(text, max(start, match.start() - 8), match.start()):
            continue
        breaks.append((match.start(), match.end()))
    for a, b in sorted(breaks):
        if a < cursor:
            continue
        spans.append((cursor, a))
        cursor = b
    spans.append((cursor, end))
    return trim_spans(text, spans)


def trim_spans(text: str, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` of ``text`` without their leading and trailing whitespace; empty ones dropped."""
    trimmed = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            trimmed.append((a, b))
    return trimmed


def chunk_document(doc: Document, size: int = 800, overlap: int = 0) -> list[Chunk]:
    """Cut ``doc`` into chunks of about ``size`` characters on sentence boundaries.

    Chunks hold whole sentences (a sentence longer than ``size`` is a chunk of its own), so the
    decomposer never sees half a statement. ``overlap`` repeats up to that many characters of
    trailing sentences at the start of the next chunk.
    """
    if size <= 0:
        raise FactweaveError("chunk size must be positive")
    sentences = sentence_spans(doc.text)
    chunks: list[Chunk] = []
    i = 0
    while i < len(sentences):
        j = i
        while j + 1 < len(sentences) and sentences[j + 1][1] - sentences[i][0] <= size:
            j += 1
        start, end = sentences[i][0], sentences[j][1]
        chunks.append(Chunk(doc.id, len(chunks), start, end, doc.text[start:end]))
        nxt = j + 1
        if overlap > 0:
            back = nxt
            while back - 1 > i and end - sentences[back - 1][0] <= overlap:
                back -= 1
            nxt = max(back, i + 1)
        i = nxt
    return chunks
