"""The ReFactX-constrained local model as a LangChain chat model."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, Field

from ..decoding import FactGenerator
from ..decoding.generate import Answer
from ..index import FactIndex
from ..pipeline.chaining import answer_on_chain, stream_on_chain
from ..pipeline.conversation import rewrite_by_rules

# LangChain message types -> the roles FactGenerator's prompt takes.
_ROLES = {"system": "system", "human": "user", "ai": "assistant"}
# Per-call options (``model.invoke(msgs, beams=3)``, ``model.bind(max_new_tokens=32)``).
_CALL_OPTIONS = ("constrained", "beams", "max_new_tokens", "index")


class ChatFactweave(BaseChatModel):
    """A :class:`~agent.decoding.FactGenerator` as a LangChain ``BaseChatModel``: every
    ``Fact:`` line it writes is, token for token, a fact of the fact index.

    The conversation goes to the generator as ``{"role", "content"}`` messages (a system
    message is appended to the ReFactX system prompt; the last message must be the user's
    question). The reply is an ``AIMessage`` whose ``content`` is the generated text and whose
    ``response_metadata`` holds:

    - ``facts``: the constrained spans ``{"start", "end", "id", "text", "source"}``, with
      ``content[start:end] == text`` and ``id`` the fact's number in the index;
    - ``answer``: the text after ``Answer:`` (empty when ``truncated``);
    - ``truncated``, ``constrained``, ``model_name`` and ``timings``;
    - ``dropped``: facts stated after the chain broke away from the question; the model was
      stopped there and answered again without them
      (:func:`agent.pipeline.chaining.answer_on_chain`; greedy constrained generation only);

    and ``usage_metadata`` the prompt and generated token counts. ``stream`` yields the text
    token by token; each fact arrives in a chunk of its own as soon as it is complete, and the
    last chunk carries the rest, so the chunks add up to the message ``invoke`` returns
    (``timings`` aside).

    Example (not run: needs a model)::

        from agent.runtime import open_generator

        model = ChatFactweave(generator=open_generator("smollm2-135m"), max_new_tokens=64)
        reply = model.invoke("Where was Laurie Graff born?")
        reply.content, reply.response_metadata["facts"], reply.usage_metadata
        for chunk in model.stream([("system", "Be brief."), ("human", "Where was Laurie Graff born?")]):
            print(chunk.content, end="", flush=True)

    ``index`` replaces the generator's own index (e.g. a small tree over chosen facts);
    ``constrained=False`` is the same model without the constraint. It writes text, not tool
    calls: it is the model that answers, not one that drives an agent.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    generator: FactGenerator = Field(exclude=True)
    index: FactIndex | None = Field(default=None, exclude=True)
    constrained: bool = True
    beams: int | None = Field(default=None, ge=1)
    max_new_tokens: int | None = Field(default=None, ge=1)
    model_name: str | None = None
    """Shown in ``response_metadata`` (default: the model config's ``name_or_path``)."""
    standalone_follow_ups: bool = True
    """When earlier turns exist, ask the last user message as a standalone question made by the
    agent's rules (:func:`agent.pipeline.conversation.rewrite_by_rules`): "What instrument did he
    play?" is asked as "What instrument did Buck Owens play?", without the earlier turns (they
    were read by the rewrite). ``response_metadata["standalone"]`` says what was asked. False:
    the whole conversation is the prompt."""

    @property
    def _llm_type(self) -> str:
        return "factweave"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        index = self.index if self.index is not None else self.generator.index
        return {"model_name": self._model_name, "constrained": self.constrained,
                "beams": self.beams or self.generator.beams,
                "max_new_tokens": self.max_new_tokens or self.generator.max_new_tokens,
                "index_fingerprint": getattr(index, "fingerprint", None),
                "index_facts": len(index.facts) if index is not None else 0}

    @property
    def _model_name(self) -> str:
        if self.model_name:
            return self.model_name
        config = getattr(self.generator.model, "config", None)
        return str(getattr(config, "name_or_path", "") or "")

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        turns = self._turns(messages)
        answer = answer_on_chain(self.generator, [turns], **self._options(stop, kwargs))[0]
        message = AIMessage(content=answer.text, usage_metadata=_usage(answer),
                            response_metadata={**self._metadata(answer), "standalone": turns[-1]["content"],
                                               "facts": [f.as_dict() for f in answer.facts]})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        turns = self._turns(messages)
        for event in stream_on_chain(self.generator, turns, **self._options(stop, kwargs)):
            if event.kind == "token":
                message = AIMessageChunk(content=event.text)
            elif event.kind == "fact":
                assert event.fact is not None  # a "fact" event carries its fact
                message = AIMessageChunk(content="", response_metadata={"facts": [event.fact.as_dict()]})
            else:
                # The facts were sent as they completed; an empty list merges into them unchanged.
                assert event.answer is not None  # the "done" event carries the answer
                message = AIMessageChunk(content="", usage_metadata=_usage(event.answer), chunk_position="last",
                                         response_metadata={**self._metadata(event.answer), "facts": [],
                                                            "standalone": turns[-1]["content"]})
            chunk = ChatGenerationChunk(message=message)
            if run_manager is not None:
                run_manager.on_llm_new_token(message.content, chunk=chunk)
            yield chunk

    def _turns(self, messages: list[BaseMessage]) -> list[dict[str, str]]:
        turns = _conversation(messages)
        if self.standalone_follow_ups and turns and turns[-1]["role"] == "user":
            history = [t for t in turns[:-1] if t["role"] in ("user", "assistant")]
            if history:
                # The earlier turns were read by the rewrite; the model gets the standalone question
                # alone (system messages kept): SmolLM2 given the earlier turns copied the earlier
                # reply's "Answer: I don't know." after the very fact that answered it.
                standalone = rewrite_by_rules(turns[-1]["content"], history).standalone
                return [*(t for t in turns if t["role"] == "system"), {"role": "user", "content": standalone}]
        return turns

    def _options(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        if stop:
            raise ValueError("ChatFactweave takes no stop sequences: generation ends after the Answer: line")
        kwargs = {k: v for k, v in kwargs.items() if k != "stream"}  # set by LangChain, meaning nothing here
        unknown = sorted(set(kwargs) - set(_CALL_OPTIONS))
        if unknown:
            raise TypeError(f"ChatFactweave got unknown option(s) {', '.join(unknown)}; "
                            f"it takes {', '.join(_CALL_OPTIONS)}")
        options = {"constrained": self.constrained, "beams": self.beams, "max_new_tokens": self.max_new_tokens,
                   "index": self.index}
        options.update(kwargs)
        return options

    def _metadata(self, answer: Answer) -> dict[str, Any]:
        return {"model_name": self._model_name, "answer": answer.answer, "truncated": answer.truncated,
                "constrained": answer.constrained, "timings": answer.timings, "dropped": list(answer.dropped)}


def _conversation(messages: list[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as the ``{"role", "content"}`` list FactGenerator takes."""
    turns = []
    for message in messages:
        role = _ROLES.get(message.type)
        if role is None:
            raise ValueError(f"ChatFactweave reads system, human and AI messages, not {message.type!r} ones "
                             "(it calls no tools)")
        turns.append({"role": role, "content": message.text})
    return turns


def _usage(answer: Answer) -> UsageMetadata:
    # langchain-core marks the detail keys NotRequired; checked for Python 3.10, mypy reads them as required.
    return UsageMetadata(input_tokens=answer.prompt_tokens, output_tokens=answer.tokens,  # type: ignore[typeddict-item]
                         total_tokens=answer.prompt_tokens + answer.tokens)
