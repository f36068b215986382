"""The graph store against the real embedded ArcadeDB server (Bolt, official neo4j driver)."""
from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO

from agent.errors import FactweaveError
from agent.web.arcade import EmbeddedGraphServer, open_graph
from agent.web.graph import GraphStore

DOC = {"id": "doc-1", "title": "Capitals", "source": "notes.md"}
CHUNK = {"id": "doc-1#0", "index": 0, "start": 0, "end": 60}
FACTS = [
    {"id": "f-paris", "text": "Paris is the capital of France.", "start": 0, "end": 31},
    {"id": "f-berlin", "text": "Berlin is the capital of Germany.", "start": 32, "end": 60},
]
LINKS = [
    {"fact_id": "f-paris", "keyword_id": "paris", "name": "Paris"},
    {"fact_id": "f-paris", "keyword_id": "france", "name": "France"},
    {"fact_id": "f-paris", "keyword_id": "capital"},
    {"fact_id": "f-berlin", "keyword_id": "berlin", "name": "Berlin"},
    {"fact_id": "f-berlin", "keyword_id": "capital"},
]
INJECTIONS = [
    '"}) DETACH DELETE n //',
    '"}) MATCH (n) DETACH DELETE n RETURN 1 //',
    "' OR 1=1 --",
    "`Fact`) DETACH DELETE f //",
    "$param {id: $id} CALL db.labels() YIELD label RETURN label",
    "ünïcödé 中文 🚀 \\u0000 \n newline",
]


def write_sample(graph: GraphStore) -> None:
    graph.write_chunk(DOC, CHUNK, FACTS, LINKS)


def test_schema_is_idempotent(graph):
    graph.ensure_schema()
    graph.ensure_schema()
    write_sample(graph)
    graph.ensure_schema()
    assert graph.stats()["facts"] == 2
    # On ArcadeDB (and Neo4j 5) the constraints themselves were accepted, not the index fallback.
    names = {row["name"] for row in graph._read("SHOW CONSTRAINTS", {})}
    assert {f"factweave_{label}_id" for label in ("document", "chunk", "fact", "keyword")} <= names
    with pytest.raises(FactweaveError, match="ConstraintValidation"):
        graph._write("CREATE (f:Fact {id: $id}) RETURN count(f)", {"id": "f-paris"})


def test_write_chunk_stores_everything_with_provenance(graph):
    write_sample(graph)
    assert graph.stats() == {
        "documents": 1, "chunks": 1, "chunks_done": 1, "facts": 2, "keywords": 4,
        "has_chunk": 1, "has_fact": 2, "mentions": 5,
    }
    paris = graph.facts_by_ids(["f-paris"])[0]
    assert paris == {"id": "f-paris", "text": "Paris is the capital of France.", "kind": "document",
                     "doc_id": "doc-1", "chunk_id": "doc-1#0", "start": 0, "end": 31}


def test_write_chunk_twice_adds_nothing(graph):
    write_sample(graph)
    before = graph.stats()
    write_sample(graph)
    graph.write_chunk(DOC, CHUNK, list(reversed(FACTS)), list(reversed(LINKS)))
    assert graph.stats() == before


def test_chunk_without_facts_is_still_done(graph):
    graph.write_chunk(DOC, {"id": "doc-1#1", "index": 1, "start": 60, "end": 61}, [], [])
    assert graph.done_chunks(["doc-1#1"]) == {"doc-1#1"}
    assert graph.stats()["facts"] == 0


def test_done_chunks(graph):
    write_sample(graph)
    assert graph.done_chunks(["doc-1#0", "doc-1#1", "other"]) == {"doc-1#0"}
    assert graph.done_chunks([]) == set()


def test_failed_chunk_leaves_nothing_behind(graph):
    """The done marker commits with the facts: a chunk that fails to write is not done."""
    bad_links = [*LINKS, {"fact_id": "f-paris"}]  # no keyword id: refused before any write
    with pytest.raises(TypeError):
        graph.write_chunk(DOC, CHUNK, FACTS, bad_links)
    assert graph.done_chunks([CHUNK["id"]]) == set()
    assert graph.stats()["facts"] == 0


def test_facts_for_keywords_degree(graph):
    write_sample(graph)
    found = graph.facts_for_keywords(["capital", "france", "paris", "unknown"])
    assert [f["id"] for f in found] == ["f-paris", "f-berlin"]
    assert found[0]["matched"] == ["capital", "france", "paris"]  # the query's order
    assert found[1]["matched"] == ["capital"]
    assert found[0]["doc_id"] == "doc-1" and found[0]["start"] == 0
    assert [f["id"] for f in graph.facts_for_keywords(["capital", "paris"], limit=1)] == ["f-paris"]
    assert graph.facts_for_keywords([]) == []
    assert graph.facts_for_keywords(["unknown"]) == []


