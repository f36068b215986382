"""N-Triples (W3C RDF 1.1) read line by line into facts with readable labels.

Each line holds at most one triple ``subject predicate object .`` and may end with a ``#``
comment. Terms become labels by these rules:

* IRI ``<http://example.org/wiki/New_York_City>`` -> ``New York City``: the local name after the
  last ``/`` or ``#``, percent-decoded, underscores read as spaces. An IRI with no local name
  keeps the text before its trailing separators' last ``/`` or ``#`` (``<http://ex.org/>`` ->
  ``ex.org``), so a label is never empty.
* Blank node ``_:b1`` -> ``_:b1``: kept whole, so it cannot be mistaken for an IRI named ``b1``.
* Literal ``"Paris"@fr`` or ``"1889"^^<...#gYear>`` -> its lexical value (``Paris``, ``1889``);
  escapes ``\\t \\b \\n \\r \\f \\" \\' \\\\ \\uXXXX \\UXXXXXXXX`` are decoded, the language tag
  and datatype are dropped.

Two leniencies, on purpose: UTF-16 surrogate pairs written as two escapes (``\\uD83D\\uDE00``, as
some writers do) are joined into one character, and an IRI need not be absolute (``<s>``): the
label is the same either way.

Parsed here rather than by a library, after a comparison (``benchmarks/nlp_libraries.py``:
``tests/data/facts.nt`` and 60,000 generated lines of KAMEL triples with escapes, language tags,
datatypes, blank nodes and comments; 16 malformed lines; triples per CPU second)::

    parser                         labels agree  malformed rejected  triples/s  keeps lines  MB new
    factweave                       60000/60000               15/16      92,940          yes       0
    rdflib                          60000/60000               14/16      75,681           no     4.6
    pyoxigraph                      60000/60000               16/16     162,857           no    21.3
    pyoxigraph, one call per line   60000/60000               16/16     130,960          yes    21.3

rdflib accepts invalid escapes (``"a\\zb"``, a lone ``\\uD800``) and renames blank nodes (``_:b1``
becomes a random id, so a fact could not show the name the file gives). pyoxigraph is stricter
(the one malformed line ours takes is the relative IRI above) and faster, but a fact's provenance
is its file and line, which it gives only when called once per line; it rejects the surrogate
pairs above unless run ``lenient``, which then lets an IRI with a space through; and it is a
21 MB compiled dependency for a loader whose labels come out the same.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

from agent.errors import InputError
from agent.knowledge.facts import Fact
from agent.knowledge.rows import checked_fact, numbered_lines

_SPACE = re.compile(r"[ \t]*")
_IRI = re.compile(r'<((?:[^\x00-\x20<>"{}|^`\\]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*)>')
# A blank node label may contain dots but not end with one: in `_:b1.` the dot ends the triple.
_BLANK = re.compile(r"_:\w(?:[\w.\-\u00b7]*[\w\-\u00b7])?")
_STRING = re.compile(r'"((?:[^"\\\n\r]|\\.)*)"')
_LANGUAGE = re.compile(r"@[A-Za-z]+(?:-[A-Za-z0-9]+)*")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {
    "t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def iri_label(iri: str) -> str:
    """``iri_label("http://dbpedia.org/resource/Caf%C3%A9_M%C3%BCller") == "Café Müller"``."""
    trimmed = iri.rstrip("/#")
    local = re.split(r"[/#]", trimmed)[-1] if trimmed else ""
    label = unquote(local).replace("_", " ").strip()
    return label or iri


def _unescape(text: str, *, allow_simple: bool) -> str:
    def decode(match: re.Match[str]) -> str:
        short, long, simple = match.groups()
        if simple is not None:
            if allow_simple and simple in _SIMPLE_ESCAPES:
                return _SIMPLE_ESCAPES[simple]
            raise ValueError(f"invalid escape \\{simple}")
        code = int(short or long, 16)
        if code > 0x10FFFF:
            raise ValueError(f"escape \\U{long} is beyond the last Unicode code point")
        return chr(code)

    decoded = _ESCAPE.sub(decode, text)
    if _SURROGATE.search(decoded):
        # Some writers escape characters outside the BMP as UTF-16 pairs (\uD83D\uDE00); join them.
        try:
            decoded = decoded.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise ValueError("unpaired surrogate in a \\u escape") from None
    return decoded


class _Cursor:
    """Position in one line; each method consumes one term and returns its label."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.pos = 0

    def skip_space(self) -> None:
        space = _SPACE.match(self.line, self.pos)
        assert space is not None  # a run of spaces, maybe empty: it always matches
        self.pos = space.end()

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.line) or self.line[self.pos] == "#"

    def iri(self) -> str | None:
        match = _IRI.match(self.line, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return iri_label(_unescape(match.group(1), allow_simple=False))

    def blank(self) -> str | None:
        match = _BLANK.match(self.line, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return match.group(0)

    def literal(self) -> str | None:
        match = _STRING.match(self.line, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        value = _unescape(match.group(1), allow_simple=True)
        if self.line.startswith("^^", self.pos):
            self.pos += 2
            if self.iri() is None:
                raise ValueError("expected a datatype IRI <...> after ^^")
        else:
            language = _LANGUAGE.match(self.line, self.pos)
            if language is not None:
                self.pos = language.end()
        return value

    def term(self, role: str, *readers: str) -> str:
        self.skip_space()
        for reader in readers:
            label = getattr(self, reader)()
            if label is not None:
                return label
        found = self.line[self.pos : self.pos + 20] or "end of line"
        kinds = {"iri": "an IRI <...>", "blank": "a blank node _:name", "literal": 'a literal "..."'}
        wanted = " or ".join(kinds[reader] for reader in readers)
        raise ValueError(f"{role}: expected {wanted}, found {found!r}")


def parse_line(line: str) -> tuple[str, str, str] | None:
    """The ``(subject, predicate, object)`` labels of one N-Triples line; ``None`` for a blank or
    comment line. Raises ``ValueError`` with the reason when the line is not N-Triples."""
    cursor = _Cursor(line)
    if cursor.at_end():
        return None
    subject = cursor.term("subject", "iri", "blank")
    predicate = cursor.term("predicate", "iri")
    obj = cursor.term("object", "iri", "blank", "literal")
    cursor.skip_space()
    if not line.startswith(".", cursor.pos):
        raise ValueError("expected '.' at the end of the triple")
    cursor.pos += 1
    if not cursor.at_end():
        raise ValueError(f"unexpected text after '.': {line[cursor.pos : cursor.pos + 20]!r}")
    return subject, predicate, obj


def read_ntriples(path: str | Path) -> Iterator[Fact]:
    """Yield one :class:`Fact` per triple of an N-Triples file (``.nt`` or ``.nt.gz``), with
    ``source`` ``"<file name>:<line>"``; a malformed line raises :class:`InputError`."""
    path = Path(path)
    for line_number, line in numbered_lines(path):
        try:
            triple = parse_line(line)
        except ValueError as error:
            raise InputError(path, line_number, f"not N-Triples: {error}") from None
        if triple is not None:
            source = f"{path.name}:{line_number}"
            yield checked_fact(*triple, source=source, path=path, line=line_number)
