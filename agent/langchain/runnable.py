"""The agent as a LangChain ``Runnable``: a question in, the answer with its facts and trace out."""
from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from typing import Any, Optional, Union, cast

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from typing_extensions import NotRequired, TypedDict

from ..errors import FactweaveError
from ..events import AgentEvent
from ..pipeline import FactAgent
from ..pipeline.conversation import as_turns, split_conversation


class AgentQuestion(TypedDict):
    """The mapping form of the agent's input (``beams``: beam width for this question;
    ``history``: the earlier turns, oldest first, as ``{"role", "content"}`` or LangChain messages)."""

    question: str
    beams: NotRequired[Optional[int]]
    history: NotRequired[Sequence[Any]]


class AgentConversation(TypedDict):
    """A whole conversation: the last user message is the question, the turns before it its history."""

    messages: Sequence[Any]
    beams: NotRequired[Optional[int]]


AgentInput = Union[str, AgentQuestion, AgentConversation, Sequence[Any]]


class FactAgentRunnable(Runnable[AgentInput, Mapping[str, Any]]):
    """A :class:`~agent.pipeline.FactAgent` as a LangChain ``Runnable``.

    Input: a question; ``{"question": ..., "history": [...], "beams": n}``; a conversation, as a
    list of messages (LangChain messages, ``{"role", "content"}`` dicts or ``(role, content)``
    pairs) or ``{"messages": [...]}``, whose last user message is the question and whose earlier
    turns go to the agent as its history (which it bounds, see :mod:`agent.pipeline.conversation`), so a
    follow-up is understood from them. ``invoke`` returns
    ``AgentAnswer.as_dict()`` (``question``, ``answer``, ``text``, ``facts``, ``trace``);
    ``stream`` yields the agent's events (``step``, ``token``, ``fact``) and last the
    ``{"event": "answer", ...}`` event with the same dict; ``batch``, ``ainvoke``, ``astream``,
    ``with_config``, callbacks and composition with ``|`` come from ``Runnable``.

    Why a subclass and not a chain around ``agent.graph``: the compiled LangGraph graph takes and
    returns the pipeline's internal state (a stop event, retrieved hit objects), and turning
    that into the answer with its trace and timings is :class:`FactAgent`'s job; delegating to
    ``FactAgent.answer`` and ``FactAgent.stream`` keeps one home for it. The graph still runs as
    a child of this runnable's run, so tracers see its nodes.

    Example (not run: needs a model and a knowledge web)::

        from agent.runtime import open_agent

        chain = FactAgentRunnable(open_agent())
        chain.invoke("Who founded Zorblax Station?")["answer"]
        for event in chain.stream({"question": "Where was Mira Quell born?"}):
            if event["event"] == "token":
                print(event["text"], end="", flush=True)
        chain.batch(["Who founded Zorblax Station?", "Where was Mira Quell born?"])
        chain.invoke([HumanMessage("Who founded Zorblax Station?"), AIMessage(reply["text"]),
                      HumanMessage("Where was she born?")])
    """

    def __init__(self, agent: FactAgent, *, name: str = "factweave") -> None:
        if not isinstance(agent, FactAgent):
            raise TypeError(f"FactAgentRunnable wraps a FactAgent, not {type(agent).__name__}")
        self.agent = agent
        self.name = name

    def invoke(self, input: AgentInput, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        return cast(dict[str, Any], self._call_with_config(self._answer, input, config, run_type="chain"))

    def stream(self, input: AgentInput, config: RunnableConfig | None = None,
               **kwargs: Any) -> Generator[AgentEvent, None, None]:
        events = self._transform_stream_with_config(iter([input]), self._events, config, run_type="chain")
        yield from cast(Iterator[AgentEvent], events)

    async def astream(self, input: AgentInput, config: RunnableConfig | None = None,
                      **kwargs: Any) -> AsyncIterator[AgentEvent]:
        # Runnable's default astream would yield only the final output; the agent is blocking,
        # so the sync event stream is read in a worker thread, one event at a time.
        events = self.stream(input, config, **kwargs)
        done = object()
        try:
            while (event := await run_in_executor(None, next, events, done)) is not done:
                yield cast(AgentEvent, event)
        finally:
            events.close()  # stops the generation when the reader leaves early

    def _answer(self, value: AgentInput) -> dict[str, Any]:
        question, history, beams = _question(value)
        return self.agent.answer(question, history=history, beams=beams).as_dict()

    def _events(self, values: Iterator[AgentInput]) -> Iterator[AgentEvent]:
        for value in values:
            question, history, beams = _question(value)
            yield from self.agent.stream(question, history=history, beams=beams)


def _question(value: Any) -> tuple[str, list[dict[str, str]], int | None]:
    """``(question, history, beams)`` from any of the runnable's input forms."""
    if isinstance(value, str):
        return value, [], None
    if isinstance(value, dict) and isinstance(value.get("question"), str):
        return value["question"], as_turns(value.get("history")), value.get("beams")
    if isinstance(value, dict) and isinstance(value.get("messages"), Sequence):
        return (*split_conversation(value["messages"]), value.get("beams"))
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, dict)):
        return (*split_conversation(value), None)
    raise FactweaveError("the agent takes a question, {\"question\": ...}, {\"messages\": [...]} or a list of "
                         f"messages, not {type(value).__name__}")
