"""Embeddings and vector indexes: both backends through the same tests, real parts only.

The Pinecone backend runs the real ``pinecone`` SDK against the local server of
``tests/pinecone_server.py``; the local backend runs usearch on disk under ``tmp_path``.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agent.errors import FactweaveError, IndexMismatchError
from agent.web.local_vectors import LocalVectorIndex
from agent.web.pinecone_index import PineconeVectorIndex
from agent.web.vector_filters import matches_filter
from agent.web.vector_stores import open_vector_index
from agent.web.vectors import VectorIndex

REPO = Path(__file__).resolve().parents[1]
DIM = 8


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def axis(i: int) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[i] = 1.0
    return vector


@pytest.fixture(params=["local", "pinecone"])
def make_index(request, tmp_path):
    """A factory of empty indexes of one backend: ``make_index(namespace="")``."""
    opened: list[VectorIndex] = []

    def make(namespace: str = "", **options) -> VectorIndex:
        if request.param == "local":
            index = LocalVectorIndex(tmp_path / f"vectors-{namespace or 'default'}", DIM, f"test:{DIM}", **options)
        else:
            server = request.getfixturevalue("fresh_pinecone_server")
            index = PineconeVectorIndex(server.index_name, namespace=namespace, api_key=server.api_key,
                                        control_host=server.url, dim=DIM, batch_size=2, backoff_s=0.01,
                                        **options)
        opened.append(index)
        return index

    make.kind = request.param
    yield make
    for index in opened:
        index.close()


def test_both_backends_implement_the_protocol(make_index):
    """Not the names alone (what ``isinstance`` on a runtime-checkable Protocol checks): every
    method takes the Protocol's parameters, by name and kind, so a caller written against the
    Protocol works with either backend (what each one does is the tests below, on both)."""
    import inspect

    index = make_index()
    assert isinstance(index, VectorIndex)
    members = [name for name, value in vars(VectorIndex).items() if callable(value) and not name.startswith("_")]
    assert {"upsert", "query", "query_many", "fetch", "delete", "count", "flush", "refresh", "close"} <= set(members)
    for name in members:
        wanted = list(inspect.signature(getattr(VectorIndex, name)).parameters.values())[1:]  # without self
        got = inspect.signature(getattr(index, name)).parameters
        for param in wanted:
            assert param.name in got, f"{type(index).__name__}.{name} lacks {param.name!r}"
            assert got[param.name].kind == param.kind, f"{type(index).__name__}.{name}({param.name})"
            assert (got[param.name].default is inspect.Parameter.empty) == (param.default is inspect.Parameter.empty), (
                f"{type(index).__name__}.{name}({param.name}): optional in one, required in the other")


def test_upsert_is_idempotent_and_replaces_by_id(make_index):
    index = make_index()
    index.upsert(["a", "b"], np.stack([axis(0), axis(1)]), [{"tag": "first"}, {"tag": "b"}])
    index.upsert(["a", "b"], np.stack([axis(0), axis(1)]), [{"tag": "first"}, {"tag": "b"}])
    assert index.count() == 2
    index.upsert(["a"], axis(2)[None, :], [{"tag": "second"}])
    assert index.count() == 2
    np.testing.assert_allclose(index.fetch(["a"])["a"], axis(2), atol=1e-6)
    hit = index.query(axis(2), k=1)[0]
    assert (hit.id, hit.metadata) == ("a", {"tag": "second"})
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_a_repeated_id_in_one_call_keeps_the_last_row(make_index):
    index = make_index()
    index.upsert(["a", "a"], np.stack([axis(0), axis(1)]), [{"n": 1}, {"n": 2}])
    assert index.count() == 1
    assert index.query(axis(1), k=1)[0].metadata == {"n": 2}


def test_fetch_and_delete(make_index):
    index = make_index()
    index.upsert(["a", "b", "c"], np.stack([axis(0), axis(1), axis(2)]))
    fetched = index.fetch(["c", "missing", "a"])
    assert list(fetched) == ["c", "a"]
    assert fetched["c"].dtype == np.float32 and fetched["c"].shape == (DIM,)
    index.delete(["a", "never-there"])
    assert index.count() == 2
    assert index.fetch(["a"]) == {}
    assert "a" not in {hit.id for hit in index.query(axis(0), k=3)}
    index.delete(["b", "c"])
    assert index.count() == 0
    assert index.query(axis(0), k=3) == []


def test_query_orders_by_cosine_similarity(make_index):
    index = make_index()
    index.upsert(["far", "near", "nearest"], np.stack([unit(0, 1), unit(1, 1), unit(1, 0.1)]))
    hits = index.query(unit(1, 0), k=3)
    assert [hit.id for hit in hits] == ["nearest", "near", "far"]
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[1].score == pytest.approx(float(unit(1, 1) @ unit(1, 0)), abs=1e-5)
    assert [hit.id for hit in index.query(unit(1, 0), k=1)] == ["nearest"]
    assert len(index.query(unit(1, 0), k=50)) == 3


def test_query_many_answers_each_row(make_index):
    index = make_index()
    index.upsert([f"v{i}" for i in range(4)], np.stack([axis(i) for i in range(4)]))
    results = index.query_many(np.stack([axis(3), axis(1)]), k=2)
    assert [hits[0].id for hits in results] == ["v3", "v1"]
    assert all(len(hits) == 2 for hits in results)
    assert index.query_many(np.zeros((0, DIM), dtype=np.float32), k=2) == []


RECORDS = {
    "paris": {"kind": "city", "country": "France", "population": 2.1, "tags": ["capital", "europe"]},
    "lyon": {"kind": "city", "country": "France", "population": 0.5, "tags": ["europe"]},
    "berlin": {"kind": "city", "country": "Germany", "population": 3.6, "tags": ["capital", "europe"]},
    "seine": {"kind": "river", "country": "France"},
    "rhine": {"kind": "river"},
}


@pytest.mark.parametrize("flt, expected", [
    ({"kind": "city"}, {"paris", "lyon", "berlin"}),
    ({"kind": {"$eq": "river"}}, {"seine", "rhine"}),
    ({"country": {"$ne": "France"}}, {"berlin", "rhine"}),
    ({"country": {"$in": ["Germany", "Spain"]}}, {"berlin"}),
    ({"country": {"$nin": ["France"]}}, {"berlin", "rhine"}),
    ({"$and": [{"kind": "city"}, {"country": "France"}]}, {"paris", "lyon"}),
    ({"$or": [{"kind": "river"}, {"population": {"$gt": 3}}]}, {"seine", "rhine", "berlin"}),
    ({"tags": "capital"}, {"paris", "berlin"}),
    ({"tags": {"$in": ["capital", "asia"]}, "country": "France"}, {"paris"}),
    ({"population": {"$gte": 0.5, "$lt": 3}}, {"paris", "lyon"}),
    ({"country": {"$exists": False}}, {"rhine"}),
    ({"kind": "mountain"}, set()),
    ({}, set(RECORDS)),
])
def test_metadata_filters(make_index, flt, expected):
    index = make_index()
    names = list(RECORDS)
    vectors = np.stack([unit(1, 0.1 * i) for i in range(len(names))])
    index.upsert(names, vectors, [RECORDS[name] for name in names])
    hits = index.query(unit(1, 0), k=10, filter=flt)
    assert {hit.id for hit in hits} == expected
    assert all(hit.metadata == RECORDS[hit.id] for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert {name for name in names if matches_filter(RECORDS[name], flt)} == expected


@pytest.mark.parametrize("call, message", [
    (lambda index: index.upsert(["a"], np.ones((1, DIM + 1))), "shape"),
    (lambda index: index.upsert(["a", "b"], np.ones((1, DIM))), "1 vectors for 2 ids"),
    (lambda index: index.upsert(["a"], np.full((1, DIM), np.nan)), "NaN"),
    (lambda index: index.upsert(["a"], np.zeros((1, DIM))), "all zeros"),
    (lambda index: index.upsert("ab", np.ones((2, DIM))), "not one string"),
    (lambda index: index.upsert([""], np.ones((1, DIM))), "non-empty string"),
    (lambda index: index.upsert(["a"], np.ones((1, DIM)), [{"x": {"nested": 1}}]), "lists of strings"),
    (lambda index: index.query(np.ones(DIM), k=0), "k must be a positive integer"),
    (lambda index: index.query(np.ones(DIM), k=1, filter={"x": {"$regex": "a"}}), "unknown filter operator"),
    (lambda index: index.query(np.ones(DIM), k=1, filter={"x": {"$in": "a"}}), "takes a list"),
    (lambda index: index.query(np.ones(DIM + 2), k=1), "shape"),
])
def test_bad_input_is_one_clear_line(make_index, call, message):
    index = make_index()
    with pytest.raises(FactweaveError, match=message) as caught:
        call(index)
    assert "\n" not in str(caught.value)


# -- Pinecone only ------------------------------------------------------------------------------

def pinecone_index(server, **options) -> PineconeVectorIndex:
    settings = {"api_key": server.api_key, "host": server.url, "dim": DIM, "backoff_s": 0.01}
    settings.update(options)
    return PineconeVectorIndex(server.index_name, **settings)


def test_pinecone_namespaces_are_separate(fresh_pinecone_server):
    left = pinecone_index(fresh_pinecone_server, namespace="left")
    right = pinecone_index(fresh_pinecone_server, namespace="right")
    left.upsert(["a", "b"], np.stack([axis(0), axis(1)]))
    right.upsert(["a"], axis(5)[None, :], [{"side": "right"}])
    assert (left.count(), right.count()) == (2, 1)
    assert right.query(axis(0), k=5)[0].metadata == {"side": "right"}
    np.testing.assert_allclose(left.fetch(["a"])["a"], axis(0))
    left.delete(["a"])
    assert (left.count(), right.count()) == (1, 1)
    assert set(fresh_pinecone_server.namespaces) == {"left", "right"}


def test_pinecone_upserts_in_batches(fresh_pinecone_server):
    index = pinecone_index(fresh_pinecone_server, batch_size=3)
    index.upsert([f"v{i}" for i in range(8)], np.stack([unit(1, i) for i in range(8)]))
    upserts = [request for request in fresh_pinecone_server.requests if request[1] == "/vectors/upsert"]
    assert len(upserts) == 3
    assert index.count() == 8


def test_pinecone_host_is_found_through_the_control_plane(fresh_pinecone_server):
    index = PineconeVectorIndex(fresh_pinecone_server.index_name, api_key=fresh_pinecone_server.api_key,
                                control_host=fresh_pinecone_server.url, dim=DIM)
    assert index.host == fresh_pinecone_server.url
    assert fresh_pinecone_server.requests[0] == ("GET", f"/indexes/{fresh_pinecone_server.index_name}")


@pytest.mark.parametrize("failures, status", [(2, 503), (2, 429), (6, 503)])
def test_pinecone_retries_transient_failures(fresh_pinecone_server, failures, status):
    """Two failures are absorbed by the SDK's own transport retries; six outlast them (it tries four
    times) and are absorbed by the adapter's backoff."""
    index = pinecone_index(fresh_pinecone_server)
    fresh_pinecone_server.fail_next(failures, status=status)
    index.upsert(["a"], axis(0)[None, :])
    assert index.count() == 1
    assert len(fresh_pinecone_server.requests) >= failures + 2


