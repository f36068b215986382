"""The factweave agent as a served chat model (model id ``factweave``).

The reply's ``content`` is the text the agent generated, token by token as it is generated:

- the question is the last user message; the user and assistant messages before it go to the
  agent as the conversation's history (it reads the last few, see :mod:`agent.pipeline.conversation`),
  so a follow-up ("What instrument did he play?") is understood from them. An assistant
  message is passed as it is: the agent's earlier replies keep their ``Fact:`` lines, which name
  what a pronoun can refer to;
- when the agent generates more than once (per-question tree, then the knowledge base), the
  attempts are separated by a blank line;
- when the agent's final answer is not the last attempt's (an answer withheld for lack of a
  supporting fact, or no attempt could run), a last line ``Answer: I don't know.`` follows.

The extra top-level field ``factweave`` carries ``{answer, supported, facts, trace}``: each
fact's ``start``/``end`` index into ``content`` (``content[start:end]`` is the fact), and the
trace is :class:`~agent.pipeline.AgentAnswer`'s. ``usage`` counts the real prompt and generated
tokens of every attempt. The request's ``max_tokens``, ``temperature`` and ``stop`` are not
used: the agent decodes greedily within its own token budget.

Example (not run: needs a model and a knowledge web)::

    model = AgentModel(open_agent(load_settings(model="smollm2-135m")))
    for piece in model.reply(ChatRequest(messages=[{"role": "user", "content": "Who founded Zorblax Station?"}]),
                             threading.Event()):
        print(piece)
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from agent.errors import FactweaveError
from agent.events import AnswerEvent
from agent.pipeline.grounding import DONT_KNOW

from .models import BadReplyRequest, ReplyEnd, ReplyPiece
from .wire import ChatRequest

if TYPE_CHECKING:
    from agent.pipeline import FactAgent

AGENT_MODEL_ID = "factweave"
VERDICT = f"Answer: {DONT_KNOW}"


def blank_line_after(text: str) -> str:
    """What to add after ``text`` so that the next part starts after a blank line ("" at the start)."""
    if not text:
        return ""
    return "\n" * max(0, 2 - (len(text) - len(text.rstrip("\n"))))


class AgentModel:
    """Serve a :class:`~agent.pipeline.FactAgent` (see the module docstring for the reply's shape).

    Example (not run: needs a model; starts a server)::

        serve_in_thread([AgentModel(fact_agent), local_chat])   # ids "factweave", "smollm2-135m"
    """

    def __init__(self, agent: FactAgent, model_id: str = AGENT_MODEL_ID) -> None:
        self.agent, self.id = agent, model_id

    def reply(self, request: ChatRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        question, history = request.conversation()
        if not question:  # the request's shape (no user message to answer), not the question's text
            raise BadReplyRequest("messages: no user message with text to answer")
        try:  # the agent checks the question (and bounds the history) in this call, before any event
            events = self.agent.stream(question, history=history, stop=stop)
        except FactweaveError as exc:
            raise BadReplyRequest(f"messages: {exc}") from None
        content = ""
        starts: dict[int, int] = {}  # attempt number -> where its text starts in content
        final: AnswerEvent | None = None
        for event in events:
            if event["event"] == "token":
                piece = event["text"]
                if event["attempt"] not in starts:
                    gap = blank_line_after(content)
                    starts[event["attempt"]] = len(content) + len(gap)
                    piece = gap + piece
                content += piece
                yield piece
            elif event["event"] == "answer":
                final = event
            else:
                yield ""  # a step or a fact ended: no new text, but the agent is at work
        if final is None:  # the agent always ends with its answer; this guards a broken stream
            raise RuntimeError("the agent's stream ended without an answer")
        trace = final["trace"]
        attempts = [s for s in trace["steps"] if s["step"] == "generate"]
        # The attempt that answers (not always the last: a hop of a question asked again hop by hop
        # answers its hop alone).
        last = next((a for a in attempts if a["attempt"] == trace.get("attempt")), attempts[-1] if attempts else None)
        if last is None or not last.get("text") or last.get("answer") != final["answer"]:
            piece = blank_line_after(content) + VERDICT
            content += piece
            yield piece
        shift = starts.get(last["attempt"], 0) if last is not None else 0
        facts = [{**fact, "start": fact["start"] + shift, "end": fact["end"] + shift} for fact in final["facts"]]
        yield ReplyEnd(
            finish_reason="length" if trace.get("truncated") else "stop",
            prompt_tokens=trace["tokens"]["prompt"],
            completion_tokens=trace["tokens"]["generated"],
            extra={"factweave": {"answer": final["answer"], "supported": trace["supported"], "facts": facts,
                                 "trace": trace}},
            stopped=bool(trace.get("stopped")),
        )
