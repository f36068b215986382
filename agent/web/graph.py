"""The knowledge web's graph: documents, chunks, facts and keywords behind the official Bolt driver.

Every statement here is a constant string with ``$parameters``: labels and relationship types
are the module constants below, and nothing from a document or a question is ever spliced
into Cypher text. That is what keeps an "injection" inside a document inert: it arrives as a
parameter value and is stored and matched as plain text.

Round trips: :meth:`GraphStore.write_chunk` is one Cypher statement in one managed write
transaction, whatever the number of facts and keywords. Traced with the driver's debug log
against ArcadeDB: three Bolt round trips per chunk (BEGIN; RUN+PULL pipelined; COMMIT), about
16 ms per chunk of 5 facts x 3 keywords on the 2-core build machine. Triples go 500 per
statement (5,000 triples with links in ~1 s).
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from typing_extensions import Self  # typing's from Python 3.11; 3.10 is supported

from agent.errors import FactweaveError

from . import cypher

log = logging.getLogger(__name__)

DEFAULT_HINT = "start Neo4j or drop --graph-uri to use the embedded server"
TRIPLE_BATCH = 500
_BOLT_SCHEMES = frozenset(
    f"{base}{tls}" for base in ("bolt", "neo4j") for tls in ("", "+s", "+ssc"))
_OS_REASON = re.compile(r"\[Errno -?\d+\]\s*([^()\[\]]+)")

# --- input shaping ------------------------------------------------------------------------

_Scalar = (str, int, float, bool)


def _properties(item: dict[str, Any], what: str) -> dict[str, Any]:
    """Keep what a graph property can hold; reject what it cannot, naming the key.

    None is dropped rather than stored: in `SET n += map` a null would delete the property.
    """
    props: dict[str, Any] = {}
    for key, value in item.items():
        if value is None:
            continue
        if not isinstance(key, str):
            raise TypeError(f"{what}: property names must be strings, got {key!r}")
        if isinstance(value, _Scalar):
            props[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, _Scalar) for v in value):
            props[key] = list(value)
        else:
            raise TypeError(f"{what}: property {key!r} is a {type(value).__name__}, "
                             "which a graph property cannot hold")
    if not isinstance(props.get("id"), str) or not props["id"]:
        raise ValueError(f"{what}: needs a non-empty string 'id', got {item.get('id')!r}")
    return props


def _unique_by_id(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Last one wins, like two SETs would; one row per id keeps MERGE from racing itself."""
    return list({row["id"]: row for row in rows}.values())