def test_pinecone_gives_up_after_max_retries_without_showing_the_key(fresh_pinecone_server, caplog):
    index = pinecone_index(fresh_pinecone_server, max_retries=1)
    fresh_pinecone_server.fail_next(50, status=503)
    with caplog.at_level(logging.DEBUG), pytest.raises(FactweaveError) as caught:
        index.upsert(["a"], axis(0)[None, :])
    message = str(caught.value)
    assert "\n" not in message
    assert fresh_pinecone_server.index_name in message and fresh_pinecone_server.url in message
    assert "after 2 attempts" in message and "503" in message
    assert fresh_pinecone_server.api_key not in message
    assert fresh_pinecone_server.api_key not in caplog.text


def test_pinecone_refuses_a_wrong_key_in_one_line(fresh_pinecone_server, caplog):
    with caplog.at_level(logging.DEBUG), pytest.raises(FactweaveError, match="API key was refused") as caught:
        pinecone_index(fresh_pinecone_server, api_key="wrong-key-do-not-print")
    assert "wrong-key-do-not-print" not in str(caught.value) + caplog.text
    assert "\n" not in str(caught.value)


def test_pinecone_refuses_another_dimension_and_unknown_index(fresh_pinecone_server):
    with pytest.raises(IndexMismatchError, match="dimension 8"):
        pinecone_index(fresh_pinecone_server, dim=16)
    with pytest.raises(FactweaveError, match="not found"):
        PineconeVectorIndex("no-such-index", api_key=fresh_pinecone_server.api_key,
                            control_host=fresh_pinecone_server.url, dim=DIM)


