"""Fixtures for the agent's interfaces (server, LangChain, MCP): one small real knowledge web with
its own embedded graph server for the whole session, and the agent over it on SmolLM2."""
from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from conftest import DATA

WEB = DATA / "web"

if TYPE_CHECKING:
    from agent.events import AgentEvent


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


@pytest.fixture
def agent_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every ``FactAgent.answer`` and ``FactAgent.stream`` call during the test, as
    ``{"method", "question", "history"}``, in order; the real methods still run. It shows what
    an entry point handed the agent (the UI, the server and MCP run the agent in other threads of
    this process)."""
    from agent.pipeline import FactAgent

    calls: list[dict[str, Any]] = []
    answer, stream = FactAgent.answer, FactAgent.stream

    def record(method: str, question: str, kwargs: dict[str, Any]) -> None:
        calls.append({"method": method, "question": question,
                      "history": [dict(t) for t in kwargs.get("history") or []]})

    def spy_answer(self: FactAgent, question: str, **kwargs: Any) -> Any:
        record("answer", question, kwargs)
        return answer(self, question, **kwargs)

    def spy_stream(self: FactAgent, question: str, **kwargs: Any) -> Generator[AgentEvent, None, None]:
        record("stream", question, kwargs)
        events = stream(self, question, **kwargs)  # in the call, as the agent's: it refuses bad input here

        def relay() -> Generator[AgentEvent, None, None]:
            try:
                yield from events
            finally:
                events.close()

        return relay()

    monkeypatch.setattr(FactAgent, "answer", spy_answer)
    monkeypatch.setattr(FactAgent, "stream", spy_stream)
    return calls


FOLLOW_UP = ["Where did Buck Owens die?", "What instrument did he play?"]
"""Two turns of one conversation: the second names no one, the first says who "he" is (the demo
KB has Buck Owens' place of death, Bakersfield, and his instrument, guitar)."""
NEEDS_REWRITING = "needs the follow-up rewriting and the whole-KB tree on main (enable at merge)"


def rewrite_step(trace: dict) -> dict | None:
    """The trace's rewrite step (None until the pipeline on this branch writes one)."""
    return next((s for s in trace.get("steps", []) if s.get("step") == "rewrite"), None)
