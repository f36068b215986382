"""The agent as Model Context Protocol tools, served over stdio: ``ask`` and ``search_facts``.

An MCP client (Claude Desktop, an IDE, an agent framework) starts ``factweave mcp`` as a child
process and talks JSON-RPC over its stdin and stdout. ``ask`` runs the whole pipeline
(:class:`agent.pipeline.FactAgent`) and returns the answer with every fact it states;
``search_facts`` returns the knowledge web's nearest facts with their score parts. Both results
are structured (an output schema per tool) and also sent as JSON text for clients that read
only text. The tool descriptions are prompt files (``prompts/mcp/``): an LLM reads them.

Why the agent is opened in the background: the model, the KB index and the web (an embedded
graph server) take seconds to open, minutes on first use (model conversion, demo-web build),
and MCP clients give up on a server that does not answer ``initialize`` in time. So the server
answers at once, opens the agent in a worker thread, and a tool called before it is ready
waits (with a progress message); when opening fails, the tools answer with the one-line error.

The agent is blocking; each call runs in a worker thread so the event loop keeps serving other
requests, pings and cancellations (a cancelled ``ask`` stops its generation).

Nothing but the protocol may reach stdout: the SDK points file descriptor 1 at stderr while it
serves, so progress bars, logs and child processes write to stderr.

Example (not run: needs a model and a knowledge web)::

    import anyio
    from mcp import Client
    from agent.serve.mcp import build_mcp_server

    async def main(agent):                       # a FactAgent, e.g. from agent.runtime.open_agent
        async with Client(build_mcp_server(agent)) as client:     # in-process, no subprocess
            reply = await client.call_tool("ask", {"question": "Who founded Zorblax Station?"})
            reply.structured_content["answer"], reply.structured_content["facts"]

    anyio.run(main, agent)
"""
# No `from __future__ import annotations`: the SDK reads the tools' annotations at registration
# with inspect.signature(eval_str=True), which sees module globals only, and `Context` is imported
# inside build_mcp_server so that `factweave --help` does not pay for importing the SDK.
import logging
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from functools import partial
from string import Template
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..errors import FactweaveError, first_validation_error
from ..events import AgentEvent, AnswerEvent, StatedFact
from ..pipeline import FactAgent
from ..pipeline.trace import describe_step
from ..prompts import read_prompt
from ..web.web import KnowledgeWeb

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger(__name__)

MAX_K = 100
DEFAULT_K = 10
SERVER_NAME = "factweave"


# --- what the tools return (their output schemas) ------------------------------------------------

class ConversationTurn(BaseModel):
    role: Literal["user", "assistant"] = Field(description="Who said it: 'user' (a question) or 'assistant' (an answer).")
    content: str = Field(description="What was said.")


class AskResult(BaseModel):
    """The agent's answer and the facts behind it."""

    answer: str = Field(description="The short answer; \"I don't know.\" when no fact supports one.")
    supported: bool = Field(description="True when the answer is backed by at least one stated fact.")
    text: str = Field(description="Everything the model wrote (its reasoning, Fact: lines, then the answer).")
    facts: list[StatedFact] = Field(description="Each fact the reply states, in order.")
    timings: dict[str, float] = Field(description="Seconds per step (retrieve_s, rerank_s, plan_s, subquery_s, "
                                                  "tree_build_s, generate_s) and total_s.")
    tokens: dict[str, int] = Field(description="Prompt tokens, those of them read from the cached fixed start "
                                           "(prompt_cached), and generated tokens, over all attempts.")
    trace: dict[str, Any] | None = Field(None, description="Every step of the pipeline (only when "
                                                                  "include_trace was set).")


class FoundFact(BaseModel):
    """A fact of the knowledge web, with why it ranks where it does."""

    fact_id: str = Field(description="The fact's id in the knowledge web.")
    text: str = Field(description="The fact.")
    kind: str = Field(description="'document' (decomposed from a document) or 'triple'.")
    score: float = Field(description="cosine + weight x ppr + weight x passage + weight x lexical (the weights "
                                     "are in the tool's description); the hits are sorted by it.")
    cosine: float = Field(description="Similarity of meaning between the query and the fact.")
    ppr: float = Field(description="Personalized PageRank over the keyword-fact graph, relative to the best fact's.")
    passage: float = Field(description="Similarity of meaning between the query and the fact's passage as a "
                                       "whole (a triple: its own cosine).")
    lexical: float = Field(description="BM25 match of the query's words in the fact, relative to the best "
                                       "found fact's.")
    degree: int = Field(description="How many of the keywords matching the query's the fact is linked to.")
    keywords: list[str] = Field(description="Those keywords (stored keywords close in meaning to a query keyword).")
    source: str = Field(description="Where the fact came from, in one line.")
    provenance: dict[str, Any] = Field(description="Where it came from, as data: document title, source, "
                                                   "character range; or subject, predicate, object, source.")


