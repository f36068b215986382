"""The knowledge web: facts and keywords in a graph, their embeddings in vector indexes.

A web lives in a folder::

    web.json               what it was built with (embedder, vector backend, graph server)
    graph/                 the embedded graph server's data (when no --graph-uri is given)
    vectors/keywords/      keyword embeddings (embedded backend)
    vectors/facts/         fact embeddings, for cos(question, fact)
    vectors/chunks/        each document chunk's embedding as a whole, for the passage score
    decompositions.jsonl   every chunk's atomic facts, so a build never decomposes a chunk twice

Building is incremental and idempotent: ids are content hashes, the graph is written with MERGE,
and a chunk is marked done in the same transaction as its facts. Vectors are made durable before
the graph rows that need them, once per checkpoint (after the first batch, then every
``CHECKPOINT_S`` seconds or ``CHECKPOINT_FACTS`` facts, and at the end): the batches' vectors are
flushed, then their graph rows written. Flushing per batch rewrote the whole vector index each
time, which grows with the web; for the same reason checkpoints are spaced to at least
``CHECKPOINT_FLUSH_SHARE`` times the last flush's duration, so flushing stays a tenth of a build.
An interruption at any point leaves chunks (and triples) either in the graph with all their
vectors present, or not in it and redone by the next build; at most one checkpoint's work is lost.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from ..embeddings import Embedder, model_name
from ..errors import FactweaveError
from ..files import file_stamp, locked, write_json
from ..knowledge.facts import Fact
from ..knowledge.keywords import extract_keywords, normalize_keyword, triple_keywords
from .arcade import open_graph
from .decompose import Decomposer, DecompositionCache, decompose_many
from .documents import Chunk, Document, chunk_document, keyword_id, stable_id
from .graph_search import GraphSearchSettings, graph_hits
from .removal import (JOURNAL, Withdrawn, check_file_source, finish_removal, prune_sources, remove_sources,
                      source_counts, source_name, withdrawn)
from .retrieval import MAX_QUESTION_CHARS, FactHit, SearchResult, merge_hits, provenance_of, rank, source_line
from .subqueries import write_subqueries
from .vector_stores import open_vector_index
from .workspace import removing_sources, upload_removal_journal

if TYPE_CHECKING:
    from ..llm.client import ChatClient
    from .graph import GraphStore
    from .vectors import VectorIndex

FORMAT = 1
DEFAULT_DEGREE_WEIGHT = 0.1
SEARCH_METHODS = ("graph", "keywords")
DEFAULT_SEARCH = "graph"
#: The most facts the keyword route scores for one question (those linked to most of its keywords
#: first): a common keyword in a large web must not fetch every fact and vector it links to.
KEYWORD_CANDIDATES = 1000
#: How much building work a kill may lose (see the module docstring).
CHECKPOINT_S = 30.0
CHECKPOINT_FACTS = 50_000
#: Checkpoints are at least this many times as far apart as the last flush took.
CHECKPOINT_FLUSH_SHARE = 10


@dataclass
class WebSettings:
    """What a web is built with; saved as ``web.json`` and checked when the web is reopened."""

    embedder: str = ""
    embedder_fingerprint: str = ""
    vectors: str = "local"
    pinecone_index: str | None = None
    pinecone_namespace: str = ""
    pinecone_host: str | None = None
    graph_uri: str | None = None
    graph_database: str | None = None
    chunk_size: int = 800
    format: int = FORMAT


@dataclass
class BuildReport:
    documents: int = 0
    chunks: int = 0
    chunks_skipped: int = 0
    facts: int = 0
    facts_skipped: int = 0
    keywords_new: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


class KnowledgeWeb:
    """Build and search a fact-centric knowledge web.

    Example (not run: needs a knowledge web and an embedding model)::

        web = KnowledgeWeb.open("my-web")                # embedded graph server and vectors
        web.add_documents(read_documents(["notes/"]), SentenceDecomposer())
        for hit in web.search("Who founded the journal?").hits:
            print(f"{hit.score:.2f}", hit.text, hit.source)
        web.close()
    """

    #: The graph search's weights and knobs when a search is given none (``search(graph=...)``);
    #: the MCP ``search_facts`` tool states them to the LLM that reads its scores.
    SEARCH_DEFAULTS = GraphSearchSettings()

    def __init__(self, folder: Path, settings: WebSettings, embedder: Embedder, graph: GraphStore,
                 keyword_vectors: VectorIndex, fact_vectors: VectorIndex, chunk_vectors: VectorIndex,
                 server: Any = None) -> None:
        self.folder = folder
        self.settings = settings
        self.embedder = embedder
        self.graph = graph
        self.keyword_vectors = keyword_vectors
        self.fact_vectors = fact_vectors
        self.chunk_vectors = chunk_vectors  # each document chunk (passage) as a whole
        self._server = server
        self.cache = DecompositionCache(folder / "decompositions.jsonl")
        self._staged = _Staged()
        self._withdrawn_seen: tuple[Any, Withdrawn] | None = None  # (the journals' stamps, what they withdraw)

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        folder: str | Path,
        *,
        embedder: Embedder | str | None = None,
        graph_uri: str | None = None,
        graph_user: str = "neo4j",
        graph_password: str | None = None,
        graph_database: str | None = None,
        vectors: str | None = None,
        pinecone_index: str | None = None,
        pinecone_namespace: str | None = None,
        pinecone_host: str | None = None,
    ) -> KnowledgeWeb:
        """Open the web in ``folder``, creating it on first use.

        Options not given are taken from the folder's ``web.json``; an embedder other than the one
        the web was built with is refused (its vectors would not be comparable).
        """
        folder = Path(folder).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        config_path = folder / "web.json"
        saved = cls._read_settings(config_path)
        settings = saved or WebSettings()
        if (saved and saved.embedder_fingerprint
                and (embedder is None or isinstance(embedder, str) and model_name(embedder) == saved.embedder)):
            # The web's own embedder, loaded when something is embedded (not for stats or removal).
            embedder = Embedder.known(saved.embedder_fingerprint) or embedder
        if embedder is None:
            embedder = Embedder(settings.embedder or None)
        elif isinstance(embedder, str):
            embedder = Embedder(embedder)
        if saved and saved.embedder_fingerprint and saved.embedder_fingerprint != embedder.fingerprint:
            raise FactweaveError(
                f"{folder}: this web was built with embedder {saved.embedder} "
                f"({saved.embedder_fingerprint}), not {embedder.fingerprint}; use --embedder "
                f"{saved.embedder} or a new folder"
            )
        settings.embedder = embedder.name
        settings.embedder_fingerprint = embedder.fingerprint
        if vectors is not None:
            settings.vectors = vectors
        for name, value in (("pinecone_index", pinecone_index), ("pinecone_namespace", pinecone_namespace),
                            ("pinecone_host", pinecone_host), ("graph_uri", graph_uri),
                            ("graph_database", graph_database)):
            if value is not None:
                setattr(settings, name, value)

        password = graph_password if graph_password is not None else os.environ.get("FACTWEAVE_GRAPH_PASSWORD", "")
        graph, server = open_graph(folder / "graph", settings.graph_uri, graph_user, password,
                                   graph_database or settings.graph_database)
        try:
            graph.ensure_schema()
            keyword_vectors = cls._vector_index(open_vector_index, settings, folder, "keywords", embedder)
            fact_vectors = cls._vector_index(open_vector_index, settings, folder, "facts", embedder)
            chunk_vectors = cls._vector_index(open_vector_index, settings, folder, "chunks", embedder)
        except BaseException:
            graph.close()
            if server is not None:
                server.stop()
            raise
        write_json(config_path, asdict(settings), indent=2)
        return cls(folder, settings, embedder, graph, keyword_vectors, fact_vectors, chunk_vectors, server)

    @staticmethod
    def _read_settings(path: Path) -> WebSettings | None:
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            settings = WebSettings(**data)
        except (json.JSONDecodeError, TypeError) as error:
            raise FactweaveError(f"{path}: not a knowledge-web settings file ({error})") from None
        if settings.format != FORMAT:
            raise FactweaveError(f"{path}: web format {settings.format}, this version reads {FORMAT}")
        return settings

    @staticmethod
    def _vector_index(factory: Any, settings: WebSettings, folder: Path, role: str,
                      embedder: Embedder) -> VectorIndex:
        if settings.vectors == "pinecone":
            namespace = f"{settings.pinecone_namespace}-{role}" if settings.pinecone_namespace else role
            return factory("pinecone", index_name=settings.pinecone_index, namespace=namespace,
                           host=settings.pinecone_host, dim=embedder.dim)
        return factory("local", folder=folder / "vectors" / role, dim=embedder.dim,
                       fingerprint=embedder.fingerprint)

    def close(self) -> None:
        for closer in (self.keyword_vectors.close, self.fact_vectors.close, self.chunk_vectors.close, self.graph.close):
            closer()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> KnowledgeWeb:  # noqa: PYI034 (final class in practice)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- building ------------------------------------------------------------------------------

    #: How long a writer waits for another to finish before it gives up with one line.
    lock_wait_s: float = 60.0

    @contextmanager
    def writing(self) -> Iterator[None]:
        """The web's write lock (``<folder>/write.lock``, across processes): writers take turns,
        each starting from the vectors the previous one flushed; one that cannot have it within
        :attr:`lock_wait_s` raises :class:`FactweaveError`. Readers never wait."""
        with locked(self.folder / "write.lock", self.lock_wait_s) as had:
            if not had:
                raise FactweaveError(
                    f"the knowledge web in {self.folder} is being written by another writer (a `factweave "
                    f"web build`, the UI, ...) for more than {self.lock_wait_s:g} s; try again when it is "
                    "done")
            for vectors in self._vector_indexes():
                vectors.refresh()
            self._staged = _Staged()
            try:
                yield
            except BaseException:
                try:  # keep the batches done before the failure (the error that stopped it is raised)
                    self._checkpoint()
                except Exception:  # noqa: BLE001, S110 - e.g. the graph server is down: redone by the next build
                    pass
                raise
            self._checkpoint()

    def add_documents(self, documents: Iterable[Document], decomposer: Decomposer, *,
                      batch_chunks: int = 32, progress: bool = True, replace: bool = True) -> BuildReport:
        """Decompose and store ``documents``; chunks already stored are skipped.

        ``replace``: the documents of each source file given (``notes.md``, ``corpus.json``: their
        sources, see :func:`.removal.source_name`) are that file's whole content now; what the web
        held from those files and they lack (an edited file's old version) is removed after they
        are stored (``report.extra["replaced"]``). Pass ``replace=False`` to add part of a file."""
        documents = list(documents)
        with self.writing():
            report = self._add_documents(documents, decomposer, batch_chunks, progress)
            if replace:
                self._replace({source_name(d.source) for d in documents}, {d.id for d in documents}, report)
            return report

    def _replace(self, sources: set[str], keep: set[str], report: BuildReport) -> None:
        """Write the new version, then remove what ``sources`` held that it lacks (``keep``: its ids)."""
        self._checkpoint()  # the new version's graph rows first: a kill then leaves both versions
        pruned = prune_sources(self, sorted(sources), keep)
        if pruned is not None:
            report.extra["replaced"] = pruned.as_dict()

    def _add_documents(self, documents: Iterable[Document], decomposer: Decomposer, batch_chunks: int,
                       progress: bool) -> BuildReport:
        started = time.perf_counter()
        report = BuildReport()
        work: list[tuple[Document, Chunk]] = []
        for doc in documents:
            report.documents += 1
            work.extend((doc, chunk) for chunk in chunk_document(doc, self.settings.chunk_size))
        report.chunks = len(work)
        done: set[str] = set()
        for i in range(0, len(work), 500):
            done |= self.graph.done_chunks([c.id for _, c in work[i:i + 500]])
        todo = [(d, c) for d, c in work if c.id not in done]
        report.chunks_skipped = len(work) - len(todo)
        self._backfill_chunk_vectors([c for _, c in work if c.id in done])
        bar = tqdm(total=len(todo), desc="chunks", unit="chunk", disable=not progress, leave=False)
        try:
            for i in range(0, len(todo), batch_chunks):
                batch = todo[i:i + batch_chunks]
                rows = []
                decomposed = decompose_many(decomposer, self.cache, [(d.title, d.text, c) for d, c in batch])
                for (doc, chunk), atomic in zip(batch, decomposed):
                    facts: list[dict[str, Any]] = [
                        {"id": stable_id("fact", chunk.id, f.text), "text": f.text, "kind": "document",
                         "doc_id": doc.id, "chunk_id": chunk.id, "start": f.start, "end": f.end,
                         "title": doc.title, "source": doc.source,
                         "page": doc.page_at(f.start), "heading": doc.heading_at(f.start)}
                        for f in atomic
                    ]
                    links = [
                        {"fact_id": fact["id"], "keyword_id": keyword_id(kw), "name": normalize_keyword(kw)}
                        for fact in facts for kw in extract_keywords(fact["text"])
                    ]
                    rows.append((doc, chunk, facts, links))
                    bar.update(1)
                all_facts = [f for _, _, facts, _ in rows for f in facts]
                all_links = [link for *_, links in rows for link in links]
                report.keywords_new += self._store_vectors(all_facts, all_links)
                self._store_chunk_vectors([chunk for _, chunk, facts, _ in rows if facts])
                self._stage(len(all_facts), lambda rows=rows: self._write_chunks(rows))
                report.facts += len(all_facts)
        finally:
            bar.close()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _write_chunks(self, rows: list[tuple[Document, Chunk, list[dict], list[dict]]]) -> None:
        for doc, chunk, facts, links in rows:
            self.graph.write_chunk(
                {"id": doc.id, "title": doc.title, "source": doc.source},
                {"id": chunk.id, "doc_id": doc.id, "index": chunk.index, "start": chunk.start, "end": chunk.end},
                facts, links,
            )

    def add_triples(self, triples: Iterable[Fact], *, source: str = "triples", batch: int = 500,
                    progress: bool = True, replace: bool = True) -> BuildReport:
        """Store verbalized triples as facts whose keywords are their subject and object.

        ``replace``: ``triples`` are all of ``source`` now (a file, by name); what the web held
        from it and they lack is removed after they are stored (``report.extra["replaced"]``).
        Pass ``replace=False`` to add a source in parts."""
        check_file_source(source)
        with self.writing():
            given: set[str] = set()
            report = self._add_triples(triples, source, batch, progress, given)
            if replace:
                self._replace({source}, given, report)
            return report

    def _add_triples(self, triples: Iterable[Fact], source: str, batch: int, progress: bool,
                     given: set[str]) -> BuildReport:
        started = time.perf_counter()
        report = BuildReport()
        bar = tqdm(desc="triples", unit="fact", disable=not progress, leave=False)
        pending: list[Fact] = []

        def flush() -> None:
            facts: list[dict[str, Any]] = []
            links: list[dict[str, str]] = []
            ids = {stable_id("triple", t.text) for t in pending}
            given.update(ids)
            # A fact in the graph was written with its links and after its vectors: adding it
            # again would change nothing, so it is not embedded again either.
            seen: set[str] = {row["id"] for row in self.graph.facts_by_ids(list(ids))} | (ids & self._staged.ids)
            report.facts_skipped += len(seen)
            for t in pending:
                fid = stable_id("triple", t.text)
                if fid in seen:
                    continue
                seen.add(fid)
                facts.append({"id": fid, "text": t.text, "kind": "triple", "subject": t.subject,
                              "predicate": t.predicate, "object": t.object, "source": t.source or source})
                links.extend({"fact_id": fid, "keyword_id": keyword_id(kw), "name": normalize_keyword(kw)}
                             for kw in triple_keywords(t.subject, t.object))
            if facts:
                report.keywords_new += self._store_vectors(facts, links)
                self._staged.ids.update(f["id"] for f in facts)
                self._stage(len(facts), lambda: self.graph.write_triples(facts, links, source))
            report.facts += len(facts)
            bar.update(len(pending))
            pending.clear()

        try:
            for triple in triples:
                pending.append(triple)
                if len(pending) >= batch:
                    flush()
            if pending:
                flush()
        finally:
            bar.close()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _store_vectors(self, facts: list[dict], links: list[dict]) -> int:
        """Embed the facts and keywords not stored yet into the vector indexes (flushed at the
        next checkpoint); return how many keywords were new.

        One ``encode`` call for both, each distinct text once (the embedder batches short
        keywords and longer facts apart, each by length). A fact whose vector
        is already stored (its id is a hash of its text; a build killed after a checkpoint's
        flush, before its graph rows) is not embedded again.
        """
        names = {link["keyword_id"]: link["name"] for link in links}
        have = self.keyword_vectors.fetch(list(names)) if names else {}
        new = [(kid, name) for kid, name in names.items() if kid not in have]
        stored = self.fact_vectors.fetch([f["id"] for f in facts]) if facts else {}
        facts = [f for f in facts if f["id"] not in stored]
        texts = list(dict.fromkeys([name for _, name in new] + [f["text"] for f in facts]))
        if texts:
            vectors = dict(zip(texts, self.embedder.encode(texts)))
            if new:
                self.keyword_vectors.upsert([kid for kid, _ in new], np.stack([vectors[n] for _, n in new]),
                                            [{"name": name} for _, name in new])
            if facts:
                self.fact_vectors.upsert([f["id"] for f in facts], np.stack([vectors[f["text"]] for f in facts]),
                                         [{"kind": f["kind"]} for f in facts])
        return len(new)

    def _store_chunk_vectors(self, chunks: Sequence[Chunk]) -> None:
        """Embed each chunk's text as a whole (the graph search's passage score)."""
        if chunks:
            self.chunk_vectors.upsert([c.id for c in chunks], self.embedder.encode([c.text for c in chunks]),
                                      [{"doc_id": c.doc_id} for c in chunks])

    def _backfill_chunk_vectors(self, done: Sequence[Chunk]) -> None:
        """Embed the stored chunks that have facts but no vector: a web built before chunks were
        embedded gets them when its documents are added again (``web build`` on the same files)."""
        for start in range(0, len(done), 500):
            batch = list(done[start:start + 500])
            have = self.chunk_vectors.fetch([c.id for c in batch])
            missing = [c for c in batch if c.id not in have]
            if missing:
                with_facts = self.graph.chunks_with_facts([c.id for c in missing])
                self._store_chunk_vectors([c for c in missing if c.id in with_facts])
        if done:
            self.chunk_vectors.flush()

    def _vector_indexes(self) -> tuple[VectorIndex, ...]:
        return self.keyword_vectors, self.fact_vectors, self.chunk_vectors

    def _stage(self, facts: int, write: Any) -> None:
        """Queue a batch's graph write (its vectors are stored); checkpoint when one is due."""
        staged = self._staged
        staged.writes.append(write)
        staged.facts += facts
        # A flush rewrites the whole index, so in a large web it is spaced out to take at most
        # 1 / CHECKPOINT_FLUSH_SHARE of the build.
        due = max(CHECKPOINT_S, CHECKPOINT_FLUSH_SHARE * staged.flush_s)
        if not staged.checkpoints or staged.facts >= CHECKPOINT_FACTS or time.monotonic() - staged.since >= due:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Flush the vectors, then write the graph rows that need them (see the module docstring)."""
        staged = self._staged
        started = time.monotonic()
        for vectors in self._vector_indexes():
            vectors.flush()
        staged.flush_s = time.monotonic() - started
        while staged.writes:
            staged.writes[0]()
            staged.writes.pop(0)
        staged.ids.clear()
        staged.facts, staged.since, staged.checkpoints = 0, time.monotonic(), staged.checkpoints + 1

    # --- searching -----------------------------------------------------------------------------

    def search(self, question: str, k: int = 10, *, method: str | None = None, keyword_k: int = 5,
               min_similarity: float = 0.55, degree_weight: float = DEFAULT_DEGREE_WEIGHT,
               graph: GraphSearchSettings | None = None, candidates: int = KEYWORD_CANDIDATES) -> SearchResult:
        """The ``k`` facts that best answer ``question``, best first.

        Both methods start from the paper's route: question -> keywords -> the stored keywords
        nearest each (``keyword_k``, similarity >= ``min_similarity``) -> their linked facts.

        ``method="graph"`` (the default, :mod:`.graph_search`): those keywords and the facts
        nearest the question seed a personalized PageRank over the keyword-fact graph; score =
        cosine + weight x PageRank + weight x the passage's mean cosine. Measured on MuSiQue,
        HotpotQA and 2WikiMultiHopQA (``benchmarks/web_retrieval.py``) it finds more supporting
        passages than the keyword route and than dense retrieval over chunks.

        ``method="keywords"``: the paper's rule, cos(question, fact) + ``degree_weight`` x
        degree, over at most ``candidates`` linked facts (most keywords matched first). The
        paper adds the degree with weight 1; then a whole keyword match outweighs any
        difference in meaning and generic keywords ("published", "city") pull in unrelated
        facts: 0.1 keeps the degree as a strong tie-breaker and found more supporting passages.

        A removal under way or cut short (by any process) withdraws its facts from the results at
        once, before they are deleted (:class:`.removal.Withdrawn`).
        """
        if not question.strip():
            raise FactweaveError("the question is empty")
        if len(question) > MAX_QUESTION_CHARS:  # every door: the UI's search, MCP, the CLI, LangChain
            raise FactweaveError(f"the query is too long ({len(question):,} characters; "
                                 f"{MAX_QUESTION_CHARS:,} at most)")
        method = method or DEFAULT_SEARCH
        if method not in SEARCH_METHODS:
            raise FactweaveError(f"unknown search method {method!r}; choose {' or '.join(SEARCH_METHODS)}")
        keywords = extract_keywords(question) or [question.strip()]
        vectors = self.embedder.encode([question, *keywords])
        seeds, names, matches = self._matched_keywords(keywords, vectors[1:], keyword_k, min_similarity)
        if method == "graph":
            hits = graph_hits(self, vectors[0], seeds, names, graph or self.SEARCH_DEFAULTS, question)
        else:
            hits = self._keyword_hits(vectors[0], seeds, names, degree_weight, question, candidates)
        gone = self._withdrawn()
        if gone.facts or gone.sources:  # a removal under way or cut short: none of its facts is offered
            hits = [hit for hit in hits if not gone.covers(hit.id, hit.provenance.get("source"))]
        top = rank(hits, k)
        return SearchResult(question, top, keywords, uncovered=uncovered_keywords(matches, top), method=method)

    def _withdrawn(self) -> Withdrawn:
        """What removals under way or cut short take out of searches (:class:`.removal.Withdrawn`):
        the web's journal and the uploads' (:mod:`.workspace`), by any process; read again only
        when one of them changed (two ``stat`` calls a search otherwise)."""
        stamp = (file_stamp(self.folder / JOURNAL), file_stamp(upload_removal_journal(self.folder)))
        seen = self._withdrawn_seen
        if seen is None or seen[0] != stamp:  # (stamped before reading: a change meanwhile is read next time)
            seen = self._withdrawn_seen = (stamp, withdrawn(self.folder, removing_sources(self.folder)))
        return seen[1]

    def _matched_keywords(self, keywords: Sequence[str], kw_vecs: np.ndarray, keyword_k: int,
                          min_similarity: float) -> tuple[dict[str, float], dict[str, str], dict[str, set[str]]]:
        """Stored keywords near the question's: id -> best similarity, id -> name, and per
        question keyword the names it matched."""
        seeds: dict[str, float] = {}
        names: dict[str, str] = {}
        matches: dict[str, set[str]] = {}
        for kw, hits in zip(keywords, self.keyword_vectors.query_many(kw_vecs, keyword_k)):
            close = [h for h in hits if h.score >= min_similarity]
            for h in close:
                names[h.id] = str(h.metadata.get("name", h.id))
                seeds[h.id] = max(seeds.get(h.id, 0.0), float(h.score))
            matches[kw] = {names[h.id] for h in close}
        return seeds, names, matches

    def _keyword_hits(self, q_vec: np.ndarray, seeds: dict[str, float], names: dict[str, str],
                      degree_weight: float, query: str, candidates: int) -> list[FactHit]:
        if not seeds:
            return []
        rows = self.graph.facts_for_keywords(list(seeds), limit=candidates)
        fact_vecs = self.fact_vectors.fetch([r["id"] for r in rows]) if rows else {}
        hits = []
        for row in rows:
            vec = fact_vecs.get(row["id"])
            cosine = float(np.dot(q_vec, vec)) if vec is not None else 0.0
            linked = list(row["matched"])
            degree = len(linked)
            provenance = provenance_of(row)
            hits.append(FactHit(row["id"], row["text"], row.get("kind", "document"),
                                round(cosine + degree_weight * degree, 6), round(cosine, 6), degree,
                                sorted(names[kid] for kid in linked if kid in names), provenance, query))
        return hits

    def remove(self, sources: Sequence[str]) -> Any:
        """Remove what ``sources`` brought in: documents, chunks, facts, keywords no other fact
        mentions, their vectors; resumable (see :mod:`.removal`). Returns a ``RemoveReport``."""
        with self.writing():
            return remove_sources(self, sources)

    def finish_removal(self) -> Any:
        """Finish a removal cut short (its journal is there; see :mod:`.removal`): its
        ``RemoveReport``, or None when there was none."""
        with self.writing():
            return finish_removal(self)

    def sources(self) -> list[dict[str, Any]]:
        """Every source with its documents and facts, by name (see :func:`.removal.source_counts`)."""
        return source_counts(self)

    def find_facts(self, question: str, k: int = 10, *, client: ChatClient | None = None,
                   max_subqueries: int = 2, **search_options: Any) -> SearchResult:
        """:meth:`search`, then, while question keywords stay uncovered by the facts found, ask
        ``client`` for sub-queries (``prompts/web/subqueries.txt``) and search those too, at most
        ``max_subqueries`` in all."""
        result = self.search(question, k, **search_options)
        if client is None or max_subqueries <= 0 or not result.uncovered:
            return result
        queries = write_subqueries(client, question, result.hits, max_subqueries)
        found = [result.hits]
        for query in queries:
            found.append(self.search(query, k, **search_options).hits)
        result.hits = rank(merge_hits(*found), k)
        result.subqueries = queries
        return result

    def facts(self, page_size: int = 2000) -> Iterator[Fact]:
        """Every fact of the web as a :class:`Fact` (a triple stays a triple, a document's fact
        is a statement), in id order, read from the graph a page at a time: the knowledge a
        fact tree over the whole web is built from.

        Example (not run: needs a knowledge web and a tokenizer)::

            index = FactIndex.build(web.facts(), tokenizer)
        """
        for row in self.graph.all_facts(page_size):
            yield _as_fact(row)

    def document_hits(self, doc_ids: Sequence[str], limit: int = 200) -> list[FactHit]:
        """Every fact of the documents ``doc_ids`` as a hit (read whole, not retrieved: no
        score), in id order, at most ``limit``: a document's sentence that does not name its
        subject ("The company was founded in 1959.") is found by its document, not by a search
        for the name."""
        rows = self.graph.facts_of_documents(list(doc_ids))[:limit] if doc_ids else []
        return [FactHit(row["id"], row["text"], row.get("kind", "document"), 0.0, 0.0, 0, [], provenance_of(row))
                for row in rows]

    def document_facts(self, documents: Iterable[Document]) -> list[Fact]:
        """The facts stored for ``documents`` (as :meth:`facts` gives them), in id order."""
        return [_as_fact(row) for row in self.graph.facts_of_documents([d.id for d in documents])]

    def stats(self) -> dict:
        """Node and edge counts of the graph, vector counts, cached decompositions."""
        counts = dict(self.graph.stats())
        counts["keyword_vectors"] = self.keyword_vectors.count()
        counts["fact_vectors"] = self.fact_vectors.count()
        counts["chunk_vectors"] = self.chunk_vectors.count()
        counts["decomposed_chunks_cached"] = len(self.cache)
        return counts


@dataclass
class _Staged:
    """Batches whose vectors are stored but not yet flushed, with their graph writes."""

    writes: list[Any] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    facts: int = 0
    since: float = field(default_factory=time.monotonic)
    checkpoints: int = 0
    flush_s: float = 0.0  # how long the last checkpoint's flush took


def _as_fact(row: dict[str, Any]) -> Fact:
    """A graph fact node's properties as a :class:`Fact` (a triple stays a triple; a document's
    fact is a statement whose source names the document and character span)."""
    if row.get("kind") == "triple" and all(row.get(k) for k in ("subject", "predicate", "object")):
        return Fact(row["subject"], row["predicate"], row["object"], str(row.get("source", "")))
    return Fact.from_statement(row["text"], source_line(row))


def uncovered_keywords(matches: dict[str, set[str]], hits: Sequence[FactHit]) -> list[str]:
    """Question keywords that no hit is linked to (through any keyword they matched)."""
    linked = {name for hit in hits for name in hit.keywords}
    return [kw for kw, names in matches.items() if not names & linked]
