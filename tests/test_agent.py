"""The agent pipeline on the real model, the real embedded graph server and real embeddings."""
from __future__ import annotations

import json

import pytest

from agent.agent import FactAgent
from agent.knowledge.kamel import demo_kamel_root, kamel_questions
from agent.knowledge.loaders import load_facts
from agent.web.decompose import SentenceDecomposer
from agent.web.documents import read_documents
from agent.web.web import KnowledgeWeb
from conftest import DATA

pytestmark = pytest.mark.model
WEB = DATA / "web"


@pytest.fixture()
def small_web(tmp_path, graph, graph_server, embedder):
    web = KnowledgeWeb.open(tmp_path / "web", embedder=embedder, graph_uri=graph_server.uri,
                            graph_user=graph_server.user, graph_password=graph_server.password,
                            graph_database=graph_server.database)
    web.add_documents(read_documents([WEB / "notes.md", WEB / "corpus.json", WEB / "rows.jsonl"]),
                      SentenceDecomposer(), progress=False)
    web.add_triples(load_facts(WEB / "triples.tsv"), source="triples.tsv", progress=False)
    yield web
    web.close()


@pytest.mark.parametrize("tree", ["question", "both"])
def test_every_span_is_a_retrieved_or_kb_fact_and_the_trace_is_json(demo_generator, small_web, tree):
    agent = FactAgent(demo_generator, small_web, tree=tree, k=8)
    kb = {f.text for f in load_facts(demo_kamel_root())}
    questions = ["Who founded Zorblax Station?", "Where was Mira Quell born?",
                 *[q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=3)]]
    spans = 0
    for question in questions:
        reply = agent.answer(question)
        trace = json.loads(json.dumps(reply.trace))  # plain data all the way down
        retrieved = {h["text"]: h for h in trace["steps"]["retrieved"]}
        attempts = trace["steps"]["attempts"]
        assert attempts[0]["tree"] == ("question" if retrieved or tree == "question" else "kb")
        for fact in reply.facts:
            spans += 1
            assert reply.text[fact["start"]:fact["end"]] == fact["text"]
            if "provenance" in fact:  # from the per-question tree: a retrieved fact, with its source
                assert fact["text"] in retrieved and fact["web_fact_id"] == retrieved[fact["text"]]["id"]
            else:
                assert tree == "both" and fact["text"] in kb
        if tree == "question":
            assert len(attempts) == 1
        assert trace["answer"] == reply.answer and "retrieve_s" in trace["timings"]
    assert spans > 0, "no Fact: line in any answer"


def test_kb_tree_is_plain_constrained_generation(demo_generator):
    agent = FactAgent(demo_generator, None, tree="kb")
    question = kamel_questions(demo_kamel_root(), split="dev", limit=1)[0].text
    reply = agent.answer(question)
    direct = demo_generator.answer(question)
    assert reply.text == direct.text and [f["id"] for f in reply.facts] == [f.id for f in direct.facts]
    assert "retrieved" not in reply.trace["steps"]


def test_bad_configurations_are_refused(demo_generator):
    with pytest.raises(ValueError, match="tree must be"):
        FactAgent(demo_generator, None, tree="forest")
    with pytest.raises(ValueError, match="knowledge web"):
        FactAgent(demo_generator, None, tree="question")