class SearchFactsResult(BaseModel):
    """The knowledge web's best facts for a query."""

    query: str = Field(description="The query searched.")
    keywords: list[str] = Field(description="The keywords taken from the query.")
    uncovered: list[str] = Field(description="Query keywords that no returned fact is linked to.")
    hits: list[FoundFact] = Field(description="The facts, best first.")


# --- the server -----------------------------------------------------------------------------------

class _AgentSlot:
    """The agent the tools use: given ready, or opened in a worker thread when the server starts
    (and then closed when it stops)."""

    def __init__(self, agent: "FactAgent | Callable[[], FactAgent]") -> None:
        self._given = isinstance(agent, FactAgent)
        self._agent: "FactAgent | None" = agent if isinstance(agent, FactAgent) else None
        self._opener: "Callable[[], FactAgent] | None" = None if isinstance(agent, FactAgent) else agent
        self._error: BaseException | None = None
        self._ready: Any = None           # an anyio.Event, made inside the event loop
        self._lock = threading.Lock()
        self._closed = False

    async def open(self, *, task_status: Any) -> None:
        """Open the agent (a no-op for a given one). Started with ``TaskGroup.start``: tools may
        wait for the agent once this has started. A failure is kept for the tools to report
        (the SDK's stdin reader cannot be interrupted, so the server could not end before its
        client disconnects anyway; a tool error is what a client's user sees)."""
        import anyio

        self._ready = anyio.Event()
        task_status.started()
        if self._opener is None:
            self._ready.set()
            return
        try:
            # Abandoned on shutdown: the thread cannot be interrupted, _open_blocking closes what it opened.
            await anyio.to_thread.run_sync(self._open_blocking, abandon_on_cancel=True)
        except Exception as exc:
            if not isinstance(exc, FactweaveError):
                log.exception("opening the agent failed")
            self._error = exc
        finally:
            self._ready.set()

    def _open_blocking(self) -> None:
        assert self._opener is not None, "open() returns before this for a given agent"
        agent = self._opener()
        with self._lock:
            if not self._closed:
                self._agent = agent
                return
        agent.close()  # the server stopped while the agent was opening

    async def get(self, ctx: Any) -> "FactAgent":
        from mcp.server.mcpserver.exceptions import ToolError

        if not self._ready.is_set():
            await ctx.report_progress(0, None, "opening the model and the knowledge web (first call only)")
            await self._ready.wait()
        if self._agent is None:
            why = self._error if isinstance(self._error, FactweaveError) else "see the server's log"
            raise ToolError(f"the agent could not be opened: {why}")
        return self._agent

    def close(self) -> None:
        with self._lock:
            self._closed = True
            agent, self._agent = self._agent, None
        if agent is not None and not self._given:
            agent.close()


