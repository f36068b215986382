"""Removing what a source brought into a knowledge web: a document file, a JSON corpus, a triple file.

A source is named as it was added (the path given to ``web build``, an upload's file name); the
web stores documents and triples under the file's name, so a path is matched by its file name
too (two files of one name in different folders are one source here). It covers the documents
and facts whose ``source`` is that name, or that name followed by ``#`` (an item of a JSON
corpus: ``corpus.json#3``) or ``:`` (a line of a triple file or a JSONL corpus:
``triples.tsv:12``). Removing it deletes its documents, their chunks (those without facts
too), its facts with their keyword links, the keywords no other fact mentions, and the vectors
of those chunks, facts and keywords: afterwards the web counts what a web built without the source counts.

All or nothing by completion, and resumable: what will be deleted (every id) is written first to
``<web>/removing.json``; then the vectors go (flushed), then the graph nodes, then the keywords
left without facts and their vectors, and the journal last. Each step deletes by id and is
idempotent, so a removal cut short (an error, a kill) is finished by the next removal, which
starts by completing the journal. Vectors go before the nodes that point at them: a kill in
between leaves facts without vectors that the journal still names, never vectors nobody names.

Not covered: a triple text two sources both added is one fact node (ids are content hashes);
removing either source removes it. The cost is one pass over the facts' ids and sources
(``GraphStore.fact_sources``) plus deletions by id.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError
from ..files import write_json
from .graph import DOCUMENT, FACT, KEYWORD

if TYPE_CHECKING:
    from .web import KnowledgeWeb

JOURNAL = "removing.json"


@dataclass
class RemoveReport:
    sources: list[str]
    documents: int = 0
    chunks: int = 0
    facts: int = 0
    keywords: int = 0
    resumed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _names(sources: Sequence[str]) -> set[str]:
    """The names a source may be stored under: as given, and its file name (documents and triples
    are stored under the file's name: ``notes.md``, ``triples.tsv:12``)."""
    return {name for s in sources for name in (s, PurePath(s).name) if name}


def _covers(names: set[str], source: str | None) -> bool:
    if not source:
        return False
    return source in names or source.split("#", 1)[0] in names or source.rsplit(":", 1)[0] in names


def removal_plan(web: KnowledgeWeb, sources: Sequence[str]) -> dict[str, Any]:
    """Every id removing ``sources`` deletes (before anything is deleted)."""
    names = _names(sources)
    documents = [d["id"] for d in web.graph.documents() if _covers(names, d.get("source"))]
    doc_set = set(documents)
    facts = [f["id"] for f in web.graph.fact_sources()
             if f.get("doc_id") in doc_set or _covers(names, f.get("source"))]
    keywords = sorted({k for ids in _keywords_of(web, facts) for k in ids})
    return {"sources": list(sources), "documents": documents, "chunks": web.graph.chunks_of_documents(documents),
            "facts": facts, "keywords": keywords}


def _keywords_of(web: KnowledgeWeb, facts: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(facts), 5000):
        yield from web.graph.keywords_of_facts(facts[start:start + 5000]).values()


def remove_sources(web: KnowledgeWeb, sources: Sequence[str]) -> RemoveReport:
    """Remove ``sources`` from ``web`` (see the module docstring); call under the web's write lock.
    A source that names nothing is an error naming it; nothing is deleted then."""
    journal = web.folder / JOURNAL
    resumed = _finish(web, journal) if journal.exists() else None
    sources = [str(s) for s in dict.fromkeys(sources) if str(s)]
    if not sources:
        if resumed is not None:
            return resumed
        raise FactweaveError("name a source to remove (a file as it was added, e.g. notes.md or triples.tsv)")
    plan = removal_plan(web, sources)
    if not plan["documents"] and not plan["facts"]:
        known = sorted({d["source"].split("#")[0] for d in web.graph.documents() if d.get("source")})
        hint = f"; its documents come from {', '.join(known[:8])}" + (" ..." if len(known) > 8 else "") if known else ""
        raise FactweaveError(f"nothing in {web.folder} comes from {', '.join(sources)}{hint}")
    write_json(journal, plan)
    report = _finish(web, journal)
    report.resumed = resumed is not None
    return report


def _finish(web: KnowledgeWeb, journal: Any) -> RemoveReport:
    """Carry out the removal the journal names (each step by id, idempotent), then drop it."""
    try:
        plan = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FactweaveError(f"{journal}: unreadable removal journal ({exc}); delete it and remove again") from None
    report = RemoveReport(plan["sources"])
    web.fact_vectors.delete(plan["facts"])
    web.fact_vectors.flush()
    web.chunk_vectors.delete(plan.get("chunks", []))
    web.chunk_vectors.flush()
    report.chunks = web.graph.delete_chunks_of_documents(plan["documents"])
    report.facts = web.graph.delete(FACT, plan["facts"])
    report.documents = web.graph.delete(DOCUMENT, plan["documents"])
    orphans = sorted(set(plan["keywords"]) - web.graph.linked_keywords(plan["keywords"]))
    web.keyword_vectors.delete(orphans)
    web.keyword_vectors.flush()
    report.keywords = web.graph.delete(KEYWORD, orphans)
    journal.unlink()
    return report