def _link_rows(links: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for link in links:
        fact_id, keyword_id = link.get("fact_id"), link.get("keyword_id")
        if not isinstance(fact_id, str) or not isinstance(keyword_id, str):
            raise TypeError(f"a keyword link needs string 'fact_id' and 'keyword_id': {link!r}")
        name = link.get("name")
        rows[(fact_id, keyword_id)] = {
            "fact_id": fact_id,
            "keyword_id": keyword_id,
            "name": name if isinstance(name, str) and name else keyword_id,
        }
    return list(rows.values())


def _one_line(text: object, limit: int = 240) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --- the store ----------------------------------------------------------------------------


class GraphStore:
    """Reads and writes the knowledge web through one Bolt driver (Neo4j 5 or ArcadeDB).

    ``alive`` and ``restart`` (the embedded server's): before each statement, a server that is
    no longer running is started again (``restart`` returns its new address) and the store
    reconnects; a statement that failed to connect because the server died meanwhile runs once
    more on the restarted one. A server of your own (Neo4j) is never restarted: its failure is
    one line naming it and how to start it.
    """

    def __init__(
        self,
        uri: str,
        user: str = "neo4j",
        password: str = "",
        database: str | None = None,
        *,
        start_hint: str = DEFAULT_HINT,
        connection_timeout: float = 10.0,
        retry_seconds: float = 15.0,
        alive: Callable[[], bool] | None = None,
        restart: Callable[[], str] | None = None,
    ) -> None:
        self.uri = uri
        self.user = user
        self.database = database
        self._start_hint = start_hint
        self._schema_ready = False
        self._password, self._connection_timeout, self._retry_seconds = password, connection_timeout, retry_seconds
        self._alive, self._restart = alive, restart
        self._restart_lock = threading.Lock()
        self._driver = self._connect(uri)

    def _connect(self, uri: str) -> Any:
        import neo4j

        scheme = uri.split("://", 1)[0] if "://" in uri else ""
        if scheme not in _BOLT_SCHEMES:
            # neo4j 6 would also take http:// (its Query API preview), which is not Bolt.
            raise FactweaveError(
                f"graph database at {uri}: invalid address (expected bolt:// or neo4j://, "
                "optionally +s or +ssc)"
            )
        try:
            return neo4j.GraphDatabase.driver(
                uri,
                auth=(self.user, self._password),
                connection_timeout=self._connection_timeout,
                max_transaction_retry_time=self._retry_seconds,
            )
        except (ValueError, neo4j.exceptions.DriverError) as exc:
            raise FactweaveError(
                f"graph database at {uri}: invalid address or settings ({_one_line(exc)})"
            ) from None

    # -- lifecycle -----------------------------------------------------------------------

    def verify(self) -> None:
        """Fail now, in one line, rather than halfway through a build."""
        with self._errors():
            self._driver.verify_connectivity()
            with self._session() as session:
                session.run("RETURN 1 AS ok").consume()

    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GraphStore({self.uri!r}, database={self.database!r})"

    # -- schema --------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Uniqueness on every label's id, so MERGE is an index lookup and ids stay unique.

        Idempotent (IF NOT EXISTS). A backend that refuses the constraint (Neo4j 4.x syntax,
        duplicates already present, or an existing plain index on the same property) gets a
        plain index instead: MERGE stays fast, uniqueness then rests on MERGE alone.
        """
        import neo4j

        with self._errors(), self._session() as session:
            for constraint, index in cypher.SCHEMA:
                try:
                    session.run(constraint).consume()
                    continue
                except neo4j.exceptions.ClientError as exc:
                    log.info("graph: constraint refused (%s); using a plain index", exc.code)
                try:
                    session.run(index).consume()
                except neo4j.exceptions.ClientError as exc:
                    if "AlreadyExists" not in (exc.code or ""):
                        raise
        self._schema_ready = True

    def _ensure_schema_once(self) -> None:
        if not self._schema_ready:
            self.ensure_schema()

    # -- writes --------------------------------------------------------------------------

    def write_chunk(
        self,
        doc: dict[str, Any],
        chunk: dict[str, Any],
        facts: list[dict[str, Any]],
        links: list[dict[str, Any]],
    ) -> None:
        """Store one chunk with its document, facts and keyword links, all or nothing.

        ``doc``: id, title, source (+ scalar extras). ``chunk``: id, index, start, end.
        ``facts``: id, text (+ provenance: start, end, page, heading, ...); kind, doc_id and chunk_id are
        filled in. ``links``: ``{"fact_id", "keyword_id", "name"?}``. The chunk is marked
        ``done`` in the same transaction, so a build killed midway resumes by skipping
        :meth:`done_chunks` and never finds a chunk marked done without its facts. Every
        node and edge is MERGEd: writing the same chunk twice changes nothing. Malformed
        input raises TypeError/ValueError before anything is sent.
        """
        doc_props = _properties(doc, "document")
        chunk_props = _properties(chunk, "chunk")
        chunk_props.update(doc_id=doc_props["id"], done=True)
        fact_rows = _unique_by_id(
            {"kind": "document", **_properties(fact, "fact"),
             "doc_id": doc_props["id"], "chunk_id": chunk_props["id"]}
            for fact in facts
        )
        params = {"doc": doc_props, "chunk": chunk_props, "facts": fact_rows,
                  "links": _link_rows(links)}
        self._ensure_schema_once()
        self._write(cypher.WRITE_CHUNK, params)

    def write_triples(
        self,
        facts: list[dict[str, Any]],
        links: list[dict[str, Any]],
        source: str,
        batch_size: int = TRIPLE_BATCH,
    ) -> None:
        """Store knowledge-base triples as facts with no document or chunk, in batches.

        ``facts``: id, subject, predicate, object (+ text; composed from the triple when
        missing). Each batch carries its facts' keyword links, so a batch is complete on
        its own; links to facts outside ``facts`` go in a last batch. Idempotent.
        """
        rows = _unique_by_id(
            {"text": " ".join(str(fact.get(k, "")) for k in ("subject", "predicate", "object")),
             **_properties(fact, "triple"), "kind": "triple",
             "source": fact.get("source") or source}
            for fact in facts
        )
        link_rows = _link_rows(links)
        by_fact: dict[str, list[dict[str, str]]] = {}
        for link in link_rows:
            by_fact.setdefault(link["fact_id"], []).append(link)
        self._ensure_schema_once()
        for start in range(0, len(rows), max(1, batch_size)):
            batch = rows[start : start + batch_size]
            batch_links = [link for row in batch for link in by_fact.pop(row["id"], [])]
            self._write(cypher.WRITE_FACTS, {"facts": batch, "links": batch_links})
        leftover = [link for group in by_fact.values() for link in group]
        if leftover:
            self._write(cypher.WRITE_FACTS, {"facts": [], "links": leftover})

    def clear(self) -> None:
        """Delete the knowledge web's nodes (only its four labels) and their edges; keep the schema."""
        for statement in cypher.CLEAR.values():
            while self._write(statement, {"limit": cypher.CLEAR_SLICE}):
                pass

    # -- reads ---------------------------------------------------------------------------

    def done_chunks(self, chunk_ids: list[str]) -> set[str]:
        """Which of these chunks were fully written (facts and links committed)."""
        if not chunk_ids:
            return set()
        return {row["id"] for row in self._read(cypher.DONE_CHUNKS, {"ids": list(chunk_ids)})}

    def chunks_with_facts(self, chunk_ids: Sequence[str]) -> set[str]:
        """Which of these chunks hold at least one fact."""
        if not chunk_ids:
            return set()
        return {row["id"] for row in self._read(cypher.CHUNKS_WITH_FACTS, {"ids": list(dict.fromkeys(chunk_ids))})}

    def chunks_of_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """The ids of the documents' chunks (those without facts too), sorted."""
        if not doc_ids:
            return []
        return [row["id"] for row in self._read(cypher.CHUNKS_OF_DOCUMENTS, {"ids": list(dict.fromkeys(doc_ids))})]

    def facts_for_keywords(
        self, keyword_ids: list[str], limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Facts mentioning any of the keywords, most keywords first.

        Each fact's properties plus ``matched``: the query keywords it is linked to, in
        query order; ``len(matched)`` is the fact's degree for scoring.
        """
        if not keyword_ids or (limit is not None and limit <= 0):
            return []
        order = {kid: i for i, kid in reversed(list(enumerate(keyword_ids)))}
        params: dict[str, Any] = {"ids": list(order)}
        statement = cypher.FACTS_FOR_KEYWORDS
        if limit is not None:
            statement, params["limit"] = cypher.FACTS_FOR_KEYWORDS_LIMIT, int(limit)
        results = []
        for row in self._read(statement, params):
            fact = dict(row["fact"])
            fact["matched"] = sorted(row["matched"], key=order.__getitem__)
            results.append(fact)
        return results

    def expand_keywords(self, keyword_ids: Sequence[str], cap: int) -> dict[str, list[str]]:
        """Every fact of each keyword linked to at most ``cap`` facts (sorted ids); a keyword
        linked to more, or unknown, is left out. One query that reads at most ``cap + 1`` links of
        each keyword, however many it has."""
        if not keyword_ids or cap < 1:
            return {}
        rows = self._read(cypher.EXPAND_KEYWORDS, {"ids": list(dict.fromkeys(keyword_ids)), "cap": int(cap),
                                                   "probe": int(cap) + 1})
        return {row["keyword"]: sorted(row["facts"]) for row in rows}

    def facts_by_ids(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The facts with these ids, in the order asked; unknown ids are skipped."""
        if not ids:
            return []
        found = {row["fact"]["id"]: dict(row["fact"])
                 for row in self._read(cypher.FACTS_BY_IDS, {"ids": list(dict.fromkeys(ids))})}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def all_facts(self, page_size: int = 2000) -> Iterator[dict[str, Any]]:
        """Every fact's properties, in id order, read ``page_size`` at a time."""
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        after = ""
        while True:
            page = self._read(cypher.FACTS_PAGE, {"after": after, "limit": int(page_size)})
            for row in page:
                yield dict(row["fact"])
            if len(page) < page_size:
                return
            after = page[-1]["fact"]["id"]

    def facts_of_documents(self, doc_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The properties of every fact decomposed from the documents ``doc_ids``, in id order."""
        if not doc_ids:
            return []
        return [dict(row["fact"]) for row in self._read(cypher.FACTS_OF_DOCUMENTS, {"ids": list(dict.fromkeys(doc_ids))})]

    def keywords_of_facts(self, fact_ids: Sequence[str]) -> dict[str, list[str]]:
        """Keyword ids per fact (every asked id is a key; sorted lists, [] when none)."""
        result: dict[str, list[str]] = {i: [] for i in fact_ids}
        if not result:
            return result
        for row in self._read(cypher.KEYWORDS_OF_FACTS, {"ids": list(result)}):
            result[row["fact"]] = sorted(row["keywords"])
        return result

    def documents(self) -> list[dict[str, Any]]:
        """Every document's id, source and title, in id order."""
        return [dict(row) for row in self._read(cypher.DOCUMENTS, {})]

    def fact_sources(self, page_size: int = 5000) -> Iterator[dict[str, Any]]:
        """Every fact's id, source and doc_id (None for a triple), in id order, a page at a time."""
        after = ""
        while True:
            page = self._read(cypher.FACT_SOURCES_PAGE, {"after": after, "limit": int(page_size)})
            yield from (dict(row) for row in page)
            if len(page) < page_size:
                return
            after = page[-1]["id"]

    def fact_source_counts(self) -> dict[str | None, int]:
        """How many facts each source holds, counted by the graph (one row per source)."""
        return {row["source"]: int(row["n"]) for row in self._read(cypher.FACT_SOURCE_COUNTS, {})}

    def linked_keywords(self, keyword_ids: Sequence[str]) -> set[str]:
        """Those of ``keyword_ids`` that some fact still mentions."""
        ids = list(dict.fromkeys(keyword_ids))
        return {row["id"] for start in range(0, len(ids), cypher.CLEAR_SLICE)
                for row in self._read(cypher.LINKED_KEYWORDS, {"ids": ids[start:start + cypher.CLEAR_SLICE]})}

    def delete(self, label: str, ids: Sequence[str]) -> int:
        """Delete the ``label`` nodes with these ids and their edges (unknown ids: nothing), in
        slices; how many were deleted."""
        ids, deleted = list(dict.fromkeys(ids)), 0
        for start in range(0, len(ids), cypher.CLEAR_SLICE):
            deleted += self._write(cypher.DELETE_BY_ID[label], {"ids": ids[start:start + cypher.CLEAR_SLICE]})
        return deleted

    def delete_chunks_of_documents(self, doc_ids: Sequence[str]) -> int:
        """Delete every chunk of these documents (those without facts too) and their edges."""
        ids = list(dict.fromkeys(doc_ids))
        return sum(self._write(cypher.DELETE_CHUNKS_OF_DOCUMENTS, {"ids": ids[start:start + 1000]})
                   for start in range(0, len(ids), 1000))

    def stats(self) -> dict[str, int]:
        """Node and edge counts: equal for an interrupted+resumed build and a clean one."""
        return {name: self._read(statement, {})[0]["n"] for name, statement in cypher.COUNTS.items()}

    # -- plumbing ------------------------------------------------------------------------

    def _session(self) -> Any:  # a neo4j.Session; the driver is imported lazily
        return self._driver.session(database=self.database)

    def _write(self, statement: str, params: dict[str, Any]) -> int:
        """Run one statement in a managed write transaction (retried on transient errors)."""

        def work(tx: Any) -> int:
            record = tx.run(statement, params).single()
            return int(record[0]) if record is not None else 0

        return self._managed(lambda session: session.execute_write(work))

    def _read(self, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        def work(tx: Any) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(statement, params)]

        return self._managed(lambda session: session.execute_read(work))

    def _managed(self, run: Callable[[Any], Any]) -> Any:
        """``run(session)`` on a running server (see the class docstring)."""
        self._restart_if_down()
        try:
            with self._errors(), self._session() as session:
                return run(session)
        except FactweaveError:
            if not self._restart_if_down():
                raise
        with self._errors(), self._session() as session:  # once more, on the restarted server
            return run(session)

    def _restart_if_down(self) -> bool:
        """Start the embedded server again when it stopped running; whether it was restarted."""
        if self._alive is None or self._restart is None or self._alive():
            return False
        with self._restart_lock:
            if self._alive():  # another thread restarted it meanwhile
                return True
            log.warning("graph: the server at %s stopped; starting it again", self.uri)
            try:
                uri = self._restart()
            except FactweaveError as exc:
                raise FactweaveError(f"graph database at {self.uri}: the server stopped and could not be "
                                     f"started again ({exc})") from None
            old, self._driver, self.uri = self._driver, self._connect(uri), uri
            old.close()
            self._schema_ready = False
        return True

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Driver failures become one line naming the server and what to do."""
        import neo4j.exceptions as errors

        where = f"graph database at {self.uri}"
        if self.database:
            where += f" (database {self.database!r})"
        try:
            yield
        except errors.AuthError:
            raise FactweaveError(
                f"{where}: authentication failed for user {self.user!r}; check the graph "
                "user and password"
            ) from None
        except (errors.ServiceUnavailable, errors.SessionExpired, OSError) as exc:
            reason = _connect_reason(exc)
            raise FactweaveError(f"{where}: cannot connect ({reason}); {self._start_hint}") from None
        except errors.Neo4jError as exc:
            if exc.code and exc.code.endswith("DatabaseNotFound"):
                raise FactweaveError(f"{where}: no such database") from None
            raise FactweaveError(
                f"{where}: {exc.code or type(exc).__name__}: {_one_line(exc.message or exc)}"
            ) from None
        except errors.DriverError as exc:
            raise FactweaveError(f"{where}: {type(exc).__name__}: {_one_line(exc)}") from None


def _connect_reason(exc: BaseException) -> str:
    """The driver's text is several lines; the OS reason in it is what a user needs."""
    text = _one_line(exc, 1000)
    found = _OS_REASON.search(text)
    if found:
        return found.group(1).strip()
    return _one_line(text, 120) or "unreachable"