def build_mcp_server(agent: "FactAgent | Callable[[], FactAgent]", *,
                     max_concurrency: int = 1) -> "MCPServer":
    """An MCP server with the tools ``ask`` and ``search_facts`` over ``agent``.

    ``agent`` is a :class:`FactAgent` (the caller keeps owning it), or a function that opens one:
    it is then called in a worker thread when the server starts, the tools wait for it, and it is
    closed when the server stops. ``max_concurrency``: answers generated at once (more wait).

    Example (not run: needs a model and a knowledge web; runs a stdio server)::

        server = build_mcp_server(lambda: open_agent(load_settings(web="my-web")))
        server.run("stdio")
    """
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    if max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1")
    slot = _AgentSlot(agent)
    limiter = anyio.CapacityLimiter(max_concurrency)

    @asynccontextmanager
    async def lifespan(_server: MCPServer):
        async with anyio.create_task_group() as tasks:
            await tasks.start(slot.open)
            try:
                yield {}
            finally:
                tasks.cancel_scope.cancel()
                slot.close()

    class Server(MCPServer):
        """Arguments that do not match a tool's schema are one line naming the argument (the
        SDK sends pydantic's several lines)."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                where, what = first_validation_error(exc.__cause__.errors())
                raise ToolError(f"{name}: argument {where}: {what}") from None

    server = Server(SERVER_NAME, title="factweave: answers built from facts that exist",
                       instructions=read_prompt("mcp/instructions.txt"), version=_version(),
                       lifespan=lifespan, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

    @server.tool(name="ask", title="Answer a question with proof", description=read_prompt("mcp/ask.txt"),
                 annotations=read_only, structured_output=True)
    async def ask(ctx: Context,
                  question: Annotated[str, Field(description=read_prompt("mcp/ask-question.txt"))],
                  include_trace: Annotated[bool, Field(description=read_prompt("mcp/ask-include-trace.txt"))]
                  = False,
                  conversation: Annotated[list[ConversationTurn] | None,
                                          Field(description=read_prompt("mcp/ask-conversation.txt"))] = None,
                  ) -> AskResult:
        # Passed on whole: the agent checks the question and bounds the history by its own options
        # (its one-line error is the tool's).
        history = [turn.model_dump() for turn in conversation or []]
        fact_agent = await slot.get(ctx)
        stop = threading.Event()
        reply = await _in_thread(partial(_answer, fact_agent, question, history, stop, ctx), stop=stop,
                                 limiter=limiter)
        if reply is None:
            raise ToolError("the agent stopped before it answered")
        trace = reply["trace"]
        return AskResult(answer=reply["answer"], supported=trace["supported"], text=reply["text"],
                         facts=reply["facts"],
                         timings=trace["timings"], tokens=trace["tokens"], trace=trace if include_trace else None)

    weights = KnowledgeWeb.SEARCH_DEFAULTS
    search_description = Template(read_prompt("mcp/search_facts.txt")).substitute(
        ppr_weight=weights.ppr_weight, passage_weight=weights.passage_weight, lexical_weight=weights.lexical_weight)
    k_description = Template(read_prompt("mcp/search_facts-k.txt")).substitute(max_k=MAX_K, default_k=DEFAULT_K)

    @server.tool(name="search_facts", title="Search the knowledge web", description=search_description,
                 annotations=read_only, structured_output=True)
    async def search_facts(ctx: Context,
                           query: Annotated[str, Field(description=read_prompt("mcp/search_facts-query.txt"))],
                           # The range is advertised, not validated by the SDK, so that a value out of
                           # range gets our one-line message instead of a pydantic report.
                           k: Annotated[int, Field(description=k_description,
                                                   json_schema_extra={"minimum": 1, "maximum": MAX_K})] = DEFAULT_K,
                           ) -> SearchFactsResult:
        if not query.strip():
            raise ToolError('the query is empty: give a question or keywords, e.g. "Zorblax Station founder"')
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be between 1 and {MAX_K}, not {k}")
        fact_agent = await slot.get(ctx)
        if fact_agent.web is None:
            raise ToolError("this server answers from the knowledge base alone (--tree kb): it has no knowledge "
                            "web to search; start it with --tree both or question")
        found = await _in_thread(partial(fact_agent.web.search, query, k))
        return SearchFactsResult(
            query=found.question, keywords=found.keywords, uncovered=found.uncovered,
            hits=[FoundFact(fact_id=h.id, text=h.text, kind=h.kind, score=h.score, cosine=h.cosine, ppr=h.ppr,
                            passage=h.passage, lexical=h.lexical, degree=h.degree,
                            keywords=h.keywords, source=h.source, provenance=h.provenance) for h in found.hits])

    return server


def _answer(agent: "FactAgent", question: str, history: list[dict[str, str]], stop: threading.Event,
            ctx: Any) -> AnswerEvent | None:
    """Run the agent (in a worker thread), reporting each step as MCP progress; the answer event
    (None when the stream ended before it)."""
    import anyio.from_thread

    final: AnswerEvent | None = None
    steps = 0
    event: AgentEvent
    for event in agent.stream(question, history=history, stop=stop):
        if event["event"] == "step":
            steps += 1
            try:
                anyio.from_thread.run(ctx.report_progress, steps, None, describe_step(event["step"]))
            except RuntimeError:  # the request is gone (cancelled): `stop` ends the stream
                pass
        elif event["event"] == "answer":
            final = event
    return final


async def _in_thread(call: Callable[[], Any], *, stop: threading.Event | None = None, limiter: Any = None) -> Any:
    """``call()`` in a worker thread; agent errors become tool errors (their one-line message
    reaches the client). A cancelled request stops waiting for the thread and sets ``stop``,
    which ends a generation at its next token."""
    import anyio
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True, limiter=limiter)
    except FactweaveError as exc:
        raise ToolError(str(exc)) from None
    finally:
        if stop is not None:
            stop.set()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("factweave")
    except PackageNotFoundError:
        return ""
