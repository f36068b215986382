"""The graph search (personalized PageRank over the keyword-fact graph) and the scoring re-ranker.

The web here is built from the shipped demo corpus (MuSiQue passages, ``agent/data/demo/web``):
its first 100 passages plus the supporting passages of its two-hop question about the Bubye River, on an embedded graph
server of its own.
"""
from __future__ import annotations

import json

import pytest

from agent.models import PRESETS, preset_installed
from agent.settings import DEFAULT_MODEL
from agent.web.graph_search import GraphSearchSettings, personalized_pagerank
from conftest import REPO

DEMO = REPO / "agent" / "data" / "demo" / "web"


@pytest.fixture(scope="module")
def demo_web(tmp_path_factory, embedder):
    from agent.web.decompose import SentenceDecomposer
    from agent.web.documents import Document
    from agent.web.web import KnowledgeWeb

    corpus = json.loads((DEMO / "corpus.json").read_text())
    question = next(q for q in json.loads((DEMO / "questions.json").read_text()) if "Bubye" in q["question"])
    docs = [Document(p["title"], p["text"], "corpus.json") for p in corpus[:100]]
    docs += [Document(p["title"], p["text"], "corpus.json") for p in question["supporting"]]
    web = KnowledgeWeb.open(tmp_path_factory.mktemp("graph-search") / "web", embedder=embedder)
    web.add_documents(list({d.id: d for d in docs}.values()), SentenceDecomposer(), progress=False)
    yield web, question
    web.close()


def test_a_fact_two_steps_away_gets_weight_and_a_dead_end_keeps_none():
    facts = {"f1": ["paris", "france"], "f2": ["france", "euro"], "f3": ["mars"]}
    keywords = {"paris": ["f1"], "france": ["f1", "f2"], "euro": ["f2"]}  # "mars" not fetched
    rank = personalized_pagerank(facts, keywords, {("k", "paris"): 1.0}, damping=0.5, iterations=30)
    assert rank["f1"] > rank["f2"] > 0  # f2 shares "france" with f1, two steps from the seed
    assert rank.get("f3", 0.0) == 0.0  # nothing leads to it
    again = personalized_pagerank(facts, keywords, {("k", "paris"): 1.0}, damping=0.5, iterations=30)
    assert again == rank
    assert personalized_pagerank(facts, keywords, {}, damping=0.5, iterations=30) == {}


def test_graph_search_finds_a_supporting_fact_the_keyword_route_ranks_below_ten(demo_web):
    """The river's passage says where it flows; the keyword route ranks that fact below 10."""
    from agent.web.documents import Document

    web, question = demo_web
    support = {Document(p["title"], p["text"], "").id for p in question["supporting"]}
    keyword_ranked = [h.id for h in web.search(question["question"], k=100, method="keywords").hits]
    graph_top = web.search(question["question"], k=10, method="graph").hits
    found = [h for h in graph_top if h.provenance.get("doc_id") in support]
    assert found, [h.text for h in graph_top]
    late = [h for h in found if h.id not in keyword_ranked[:10]]
    assert late, "every supporting fact the graph search found was already in the keyword route's top 10"
    assert all(h.ppr > 0 and -1 <= h.cosine <= 1 for h in graph_top)  # the score parts are on each hit
    weights = GraphSearchSettings()
    assert all(h.score == pytest.approx(h.cosine + weights.ppr_weight * h.ppr + weights.passage_weight * h.passage
                                        + weights.lexical_weight * h.lexical, abs=1e-5) for h in graph_top)


def test_the_lexical_score_rewards_the_question_s_own_words():
    """BM25 over the candidates: the fact naming both people of a comparison ranks first, a fact
    sharing only stop words with the question gets nothing."""
    from agent.web.graph_search import lexical_scores

    texts = ["Ada Lovelace was born in London in 1815.", "Alan Turing was born in Maida Vale in 1912.",
             "Ada Lovelace and Alan Turing both worked on computing.", "It was the best of times.",
             "Charles Babbage designed the Analytical Engine.", "Grace Hopper wrote the first compiler.",
             "The Colossus computer was built at Bletchley Park.", "London is the capital of England."]
    scores = lexical_scores("Who was born first, Ada Lovelace or Alan Turing?", texts)
    assert scores[2] == max(scores) == 1.0 and scores[3] == scores[4] == 0.0
    assert 0 < scores[0] < 1 and 0 < scores[1] < 1
    assert lexical_scores("Who was it?", texts) == [0.0] * len(texts)  # stop words only


def test_search_is_deterministic(demo_web):
    web, question = demo_web
    text = question["question"]
    first = [(h.id, h.score) for h in web.search(text, k=20).hits]
    assert first and first == [(h.id, h.score) for h in web.search(text, k=20).hits]
    assert web.search(text, k=20).method == "graph"
    narrow = web.search(text, k=20, graph=GraphSearchSettings(dense_k=0))  # keyword seeds alone still work
    assert narrow.hits and all(h.provenance.get("doc_id") for h in narrow.hits)


def test_unknown_search_method_is_refused(demo_web):
    from agent.errors import FactweaveError

    web, question = demo_web
    with pytest.raises(FactweaveError, match="unknown search method"):
        web.search(question["question"], method="pagerank")


@pytest.mark.model
@pytest.mark.skipif(not preset_installed(PRESETS[DEFAULT_MODEL]),
                    reason=f"the default model {DEFAULT_MODEL} is not installed (make install-demo installs it)")
def test_scoring_reranker_puts_the_answering_fact_first():
    """Hand-made cases: the fact that answers is never the retrieval's first."""
    from types import SimpleNamespace

    from agent.rerank.scoring import ScoringReranker

    reranker = ScoringReranker.local(DEFAULT_MODEL)
    cases = [
        ("Where was Mira Quell born?", ["Mira Quell founded Zorblax Station in 1921.",
                                        "Zorblax Station is located on Norvik.", "Mira Quell was born in Oslo.",
                                        "Oslo is the capital of Norway."], 2),
        ("What instrument did Buck Owens play?", ["Buck Owens was born in Sherman, Texas.",
                                                  "Buck Owens died in Bakersfield.", "Buck Owens played the guitar.",
                                                  "Bakersfield is a city in California."], 2),
        ("What is the official language of Germany?", ["Germany is a country in Europe.",
                                                       "Berlin is the capital of Germany.",
                                                       "The official language of Germany is German.",
                                                       "Germany borders France."], 2),
    ]
    for question, texts, answer in cases:
        hits = [SimpleNamespace(id=f"f{i}", text=t, score=1.0 - i / 10) for i, t in enumerate(texts)]
        ordered = reranker.rerank(question, hits)
        assert ordered[0].text == texts[answer], (question, [h.text for h in ordered])
        assert sorted(h.id for h in ordered) == sorted(h.id for h in hits)  # nothing dropped
