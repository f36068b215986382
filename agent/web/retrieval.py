"""What a knowledge-web search returns, and how candidates are scored.

Two searches (``KnowledgeWeb.search``'s ``method``):

- ``keywords``, the knowledge-web paper's route: score = cos(question, fact) + ``degree_weight`` x
  degree, where the degree is the number of the question's matched keywords the fact is linked to
  (the paper's weight is 1, the default 0.1 was chosen by measurement);
- ``graph`` (the default): personalized PageRank over the keyword-fact graph, score = cosine +
  weight x PageRank + weight x the cosine of the fact's passage + weight x its BM25 match of the
  question's words (``graph_search``).

Every part is kept on each hit (``cosine``, ``degree``, ``ppr``, ``passage``, ``lexical``) so a user can see
why a fact ranks where it does.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..embeddings import Embedder

MAX_QUESTION_CHARS = 2000
"""Characters a question, or a query searched in the knowledge web, may have, at every door (UI,
serve, MCP, CLI, Python): one bound for the work a single request can cause. Its home is here,
below both the agent (:func:`agent.pipeline.conversation.check_question`) and the web's search."""


@dataclass
class FactHit:
    """A retrieved fact with its score parts and where it came from.

    ``provenance`` holds ``title``, ``source``, ``doc_id``, ``chunk_id``, ``start`` and ``end``
    for a fact decomposed from a document (and ``page``, 1-based, for a PDF's; ``heading``, the
    heading path like ``"Install > Linux"``, for a Markdown, HTML or DOCX document's under a
    heading), ``subject``, ``predicate``, ``object`` and ``source`` for a fact verbalized from a
    triple.
    """

    id: str
    text: str
    kind: str
    score: float
    cosine: float
    degree: int
    keywords: list[str]
    provenance: dict = field(default_factory=dict)
    query: str = ""
    ppr: float = 0.0
    passage: float = 0.0
    lexical: float = 0.0

    @property
    def source(self) -> str:
        """One short line saying where the fact came from (:func:`source_line`)."""
        if self.kind == "triple":
            return str(self.provenance.get("source", ""))
        return source_line(self.provenance)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["source_line"] = self.source
        return data


@dataclass
class SearchResult:
    """Hits for a question, plus the sub-queries the fact-finding loop issued."""

    question: str
    hits: list[FactHit]
    keywords: list[str]
    subqueries: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    method: str = "graph"

    def as_dict(self) -> dict:
        return {
            "question": self.question,
            "method": self.method,
            "keywords": self.keywords,
            "subqueries": self.subqueries,
            "uncovered": self.uncovered,
            "hits": [h.as_dict() for h in self.hits],
        }


class FactSearch(Protocol):
    """What the agent needs of a knowledge web: its best facts for a question, every fact of some
    documents, and the embedder it compares meanings with. :class:`~agent.web.web.KnowledgeWeb`
    is one; the pipeline (:mod:`agent.pipeline`) annotates this, not the web's class, so another
    store of facts can stand in for it."""

    embedder: Embedder

    def search(self, question: str, k: int = 10) -> SearchResult:
        """The ``k`` facts that best answer ``question``, best first."""
        ...

    def document_hits(self, doc_ids: Sequence[str], limit: int = 200) -> list[FactHit]:
        """Every fact of the documents ``doc_ids`` (read whole, not retrieved), at most ``limit``."""
        ...


PROVENANCE_KEYS = ("title", "source", "doc_id", "chunk_id", "start", "end", "page", "heading",
                   "subject", "predicate", "object")


def source_line(p: dict) -> str:
    """Where a document's fact came from, in one line: the title (else the file), the page or
    heading path when known, and the character span, e.g. ``report, page 4 [120:198]``,
    ``Setup, Install > Linux [120:198]``, ``Mira Quell [0:42]``. A heading path that starts with
    the title does not repeat it."""
    where = str(p.get("title") or p.get("source", ""))
    if p.get("page") is not None:
        where = f"{where}, page {p['page']}"
    heading = str(p.get("heading") or "")
    if heading.startswith(where + " > "):
        heading = heading[len(where) + 3:]
    if heading and heading != where:
        where = f"{where}, {heading}"
    if p.get("start") is not None:
        where = f"{where} [{p['start']}:{p.get('end')}]"
    return where


def provenance_of(row: dict) -> dict:
    """The provenance fields of a fact node's properties (those it has)."""
    return {key: row[key] for key in PROVENANCE_KEYS if row.get(key) is not None}


def rank(hits: list[FactHit], k: int) -> list[FactHit]:
    """The ``k`` best hits, ties broken by id so a ranking is reproducible."""
    return sorted(hits, key=lambda h: (-h.score, h.id))[:k]


def merge_hits(*lists: list[FactHit]) -> list[FactHit]:
    """One hit per fact, the best-scored one kept (a sub-query may find a fact again)."""
    best: dict[str, FactHit] = {}
    for hits in lists:
        for hit in hits:
            if hit.id not in best or hit.score > best[hit.id].score:
                best[hit.id] = hit
    return list(best.values())
