"""The LangChain adapters (agent.langchain) on the real SmolLM2, the real knowledge web and the real agent.

Only the outer agent's model in the last test is a stand-in (langchain_core's fake chat model):
see that test's docstring.
"""
from __future__ import annotations

import asyncio
import functools
import json
import operator

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, ValidationError

from agent.errors import FactweaveError
from agent_fixtures import FOLLOW_UP, rewrite_step
from agent.knowledge.kamel import demo_kamel_root, kamel_questions
from agent.langchain import ChatFactweave, FactAgentRunnable, FactweaveQuestion, FactweaveTool, KnowledgeWebRetriever

pytestmark = pytest.mark.model

ZORBLAX = "Who founded Zorblax Station?"
MIRA = "Where was Mira Quell born?"


@pytest.fixture(scope="module")
def chat_model(demo_generator):
    return ChatFactweave(generator=demo_generator, max_new_tokens=48, model_name="smollm2-135m")


@pytest.fixture(scope="module")
def kamel():
    return [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=2)]


def _without_timings(metadata: dict) -> dict:
    return {k: v for k, v in metadata.items() if k != "timings"}


def _assert_kb_spans(message, index) -> int:
    """Every span in the message's metadata is a fact of ``index``, where its offsets say."""
    for fact in message.response_metadata["facts"]:
        assert message.content[fact["start"]:fact["end"]] == fact["text"] == index.facts[fact["id"]].text
        assert fact["source"] == index.facts[fact["id"]].source
    return len(message.response_metadata["facts"])


# --- ChatFactweave --------------------------------------------------------------------------------


def test_chat_model_invoke_stream_and_batch_give_one_message(chat_model, demo_generator, kamel):
    question = kamel[0]
    invoked = chat_model.invoke(question)
    meta = invoked.response_metadata
    assert isinstance(invoked, AIMessage) and invoked.content
    assert (meta["constrained"], meta["model_name"]) == (True, "smollm2-135m")

    chunks = list(chat_model.stream(question))
    assert sum(1 for c in chunks if c.content) > 2  # token by token, not one piece
    shown = ""
    for chunk in chunks:  # a fact arrives once the text streamed so far holds it
        for fact in chunk.response_metadata.get("facts", []):
            assert shown[fact["start"]:fact["end"]] == fact["text"]
        shown += chunk.content
    merged = functools.reduce(operator.add, chunks)
    assert merged.content == invoked.content
    assert _without_timings(merged.response_metadata) == _without_timings(meta)
    assert merged.usage_metadata == invoked.usage_metadata

    conversation = [SystemMessage("Answer in English."), HumanMessage(kamel[1])]
    batch = chat_model.batch([conversation, question])
    assert batch[1].content == invoked.content and batch[1].response_metadata["facts"] == meta["facts"]
    # The messages reach the generator as the conversation they are (the system message too).
    direct = demo_generator.answer([{"role": "system", "content": "Answer in English."},
                                    {"role": "user", "content": kamel[1]}], max_new_tokens=48)
    assert batch[0].content == direct.text
    assert batch[0].response_metadata["facts"] == [f.as_dict() for f in direct.facts]
    assert (batch[0].response_metadata["answer"], batch[0].response_metadata["truncated"]) == (
        direct.answer, direct.truncated)
    assert batch[0].usage_metadata == {"input_tokens": direct.prompt_tokens, "output_tokens": direct.tokens,
                                       "total_tokens": direct.prompt_tokens + direct.tokens}
    spans = sum(_assert_kb_spans(m, demo_generator.index) for m in (invoked, merged, *batch))
    assert spans > 0, "no Fact: line in any reply"


