"""The agent's output as types: the events :meth:`agent.pipeline.FactAgent.stream` yields, the
record of a fact the answer states, and the kinds of trace step.

Every interface (the CLI, the UI, serve's OpenAI-compatible reply, the MCP tools, the LangChain
runnable) reads these and nothing else: an ``event`` key tells the four events apart, and a type
checker narrows on it (``if event["event"] == "fact": event["fact"]["text"]``). They are
TypedDicts, not classes, because the events are plain JSON-ready dicts on every path (serve sends
them on, the eval saves them): the types describe them without changing them. The MCP ``ask``
tool's output schema is derived from :class:`StatedFact` (its field docstrings are the
descriptions an LLM reads).

Why a step record stays a dict: each kind carries its own fields (a hop its entity and the facts
it added, an attempt its tree and grounding...), written where the step runs and read by the
trace's one-line description (:func:`agent.pipeline.trace.describe_step`); its ``step`` key is one
of :data:`StepKind`.

Example::

    >>> from collections.abc import Iterable
    >>> from agent.events import AgentEvent
    >>> def show(events: Iterable[AgentEvent]) -> None:
    ...     for event in events:
    ...         if event["event"] == "token":
    ...             print(event["text"], end="")
    ...         elif event["event"] == "answer":
    ...             print("\\n->", event["answer"], len(event["facts"]), "fact(s)")
    >>> show([{"event": "token", "text": "Oslo"}, {"event": "answer", "answer": "Oslo", "facts": []}])
    Oslo
    -> Oslo 0 fact(s)
"""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import ConfigDict, with_config
# typing_extensions' TypedDict: pydantic reads the MCP schema from it (typing's lacks what it needs
# before Python 3.12); to a type checker the two are the same.
from typing_extensions import TypedDict

#: What a trace step did (the ``step`` key of a step record).
StepKind = Literal["rewrite", "retrieve", "rerank", "plan", "subquery", "hop", "generate"]

#: Which prefix tree constrained a fact: the facts retrieved for the question, the whole knowledge
#: base, or the question's two hops joined.
TreeName = Literal["question", "kb", "hops"]


@with_config(ConfigDict(use_attribute_docstrings=True))
class StatedFact(TypedDict):
    """A fact the answer states, token for token a fact of the knowledge."""

    start: int
    """Where the fact starts in the reply's `text`."""
    end: int
    """Where it ends: text[start:end] is the fact."""
    text: str
    """The fact, exactly as it exists in the knowledge."""
    tree: str
    """What constrained it: 'question' (facts retrieved from the knowledge web for this question) or 'kb' (the
    whole knowledge base)."""
    fact_id: str | None
    """The web fact's id, or 'kb:<n>' for fact n of the knowledge base."""
    source: str
    """Where the fact came from, in one line."""
    provenance: dict[str, Any]
    """Where the fact came from, as data: 'kind' (document, triple, statement) and the document title and
    character range, or the triple's subject, predicate, object and source."""


class TokenEvent(TypedDict):
    """Text as it is generated, for attempt ``attempt`` (0 first)."""

    event: Literal["token"]
    text: str
    attempt: int


class FactEvent(TypedDict):
    """A constrained fact completed; its offsets point into attempt ``attempt``'s text."""

    event: Literal["fact"]
    fact: StatedFact
    attempt: int


class StepEvent(TypedDict):
    """A step of the pipeline ended; ``step`` is its trace record (``step["step"]``: a
    :data:`StepKind`)."""

    event: Literal["step"]
    step: dict[str, Any]


class AnswerEvent(TypedDict):
    """The last event: the answer, everything generated, the facts it states and the trace
    (:meth:`agent.pipeline.AgentAnswer.as_dict` with ``event``)."""

    event: Literal["answer"]
    question: str
    answer: str
    text: str
    facts: list[StatedFact]
    trace: dict[str, Any]


#: One event of the agent's stream.
AgentEvent = Union[TokenEvent, FactEvent, StepEvent, AnswerEvent]
