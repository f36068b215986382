"""The agent as a LangChain ``Runnable``: a question in, the answer with its facts and trace out."""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Optional, Union

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from typing_extensions import NotRequired, TypedDict

from ..pipeline import FactAgent
from ..errors import FactweaveError


class AgentQuestion(TypedDict):
    """The mapping form of the agent's input (``beams``: beam width for this question)."""

    question: str
    beams: NotRequired[Optional[int]]


AgentInput = Union[str, AgentQuestion]


class FactAgentRunnable(Runnable[AgentInput, dict[str, Any]]):
    """A :class:`~agent.pipeline.FactAgent` as a LangChain ``Runnable``.

    Input: a question, or ``{"question": ..., "beams": n}``. ``invoke`` returns
    ``AgentAnswer.as_dict()`` (``question``, ``answer``, ``text``, ``facts``, ``trace``);
    ``stream`` yields the agent's events (``step``, ``token``, ``fact``) and last the
    ``{"event": "answer", ...}`` event with the same dict; ``batch``, ``ainvoke``, ``astream``,
    ``with_config``, callbacks and composition with ``|`` come from ``Runnable``.

    Why a subclass and not a chain around ``agent.graph``: the compiled LangGraph graph takes and
    returns the pipeline's internal state (a stop event, retrieved hit objects), and turning
    that into the answer with its trace and timings is :class:`FactAgent`'s job; delegating to
    ``FactAgent.answer`` and ``FactAgent.stream`` keeps one home for it. The graph still runs as
    a child of this runnable's run, so tracers see its nodes.

    Example::

        from agent.runtime import open_agent

        chain = FactAgentRunnable(open_agent())
        chain.invoke("Who founded Zorblax Station?")["answer"]
        for event in chain.stream({"question": "Where was Mira Quell born?"}):
            if event["event"] == "token":
                print(event["text"], end="", flush=True)
        chain.batch(["Who founded Zorblax Station?", "Where was Mira Quell born?"])
    """

    def __init__(self, agent: FactAgent, *, name: str = "factweave") -> None:
        if not isinstance(agent, FactAgent):
            raise TypeError(f"FactAgentRunnable wraps a FactAgent, not {type(agent).__name__}")
        self.agent = agent
        self.name = name

    def invoke(self, input: AgentInput, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        return self._call_with_config(self._answer, input, config, run_type="chain")

    def stream(self, input: AgentInput, config: RunnableConfig | None = None,
               **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield from self._transform_stream_with_config(iter([input]), self._events, config, run_type="chain")

    async def astream(self, input: AgentInput, config: RunnableConfig | None = None,
                      **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        # Runnable's default astream would yield only the final output; the agent is blocking,
        # so the sync event stream is read in a worker thread, one event at a time.
        events = self.stream(input, config, **kwargs)
        done = object()
        try:
            while (event := await run_in_executor(None, next, events, done)) is not done:
                yield event
        finally:
            events.close()  # stops the generation when the reader leaves early

    def _answer(self, value: AgentInput) -> dict[str, Any]:
        question, beams = _question(value)
        return self.agent.answer(question, beams=beams).as_dict()

    def _events(self, values: Iterator[AgentInput]) -> Iterator[dict[str, Any]]:
        for value in values:
            question, beams = _question(value)
            yield from self.agent.stream(question, beams=beams)


def _question(value: Any) -> tuple[str, int | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict) and isinstance(value.get("question"), str):
        return value["question"], value.get("beams")
    raise FactweaveError(f"the agent takes a question or {{\"question\": ...}}, not {type(value).__name__}")