def test_chat_model_answers_a_conversation_with_every_turn_in_its_prompt(chat_model, demo_generator):
    first = chat_model.invoke(FOLLOW_UP[0])
    messages = [HumanMessage(FOLLOW_UP[0]), AIMessage(first.content), HumanMessage(FOLLOW_UP[1])]
    prompt = demo_generator.render([{"role": "user", "content": FOLLOW_UP[0]},
                                    {"role": "assistant", "content": first.content},
                                    {"role": "user", "content": FOLLOW_UP[1]}])
    assert FOLLOW_UP[0] in prompt and first.content in prompt and prompt.rfind(FOLLOW_UP[1]) > prompt.rfind(first.content)
    whole = chat_model.model_copy(update={"standalone_follow_ups": False})
    second = whole.invoke(messages)
    # The whole conversation was the prompt: more tokens than the follow-up alone, the same count
    # as the rendered conversation.
    alone = demo_generator.render(FOLLOW_UP[1])
    tokens = len(demo_generator.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert second.usage_metadata["input_tokens"] == tokens
    assert tokens > len(demo_generator.tokenizer(alone, add_special_tokens=False)["input_ids"])
    assert _assert_kb_spans(second, demo_generator.index) >= 1, second.content
    streamed = functools.reduce(operator.add, whole.stream(messages))
    assert streamed.content == second.content
    # By default the follow-up is asked standalone, on its own.
    default = chat_model.invoke(messages)
    standalone = demo_generator.render("What instrument did Buck Owens play?")
    assert default.usage_metadata["input_tokens"] == len(demo_generator.tokenizer(standalone, add_special_tokens=False)["input_ids"])
    assert functools.reduce(operator.add, chat_model.stream(messages)).content == default.content


def test_chat_model_answers_the_follow_up_from_the_first_turn(chat_model, demo_generator):
    first = chat_model.invoke(FOLLOW_UP[0])
    second = chat_model.invoke([HumanMessage(FOLLOW_UP[0]), AIMessage(first.content), HumanMessage(FOLLOW_UP[1])])
    assert second.response_metadata["standalone"] == "What instrument did Buck Owens play?"
    assert "guitar" in second.response_metadata["answer"].lower()
    assert any("Buck Owens" in f["text"] and "guitar" in f["text"] for f in second.response_metadata["facts"])


def test_chat_model_options_and_refusals(chat_model):
    free = chat_model.invoke("Where was Laurie Graff born?", constrained=False, max_new_tokens=6)
    assert free.usage_metadata["output_tokens"] <= 6
    assert free.response_metadata["constrained"] is False and free.response_metadata["facts"] == []
    assert chat_model.bind(max_new_tokens=4).invoke("Where was Laurie Graff born?").usage_metadata[
        "output_tokens"] <= 4
    with pytest.raises(FactweaveError, match="must end with a user message"):
        chat_model.invoke([HumanMessage("Hi"), AIMessage("Hello.")])
    with pytest.raises(ValueError, match="not 'tool' ones"):
        chat_model.invoke([HumanMessage("Hi"), ToolMessage("42", tool_call_id="x")])
    with pytest.raises(ValueError, match="no stop sequences"):
        chat_model.invoke("Hi", stop=["\n"])
    with pytest.raises(TypeError, match="unknown option.*temperature"):
        chat_model.invoke("Hi", temperature=0.7)
    with pytest.raises(ValidationError):
        ChatFactweave(generator="smollm2-135m")
    assert chat_model._identifying_params["index_facts"] == len(chat_model.generator.index.facts)


# --- KnowledgeWebRetriever ------------------------------------------------------------------------


def test_retriever_documents_are_the_web_hits(agent_web):
    retriever = KnowledgeWebRetriever(web=agent_web, k=4)
    docs = retriever.invoke(ZORBLAX)
    hits = agent_web.search(ZORBLAX, 4).hits
    assert docs and len(docs) == len(hits)
    for doc, hit in zip(docs, hits):
        assert doc.page_content == hit.text and doc.id == hit.id
        assert doc.metadata == {"id": hit.id, "score": hit.score, "cosine": hit.cosine, "ppr": hit.ppr,
                                "passage": hit.passage, "lexical": hit.lexical, "degree": hit.degree,
                                "keywords": hit.keywords, "kind": hit.kind, "source": hit.source,
                                "provenance": hit.provenance}
    assert any("founded" in d.page_content and "Mira Quell" in d.page_content for d in docs)
    document = next(d for d in docs if d.metadata["kind"] == "document")
    assert document.metadata["provenance"]["start"] < document.metadata["provenance"]["end"]

    mira = retriever.batch([MIRA, ZORBLAX])
    assert [d.page_content for d in mira[1]] == [d.page_content for d in docs]
    triple = next(d for d in mira[0] if d.metadata["kind"] == "triple")
    assert triple.page_content == "<Mira Quell> <place of birth> <Oslo> ."
    assert triple.metadata["provenance"]["subject"] == "Mira Quell" and triple.metadata["source"] == "triples.tsv:2"
    json.dumps([d.metadata for d in docs])
    with pytest.raises(FactweaveError, match="empty"):
        retriever.invoke("  ")


# --- FactAgentRunnable ----------------------------------------------------------------------------

ANSWER_KEYS = ("question", "answer", "text", "facts")


def test_agent_runnable_invoke_stream_and_batch(small_agent):
    chain = FactAgentRunnable(small_agent)
    runs = RunCollectorCallbackHandler()
    invoked = chain.invoke(ZORBLAX, config={"callbacks": [runs]})
    assert invoked["question"] == ZORBLAX and invoked["trace"]["answer"] == invoked["answer"]
    json.dumps(invoked)
    # The LangGraph pipeline runs as a child of the runnable's run: tracers see its nodes.
    (root,) = runs.traced_runs
    assert root.name == "factweave" and root.outputs["answer"] == invoked["answer"]
    graph_run = next(r for r in root.child_runs if r.name == "factweave-agent")
    assert {"retrieve", "rerank", "plan", "read"} <= {r.name for r in graph_run.child_runs}

    events = list(chain.stream({"question": ZORBLAX}))
    assert events[-1]["event"] == "answer" and all(e["event"] != "answer" for e in events[:-1])
    assert {k: events[-1][k] for k in ANSWER_KEYS} == {k: invoked[k] for k in ANSWER_KEYS}
    assert [e["step"] for e in events if e["event"] == "step"] == events[-1]["trace"]["steps"]
    assert any(e["event"] == "token" for e in events)

    async def read_until_first_token() -> list[dict]:
        seen = []
        stream = chain.astream(ZORBLAX)
        async for event in stream:
            seen.append(event)
            if event["event"] == "token":
                break
        await stream.aclose()  # leaving early stops the generation
        return seen

    early = asyncio.run(read_until_first_token())
    assert early[-1]["event"] == "token" and [e["event"] for e in early[:-1]] == ["step"] * (len(early) - 1)
    assert early[0]["step"] == events[0]["step"] | {"seconds": early[0]["step"]["seconds"]}

    batch = chain.batch([MIRA, {"question": ZORBLAX}])
    assert batch[0]["question"] == MIRA and batch[0]["trace"]["question"] == MIRA
    assert {k: batch[1][k] for k in ANSWER_KEYS} == {k: invoked[k] for k in ANSWER_KEYS}
    with pytest.raises(FactweaveError, match="takes a question"):
        chain.invoke({"query": ZORBLAX})


def test_agent_runnable_takes_a_conversation_in_every_form(small_agent, agent_calls):
    from dataclasses import replace

    from agent.pipeline import FactAgent
    from agent.pipeline.conversation import MAX_TURNS

    chain = FactAgentRunnable(small_agent)
    said = "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"
    history = [{"role": "user", "content": FOLLOW_UP[0]}, {"role": "assistant", "content": said}]
    lc_messages = [SystemMessage("Be brief."), HumanMessage(FOLLOW_UP[0]), AIMessage(said), HumanMessage(FOLLOW_UP[1])]
    # One real run through the pipeline with a LangChain message list ...
    reply = chain.invoke(lc_messages)
    assert agent_calls[-1] == {"method": "answer", "question": FOLLOW_UP[1], "history": history}
    assert reply["question"] == FOLLOW_UP[1] or reply["trace"].get("standalone")
    rewrite = rewrite_step(reply["trace"])
    if rewrite is not None:  # once the pipeline rewrites follow-ups, its record says what it was given
        assert rewrite["question"] == FOLLOW_UP[1]
    # ... and every other form hands the agent the same question and history (the first streamed
    # event is enough to see what the agent was given).
    dicts = [{"role": "user", "content": FOLLOW_UP[0]}, {"role": "assistant", "content": said},
             {"role": "user", "content": FOLLOW_UP[1]}]
    for value in ({"messages": lc_messages}, dicts, {"messages": dicts, "beams": 1},
                  {"question": FOLLOW_UP[1], "history": history},
                  {"question": FOLLOW_UP[1], "history": lc_messages[:3]}):
        events = chain.stream(value)
        next(events)
        events.close()
        assert agent_calls[-1] == {"method": "stream", "question": FOLLOW_UP[1], "history": history}, value
    # The history is passed on whole whatever the form, and the agent reads as much of it as its
    # own options say: the default bound, or a raised one (the runnable cut it at the default).
    long = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(10)]
    raised = FactAgentRunnable(FactAgent(small_agent.generator, small_agent.web, small_agent.reranker,
                                         options=replace(small_agent.options, max_history_turns=8),
                                         chat=small_agent.chat))
    for runnable, read in ((chain, MAX_TURNS), (raised, 8)):
        for value in ({"question": FOLLOW_UP[1], "history": long}, [*long, {"role": "user", "content": FOLLOW_UP[1]}]):
            events = runnable.stream(value)
            first = next(events)  # the rewrite step: what the agent read the follow-up with
            events.close()
            assert agent_calls[-1]["history"] == long
            assert first["step"]["step"] == "rewrite" and first["step"]["history_turns"] == read, (read, first)
    with pytest.raises(FactweaveError, match="no user message"):
        chain.invoke([AIMessage(said)])


