"""The knowledge web end to end, on the real embedded graph server and real embeddings."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import DATA, REPO

from agent.errors import FactweaveError
from agent.knowledge.facts import Fact
from agent.knowledge.loaders import load_facts
from agent.web.decompose import SentenceDecomposer
from agent.web.documents import Document, read_documents
from agent.web.web import DEFAULT_DEGREE_WEIGHT, KnowledgeWeb

WEB = DATA / "web"
DOCS = [WEB / "notes.md", WEB / "corpus.json", WEB / "rows.jsonl"]
INJECTIONS = [
    '"}) MATCH (n) DETACH DELETE n //',
    "' OR 1=1 --",
    "`Fact`) DETACH DELETE f RETURN 1 //",
    "$text {id: 'x'} CALL db.labels()",
]


@pytest.fixture()
def open_web(tmp_path, graph, graph_server, embedder):
    """Open webs on the (emptied) test graph server; closed after the test."""
    opened = []

    def _open(name: str = "web", **options) -> KnowledgeWeb:
        web = KnowledgeWeb.open(tmp_path / name, embedder=embedder, graph_uri=graph_server.uri,
                                graph_user=graph_server.user, graph_password=graph_server.password,
                                graph_database=graph_server.database, **options)
        opened.append(web)
        return web

    yield _open
    for web in opened:
        web.close()


def test_build_search_and_provenance(open_web):
    web = open_web()
    report = web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    assert report.documents == 4 and report.facts > 8
    result = web.search("Who founded Zorblax Station?", k=5)  # the graph search
    assert result.hits, result
    assert result.method == "graph"
    top = result.hits[0]
    assert "founded" in top.text and "Zorblax Station" in top.text
    assert top.degree >= 1 and top.keywords and top.ppr > 0
    route = web.search("Who founded Zorblax Station?", k=5, method="keywords").hits  # the paper's route
    assert "founded" in route[0].text and "Zorblax Station" in route[0].text
    assert all(h.score == pytest.approx(h.cosine + DEFAULT_DEGREE_WEIGHT * h.degree) for h in route)
    paper = web.search("Who founded Zorblax Station?", k=5, method="keywords", degree_weight=1.0).hits
    assert all(h.score == pytest.approx(h.cosine + h.degree) for h in paper)
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    # Provenance points at the exact words of the document the fact came from.
    docs = {d.id: d for d in read_documents(DOCS)}
    for hit in result.hits:
        p = hit.provenance
        assert docs[p["doc_id"]].title == p["title"]
        assert 0 <= p["start"] < p["end"] <= len(docs[p["doc_id"]].text)


def test_rebuild_adds_nothing(open_web):
    web = open_web()
    web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    before = web.stats()
    again = web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    assert again.facts == 0 and again.chunks_skipped == again.chunks > 0
    assert web.stats() == before
    # A web built before its chunks were embedded (the passage score): adding its documents
    # again embeds them, and nothing else changes.
    assert before["chunk_vectors"] > 0
    web.chunk_vectors.delete(web.graph.chunks_of_documents([d.id for d in read_documents(DOCS)]))
    web.chunk_vectors.flush()
    assert web.stats()["chunk_vectors"] == 0
    web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    assert web.stats() == before


def test_triples_enter_the_same_web(open_web):
    web = open_web()
    web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    report = web.add_triples(load_facts(WEB / "triples.tsv"), source="triples.tsv", progress=False)
    assert report.facts == 2
    hits = web.search("Where was Mira Quell born?", k=5).hits
    triple = next(h for h in hits if h.kind == "triple")
    assert triple.text == "<Mira Quell> <place of birth> <Oslo> ."
    assert triple.provenance["subject"] == "Mira Quell" and "triples.tsv" in triple.source
    assert set(triple.keywords) >= {"mira quell"}
    before = web.stats()
    web.add_triples(load_facts(WEB / "triples.tsv"), source="triples.tsv", progress=False)
    assert web.stats() == before


def test_every_fact_of_the_web_page_by_page(open_web):
    """``facts()`` reads the whole graph in id-ordered pages (what a KB tree of the web is built from)."""
    web = open_web()
    web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    web.add_triples(load_facts(WEB / "triples.tsv"), source="triples.tsv", progress=False)
    total = web.stats()["facts"]
    rows = list(web.graph.all_facts(page_size=3))  # many pages, the last one short or empty
    assert len(rows) == total and len({r["id"] for r in rows}) == total
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    facts = list(web.facts(page_size=total))  # exactly one full page, then an empty one
    assert [f.text for f in facts] == [r["text"] for r in rows]
    triples = [f for f in facts if not f.statement]
    assert {(f.subject, f.predicate, f.object) for f in triples} == {
        ("Zorblax Station", "located on", "Norvik"), ("Mira Quell", "place of birth", "Oslo")}
    docs = {d.title: d.text for d in read_documents(DOCS)}
    for fact in facts:
        if fact.statement:  # a statement names its document and the characters it came from
            title, span = fact.source.rsplit(" [", 1)
            start, end = (int(x) for x in span.rstrip("]").split(":"))
            assert title in docs and 0 <= start < end <= len(docs[title])


def test_cypher_injection_is_plain_text(open_web):
    web = open_web()
    web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    docs = [Document(f"Injection {i}", f"The string {text} was typed by Mira Quell.", "evil.json")
            for i, text in enumerate(INJECTIONS)]
    web.add_documents(docs, SentenceDecomposer(), progress=False)
    stats = web.stats()
    for text in INJECTIONS:
        result = web.search(f"Did Mira Quell type {text}?", k=20)
        assert any(text in hit.text for hit in result.hits), text
    assert web.stats() == stats
    assert stats["facts"] >= len(INJECTIONS) + 8


def test_other_embedder_is_refused(open_web, tmp_path, graph_server):
    open_web().close()

    class Other:
        name, dim, fingerprint = "other", 384, "other:384"

    with pytest.raises(FactweaveError, match="built with embedder"):
        KnowledgeWeb.open(tmp_path / "web", embedder=Other(), graph_uri=graph_server.uri,
                          graph_user=graph_server.user, graph_password=graph_server.password,
                          graph_database=graph_server.database)


def test_pinecone_backend_gives_the_same_hits(open_web, graph, pinecone_server, embedder, monkeypatch):
    question = "Who founded Zorblax Station?"
    pinecone_server.reset(dimension=embedder.dim)
    monkeypatch.setenv("PINECONE_API_KEY", pinecone_server.api_key)
    remote = open_web("remote", vectors="pinecone", pinecone_index=pinecone_server.index_name,
                      pinecone_host=pinecone_server.url, pinecone_namespace="t1")
    remote.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    got = [h.id for h in remote.search(question, k=5).hits]
    assert remote.stats()["keyword_vectors"] == remote.stats()["keywords"] > 0
    remote.close()

    graph.clear()  # the same graph server: start the local web from nothing
    local = open_web("local")
    local.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    assert [h.id for h in local.search(question, k=5).hits] == got


def _build_cmd(corpus, folder, server):
    return [sys.executable, "-m", "agent.cli", "web", "build", str(corpus), "--web", str(folder),
            "--graph-uri", server.uri, "--graph-user", server.user, "--graph-database", server.database,
            "--decomposer", "sentences", "--json"]


def test_killed_build_resumes_to_the_same_counts(tmp_path, graph, graph_server, cache_dir):
    # 60 of the demo corpus's paragraphs: enough to be killed midway, a third of the time of all 196
    demo = json.loads((REPO / "agent" / "data" / "demo" / "web" / "corpus.json").read_text(encoding="utf-8"))
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(demo[:60]), encoding="utf-8")
    env = {**os.environ, "FACTWEAVE_CACHE": str(cache_dir), "PYTHONPATH": str(REPO),
           "FACTWEAVE_GRAPH_PASSWORD": graph_server.password}
    proc = subprocess.Popen(_build_cmd(corpus, tmp_path / "a", graph_server), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if graph.stats()["chunks"] > 0:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    at_kill = graph.stats()["chunks"]
    assert at_kill > 0, "the build was killed before it stored anything"

    done = subprocess.run(_build_cmd(corpus, tmp_path / "a", graph_server), env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)
    assert resumed["documents"]["chunks_skipped"] == at_kill

    graph.clear()
    whole = subprocess.run(_build_cmd(corpus, tmp_path / "b", graph_server), env=env, capture_output=True,
                           text=True, timeout=600, check=False)
    assert whole.returncode == 0, whole.stderr
    uninterrupted = json.loads(whole.stdout)
    assert resumed["stats"] == uninterrupted["stats"]
    total = uninterrupted["stats"]["chunks"]
    assert at_kill < total, f"the build was not interrupted midway ({at_kill} of {total} chunks stored)"
    assert uninterrupted["documents"]["documents"] == 60 and uninterrupted["stats"]["facts"] > 150


def test_fact_finding_loop_is_bounded(open_web, local_chat):
    web = open_web()
    web.add_documents(read_documents(DOCS), SentenceDecomposer(), progress=False)
    covered = web.find_facts("Who founded Zorblax Station?", k=5, client=local_chat, max_subqueries=2)
    assert covered.uncovered == [] and covered.subqueries == []  # nothing missing: no model call
    question = "Who founded Zorblax Station, and which violin did Paganini prefer?"
    result = web.find_facts(question, k=5, client=local_chat, max_subqueries=2)
    assert "Paganini" in result.uncovered or "violin" in result.uncovered
    assert 1 <= len(result.subqueries) <= 2, result.subqueries
    assert all(q.strip() and q.casefold() != question.casefold() for q in result.subqueries)
    assert any("Zorblax Station" in hit.text for hit in result.hits)


def test_a_common_keyword_fetches_a_bounded_number_of_facts(open_web):
    """The keyword route scores at most ``candidates`` facts, those linked to most question keywords first."""
    web = open_web()
    streets = [Fact("Velmora", "has street", f"Lantern Row {i}") for i in range(40)]
    web.add_triples([*streets, Fact("Velmora", "mayor", "Odile Fenn")], source="velmora.tsv", progress=False)
    question = "Is Odile Fenn the mayor of Velmora?"
    everything = web.search(question, k=100, method="keywords").hits
    assert len(everything) == 41
    bounded = web.search(question, k=100, method="keywords", candidates=10).hits
    assert len(bounded) == 10
    assert bounded[0].text == "<Velmora> <mayor> <Odile Fenn> ."  # two keywords matched: kept and first


def test_two_openers_of_one_web_share_it_and_see_each_others_writes(tmp_path, embedder):
    """The chat UI and `factweave serve` on one web: the second attaches to the first's embedded
    graph server; each one's additions reach the other's search; the server outlives the first."""
    folder = tmp_path / "shared"
    first = KnowledgeWeb.open(folder, embedder=embedder)
    second = KnowledgeWeb.open(folder, embedder=embedder)
    try:
        first.add_triples([Fact("Velmora", "mayor", "Odile Fenn")], source="a.tsv", progress=False)
        assert "<Velmora> <mayor> <Odile Fenn> ." in [h.text for h in second.search("Who is the mayor of Velmora?").hits]
        second.add_triples([Fact("Brisk", "harbour master", "Tomas Vey")], source="b.tsv", progress=False)
        assert "<Brisk> <harbour master> <Tomas Vey> ." in [
            h.text for h in first.search("Who is the harbour master of Brisk?").hits]
        first.close()
        assert second.stats()["facts"] == 2  # the graph server outlived the process that started it
        assert "<Velmora> <mayor> <Odile Fenn> ." in [h.text for h in second.search("Who is the mayor of Velmora?").hits]
    finally:
        first.close()
        second.close()
    with KnowledgeWeb.open(folder, embedder=embedder) as again:  # nothing of either was lost
        assert again.stats()["facts"] == 2
        assert again.fact_vectors.count() == 2 and again.keyword_vectors.count() == 4


def test_removing_sources_leaves_the_counts_of_a_web_built_without_them(tmp_path, open_web, graph):
    """`web remove`: a Markdown file, a JSON corpus (its items are `corpus.json#N`) and a triple
    file (its facts are `triples.tsv:N`) removed from a web count what a web built without them
    counts (documents, chunks, facts, keywords, edges, vectors); their facts are no longer found;
    a removal cut short after its journal is finished by the next one; an unknown source is one
    line and deletes nothing."""
    notes, corpus, rows = (str(p) for p in DOCS)
    triples = str(WEB / "triples.tsv")
    more = tmp_path / "more.tsv"
    more.write_text("Quillon Dock\tbuilt by\tAsha Merrow\nZorblax Station\tlocated on\tNorvik\n")

    def build(web, documents, triple_files):
        web.add_documents(read_documents(documents), SentenceDecomposer(), progress=False)
        for path in triple_files:
            web.add_triples(load_facts(path), source=str(path), progress=False)

    def counts(web):
        return {k: v for k, v in web.stats().items() if k != "decomposed_chunks_cached"}

    web = open_web("all")
    build(web, [notes, corpus, rows], [triples, more])
    before = counts(web)
    with pytest.raises(FactweaveError, match=r"nothing in .* comes from nowhere\.md"):
        web.remove(["nowhere.md"])
    assert counts(web) == before

    # Cut short after the journal (a kill): the next removal finishes it first.
    from agent.web import removal

    real_finish = removal._finish
    removal._finish = lambda *_: (_ for _ in ()).throw(OSError("killed"))
    try:
        with pytest.raises(OSError):
            web.remove([notes])
    finally:
        removal._finish = real_finish
    assert (web.folder / removal.JOURNAL).exists() and counts(web) == before
    report = web.remove([corpus, more])
    assert report.resumed and not (web.folder / removal.JOURNAL).exists()
    assert report.documents >= 1 and report.facts >= 1
    removed = counts(web)
    found = [h.text for h in web.search("Who built Quillon Dock?", k=10).hits]
    assert not any("Quillon Dock" in text for text in found)

    graph.clear()  # the same graph server: the web without those sources, built from nothing
    fresh = open_web("without")
    build(fresh, [rows], [triples])
    assert removed == counts(fresh)
    assert removed["documents"] < before["documents"] and removed["keywords"] < before["keywords"]


def test_adding_a_changed_file_replaces_its_old_version(tmp_path, open_web, graph):
    """A file is its source: adding it again unchanged changes nothing; a changed Markdown file,
    JSON corpus (an item edited, one dropped) or triple file (a line edited) replaces what the web
    held from it, and removing then re-adding a changed file works too. The web then counts what
    a fresh build of the final files counts, and lists each source with its facts."""
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    for folder in (v1, v2):
        folder.mkdir()
    (v1 / "notes.md").write_text((WEB / "notes.md").read_text())
    (v2 / "notes.md").write_text((WEB / "notes.md").read_text().replace("studies sea ice", "studies krill"))
    corpus = json.loads((WEB / "corpus.json").read_text())
    (v1 / "corpus.json").write_text(json.dumps(corpus))
    (v2 / "corpus.json").write_text(json.dumps([{**corpus[0], "text": corpus[0]["text"].replace("1951", "1952")}]))
    (v1 / "facts.tsv").write_text("Zorblax Station\tlocated on\tNorvik\nMira Quell\tplace of birth\tOslo\n")
    (v2 / "facts.tsv").write_text("Zorblax Station\tlocated on\tNorvik\nMira Quell\tplace of birth\tBergen\n")

    def add(web, folder, files):
        docs = web.add_documents(read_documents([folder / f for f in files if f != "facts.tsv"]),
                                 SentenceDecomposer(), progress=False)
        triples = web.add_triples(load_facts(folder / "facts.tsv"), source="facts.tsv", progress=False)
        return docs, triples

    def counts(web):
        return {k: v for k, v in web.stats().items() if k != "decomposed_chunks_cached"}

    files = ["notes.md", "corpus.json", "facts.tsv"]
    web = open_web("changing")
    add(web, v1, files)
    before = counts(web)
    docs, triples = add(web, v1, files)  # unchanged: a no-op
    assert counts(web) == before and "replaced" not in docs.extra and "replaced" not in triples.extra

    docs, triples = add(web, v2, ["corpus.json", "facts.tsv"])
    assert docs.extra["replaced"]["documents"] == 2 and triples.extra["replaced"]["facts"] == 1
    web.remove(["notes.md"])
    add(web, v2, ["notes.md", "facts.tsv"])
    changed = counts(web)
    texts = [h.text for h in web.search("Where was Mira Quell born?", k=10).hits]
    assert "<Mira Quell> <place of birth> <Bergen> ." in texts and not any("Oslo>" in t for t in texts)
    assert not any("1951" in t for t in texts) and not any("sea ice" in t for t in [f.text for f in web.facts()])
    listed = {row["source"]: (row["documents"], row["facts"]) for row in web.sources()}
    assert set(listed) == {"notes.md", "corpus.json", "facts.tsv"} and listed["facts.tsv"] == (0, 2)
    assert listed["corpus.json"][0] == 1 and listed["notes.md"][0] == 1

    graph.clear()  # the same graph server: the final files built from nothing
    fresh = open_web("fresh")
    add(fresh, v2, files)
    assert changed == counts(fresh)


def test_a_writer_that_cannot_have_the_lock_says_so_in_one_line_and_writes_nothing(open_web):
    """Another writer (here: the lock held as another process holds it) makes a write wait at
    most ``lock_wait_s``, then fail in one line naming the folder; once it is free, it writes."""
    import fcntl

    from agent.knowledge.facts import Fact

    web = open_web()
    web.lock_wait_s = 1.0
    fact = Fact("Quillon Dock", "built by", "Asha Merrow")
    with open(web.folder / "write.lock", "a+", encoding="utf-8") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # a second open file: as a `factweave web build` holds it
        started = time.monotonic()
        with pytest.raises(FactweaveError, match=r"being written by another writer .* more than 1 s") as raised:
            web.add_triples([fact], source="docks.tsv", progress=False)
        assert 1.0 <= time.monotonic() - started < 10 and "\n" not in str(raised.value)
        assert str(web.folder) in str(raised.value)
        assert web.stats()["facts"] == 0
    web.add_triples([fact], source="docks.tsv", progress=False)
    assert web.stats()["facts"] == 1
