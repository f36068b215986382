"""Which approximate-nearest-neighbour library backs the embedded vector index: a measurement.

Real data: the distinct subject and object labels of a KB (the demo KAMEL selection by default,
about 49k labels), embedded with the packaged all-MiniLM-L6-v2. Queries are other real texts
from the same KB: "<subject> <predicate>" phrases, which are not in the index, so a query's
nearest neighbours are found, not looked up.

Each backend (usearch, faiss HNSW, hnswlib, lancedb if installed, and exact numpy brute force
as the baseline, and the project's own LocalVectorIndex on top of usearch) is built with comparable settings (M / connectivity 16, construction beam 128,
search beam 64, cosine on normalized float32) and measured for: build time, save and load
time, disk size, single-query latency p50/p95, batched query latency (per batch of 100 and per
query), recall@10 against exact search, replacing 1,000 vectors by id (and recall after that),
and deleting 1,000 ids (and that none of them comes back).

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python benchmarks/vector_backends.py            # 5k and full set
    PYTHONPATH=. .venv/bin/python benchmarks/vector_backends.py --sizes 5000 --backends usearch

Prints a table per size and writes ``benchmarks/results/vector_backends.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
M, EF_CONSTRUCTION, EF_SEARCH, K = 16, 128, 64, 10


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Backend:
    """One library behind the operations the benchmark measures."""

    name = "?"
    supports_replace = True
    supports_delete = True

    def build(self, keys: np.ndarray, vectors: np.ndarray) -> None: ...
    def save(self, folder: Path) -> None: ...
    def load(self, folder: Path, dim: int) -> None: ...
    def query(self, vector: np.ndarray, k: int) -> np.ndarray: ...
    def query_batch(self, vectors: np.ndarray, k: int) -> np.ndarray: ...
    def replace(self, keys: np.ndarray, vectors: np.ndarray) -> None: ...
    def delete(self, keys: np.ndarray) -> None: ...


class ExactBackend(Backend):
    """numpy matrix product over all rows: the recall reference and the small-index fallback."""

    name = "exact-numpy"

    def build(self, keys, vectors):
        self.keys, self.vectors = keys.copy(), vectors.copy()

    def save(self, folder):
        np.save(folder / "vectors.npy", self.vectors)
        np.save(folder / "keys.npy", self.keys)

    def load(self, folder, dim):
        self.vectors = np.load(folder / "vectors.npy")
        self.keys = np.load(folder / "keys.npy")

    def query(self, vector, k):
        return self.query_batch(vector[None, :], k)[0]

    def query_batch(self, vectors, k):
        scores = vectors @ self.vectors.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.take_along_axis(scores, top, axis=1).argsort(axis=1)[:, ::-1]
        return self.keys[np.take_along_axis(top, order, axis=1)]

    def replace(self, keys, vectors):
        where = {int(key): i for i, key in enumerate(self.keys)}
        for key, vector in zip(keys, vectors):
            self.vectors[where[int(key)]] = vector

    def delete(self, keys):
        keep = ~np.isin(self.keys, keys)
        self.keys, self.vectors = self.keys[keep], self.vectors[keep]


class UsearchBackend(Backend):
    name = "usearch"

    def _new(self, dim):
        from usearch.index import Index

        return Index(ndim=dim, metric="cos", dtype="f32", connectivity=M,
                     expansion_add=EF_CONSTRUCTION, expansion_search=EF_SEARCH)

    def build(self, keys, vectors):
        self.index = self._new(vectors.shape[1])
        self.index.add(keys, vectors)

    def save(self, folder):
        self.index.save(str(folder / "index.usearch"))

    def load(self, folder, dim):
        self.index = self._new(dim)
        self.index.load(str(folder / "index.usearch"))

    def query(self, vector, k):
        return self.index.search(vector, k).keys

    def query_batch(self, vectors, k):
        return self.index.search(vectors, k).keys

    def replace(self, keys, vectors):
        # usearch refuses a duplicate key: remove, then add (the graph reuses the freed slots).
        self.index.remove(keys)
        self.index.add(keys, vectors)

    def delete(self, keys):
        self.index.remove(keys)


class FaissHNSWBackend(Backend):
    """faiss IndexHNSWFlat with inner product; HNSW in faiss cannot remove vectors."""

    name = "faiss-hnsw"
    supports_replace = False
    supports_delete = False

    def build(self, keys, vectors):
        import faiss

        hnsw = faiss.IndexHNSWFlat(vectors.shape[1], M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = EF_CONSTRUCTION
        hnsw.hnsw.efSearch = EF_SEARCH
        self.index = faiss.IndexIDMap2(hnsw)
        self.index.add_with_ids(vectors, keys.astype(np.int64))

    def save(self, folder):
        import faiss

        faiss.write_index(self.index, str(folder / "index.faiss"))

    def load(self, folder, dim):
        import faiss

        self.index = faiss.read_index(str(folder / "index.faiss"))
        faiss.downcast_index(self.index.index).hnsw.efSearch = EF_SEARCH

    def query(self, vector, k):
        return self.index.search(vector[None, :], k)[1][0]

    def query_batch(self, vectors, k):
        return self.index.search(vectors, k)[1]

    def replace(self, keys, vectors):
        raise NotImplementedError("faiss IndexHNSWFlat does not support remove_ids")

    def delete(self, keys):
        self.index.remove_ids(keys.astype(np.int64))


class HnswlibBackend(Backend):
    name = "hnswlib"

    def build(self, keys, vectors):
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=vectors.shape[1])
        self.index.init_index(max_elements=len(keys), ef_construction=EF_CONSTRUCTION, M=M,
                              allow_replace_deleted=True)
        self.index.add_items(vectors, keys)
        self.index.set_ef(EF_SEARCH)

    def save(self, folder):
        self.index.save_index(str(folder / "index.hnsw"))

    def load(self, folder, dim):
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.load_index(str(folder / "index.hnsw"), allow_replace_deleted=True)
        self.index.set_ef(EF_SEARCH)

    def query(self, vector, k):
        return self.index.knn_query(vector, k)[0][0]

    def query_batch(self, vectors, k):
        return self.index.knn_query(vectors, k)[0]

    def replace(self, keys, vectors):
        # add_items with a known label overwrites that element's vector in place.
        self.index.add_items(vectors, keys)

    def delete(self, keys):
        for key in keys:
            self.index.mark_deleted(int(key))


class LanceDBBackend(Backend):
    """LanceDB table with an IVF_HNSW_SQ index (its only HNSW flavour), cosine distance."""

    name = "lancedb"

    def _data(self, keys, vectors):
        import pyarrow as pa

        dim = vectors.shape[1]
        values = pa.array(vectors.reshape(-1), type=pa.float32())
        return pa.table({"key": pa.array(keys, type=pa.int64()),
                         "vector": pa.FixedSizeListArray.from_arrays(values, dim)})

    def build(self, keys, vectors):
        import lancedb

        self.folder = Path(tempfile.mkdtemp(prefix="lancedb-bench-"))
        self.db = lancedb.connect(str(self.folder))
        self.table = self.db.create_table("vectors", data=self._data(keys, vectors))
        partitions = max(1, int(np.sqrt(len(keys)) / 4))
        self.table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ",
                                num_partitions=partitions, m=M, ef_construction=EF_CONSTRUCTION)
        self.partitions = partitions

    def save(self, folder):
        # Lance writes on every operation: saving is copying its folder.
        shutil.copytree(self.folder, folder / "lance", dirs_exist_ok=True)

    def load(self, folder, dim):
        import lancedb

        self.db = lancedb.connect(str(folder / "lance"))
        self.table = self.db.open_table("vectors")

    def _search(self, vector, k):
        return (self.table.search(vector, vector_column_name="vector").distance_type("cosine")
                .nprobes(max(1, self.partitions // 4 + 1)).ef(EF_SEARCH).limit(k).select(["key", "_distance"]))

    def query(self, vector, k):
        return np.array(self._search(vector, k).to_arrow()["key"].to_pylist())

    def query_batch(self, vectors, k):
        table = self._search(list(vectors), k).to_arrow()
        rows = [[] for _ in range(len(vectors))]
        for query_index, key in zip(table["query_index"].to_pylist(), table["key"].to_pylist()):
            rows[query_index].append(key)
        return np.array([row + [-1] * (k - len(row)) for row in rows])

    def replace(self, keys, vectors):
        (self.table.merge_insert("key").when_matched_update_all().when_not_matched_insert_all()
         .execute(self._data(keys, vectors)))

    def delete(self, keys):
        self.table.delete(f"key IN ({', '.join(str(int(key)) for key in keys)})")


class FactweaveLocalBackend(Backend):
    """The project's LocalVectorIndex (usearch plus string ids and metadata): the wrapper's cost."""

    name = "factweave-local"

    def build(self, keys, vectors):
        from agent.web.local_vectors import LocalVectorIndex

        self.folder = Path(tempfile.mkdtemp(prefix="factweave-local-bench-"))
        self.index = LocalVectorIndex(self.folder / "v", vectors.shape[1], "bench")
        self.index.upsert([str(key) for key in keys], vectors, [{"n": int(key) % 7} for key in keys])

    def save(self, folder):
        self.index.flush()
        shutil.copytree(self.folder / "v", folder / "v")

    def load(self, folder, dim):
        from agent.web.local_vectors import LocalVectorIndex

        self.index = LocalVectorIndex(folder / "v", dim, "bench")

    def query(self, vector, k):
        return np.array([int(hit.id) for hit in self.index.query(vector, k)])

    def query_batch(self, vectors, k):
        return np.array([[int(hit.id) for hit in hits] for hits in self.index.query_many(vectors, k)])

    def replace(self, keys, vectors):
        self.index.upsert([str(key) for key in keys], vectors)

    def delete(self, keys):
        self.index.delete([str(key) for key in keys])


BACKENDS: dict[str, Callable[[], Backend]] = {
    "exact-numpy": ExactBackend,
    "usearch": UsearchBackend,
    "faiss-hnsw": FaissHNSWBackend,
    "hnswlib": HnswlibBackend,
    "lancedb": LanceDBBackend,
    "factweave-local": FactweaveLocalBackend,
}


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    hits = sum(len(set(map(int, row)) & set(map(int, ref))) for row, ref in zip(found, truth))
    return hits / truth.size


def percentiles_ms(samples: list[float]) -> tuple[float, float]:
    values = np.array(samples) * 1000
    return float(np.percentile(values, 50)), float(np.percentile(values, 95))


def load_texts(kb: Path | None, seed: int) -> tuple[list[str], list[str]]:
    """(distinct labels sorted, 1,000 "<subject> <predicate>" query phrases)."""
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts

    labels: set[str] = set()
    phrases: set[str] = set()
    for fact in load_facts(kb or demo_kamel_root()):
        labels.update((fact.subject, fact.object))
        phrases.add(f"{fact.subject} {fact.predicate}")
    rng = np.random.default_rng(seed)
    queries = sorted(phrases)
    picked = rng.choice(len(queries), size=min(1000, len(queries)), replace=False)
    return sorted(labels), [queries[i] for i in picked]


def embed(texts: list[str], cache: Path | None, tag: str):
    """Embeddings of ``texts``, cached as .npy when ``cache`` is given (embedding dominates reruns)."""
    from agent.embeddings import Embedder

    if cache is not None:
        path = cache / f"{tag}-{len(texts)}.npy"
        if path.exists():
            return np.load(path)
    vectors = Embedder().encode(texts, progress=True)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def measure(backend: Backend, vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray,
            seed: int) -> dict:
    keys = np.arange(len(vectors), dtype=np.uint64)
    row: dict = {"backend": backend.name, "n": len(vectors)}
    started = time.perf_counter()
    backend.build(keys, vectors)
    row["build_s"] = time.perf_counter() - started

    with tempfile.TemporaryDirectory(prefix="vector-bench-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        backend.save(folder)
        row["save_s"] = time.perf_counter() - started
        row["disk_mb"] = folder_bytes(folder) / 1e6
        started = time.perf_counter()
        backend.load(folder, vectors.shape[1])
        row["load_s"] = time.perf_counter() - started

        for query in queries[:20]:  # warm-up: page cache, lazy allocations
            backend.query(query, K)
        single = []
        found = []
        for query in queries:
            started = time.perf_counter()
            found.append(backend.query(query, K))
            single.append(time.perf_counter() - started)
        row["single_p50_ms"], row["single_p95_ms"] = percentiles_ms(single)
        row["recall@10"] = recall_at_k(np.array(found), truth)

        batches = []
        batch_found = []
        for start in range(0, len(queries), 100):
            started = time.perf_counter()
            batch_found.append(backend.query_batch(queries[start:start + 100], K))
            batches.append(time.perf_counter() - started)
        row["batch100_p50_ms"], row["batch100_p95_ms"] = percentiles_ms(batches)
        row["batch_per_query_ms"] = sum(batches) / len(queries) * 1000
        row["batch_recall@10"] = recall_at_k(np.vstack(batch_found), truth)

        rng = np.random.default_rng(seed)
        changed = rng.choice(len(vectors), size=min(1000, len(vectors) // 5), replace=False)
        row["replace"] = backend.supports_replace
        if backend.supports_replace:
            # Replace each chosen vector by another row's vector: the index must now find the key there.
            donors = rng.permutation(changed)
            started = time.perf_counter()
            backend.replace(keys[changed], vectors[donors])
            row["replace_1k_s"] = time.perf_counter() - started
            top1 = backend.query_batch(vectors[donors[:200]], 1)[:, 0]
            row["replace_found_top1"] = float(np.mean(top1 == keys[changed[:200]]))
        row["delete"] = backend.supports_delete
        if backend.supports_delete:
            started = time.perf_counter()
            backend.delete(keys[changed])
            row["delete_1k_s"] = time.perf_counter() - started
            after = backend.query_batch(queries, K)
            row["deleted_returned"] = int(np.isin(after, keys[changed]).sum())
    return row


COLUMNS = [("backend", "{}"), ("n", "{}"), ("build_s", "{:.2f}"), ("save_s", "{:.3f}"),
           ("load_s", "{:.3f}"), ("disk_mb", "{:.1f}"), ("single_p50_ms", "{:.3f}"),
           ("single_p95_ms", "{:.3f}"), ("batch100_p50_ms", "{:.2f}"), ("batch_per_query_ms", "{:.3f}"),
           ("recall@10", "{:.3f}"), ("replace_1k_s", "{:.3f}"), ("replace_found_top1", "{:.2f}"),
           ("delete_1k_s", "{:.3f}"), ("deleted_returned", "{}")]


def print_table(rows: list[dict]) -> None:
    header = [name for name, _ in COLUMNS]
    cells = [[fmt.format(row[name]) if name in row else "n/a" for name, fmt in COLUMNS] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-+-".join("-" * w for w in widths))
    for c in cells:
        print(" | ".join(v.ljust(w) for v, w in zip(c, widths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=Path, default=None, help="KB to take labels from (default: demo KAMEL)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000],
                        help="index sizes (capped at the number of distinct labels)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "factweave-vector-bench",
                        help="where embeddings are cached between runs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=RESULTS / "vector_backends.json")
    args = parser.parse_args()

    labels, phrases = load_texts(args.kb, args.seed)
    all_vectors = embed(labels, args.cache, "labels")
    queries = embed(phrases, args.cache, "queries")
    print(f"{len(labels)} distinct labels, {len(queries)} queries, dim {all_vectors.shape[1]}, "
          f"{os.cpu_count()} cpus")

    rows = []
    rng = np.random.default_rng(args.seed)
    for size in args.sizes:
        size = min(size, len(labels))
        picked = np.sort(rng.choice(len(labels), size=size, replace=False))
        vectors = np.ascontiguousarray(all_vectors[picked])
        exact = ExactBackend()
        exact.build(np.arange(size, dtype=np.uint64), vectors)
        truth = exact.query_batch(queries, K)
        size_rows = []
        for name in args.backends:
            try:
                size_rows.append(measure(BACKENDS[name](), vectors, queries, truth, args.seed))
            except ImportError as error:
                print(f"skipping {name}: {error}")
        print()
        print_table(size_rows)
        rows.extend(size_rows)

    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "settings": {"M": M, "ef_construction": EF_CONSTRUCTION, "ef_search": EF_SEARCH, "k": K,
                     "queries": len(queries), "labels": len(labels)},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_avg_1m": os.getloadavg()[0]},
        "versions": versions(),
        "rows": rows,
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.json}")


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("usearch", "faiss-cpu", "hnswlib", "lancedb", "numpy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


if __name__ == "__main__":
    main()
