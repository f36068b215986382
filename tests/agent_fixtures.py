"""Fixtures for the agent's interfaces (server, LangChain, MCP): one small real knowledge web with
its own embedded graph server for the whole session, and the agent over it on SmolLM2."""
from __future__ import annotations

import pytest

from conftest import DATA

WEB = DATA / "web"


def build_small_web(web) -> None:
    """The test corpus (Zorblax Station, Mira Quell, Norvik, Tomas Berg) and two triples."""
    from agent.knowledge.loaders import load_facts
    from agent.web.decompose import SentenceDecomposer
    from agent.web.documents import read_documents

    web.add_documents(read_documents([WEB / "notes.md", WEB / "corpus.json", WEB / "rows.jsonl"]),
                      SentenceDecomposer(), progress=False)
    web.add_triples(load_facts(WEB / "triples.tsv"), source="triples.tsv", progress=False)


@pytest.fixture(scope="session")
def agent_web(tmp_path_factory, embedder):
    """A built knowledge web (embedded graph server of its own, local vectors), open for the session."""
    from agent.web.web import KnowledgeWeb

    web = KnowledgeWeb.open(tmp_path_factory.mktemp("agent-web") / "web", embedder=embedder)
    build_small_web(web)
    yield web
    web.close()


@pytest.fixture(scope="session")
def small_agent(demo_generator, agent_web, local_chat):
    """The whole pipeline: retrieval from ``agent_web``, re-ranking and sub-queries by SmolLM2, the
    per-question tree first, then the demo KB (``tree="both"``)."""
    from agent.pipeline import FactAgent
    from agent.rerank import Reranker

    # A short reply budget: the re-ranker only has to name fact numbers (keeps the tests quick).
    return FactAgent(demo_generator, agent_web, Reranker(local_chat, max_tokens=12), tree="both", k=8)
