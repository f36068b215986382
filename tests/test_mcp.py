"""`factweave mcp`: the real command in a child process, driven over stdio by the MCP SDK's own
client, on SmolLM2, a small knowledge web in a temp folder and the demo KB."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from agent.knowledge.kamel import demo_kamel_root
from agent.knowledge.loaders import load_facts
from agent.web.web import KnowledgeWeb
from agent.web.web import KnowledgeWeb
from agent_fixtures import build_small_web
from conftest import REPO

pytestmark = pytest.mark.model


@dataclass
class McpSession:
    """One client connected to one `factweave mcp` process for the whole module."""

    portal: Any
    client: Any
    stray: list[Exception]              # stdout lines that were not JSON-RPC messages
    stderr: Any

    def call(self, tool: str, arguments: dict[str, Any], **kwargs: Any):
        return self.portal.call(lambda: self.client.call_tool(tool, arguments, **kwargs))


@pytest.fixture(scope="module")
def mcp_web(tmp_path_factory, embedder):
    """A small web in a temp folder (closed again: the server process must hold its graph lock)
    and the text of every fact in it."""
    folder = tmp_path_factory.mktemp("mcp-web") / "web"
    with KnowledgeWeb.open(folder, embedder=embedder) as web:
        build_small_web(web)
        everything = web.fact_vectors.query(embedder.encode(["facts"])[0], k=web.fact_vectors.count())
        texts = {fact["text"] for fact in web.graph.facts_by_ids([hit.id for hit in everything])}
    assert any("Zorblax" in text for text in texts)
    return folder, texts


@pytest.fixture(scope="module")
def session(mcp_web, cache_dir, smollm, tmp_path_factory):
    """`python -m agent.cli mcp --model smollm2-135m --web DIR` as a child process (``smollm``: the
    model is converted into ``cache_dir`` once, and the child loads it from there)."""
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    folder, _ = mcp_web
    home = tmp_path_factory.mktemp("mcp-home")
    (home / "config.toml").write_text("max_tokens = 64\n")  # keeps a developer's own settings out
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "agent.cli", "mcp", "--model", "smollm2-135m", "--web", str(folder)],
        env={"PYTHONPATH": str(REPO), "FACTWEAVE_CACHE": str(cache_dir), "FACTWEAVE_CONFIG": str(home / "config.toml"),
             "HF_HUB_OFFLINE": "1"},
        cwd=str(home))
    stray: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    with (home / "stderr.log").open("w+", encoding="utf-8") as stderr, start_blocking_portal() as portal:
        client = Client(stdio_client(params, errlog=stderr), message_handler=on_message, read_timeout_seconds=600)
        with portal.wrap_async_context_manager(client) as connected:
            yield McpSession(portal, connected, stray, stderr)


def _error_text(result) -> str:
    assert result.is_error
    (content,) = result.content
    return content.text


def test_both_tools_are_listed_with_their_schemas(session):
    tools = {tool.name: tool for tool in session.portal.call(session.client.list_tools).tools}
    assert set(tools) == {"ask", "search_facts"}
    ask, search = tools["ask"], tools["search_facts"]
    assert ask.input_schema["required"] == ["question"]
    assert set(ask.input_schema["properties"]) == {"question", "include_trace", "conversation"}
    assert {"answer", "supported", "text", "facts", "timings"} <= set(ask.output_schema["properties"])
    # A stated fact's schema is the agent's own record (agent.events.StatedFact), described field by field.
    fact = ask.output_schema["$defs"]["StatedFact"]
    assert set(fact["required"]) == {"start", "end", "text", "tree", "fact_id", "source", "provenance"}
    assert all(p.get("description") for p in fact["properties"].values())
    assert search.input_schema["required"] == ["query"]
    assert search.input_schema["properties"]["k"]["maximum"] == 100
    assert {"hits", "keywords"} <= set(search.output_schema["properties"])
    weights = KnowledgeWeb.SEARCH_DEFAULTS  # the score's weights, as the search uses them
    assert f"{weights.ppr_weight} x `ppr`" in search.description and "$" not in search.description
    assert f"{weights.lexical_weight} x\n`lexical`" in search.description
    for tool in (ask, search):  # what an LLM reads to choose a tool and fill its arguments
        assert len(tool.description) > 200 and tool.annotations.read_only_hint
        assert all(p.get("description") for p in tool.input_schema["properties"].values())


def test_search_facts_returns_scored_web_facts_with_provenance(session, mcp_web):
    _, web_facts = mcp_web
    result = session.call("search_facts", {"query": "Who founded Zorblax Station?", "k": 5})
    assert not result.is_error
    found = result.structured_content
    assert json.loads(result.content[0].text) == found  # the same result as text, for text-only clients
    hits = found["hits"]
    assert 0 < len(hits) <= 5 and any("Zorblax" in keyword for keyword in found["keywords"])
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    for hit in hits:
        assert hit["text"] in web_facts
        # The graph search's parts, with the weights the tool's description states.
        weights = KnowledgeWeb.SEARCH_DEFAULTS
        assert hit["score"] == pytest.approx(hit["cosine"] + weights.ppr_weight * hit["ppr"]
                                             + weights.passage_weight * hit["passage"]
                                             + weights.lexical_weight * hit["lexical"], abs=1e-4)
    zorblax = [h for h in hits if "Zorblax" in h["text"]]
    assert zorblax, hits
    for hit in zorblax:
        assert hit["kind"] in ("document", "triple") and hit["source"]
        if hit["kind"] == "document":
            assert {"title", "start", "end"} <= set(hit["provenance"])
        else:
            assert {"subject", "predicate", "object"} <= set(hit["provenance"])


def test_ask_states_only_facts_of_the_web_or_the_kb(session, mcp_web):
    _, web_facts = mcp_web
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    result = session.call("ask", {"question": "Who founded Zorblax Station?", "include_trace": True},
                          progress_callback=progress)
    assert not result.is_error, result.content
    reply = result.structured_content
    assert reply["facts"], reply["text"]  # greedy SmolLM2 states a fact here; none would prove nothing
    kb = {fact.text for fact in load_facts(demo_kamel_root())}
    for fact in reply["facts"]:
        assert reply["text"][fact["start"]:fact["end"]] == fact["text"]
        if fact["tree"] == "question":
            assert fact["text"] in web_facts and fact["provenance"]["kind"] in ("document", "triple")
        else:
            assert fact["text"] in kb and fact["fact_id"].startswith("kb:")
    if reply["supported"]:
        assert reply["facts"] and reply["answer"] != "I don't know."
    else:
        assert reply["answer"] == "I don't know."
    trace = reply["trace"]
    assert trace["answer"] == reply["answer"] and trace["timings"] == reply["timings"]
    assert trace["steps"][0]["step"] == "retrieve" and reply["timings"]["total_s"] > 0
    # a progress message per step of the pipeline while it ran (the client delivers them in tasks of
    # their own, so the last ones may still be on their way)
    assert 0 < len(messages) <= len(trace["steps"]) and messages[0].startswith("retrieved ")


def test_bad_arguments_are_tool_errors_of_one_line(session):
    for tool, arguments, expected in [
        ("ask", {"question": "   "}, "the question is empty"),
        ("ask", {"question": "Where? " * 400}, "the question is too long (2,799 characters; 2,000 at most)"),
        ("search_facts", {"query": "Zorblax", "k": 0}, "k must be between 1 and 100, not 0"),
        ("search_facts", {"query": "Zorblax", "k": 101}, "k must be between 1 and 100, not 101"),
        ("search_facts", {"query": ""}, "the query is empty"),
        ("search_facts", {"query": "Zorblax " * 300}, "the query is too long (2,400 characters; 2,000 at most)"),
        ("ask", {"question": "And where?", "conversation": [{"role": "robot", "content": "hi"}]}, "conversation"),
        ("ask", {"question": "And where?", "conversation": "Laurie Graff"}, "ask: argument conversation:"),
        ("ask", {"include_trace": True}, "ask: argument question: Field required"),
    ]:
        message = _error_text(session.call(tool, arguments))
        assert expected in message and "\n" not in message, message


def test_stdout_carried_only_the_protocol(session):
    assert session.stray == []  # every line the server wrote to stdout was a JSON-RPC message
    session.stderr.seek(0)
    log = session.stderr.read()
    assert "factweave MCP server on stdio (smollm2-135m, tree both)" in log  # the notices went to stderr


def test_a_server_without_a_web_says_so(smollm):
    """In process (the API the command uses): a KB-only agent has nothing to search."""
    import anyio
    from mcp import Client

    from agent.pipeline import FactAgent
    from agent.decoding import FactGenerator
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact
    from agent.serve.mcp import build_mcp_server

    kb = FactIndex.build([Fact("Zorblax Station", "founded by", "Mira Quell")], smollm.tokenizer)
    kb_only = FactAgent(FactGenerator(smollm.model, smollm.tokenizer, kb), None, tree="kb")

    async def search() -> Any:
        async with Client(build_mcp_server(kb_only)) as client:
            return await client.call_tool("search_facts", {"query": "Zorblax Station"})

    message = _error_text(anyio.run(search))
    assert "no knowledge web" in message and "\n" not in message


def test_ask_passes_its_conversation_to_the_agent_which_bounds_it(smollm, agent_calls):
    """In process (the spy sees the agent's calls): ``conversation`` is the question's history,
    passed on whole; the agent reads as much of it as its own options say (the tool cut it at the
    default, so a raised ``max_history_turns`` did nothing through MCP)."""
    import anyio
    from mcp import Client

    from agent.decoding import FactGenerator
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact
    from agent.serve.mcp import build_mcp_server
    from agent.pipeline import FactAgent
    from agent.pipeline.conversation import MAX_TURNS
    from agent_fixtures import FOLLOW_UP, rewrite_step

    kb = FactIndex.build([Fact("Buck Owens", "place of death", "Bakersfield"),
                          Fact("Buck Owens", "instrument", "guitar")], smollm.tokenizer)
    kb_only = FactAgent(FactGenerator(smollm.model, smollm.tokenizer, kb, max_new_tokens=24), None, tree="kb")
    said = "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"
    history = [{"role": "user", "content": FOLLOW_UP[0]}, {"role": "assistant", "content": said}]
    older = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"older turn {i}"} for i in range(6)]

    raised = FactAgent(kb_only.generator, None, tree="kb", max_history_turns=10)

    async def calls() -> list[Any]:
        async with Client(build_mcp_server(kb_only)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            asked = [tools["ask"],
                     await client.call_tool("ask", {"question": FOLLOW_UP[1], "conversation": history,
                                                    "include_trace": True}),
                     await client.call_tool("ask", {"question": FOLLOW_UP[1], "conversation": older + history,
                                                    "include_trace": True}),
                     await client.call_tool("ask", {"question": FOLLOW_UP[0]})]
        async with Client(build_mcp_server(raised)) as client:
            return [*asked, await client.call_tool("ask", {"question": FOLLOW_UP[1], "conversation": older + history,
                                                           "include_trace": True})]

    tool, with_history, long, alone, long_raised = anyio.run(calls)
    schema = tool.input_schema["properties"]["conversation"]
    assert "follow-up" in schema["description"] and "question" in tool.input_schema["required"]
    assert [c["history"] for c in agent_calls] == [history, older + history, [], older + history]
    assert all(c["question"] == q for c, q in zip(agent_calls, [FOLLOW_UP[1], FOLLOW_UP[1], FOLLOW_UP[0],
                                                                FOLLOW_UP[1]]))
    for result in (with_history, long, alone, long_raised):
        assert not result.is_error, result.content
    rewrite = rewrite_step(with_history.structured_content["trace"])
    assert rewrite is not None and rewrite["question"] == FOLLOW_UP[1] and rewrite["history_turns"] == 2
    # What the agent read the follow-up with: its own bound, the default or the raised one.
    assert rewrite_step(long.structured_content["trace"])["history_turns"] == MAX_TURNS
    assert rewrite_step(long_raised.structured_content["trace"])["history_turns"] == len(older + history) == 8


def test_an_agent_that_cannot_open_is_reported_by_the_tools():
    """In process: the opener fails while the server serves; every tool call says why."""
    import anyio
    from mcp import Client

    from agent.errors import FactweaveError
    from agent.serve.mcp import build_mcp_server

    def cannot_open():
        raise FactweaveError("no knowledge web in /nowhere")

    async def calls() -> list[Any]:
        async with Client(build_mcp_server(cannot_open)) as client:
            return [await client.call_tool("ask", {"question": "Who founded Zorblax Station?"}),
                    await client.call_tool("search_facts", {"query": "Zorblax"})]

    for result in anyio.run(calls):
        assert _error_text(result).endswith("the agent could not be opened: no knowledge web in /nowhere")


def test_the_command_prints_why_it_cannot_open_and_exits_1(tmp_path):
    """The real command: `Error: ...` on stderr while it serves, nothing on stdout, exit 1 once its
    client goes away."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "FACTWEAVE_CACHE": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-m", "agent.cli", "mcp", "--model", "no-such-model"], cwd=tmp_path,
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, child.kill)
    watchdog.start()
    try:
        errors = []
        for line in child.stderr:  # stdin is still open: the server is serving
            if line.startswith("Error: "):
                errors.append(line)
                break
        child.stdin.close()  # the client goes away
        assert child.wait() == 1 and child.stdout.read() == ""
    finally:
        watchdog.cancel()
        child.kill()
        child.stdout.close()
        child.stderr.close()
    assert errors and errors[0].startswith("Error: unknown model 'no-such-model'")


