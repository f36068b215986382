"""The re-ranker: question types, reply parsing, and the whole path through the real SDK and
server to the real SmolLM2, with its fallbacks."""
from __future__ import annotations

import re
import threading

import pytest
from llm_fixtures import ScriptedChat

from agent.errors import FactweaveError
from agent.llm import ChatError, OpenAIChat
from agent.prompts import prompts_dir
from agent.rerank import (
    Candidate,
    QuestionType,
    QuestionTypeRules,
    Reranker,
    detect_question_type,
    parse_fact_numbers,
    says_none,
)

FACTS = [
    Candidate("q1", "Marie Curie was born on 7 November 1867.", 0.82),
    Candidate("q2", "Marie Curie died on 4 July 1934.", 0.80),
    Candidate("q3", "Marie Curie was born in Warsaw.", 0.61),
    Candidate("q4", "Pierre Curie was a French physicist.", 0.55),
    Candidate("q5", "Warsaw is the capital of Poland.", 0.40),
]


# --- question types ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How old was Marie Curie when she died?", "calculation"),
        ("How many children did Pierre Curie have?", "calculation"),
        ("How much did the Eiffel Tower cost?", "calculation"),
        ("How long did the Hundred Years' War last?", "calculation"),
        ("When was Warsaw founded?", "calculation"),
        ("What year did the Berlin Wall fall?", "calculation"),
        ("Who is older, Marie or Pierre?", "calculation"),
        ("Which came first, the book or the film?", "calculation"),
        ("Who was the last emperor of Rome?", "calculation"),
        ("What is the difference in height between the two towers?", "calculation"),
        ("Who won the election in 1990?", "calculation"),
        ("What is 12 + 30?", "calculation"),
        ("Why did the Roman Empire fall?", "inference"),
        ("How did the printing press change Europe?", "inference"),
        ("What caused the Great Fire of London?", "inference"),
        ("What was the reason for the strike?", "inference"),
        ("What effect did the war have on trade?", "inference"),
        ("What did the drought lead to?", "inference"),
        ("Who wrote Pride and Prejudice?", "plain"),
        ("However, who painted the Mona Lisa?", "plain"),  # "however" is not "how"
        ("Show me the capital of Poland.", "plain"),        # "show" is not "how"
        ("Whyte is a surname; where is it common?", "plain"),  # "Whyte" is not "why"
        ("What is the capital of France?", "plain"),
    ],
)
def test_question_type_rules(question, expected):
    assert detect_question_type(question).name == expected


def test_rules_are_extensible_and_ordered():
    rules = QuestionTypeRules.default()
    where = QuestionType("location", ("where", "which country"), "plain.txt")
    rules.add(where, before="inference")
    assert [t.name for t in rules.types] == ["calculation", "location", "inference"]
    assert rules.detect("Where and how did he live?").name == "location"
    assert rules.detect("When and where was he born?").name == "calculation"
    # Replacing a built-in by name keeps its place in the order.
    rules.add(QuestionType("calculation", (re.compile(r"\bsum\b", re.IGNORECASE),), "calculation.txt"))
    assert [t.name for t in rules.types] == ["calculation", "location", "inference"]
    assert rules.detect("How many moons?").name == "inference"
    with pytest.raises(FactweaveError, match="no question type 'nope'"):
        rules.add(QuestionType("x", ("x",), "plain.txt"), before="nope")


# --- reading the reply ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[2, 5]", [2, 5]),
        ("[5, 2]", [5, 2]),  # the LLM's order is kept
        ('["2", "4"]', [2, 4]),
        ('{"facts": [3, 1]}', [3, 1]),
        ("1, 3", [1, 3]),
        ("The relevant facts are [2] and [5].", [2, 5]),
        ("Facts: 2,5", [2, 5]),
        ("Fact 2 and fact 4 give the dates.", [2, 4]),
        ("fact #3", [3]),
        ("I would use facts 3 and 1 to answer this.", [3, 1]),
        ("[1] Marie Curie was born in 1867. [2] She died in 1934.", [1, 2]),  # echoed facts
        ("Born in 1867 (fact 2)", [2]),  # a year is not a fact number
        ("[0, 9, 2, 2, -1]", [2]),  # out of range and repeats dropped
        ("```json\n[4]\n```", [4]),
        ("3.5", []),
        ("none", []),
        ("[]", []),
        ("I cannot tell.", []),
        ("", []),
    ],
)
def test_parse_fact_numbers(reply, expected):
    assert parse_fact_numbers(reply, 5) == expected


@pytest.mark.parametrize("reply", ["none", "None.", "[]", "No facts are needed.", "nothing"])
def test_says_none(reply):
    assert says_none(reply)


def test_says_none_only_for_the_whole_reply():
    assert not says_none("None of them, except [2]")
    assert not says_none("[2]")


# --- the whole path, with the real model --------------------------------------------------


@pytest.mark.model
def test_rerank_through_the_sdk_and_server_with_smollm(openai_server, local_chat):
    chat = OpenAIChat(local_chat.name, base_url=openai_server, timeout=60, max_retries=0)
    reranker = Reranker(chat, max_tokens=12)
    result = reranker.rerank("How old was Marie Curie when she died?", FACTS)
    assert result.question_type == "calculation"
    assert isinstance(result.raw_reply, str)
    # Structure, not model quality: the LLM's own pick, or the fallback with its reason.
    if result.used_fallback:
        assert result.reason and result.selected == FACTS[:3]
    else:
        assert result.reason is None
        assert result.selected and all(f in FACTS for f in result.selected)
        assert len(set(result.ids)) == len(result.ids)


