"""The agent as a LangChain tool that another LangChain agent can call."""
from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from ..errors import FactweaveError
from ..pipeline import AgentAnswer, FactAgent
from ..prompts import read_prompt


def _paragraph(name: str) -> str:
    """A prompt file as one line (the files are wrapped for reading)."""
    return " ".join(read_prompt(name).split())


class FactweaveQuestion(BaseModel):
    """The tool's input: one question."""

    question: str = Field(min_length=1, description=_paragraph("langchain/tool-question.txt"))


class FactweaveTool(BaseTool):
    """A :class:`~agent.pipeline.FactAgent` as a LangChain tool named ``factweave``.

    The calling model reads a short text: the answer, then each supporting fact (quoted from
    the knowledge base) with its source. The ``ToolMessage``'s ``artifact`` is the whole
    ``AgentAnswer.as_dict()`` (spans, provenance, trace) for code, not for the model. An agent
    error (e.g. a blank question) comes back to the model as the tool's one-line reply.

    Example (not run: needs an OpenAI endpoint, a model and a knowledge web)::

        from langchain.agents import create_agent
        from agent.runtime import open_agent

        tool = FactweaveTool(open_agent())
        outer = create_agent("openai:gpt-4o-mini", tools=[tool])
        result = outer.invoke({"messages": [("user", "Where was Mira Quell born?")]})
        tool_message = result["messages"][-2]
        tool_message.content, tool_message.artifact["facts"]

    The description the calling model reads is ``prompts/langchain/tool.txt``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "factweave"
    description: str = Field(default_factory=lambda: _paragraph("langchain/tool.txt"))
    args_schema: type[BaseModel] = FactweaveQuestion
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True
    agent: FactAgent = Field(exclude=True)
    beams: int | None = Field(default=None, ge=1)

    def __init__(self, agent: FactAgent | None = None, **kwargs: Any) -> None:
        if agent is not None:
            kwargs["agent"] = agent
        super().__init__(**kwargs)

    def _run(self, question: str, run_manager: CallbackManagerForToolRun | None = None) -> tuple[str, dict[str, Any]]:
        try:
            reply = self.agent.answer(question, beams=self.beams)
        except FactweaveError as exc:  # one line meant for a reader: the calling model reads it
            raise ToolException(str(exc)) from exc
        return tool_text(reply), reply.as_dict()


def tool_text(reply: AgentAnswer) -> str:
    """What the calling model reads: the answer, then the facts behind it with their sources."""
    lines = [f"Answer: {reply.answer}"]
    if reply.facts:
        lines.append("Facts quoted from the knowledge base:")
        lines += [f"- {f['text']}" + (f" (source: {f['source']})" if f.get("source") else "") for f in reply.facts]
    else:
        lines.append("No fact of the knowledge base was stated.")
    return "\n".join(lines)