def test_pinecone_without_a_key_says_what_to_set(monkeypatch):
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    with pytest.raises(FactweaveError, match="PINECONE_API_KEY"):
        PineconeVectorIndex("x", host="http://127.0.0.1:9", dim=DIM)


def test_pinecone_unreachable_host_is_one_line(monkeypatch):
    with pytest.raises(FactweaveError, match="cannot reach") as caught:
        PineconeVectorIndex("x", api_key="k", host="http://127.0.0.1:9", dim=DIM, max_retries=0)
    assert "\n" not in str(caught.value)


# -- Local only -----------------------------------------------------------------------------------

def test_local_index_persists_across_reopen(tmp_path):
    folder = tmp_path / "vectors"
    with LocalVectorIndex(folder, DIM, "test:8") as index:
        index.upsert(["a", "b"], np.stack([axis(0), axis(1)]), [{"x": "1"}, {}])
    reopened = LocalVectorIndex(folder, DIM, "test:8")
    assert reopened.count() == 2
    assert reopened.query(axis(0), k=1)[0].metadata == {"x": "1"}
    reopened.upsert(["c"], axis(2)[None, :])
    reopened.delete(["b"])
    reopened.flush()
    again = LocalVectorIndex(folder, DIM, "test:8")
    assert sorted(again.fetch(["a", "b", "c"])) == ["a", "c"]
    # New keys never reuse an old one, even after deletes and reopening.
    again.upsert(["d"], axis(3)[None, :])
    assert again.query(axis(3), k=1)[0].id == "d"
    assert sorted(path.name for path in folder.iterdir()) == ["index.2.usearch", "manifest.json", "records.2.json"]