def test_prompt_numbers_the_facts_and_hides_ids():
    reranker = Reranker(None, max_facts=3)
    qtype = detect_question_type("Why did she move to Paris?")
    [message] = reranker.prompt_messages("Why did she move to Paris?", FACTS[:3], qtype)
    text = message["content"]
    assert message["role"] == "user"
    assert "Why did she move to Paris?" in text
    for i, fact in enumerate(FACTS[:3], start=1):
        assert f"[{i}] {fact.text}" in text
        assert fact.id not in text
    assert "$" not in text  # every placeholder was filled
    # Each type has its own prompt file.
    texts = {t.name: reranker.template(t).template for t in reranker.rules.all_types()}
    assert len(set(texts.values())) == 3


@pytest.mark.parametrize(
    ("reply", "selected", "reason"),
    [
        ("[3, 1]", ["q3", "q1"], None),
        ("Fact 2 and fact 2 again", ["q2"], None),
        ("I cannot tell from these facts.", ["q1", "q2", "q3"], "names no fact number in 1..5"),
        ("none", ["q1", "q2", "q3"], "said no fact is needed"),
        ("[7, 8]", ["q1", "q2", "q3"], "names no fact number in 1..5"),
    ],
)
def test_reply_shapes_through_the_real_server(serve_chat, reply, selected, reason):
    scripted = ScriptedChat(reply)
    chat = OpenAIChat("scripted", base_url=serve_chat(scripted), max_retries=0)
    result = Reranker(chat).rerank("Who was Marie Curie?", FACTS)
    assert result.question_type == "plain"
    assert result.ids == selected
    assert result.used_fallback == (reason is not None)
    assert (reason is None and result.reason is None) or reason in result.reason
    assert result.raw_reply == reply
    assert len(scripted.calls) == 1


def test_fallback_when_the_server_is_down(closed_port_url):
    chat = OpenAIChat("some-model", base_url=closed_port_url, max_retries=0, timeout=2)
    result = Reranker(chat, fallback_k=2).rerank("Why did she move?", FACTS)
    assert result.question_type == "inference"
    assert result.used_fallback and result.ids == ["q1", "q2"]
    assert "LLM call failed" in result.reason and "could not connect" in result.reason
    assert result.raw_reply is None


def test_fallback_when_the_call_times_out(serve_chat):
    release = threading.Event()
    chat = OpenAIChat("scripted", base_url=serve_chat(ScriptedChat("[1]", release=release)),
                      timeout=0.3, max_retries=0)
    try:
        result = Reranker(chat).rerank("When did she die?", FACTS)
    finally:
        release.set()
    assert result.used_fallback and result.ids == ["q1", "q2", "q3"]
    assert "timed out" in result.reason


def test_fallback_on_any_client_exception():
    class Broken:
        name = "broken"

        def complete(self, messages, **kwargs):
            raise ChatError("quota exceeded")

    result = Reranker(Broken()).rerank("Who?", FACTS)
    assert result.used_fallback and result.reason == "LLM call failed: quota exceeded"


def test_without_client_or_candidates():
    assert Reranker(None).rerank("Who?", FACTS).ids == ["q1", "q2", "q3"]
    assert Reranker(None).rerank("Who?", FACTS).reason == "no LLM client configured"
    empty = Reranker(ScriptedChat("[1]")).rerank("Who?", [])
    assert empty.selected == [] and not empty.used_fallback


def test_only_max_facts_are_shown():
    scripted = ScriptedChat("[4]")
    result = Reranker(scripted, max_facts=3).rerank("Who?", FACTS)
    assert result.used_fallback  # fact 4 was never shown, so it cannot be chosen
    shown = scripted.calls[0][0]["content"]
    assert FACTS[2].text in shown and FACTS[3].text not in shown


def test_custom_prompt_folder_and_type(tmp_path):
    (tmp_path / "plain.txt").write_text("Q: $question\n$facts\nCost: $$5\n")
    (tmp_path / "where.txt").write_text("Where? $question ($count facts)\n$facts\n")
    rules = QuestionTypeRules.default()
    rules.add(QuestionType("location", ("where",), "where.txt"), before="inference")
    scripted = ScriptedChat("[2]")
    reranker = Reranker(scripted, prompts_dir=tmp_path, rules=rules)
    result = reranker.rerank("Where did she live?", FACTS)
    assert (result.question_type, result.ids) == ("location", ["q2"])
    assert scripted.calls[0][0]["content"].startswith("Where? Where did she live? (5 facts)\n[1] ")
    reranker.rerank("Who was she?", FACTS)
    assert scripted.calls[1][0]["content"].endswith("Cost: $5")


def test_bad_prompt_files_raise_one_line(tmp_path):
    (tmp_path / "plain.txt").write_text("No placeholders here.\n")
    with pytest.raises(FactweaveError, match=r"lacks the placeholder\(s\) \$question, \$facts"):
        Reranker(ScriptedChat("[1]"), prompts_dir=tmp_path).rerank("Who?", FACTS)
    with pytest.raises(FactweaveError, match="calculation.txt is missing"):
        Reranker(ScriptedChat("[1]"), prompts_dir=tmp_path).rerank("When?", FACTS)


def test_shipped_prompts_exist_and_are_documented():
    readme = (prompts_dir() / "README.md").read_text()
    for name in ("plain", "calculation", "inference"):
        assert (prompts_dir() / "rerank" / f"{name}.txt").is_file()
        assert f"`rerank/{name}.txt`" in readme