# --- FactweaveTool --------------------------------------------------------------------------------


def test_tool_schema_and_errors(small_agent):
    tool = FactweaveTool(small_agent)
    assert tool.name == "factweave" and "knowledge base" in tool.description and "\n" not in tool.description
    assert tool.args_schema is FactweaveQuestion and issubclass(FactweaveQuestion, BaseModel)
    schema = tool.tool_call_schema.model_json_schema()
    assert schema["required"] == ["question"] and schema["properties"]["question"]["type"] == "string"
    assert schema["properties"]["question"]["description"]
    with pytest.raises(ValidationError):
        tool.invoke({})
    with pytest.raises(ValidationError):
        tool.invoke({"question": ""})
    assert tool.invoke({"question": "   "}) == "the question is empty"  # the agent's one line, to the model


class ScriptedToolCaller(GenericFakeChatModel):
    """langchain_core's fake chat model, standing in for the user's tool-calling LLM.

    Its first reply is the scripted tool call; once a tool result comes back it replies by
    quoting it. It records the tools bound to it and every conversation it is shown.
    """

    bound: list[list[dict]] = Field(default_factory=list)
    seen: list[list] = Field(default_factory=list)

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        self.bound.append([convert_to_openai_tool(t) for t in tools])
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"From the knowledge base:\n{messages[-1].content}")
            return ChatResult(generations=[ChatGeneration(message=reply)])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_a_langchain_agent_calls_ours_as_a_tool(small_agent, demo_generator):
    """``langchain.agents.create_agent`` with our tool, asked a question.

    The outer agent's model is the user's LLM, not ours. No model that can run here emits tool
    calls reliably (SmolLM2-135M's chat template has no tools; the Qwen2.5 presets are not
    installed in CI), so it is :class:`ScriptedToolCaller`, langchain_core's
    ``GenericFakeChatModel`` scripted to call ``factweave`` with the question. Everything our
    side does is real: the tool, the agent, the knowledge web and SmolLM2.
    """
    from langchain.agents import create_agent

    model = ScriptedToolCaller(messages=iter([AIMessage("", tool_calls=[
        {"name": "factweave", "args": {"question": ZORBLAX}, "id": "call-1", "type": "tool_call"}])]))
    outer = create_agent(model, tools=[FactweaveTool(small_agent)])
    result = outer.invoke({"messages": [HumanMessage(ZORBLAX)]})

    for (offered,) in model.bound:  # on each turn the outer model was offered our tool with its schema
        assert offered["function"]["name"] == "factweave"
        assert offered["function"]["parameters"]["required"] == ["question"]
    human, call, tool_message, final = result["messages"]
    assert call.tool_calls[0]["args"] == {"question": ZORBLAX}
    assert isinstance(tool_message, ToolMessage) and tool_message.name == "factweave"
    assert tool_message.tool_call_id == "call-1" and tool_message.status == "success"

    reply = tool_message.artifact  # the whole AgentAnswer for code; the model reads .content
    assert reply["question"] == ZORBLAX and "steps" in reply["trace"]
    json.dumps(reply)
    assert tool_message.content.startswith(f"Answer: {reply['answer']}\n")
    assert reply["facts"], "the agent stated no fact for the Zorblax question"
    retrieved = {h["text"]: h for s in reply["trace"]["steps"] if s["step"] == "retrieve" for h in s["hits"]}
    for fact in reply["facts"]:
        assert reply["text"][fact["start"]:fact["end"]] == fact["text"]
        assert f"- {fact['text']}" in tool_message.content
        if fact["tree"] == "question":  # a fact of the knowledge web, as retrieved
            assert retrieved[fact["text"]]["id"] == fact["fact_id"]
            assert f"(source: {fact['source']})" in tool_message.content
        else:  # a fact of the demo knowledge base
            assert demo_generator.index.facts[int(fact["fact_id"][3:])].text == fact["text"]

    assert isinstance(model.seen[-1][-1], ToolMessage)  # the tool's result went back to the outer model
    assert isinstance(final, AIMessage) and not final.tool_calls and tool_message.content in final.content
