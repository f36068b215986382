"""The embedded vector index: usearch (HNSW) in a folder, written generation by generation
(why usearch: :mod:`agent.web.vectors`)."""
from __future__ import annotations

import ctypes
import functools
import json
import logging
import math
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.errors import FactweaveError, IndexMismatchError
from agent.files import fsync_file, fsync_folder, replacing

from .vector_checks import check_ids, check_k, check_matrix, check_upsert
from .vector_filters import check_filter, matches_filter
from .vectors import VectorHit

log = logging.getLogger(__name__)

_MANIFEST = "manifest.json"
_FORMAT = "factweave-vectors"
_VERSION = 1


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells one manifest from the next (each is a new file renamed into place): its inode,
    mtime and size; None when there is none."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _write_json_aside(path: Path, payload: Any) -> None:
    """Replace ``path`` all or nothing; the temporary file's name starts with the target's, so a
    leftover one is swept with the stale files (:meth:`LocalVectorIndex._remove_stale_files`)."""
    with replacing(path, prefix=f"{path.name}.") as handle:
        json.dump(payload, handle, ensure_ascii=False, separators=(",", ":"))


@functools.cache
def _usearch_index() -> Any:
    """usearch's ``Index`` class, imported once the system's C++ runtime is loaded.

    usearch's compiled module carries its own static copy of libstdc++, whose locale facet ids are
    GNU unique symbols: the first copy loaded names them for the whole process, whatever the
    loading flags. Loaded before the shared ``libstdc++.so.6`` (a process that has not imported
    torch yet), its ids win, and llama.cpp, which links the shared runtime, then fails to read a
    GGUF vocabulary ("std::bad_cast"). Loading the shared runtime first keeps its ids (a no-op
    where it is loaded already, and where there is none, as on macOS)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
        except OSError:  # none installed: usearch's own copy is the only one
            pass
    from usearch.index import Index

    return Index


class LocalVectorIndex:
    """A persistent vector index in a folder: usearch HNSW for vectors, a JSON sidecar for ids
    and metadata.

    Layout: ``manifest.json`` names the current generation's files, ``index.<gen>.usearch``
    (the graph and vectors, keyed by integers) and ``records.<gen>.json`` (string id, integer
    key and metadata per record). :meth:`flush` writes a new generation beside the old one,
    fsyncs it, then replaces the manifest with a rename, which is the single commit point; old
    generations are deleted after. A crash at any moment therefore leaves the last flushed
    state loadable, and files the manifest does not name (temporaries, half-written
    generations) are ignored and cleaned up on the next flush. Changes are held in memory
    until :meth:`flush` (or :meth:`close`, or leaving a ``with`` block).

    Search: collections smaller than ``exact_below`` records are searched exactly (a scan is
    as fast as the graph there and has perfect recall); larger ones through the HNSW graph.
    A metadata filter is applied by over-fetching: the fraction of records that pass the filter
    is counted first; when few pass (at most ``exact_below`` records, or under 1 in 20), those
    records are scored exactly, which is both faster and complete; otherwise the graph is asked
    for ``k / fraction`` (times two) candidates, filtered, and asked again for more if fewer
    than ``k`` survive.

    The folder remembers the embedder's fingerprint and dimension; opening it with another is
    refused, since vectors of different models are not comparable. Several processes may use
    one folder (the chat UI and ``factweave serve`` on one web): reads pick up what another
    process flushed (:meth:`refresh`, a ``stat`` of the manifest per read), and writers must take
    turns (``KnowledgeWeb`` holds the web's write lock from before its first change to its flush);
    a flush over a generation another process wrote since is refused, never silently lost.
    """

    def __init__(self, folder: str | Path, dim: int, fingerprint: str, *,
                 connectivity: int = 16, expansion_add: int = 128, expansion_search: int = 64,
                 exact_below: int = 2048) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise FactweaveError(f"dim must be a positive integer, got {dim!r}")
        if not isinstance(fingerprint, str) or not fingerprint:
            raise FactweaveError("fingerprint must be a non-empty string (use Embedder.fingerprint)")
        self.folder = Path(folder)
        self.dim = dim
        self.fingerprint = fingerprint
        self.exact_below = exact_below
        self._graph_settings = {"connectivity": connectivity, "expansion_add": expansion_add,
                                "expansion_search": expansion_search}
        self._lock = threading.RLock()
        self._keys: dict[str, int] = {}
        self._ids: dict[int, str] = {}
        self._metadata: dict[int, dict[str, Any]] = {}
        self._next_key = 0
        self._generation = 0
        self._dirty = False
        self._closed = False
        self._seen: tuple[int, int, int] | None = None  # the manifest's (mtime, size) as last read or written
        # Keys and vectors of the whole index for exact search of small indexes; rebuilt after a write.
        self._snapshot: tuple[list[int], np.ndarray] | None = None
        if self.folder.exists() and not self.folder.is_dir():
            raise FactweaveError(f"vector index path {self.folder} is a file, not a folder")
        self._graph = self._new_graph()
        self._load()

    # -- persistence ------------------------------------------------------------------------

    def _new_graph(self):
        Index = _usearch_index()
        return Index(ndim=self.dim, metric="cos", dtype="f32", **self._graph_settings)

    def refresh(self) -> bool:
        """Reload if another process flushed since this one last read or wrote; whether it did."""
        with self._lock:
            self._check_open()
            if _stamp(self.folder / _MANIFEST) == self._seen:
                return False
            if self._dirty:
                raise FactweaveError(f"{self.folder}: another process wrote this vector index while this one had "
                                     "changes not flushed; take turns writing (the web's write lock)")
            self._keys, self._ids, self._metadata = {}, {}, {}
            self._next_key, self._generation, self._snapshot = 0, 0, None
            self._graph = self._new_graph()
            self._load()
            return True

    def _load(self) -> None:
        manifest_path = self.folder / _MANIFEST
        self._seen = _stamp(manifest_path)
        if not manifest_path.exists():
            return
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise FactweaveError(f"{manifest_path}: unreadable vector index manifest ({_one_line(error)})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
            raise FactweaveError(f"{manifest_path}: not a factweave vector index")
        if manifest.get("version") != _VERSION:
            raise IndexMismatchError(
                f"{self.folder}: vector index format version {manifest.get('version')}, this factweave "
                f"reads version {_VERSION}; rebuild it"
            )
        if manifest.get("fingerprint") != self.fingerprint or manifest.get("dim") != self.dim:
            raise IndexMismatchError(
                f"{self.folder}: vector index was built with embedder {manifest.get('fingerprint')!r} "
                f"(dim {manifest.get('dim')}), not {self.fingerprint!r} (dim {self.dim}); "
                f"use the same embedding model or rebuild the index in another folder"
            )
        try:
            generation, next_key = int(manifest["generation"]), int(manifest["next_key"])
            records = json.loads((self.folder / manifest["records"]).read_text(encoding="utf-8"))
            graph_path = self.folder / manifest["graph"]
            rows = list(zip(records["ids"], records["keys"], records["metadata"], strict=True))
            graph = self._new_graph()
            if rows:
                graph.load(str(graph_path))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
            raise FactweaveError(f"{self.folder}: vector index files are damaged ({_one_line(error)}); "
                                 f"rebuild it") from None
        for item, key, entry in rows:
            self._keys[item] = key
            self._ids[key] = item
            self._metadata[key] = entry
        if len(graph) != len(self._keys):
            raise FactweaveError(
                f"{self.folder}: vector index holds {len(graph)} vectors for {len(self._keys)} ids; rebuild it"
            )
        self._graph = graph
        self._generation = generation
        self._next_key = next_key

    def flush(self) -> None:
        """Persist the current state atomically (see the class docstring); a no-op when clean."""
        with self._lock:
            self._check_open()
            if not self._dirty and (self.folder / _MANIFEST).exists():
                return
            if _stamp(self.folder / _MANIFEST) != self._seen:
                raise FactweaveError(f"{self.folder}: another process wrote this vector index since this one read "
                                     "it; nothing was saved over it (take turns writing: the web's write lock)")
            self.folder.mkdir(parents=True, exist_ok=True)
            generation = self._generation + 1
            graph_name = f"index.{generation}.usearch"
            records_name = f"records.{generation}.json"
            if len(self._graph):
                self._graph.save(str(self.folder / graph_name))
                fsync_file(self.folder / graph_name)
            keys = sorted(self._ids)
            records = {"ids": [self._ids[key] for key in keys], "keys": keys,
                       "metadata": [self._metadata[key] for key in keys]}
            _write_json_aside(self.folder / records_name, records)
            manifest = {"format": _FORMAT, "version": _VERSION, "fingerprint": self.fingerprint,
                        "dim": self.dim, "metric": "cosine", "library": "usearch",
                        "generation": generation, "next_key": self._next_key, "count": len(keys),
                        "graph": graph_name, "records": records_name}
            _write_json_aside(self.folder / _MANIFEST, manifest)  # the commit point
            fsync_folder(self.folder)
            self._seen = _stamp(self.folder / _MANIFEST)
            self._generation = generation
            self._dirty = False
            self._remove_stale_files(keep={_MANIFEST, graph_name, records_name})

    def _remove_stale_files(self, keep: set[str]) -> None:
        for path in self.folder.iterdir():
            ours = path.name.startswith(("index.", "records.", _MANIFEST))
            if ours and path.name not in keep and path.is_file():
                try:
                    path.unlink()
                except OSError as error:  # a leftover file costs disk, not correctness
                    log.warning("could not remove stale vector index file %s: %s", path, error)

    def close(self) -> None:
        """Flush pending changes and release the index; later calls raise."""
        with self._lock:
            if self._closed:
                return
            self.flush()
            self._closed = True

    def __enter__(self) -> LocalVectorIndex:  # noqa: PYI034 (not meant to be subclassed)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise FactweaveError(f"vector index {self.folder} is closed")

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadata: Sequence[dict] | None = None) -> None:
        """Insert records, or replace those whose id exists (vector and metadata both)."""
        ids, matrix, entries = check_upsert(ids, vectors, metadata, self.dim)
        if not ids:
            return
        with self._lock:
            self._check_open()
            known = np.array([self._keys[item] for item in ids if item in self._keys], dtype=np.uint64)
            if len(known):
                # usearch refuses duplicate keys: drop the old vector, then add the new one under the same key.
                self._graph.remove(known)
            keys = []
            for item in ids:
                key = self._keys.get(item)
                if key is None:
                    key = self._next_key
                    self._next_key += 1
                    self._keys[item] = key
                    self._ids[key] = item
                keys.append(key)
            self._graph.add(np.array(keys, dtype=np.uint64), matrix)
            for key, entry in zip(keys, entries):
                self._metadata[key] = entry
            self._dirty = True
            self._snapshot = None

    def delete(self, ids: Sequence[str]) -> None:
        """Remove records by id; unknown ids are ignored (as Pinecone does)."""
        ids = check_ids(ids)
        with self._lock:
            self._check_open()
            keys = [self._keys.pop(item) for item in dict.fromkeys(ids) if item in self._keys]
            if not keys:
                return
            self._graph.remove(np.array(keys, dtype=np.uint64))
            for key in keys:
                del self._ids[key]
                del self._metadata[key]
            self._dirty = True
            self._snapshot = None

    # -- reads ------------------------------------------------------------------------------

    def count(self) -> int:
        return len(self._keys)

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored (unit-length) vectors of the ids that exist; missing ids are left out."""
        ids = check_ids(ids)
        with self._lock:
            self._check_open()
            if not self._dirty:
                self.refresh()
            found = [item for item in dict.fromkeys(ids) if item in self._keys]
            if not found:
                return {}
            rows = self._vectors_of([self._keys[item] for item in found])
            return {item: rows[i].copy() for i, item in enumerate(found)}

    def metadata(self, item: str) -> dict[str, Any] | None:
        """The metadata stored with ``item``, or ``None`` when the id is unknown."""
        key = self._keys.get(item)
        return None if key is None else dict(self._metadata[key])

    def _vectors_of(self, keys: Sequence[int]) -> np.ndarray:
        rows = self._graph.get(np.array(keys, dtype=np.uint64), dtype=np.float32)
        return np.asarray(rows, dtype=np.float32).reshape(len(keys), self.dim)

    def query(self, vector: np.ndarray, k: int, filter: dict | None = None) -> list[VectorHit]:
        """The ``k`` records most similar to ``vector`` that pass ``filter``, best first."""
        matrix = check_matrix(vector, self.dim, rows=1)
        return self.query_many(matrix, k, filter)[0]

    def query_many(self, vectors: np.ndarray, k: int, filter: dict | None = None) -> list[list[VectorHit]]:
        """:meth:`query` for each row of ``vectors`` (one graph search for the whole batch)."""
        k = check_k(k)
        flt = check_filter(filter)
        matrix = check_matrix(vectors, self.dim)
        with self._lock:
            self._check_open()
            if not self._dirty:
                self.refresh()
            if not self._keys or not len(matrix):
                return [[] for _ in range(len(matrix))]
            if flt:
                allowed = [key for key, entry in self._metadata.items() if matches_filter(entry, flt)]
                if not allowed:
                    return [[] for _ in range(len(matrix))]
                if len(allowed) <= self.exact_below or len(allowed) * 20 < len(self._keys):
                    return self._exact(matrix, k, allowed)
                return self._overfetch(matrix, k, set(allowed))
            if len(self._keys) <= self.exact_below:
                if self._snapshot is None:
                    keys = list(self._ids)
                    self._snapshot = (keys, self._vectors_of(keys))
                return self._exact(matrix, k, *self._snapshot)
            return self._graph_search(matrix, k)

    def _hits(self, keys: Iterable[int], scores: Iterable[float]) -> list[VectorHit]:
        return [VectorHit(self._ids[key], float(score), dict(self._metadata[key])) for key, score in zip(keys, scores)]

    def _exact(self, matrix: np.ndarray, k: int, keys: list[int],
               vectors: np.ndarray | None = None) -> list[list[VectorHit]]:
        candidates = np.array(keys, dtype=np.int64)
        scores = matrix @ (self._vectors_of(keys) if vectors is None else vectors).T
        take = min(k, len(keys))
        results = []
        for row in scores:
            top = np.argpartition(-row, take - 1)[:take] if take < len(row) else np.arange(len(row))
            top = top[np.argsort(-row[top], kind="stable")]
            results.append(self._hits(candidates[top].tolist(), row[top]))
        return results

    def _search_graph(self, matrix: np.ndarray, count: int) -> list[tuple[list[int], np.ndarray]]:
        """(keys, cosine similarities) per query row, best first, from the HNSW graph."""
        matches = self._graph.search(matrix, count)
        if not hasattr(matches, "counts"):  # usearch answers a one-row batch with a flat Matches
            found = len(matches.keys)
            return [(matches.keys[:found].tolist(), 1.0 - matches.distances[:found])]
        rows = []
        for row in range(len(matrix)):
            found = int(matches.counts[row])
            # usearch's "cos" distance is 1 - cosine similarity.
            rows.append((matches.keys[row][:found].tolist(), 1.0 - matches.distances[row][:found]))
        return rows

    def _graph_search(self, matrix: np.ndarray, k: int) -> list[list[VectorHit]]:
        return [self._hits(keys, scores) for keys, scores in self._search_graph(matrix, min(k, len(self._keys)))]

    def _overfetch(self, matrix: np.ndarray, k: int, allowed: set[int]) -> list[list[VectorHit]]:
        total = len(self._keys)
        want = min(k, len(allowed))
        fetch = min(total, max(2 * k, math.ceil(2 * k * total / len(allowed))))
        results: list[list[VectorHit]] = [[] for _ in range(len(matrix))]
        pending = list(range(len(matrix)))
        while pending:
            short = []
            for row, (keys, scores) in zip(pending, self._search_graph(matrix[pending], fetch)):
                pairs = [(key, score) for key, score in zip(keys, scores) if key in allowed][:k]
                if len(pairs) >= want:
                    results[row] = self._hits([key for key, _ in pairs], [score for _, score in pairs])
                else:
                    short.append(row)
            pending = short
            if fetch >= total:
                break
            fetch = min(total, fetch * 4)
        if pending:  # the graph gave too few candidates even at full size: score the allowed ones exactly
            for row, hits in zip(pending, self._exact(matrix[pending], k, sorted(allowed))):
                results[row] = hits
        return results

    def __repr__(self) -> str:
        return f"LocalVectorIndex(folder={str(self.folder)!r}, dim={self.dim}, count={self.count()})"