def test_help_shows_an_example_and_a_client_configuration_that_parses():
    from click.testing import CliRunner

    from agent.cli.main import cli

    out = CliRunner().invoke(cli, ["mcp", "--help"]).output
    assert "Example:" in out and "factweave mcp --web" in out
    snippet = out[out.index('{"mcpServers"'):out.index("Options:")]
    entry = json.loads(snippet)["mcpServers"]["factweave"]
    assert entry["command"].endswith("factweave") and entry["args"][0] == "mcp"


# Any arguments an MCP client may send (Hypothesis): an answer, or a tool error of one line, never
# a crash of the server, a traceback or a hang. Valid questions are answered by SmolLM2 (kept few
# by the strategy: most examples are malformed).
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=10)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
_turns = st.lists(st.fixed_dictionaries({}, optional={"role": st.sampled_from(["user", "assistant", "system", "x"])
                                                      | _values, "content": st.text(max_size=20) | _values}),
                  max_size=2)
_arguments = st.dictionaries(st.sampled_from(["question", "query", "k", "conversation", "include_trace", "tree"]),
                             _values | _turns | st.integers(-5, 200), max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(["ask", "search_facts"]), arguments=_arguments)
def test_any_arguments_are_answered_or_refused_in_one_line(session, tool, arguments):
    result = session.call(tool, arguments)
    if result.is_error:
        text = _error_text(result)
        assert text and "\n" not in text and "Traceback" not in text, text
    else:
        assert result.structured_content is not None
        assert ("answer" in result.structured_content) if tool == "ask" else ("hits" in result.structured_content)
