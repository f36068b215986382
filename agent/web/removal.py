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

Replacing a changed source (:func:`prune_sources`): adding a file the web already holds adds its
new documents and triples (ids are content hashes, so what is unchanged is skipped), then removes
what the web holds from that source and the new version lacks, through the same journal. A kill
in between leaves both versions; adding the file again finishes the replacement.

Listing (:func:`source_counts`): one row per source as a removal names it (:func:`source_name`).

Searching while a removal is under way or was cut short (:class:`Withdrawn`): the facts its
journal names, and the sources an upload's removal names before it plans (``uploads/removing.json``),
are left out of every search from the moment they are named.
"""
from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError
from ..files import write_json
from .cypher import DOCUMENT, FACT, KEYWORD

if TYPE_CHECKING:
    from .web import KnowledgeWeb

JOURNAL = "removing.json"
#: A line of a triple file or a JSONL corpus (``triples.tsv:12``), an inverse fact's too.
_LINE = re.compile(r":\d+(?: \(inverse\))?$")


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


def source_name(stored: str) -> str:
    """The source a stored document or fact ``source`` belongs to, as a removal names it:
    ``corpus.json#3`` -> ``corpus.json``, ``triples.tsv:12`` -> ``triples.tsv``, ``notes.md`` -> itself."""
    name = stored.split("#", 1)[0]
    return _LINE.sub("", name) if name == stored else name


def check_file_source(name: str) -> str:
    """``name``, a file's name that the web will store its documents or facts under, when
    :func:`source_name` reads it back as itself; else :class:`FactweaveError` in one line. A
    ``#`` (a corpus's item) or a ``:<number>`` ending (a line) in it would make it part of
    another source: an upload named ``victim.pdf#x.md`` would replace ``victim.pdf``'s facts and
    take its provenance. Checked where files come in (uploads, ``web add``, ``web build``,
    :meth:`~agent.web.web.KnowledgeWeb.add_triples`), before anything is read or written."""
    owner = source_name(name)
    if owner != name:
        raise FactweaveError(f"{name}: a file name with '#' or ending in ':<number>' would be read as part of the "
                             f"source {owner!r}; rename the file")
    return name


def _covers(names: set[str], source: str | None) -> bool:
    if not source:
        return False
    return source in names or source_name(source) in names


def source_counts(web: KnowledgeWeb) -> list[dict[str, Any]]:
    """Every source of the web with its documents and facts (counted by the graph, per source),
    by name: ``[{"source": "notes.md", "documents": 1, "facts": 4}, ...]``."""
    counts: dict[str, dict[str, Any]] = {}

    def row(source: str | None) -> dict[str, Any]:
        name = source_name(source or "")
        return counts.setdefault(name, {"source": name, "documents": 0, "facts": 0})

    for document in web.graph.documents():
        row(document.get("source"))["documents"] += 1
    for source, n in web.graph.fact_source_counts().items():
        row(source)["facts"] += n
    return [counts[name] for name in sorted(counts)]


def removal_plan(web: KnowledgeWeb, sources: Sequence[str], keep: Collection[str] = ()) -> dict[str, Any]:
    """Every id removing ``sources`` deletes (before anything is deleted); the documents and facts
    whose ids are in ``keep`` stay (a new version of the sources holds them), with the facts of
    kept documents."""
    names = _names(sources)
    documents = [d["id"] for d in web.graph.documents() if _covers(names, d.get("source")) and d["id"] not in keep]
    doc_set = set(documents)
    facts = [f["id"] for f in web.graph.fact_sources()
             if f.get("doc_id") in doc_set or (_covers(names, f.get("source"))
                                                and f["id"] not in keep and f.get("doc_id") not in keep)]
    keywords = sorted({k for ids in _keywords_of(web, facts) for k in ids})
    return {"sources": list(sources), "documents": documents, "chunks": web.graph.chunks_of_documents(documents),
            "facts": facts, "keywords": keywords}


def _keywords_of(web: KnowledgeWeb, facts: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(facts), 5000):
        yield from web.graph.keywords_of_facts(facts[start:start + 5000]).values()


def remove_sources(web: KnowledgeWeb, sources: Sequence[str]) -> RemoveReport:
    """Remove ``sources`` from ``web`` (see the module docstring); call under the web's write lock.
    A source that names nothing is an error naming it; nothing is deleted then."""
    resumed = _resume(web)
    sources = [str(s) for s in dict.fromkeys(sources) if str(s)]
    if not sources:
        if resumed is not None:
            return resumed
        raise FactweaveError("name a source to remove (a file as it was added, e.g. notes.md or triples.tsv)")
    plan = removal_plan(web, sources)
    if not plan["documents"] and not plan["facts"]:
        known = [row["source"] for row in source_counts(web)]
        hint = f"; its sources are {', '.join(known[:8])}" + (" ..." if len(known) > 8 else "") if known else ""
        raise FactweaveError(f"nothing in {web.folder} comes from {', '.join(sources)}{hint}")
    report = _remove(web, plan)
    report.resumed = resumed is not None
    return report


def prune_sources(web: KnowledgeWeb, sources: Sequence[str], keep: Collection[str]) -> RemoveReport | None:
    """Remove what ``sources`` brought in earlier that their new version lacks (its document and
    fact ids are ``keep``): the second half of replacing a changed file (see the module
    docstring). None when nothing is stale. Call under the web's write lock, after the new
    version's graph rows are written."""
    _resume(web)
    plan = removal_plan(web, [str(s) for s in dict.fromkeys(sources) if str(s)], keep)
    if not plan["documents"] and not plan["facts"]:
        return None
    return _remove(web, plan)


def finish_removal(web: KnowledgeWeb) -> RemoveReport | None:
    """Finish a removal cut short (its journal is there); its report, or None. Call under the
    web's write lock."""
    report = _resume(web)
    if report is not None:
        report.resumed = True
    return report


def _resume(web: KnowledgeWeb) -> RemoveReport | None:
    """Finish a removal cut short (its journal is there); its report, or None."""
    journal = web.folder / JOURNAL
    return _finish(web, journal) if journal.exists() else None


def _remove(web: KnowledgeWeb, plan: dict[str, Any]) -> RemoveReport:
    journal = web.folder / JOURNAL
    write_json(journal, plan)
    return _finish(web, journal)


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



@dataclass(frozen=True)
class Withdrawn:
    """What removals under way, or cut short, take out of a web before it is deleted: the facts
    the web's journal names (by id), and the sources a removal names before it has planned its
    ids (an upload's removal, :mod:`agent.web.workspace`). A search leaves them out: a removal
    cut short offers none of its facts, whichever process finishes it, and whenever."""

    facts: frozenset[str] = frozenset()
    sources: frozenset[str] = frozenset()

    def covers(self, fact_id: str, source: str | None) -> bool:
        """Whether the fact ``fact_id`` stored from ``source`` is being removed."""
        return fact_id in self.facts or _covers(set(self.sources), source)


def withdrawn(web_folder: Path, sources: Sequence[str] = ()) -> Withdrawn:
    """What is being removed from the web in ``web_folder``: the facts its journal names, and
    ``sources`` (named as a removal names them). An unreadable journal names nothing here (the
    next removal says so, in one line)."""
    facts: list[str] = []
    journal = Path(web_folder) / JOURNAL
    if journal.is_file():
        try:
            facts = list(json.loads(journal.read_text(encoding="utf-8")).get("facts", []))
        except (OSError, ValueError, AttributeError, TypeError):
            facts = []
    return Withdrawn(frozenset(facts), frozenset(_names(sources)))