def test_expand_keywords_gives_only_keywords_within_the_cap(graph):
    """A keyword linked to more facts than the cap (a hub: "film", "born") is left out whole; one at
    the cap keeps every fact; an unknown one is absent."""
    triples = [{"id": f"t{i}", "subject": f"S{i}", "predicate": "genre", "object": "film"} for i in range(12)]
    links = [{"fact_id": f"t{i}", "keyword_id": "film", "name": "film"} for i in range(12)]
    links += [{"fact_id": f"t{i}", "keyword_id": "drama", "name": "drama"} for i in range(3)]
    graph.write_triples(triples, links, source="kamel")
    assert graph.expand_keywords(["film", "drama", "unknown", "drama"], cap=3) == {"drama": ["t0", "t1", "t2"]}
    assert graph.expand_keywords(["film", "drama"], cap=12) == {
        "film": sorted(f"t{i}" for i in range(12)), "drama": ["t0", "t1", "t2"]}
    assert graph.expand_keywords(["film"], cap=11) == {}
    assert graph.expand_keywords(["film"], cap=0) == {}


def test_facts_by_ids_and_keywords_of_facts(graph):
    write_sample(graph)
    assert [f["id"] for f in graph.facts_by_ids(["f-berlin", "nope", "f-paris"])] == ["f-berlin", "f-paris"]
    assert graph.keywords_of_facts(["f-paris", "f-berlin", "nope"]) == {
        "f-paris": ["capital", "france", "paris"], "f-berlin": ["berlin", "capital"], "nope": []}


def test_triples_are_facts_without_documents(graph):
    triples = [{"id": f"t{i}", "subject": f"S{i}", "predicate": "capital of", "object": f"O{i}"}
               for i in range(7)]
    links = [{"fact_id": f"t{i}", "keyword_id": f"s{i}", "name": f"S{i}"} for i in range(7)]
    links.append({"fact_id": "t0", "keyword_id": "capital"})
    graph.write_triples(triples, links, source="kamel", batch_size=3)
    graph.write_triples(triples, links, source="kamel", batch_size=3)
    stats = graph.stats()
    assert (stats["facts"], stats["keywords"], stats["mentions"], stats["documents"]) == (7, 8, 8, 0)
    t0 = graph.facts_for_keywords(["capital", "s0"])[0]
    assert t0 == {"id": "t0", "text": "S0 capital of O0", "kind": "triple", "subject": "S0",
                  "predicate": "capital of", "object": "O0", "source": "kamel",
                  "matched": ["capital", "s0"]}


def test_injection_strings_are_plain_text(graph):
    write_sample(graph)
    facts = [{"id": f"inj-{i}", "text": text, "start": i, "end": i + 1} for i, text in enumerate(INJECTIONS)]
    # The keyword ids themselves are hostile too, and so are the document fields.
    links = [{"fact_id": f"inj-{i}", "keyword_id": text, "name": text} for i, text in enumerate(INJECTIONS)]
    doc = {"id": INJECTIONS[0], "title": INJECTIONS[2], "source": INJECTIONS[3]}
    chunk = {"id": INJECTIONS[1], "index": 0, "start": 0, "end": 9}
    graph.write_chunk(doc, chunk, facts, links)

    stats = graph.stats()
    assert stats["facts"] == 2 + len(INJECTIONS) and stats["documents"] == 2  # nothing deleted
    assert [f["text"] for f in graph.facts_by_ids([f["id"] for f in facts])] == INJECTIONS
    for i, text in enumerate(INJECTIONS):  # searched as text: each finds exactly its fact
        assert [f["id"] for f in graph.facts_for_keywords([text])] == [f"inj-{i}"]
        assert graph.facts_for_keywords([text])[0]["matched"] == [text]
    assert graph.done_chunks([INJECTIONS[1]]) == {INJECTIONS[1]}
    assert graph.facts_by_ids(["f-paris"])[0]["text"] == FACTS[0]["text"]


def test_statements_name_only_the_module_labels():
    """Cypher text is fixed at import: only the module's labels and types, no placeholders."""
    import re

    import agent.web.cypher as module

    statements = [v for v in vars(module).values() if isinstance(v, str) and "RETURN" in v]
    statements += [s for pair in module.SCHEMA for s in pair]
    statements += [*module.COUNTS.values(), *module.CLEAR.values()]
    assert len(statements) > 20
    for statement in statements:
        assert "{" not in statement.replace("{id:", "") or "{{" not in statement
        assert set(re.findall(r"\(\w*:(\w+)", statement)) <= set(module.LABELS), statement
        assert set(re.findall(r"\[\w*:(\w+)\]", statement)) <= {module.HAS_CHUNK, module.HAS_FACT,
                                                                module.MENTIONS}, statement


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_down_server_is_one_line_naming_the_uri():
    uri = f"bolt://127.0.0.1:{_closed_port()}"
    with GraphStore(uri, "neo4j", "x") as store, pytest.raises(FactweaveError) as caught:
        store.verify()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"graph database at {uri}: cannot connect (")
    assert "--graph-uri" in message and "Neo4j" in message
    # Reads and writes retry transient failures for retry_seconds, then say the same line.
    with GraphStore(uri, retry_seconds=0.5) as store, pytest.raises(FactweaveError, match="cannot connect"):
        store.stats()