def test_local_index_refuses_another_embedder(tmp_path):
    folder = tmp_path / "vectors"
    with LocalVectorIndex(folder, DIM, "model-a:8") as index:
        index.upsert(["a"], axis(0)[None, :])
    with pytest.raises(IndexMismatchError, match="model-a:8") as caught:
        LocalVectorIndex(folder, DIM, "model-b:8")
    assert "\n" not in str(caught.value)
    with pytest.raises(IndexMismatchError, match="dim 8"):
        LocalVectorIndex(folder, 16, "model-a:8")


def test_local_flush_interrupted_before_commit_keeps_the_last_state(tmp_path):
    """A process killed in the middle of flush (new files written, manifest not yet replaced)
    leaves the previous generation loadable, and its leftovers are ignored, then cleaned."""
    folder = tmp_path / "vectors"
    with LocalVectorIndex(folder, DIM, "test:8") as index:
        index.upsert(["kept"], axis(0)[None, :], [{"v": 1}])
    script = textwrap.dedent(f"""
        import os, numpy as np
        from agent.web.local_vectors import LocalVectorIndex
        index = LocalVectorIndex({str(folder)!r}, {DIM}, "test:8")
        index.upsert(["lost"], np.eye({DIM}, dtype=np.float32)[1:2])
        index.upsert(["kept"], np.eye({DIM}, dtype=np.float32)[2:3], [{{"v": 2}}])
        real_replace = os.replace
        def crash(source, target):
            if str(target).endswith("manifest.json"):
                os._exit(9)  # the power goes out just before the commit point
            real_replace(source, target)
        os.replace = crash
        index.flush()
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    leftovers = sorted(path.name for path in folder.iterdir())
    assert "index.2.usearch" in leftovers
    assert [name for name in leftovers if name.startswith("manifest.json.") and name.endswith(".tmp")]
    (folder / "records.3.json.tmp").write_text("{half a fi")  # another torn write, for good measure

    index = LocalVectorIndex(folder, DIM, "test:8")
    assert index.count() == 1 and index.fetch(["lost"]) == {}
    hit = index.query(axis(0), k=1)[0]
    assert (hit.id, hit.metadata) == ("kept", {"v": 1})
    assert json.loads((folder / "manifest.json").read_text())["generation"] == 1
    index.upsert(["new"], axis(4)[None, :])
    index.flush()
    assert sorted(path.name for path in folder.iterdir()) == ["index.2.usearch", "manifest.json", "records.2.json"]
    assert LocalVectorIndex(folder, DIM, "test:8").count() == 2


def test_local_damaged_files_are_one_line(tmp_path):
    folder = tmp_path / "vectors"
    with LocalVectorIndex(folder, DIM, "test:8") as index:
        index.upsert(["a"], axis(0)[None, :])
    graph = folder / "index.1.usearch"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    with pytest.raises(FactweaveError, match="damaged"):
        LocalVectorIndex(folder, DIM, "test:8")
    (folder / "records.1.json").write_text("{not json")
    with pytest.raises(FactweaveError, match="damaged") as caught:
        LocalVectorIndex(folder, DIM, "test:8")
    assert "\n" not in str(caught.value)


def test_local_graph_search_and_filtered_overfetch_match_exact_search(tmp_path):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(1500, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"v{i}" for i in range(len(vectors))]
    groups = [{"group": "rare" if i % 50 == 0 else ("half" if i % 2 else "other")} for i in range(len(vectors))]
    index = LocalVectorIndex(tmp_path / "v", 32, "random:32", exact_below=100)
    index.upsert(ids, vectors, groups)
    queries = rng.normal(size=(20, 32)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    def exact(query, wanted):
        scores = vectors @ query
        order = [i for i in np.argsort(-scores) if wanted(i)]
        return [ids[i] for i in order[:10]]

    graph = index.query_many(queries, k=10)
    recall = np.mean([len({hit.id for hit in hits} & set(exact(query, lambda i: True))) / 10
                      for query, hits in zip(queries, graph)])
    assert recall >= 0.9
    for flt, wanted in (({"group": "half"}, lambda i: i % 2 == 1), ({"group": "rare"}, lambda i: i % 50 == 0)):
        results = index.query_many(queries, k=10, filter=flt)
        for query, hits in zip(queries, results):
            assert len(hits) == 10
            assert all(hit.metadata == flt for hit in hits)
            assert len({hit.id for hit in hits} & set(exact(query, wanted))) >= 8


def test_open_vector_index_factory(tmp_path, fresh_pinecone_server):
    local = open_vector_index("local", folder=tmp_path / "v", dim=DIM, fingerprint="t:8")
    assert isinstance(local, LocalVectorIndex)
    remote = open_vector_index("pinecone", index_name=fresh_pinecone_server.index_name, dim=DIM,
                               api_key=fresh_pinecone_server.api_key, host=fresh_pinecone_server.url)
    assert isinstance(remote, PineconeVectorIndex)
    with pytest.raises(FactweaveError, match="unknown vector index kind 'faiss'"):
        open_vector_index("faiss", folder=tmp_path)
    with pytest.raises(FactweaveError, match="vector index 'local'"):
        open_vector_index("local", folder=tmp_path / "w")


# -- Embeddings -----------------------------------------------------------------------------------

def test_embedder_shapes_and_normalization(embedder):
    assert embedder.name == "all-MiniLM-L6-v2" and embedder.dim == 384
    assert embedder.fingerprint == "all-MiniLM-L6-v2:384"
    vectors = embedder.encode(["Paris", "capital of France", "photosynthesis"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    empty = embedder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_short_and_long_texts_in_their_own_batches_keep_their_rows(embedder):
    from agent.embeddings import SHORT_TEXT_CHARS

    texts = ["Paris", "The Journal of Psychotherapy Integration is a peer-reviewed academic journal.",
             "marie curie", "<Laurie Graff> <place of birth> <New York> .", "1867"]
    assert sorted(len(t) <= SHORT_TEXT_CHARS for t in texts) == [False, False, True, True, True]
    mixed = embedder.encode(texts)
    alone = np.stack([embedder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(mixed, alone, atol=1e-5)


def test_bf16_embedder_gives_the_same_vectors_to_within_rounding(embedder, monkeypatch):
    from agent.embeddings import Embedder

    texts = ["Paris", "capital of France", "<Laurie Graff> <place of birth> <New York> .",
             "The Journal of Psychotherapy Integration is a peer-reviewed academic journal."]
    monkeypatch.setenv("FACTWEAVE_EMBED_PRECISION", "bf16")
    fast = Embedder(device="cpu")
    assert fast.precision == "bf16" and fast.fingerprint == embedder.fingerprint
    vectors = fast.encode(texts)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    exact = embedder.encode(texts)
    cosines = np.sum(vectors * exact, axis=1)
    assert cosines.min() > 0.999, cosines
    assert np.abs(vectors - exact).max() > 1e-4  # bfloat16 products did run
    with pytest.raises(FactweaveError, match=r"precision must be one of fp32, bf16 .*got 'fp16'"):
        Embedder(device="cpu", precision="fp16")


def test_embedder_semantics(embedder):
    paris, capital, plants = embedder.encode(["Paris", "capital of France", "photosynthesis"])
    assert paris @ capital > paris @ plants + 0.2


def test_embedder_rejects_bad_input_in_one_line(embedder):
    with pytest.raises(FactweaveError, match="not a single string"):
        embedder.encode("Paris")
    with pytest.raises(FactweaveError, match="text 1 to embed is int"):
        embedder.encode(["Paris", 3])


def test_embedder_missing_model_is_one_line(monkeypatch, tmp_path):
    from agent.embeddings import Embedder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FactweaveError, match="cannot load embedding model 'no-such/model' offline") as caught:
        Embedder("no-such/model")
    assert "\n" not in str(caught.value)


def test_an_embedder_known_by_its_fingerprint_embeds_alike_and_checks_the_dimension(embedder):
    """A web's saved embedder opens from its fingerprint (stats and removal never load it); the
    first text embedded loads it, gives the same vectors, and a wrong saved dimension is one line."""
    from agent.embeddings import Embedder

    known = Embedder.known(embedder.fingerprint)
    assert known.fingerprint == embedder.fingerprint
    texts = ["Paris", "The Journal of Psychotherapy Integration is a peer-reviewed academic journal."]
    np.testing.assert_allclose(known.encode(texts), embedder.encode(texts), atol=1e-6)
    with pytest.raises(FactweaveError, match="gives 384 dimensions, not the 512 it was saved with"):
        Embedder.known("all-MiniLM-L6-v2:512").encode(["Paris"])
    assert Embedder.known("not a fingerprint") is None


def test_keywords_found_by_meaning_in_both_backends(make_index, embedder, tmp_path, request):
    labels = ["Paris", "Berlin", "photosynthesis", "Mount Everest", "Johann Sebastian Bach"]
    vectors = embedder.encode(labels)
    if make_index.kind == "local":
        index = LocalVectorIndex(tmp_path / "kw", embedder.dim, embedder.fingerprint)
    else:
        server = request.getfixturevalue("fresh_pinecone_server")
        server.dimension = embedder.dim
        index = PineconeVectorIndex(server.index_name, api_key=server.api_key, host=server.url,
                                    dim=embedder.dim)
    index.upsert(labels, vectors, [{"label": label} for label in labels])
    questions = ["capital of France", "highest mountain", "German composer of fugues", "how plants make sugar"]
    found = [hits[0].id for hits in index.query_many(embedder.encode(questions), k=1)]
    assert found == ["Paris", "Mount Everest", "Johann Sebastian Bach", "photosynthesis"]
    index.close()