def test_wrong_password_is_one_line(graph_server):
    with GraphStore(graph_server.uri, graph_server.user, "wrong") as store, \
            pytest.raises(FactweaveError, match="authentication failed") as caught:
        store.verify()
    assert "\n" not in str(caught.value)


def test_bad_uri_is_one_line():
    with pytest.raises(FactweaveError, match="invalid address"):
        GraphStore("http://127.0.0.1:1")


def _folder_served(folder) -> bool:
    with open(folder / "server.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except OSError:
            return True


def _stats_from_another_process(folder) -> dict:
    code = ("import json, sys; from agent.web.arcade import open_graph; "
            "store, server = open_graph(sys.argv[1], None); "
            "print(json.dumps({'stats': store.stats(), 'attached': server.attached})); store.close(); server.stop()")
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_embedded_server_is_shared_by_the_processes_of_one_folder_and_stops_after_the_last(tmp_path):
    folder = tmp_path / "graph"
    store, server = open_graph(folder, None, "ignored", "ignored")
    assert server is not None and server.uri.startswith("bolt://127.0.0.1:") and not server.attached
    assert (folder / "root_password").stat().st_mode & 0o777 == 0o600
    with store:
        write_sample(store)
    # Another process on the same folder (the UI and `factweave serve` on one web) attaches to the
    # running server instead of refusing: it reads what this one wrote.
    seen = _stats_from_another_process(folder)
    assert seen["attached"] and seen["stats"]["facts"] == 2
    # One attached here too; the first user leaves: the server stays up for the second.
    second = EmbeddedGraphServer(folder, start_timeout=60)
    assert second.attached and second.uri == server.uri
    server.stop()
    with GraphStore(second.uri, second.user, second.password, second.database) as attached:
        assert attached.stats()["facts"] == 2
    second.stop()  # the last user: now the server stops and lets go of the folder
    deadline = time.monotonic() + 30
    while _folder_served(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _folder_served(folder) and not (folder / "server.json").exists()
    assert not server.running
    with pytest.raises(FactweaveError, match="embedded server"):
        GraphStore(server.uri, server.user, server.password, server.database,
                   start_hint="the embedded server stopped").verify()

    store, server = open_graph(folder, None, "ignored", "ignored")
    with server, store:
        assert store.stats()["facts"] == 2
        assert store.done_chunks([CHUNK["id"]]) == {CHUNK["id"]}


def test_a_killed_embedded_server_is_started_again_by_the_next_statement(tmp_path):
    import signal

    folder = tmp_path / "graph"
    store, server = open_graph(folder, None)
    with server, store:
        write_sample(store)
        killed = json.loads((folder / "server.json").read_text())["pid"]
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        # The next statement finds the server gone, starts it again on the same data and answers.
        assert store.stats()["facts"] == 2
        assert [f["text"] for f in store.facts_by_ids(["f-paris"])] == [FACTS[0]["text"]]
        assert json.loads((folder / "server.json").read_text())["pid"] != killed


def test_open_graph_with_uri_uses_that_server(graph_server, tmp_path):
    store, server = open_graph(tmp_path, graph_server.uri, graph_server.user, graph_server.password)
    with store:
        assert server is None
        store.verify()
    assert not (tmp_path / "server").exists()


def test_schema_falls_back_to_an_index_when_the_constraint_is_refused(graph, monkeypatch):
    """What Neo4j 4.x or a graph with duplicate ids does: the constraint fails, an index is made."""
    import agent.web.cypher as module

    refused = "CREATE CONSTRAINT FOR n REQUIRE nonsense"  # a syntax error on any backend
    monkeypatch.setattr(module, "SCHEMA", (
        (refused, "CREATE INDEX factweave_probe_id_index IF NOT EXISTS FOR (n:Probe) ON (n.id)"),
        (refused, "CREATE INDEX factweave_fact_id_index IF NOT EXISTS FOR (n:Fact) ON (n.id)"),
    ))
    graph.ensure_schema()
    graph.ensure_schema()
    names = {row["name"] for row in graph._read("SHOW INDEXES", {})}
    assert "factweave_probe_id_index" in names
