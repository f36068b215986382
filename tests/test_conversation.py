"""How a conversation reaches the agent: the question and the earlier turns, from every message
shape an entry point receives, and how the agent bounds them (no model needed)."""
from __future__ import annotations

import pytest

from agent.errors import FactweaveError
from agent.pipeline.conversation import MAX_CHARS, MAX_TURNS, split_conversation, trim_history

BUCK = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Where did Buck Owens die?"},
        {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"},
        {"role": "user", "content": "What instrument did he play?"}]


def test_the_last_user_message_is_the_question_and_the_turns_before_it_the_history():
    question, history = split_conversation(BUCK)
    assert question == "What instrument did he play?"
    assert history == BUCK[1:3]  # the system message is no turn; the assistant's Fact: line is kept as it is
    assert split_conversation(BUCK[1:2]) == ("Where did Buck Owens die?", [])
    # A trailing assistant message (nothing asked after it) is not history of the question.
    assert split_conversation(BUCK + [{"role": "assistant", "content": "Answer: guitar"}])[1] == BUCK[1:3]


def test_langchain_messages_pairs_and_content_parts_are_turns():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    lc = [SystemMessage("Be brief."), HumanMessage(BUCK[1]["content"]), AIMessage(BUCK[2]["content"]),
          HumanMessage(BUCK[3]["content"])]
    assert split_conversation(lc) == split_conversation(BUCK)
    pairs = [("human", BUCK[1]["content"]), ("ai", BUCK[2]["content"]), ("human", BUCK[3]["content"])]
    assert split_conversation(pairs) == split_conversation(BUCK)
    parts = [{"role": "user", "content": [{"type": "text", "text": "Where did "}, {"type": "text", "text": "he die?"}]}]
    assert split_conversation(parts) == ("Where did he die?", [])


def test_a_conversation_without_a_question_is_refused_in_one_line():
    for bad in ([], [{"role": "system", "content": "Hi"}], [{"role": "user", "content": "  "}]):
        with pytest.raises(FactweaveError, match="no user message"):
            split_conversation(bad)
    with pytest.raises(FactweaveError, match="list of messages"):
        split_conversation("Where did Buck Owens die?")
    with pytest.raises(FactweaveError, match="role"):
        split_conversation([{"content": "Hi"}])


def test_history_keeps_the_newest_turns_within_the_turn_bound():
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(10)]
    assert MAX_TURNS == 6
    assert trim_history(turns) == turns[-6:]
    assert trim_history(turns, max_turns=2) == turns[-2:]
    assert trim_history(turns, max_turns=0) == []
    question, history = split_conversation([*turns, {"role": "user", "content": "and then?"}])
    assert question == "and then?" and history == turns  # passed on whole: the agent bounds it
    # Empty turns and system messages take no place.
    noisy = [turns[0], {"role": "system", "content": "x"}, {"role": "assistant", "content": ""}, turns[1]]
    assert trim_history(noisy) == turns[:2]


def test_history_keeps_the_newest_turns_within_the_character_budget():
    assert MAX_CHARS == 4000
    turns = [{"role": "user", "content": "q" * 1500}, {"role": "assistant", "content": "a" * 1500},
             {"role": "user", "content": "r" * 1500}, {"role": "assistant", "content": "b" * 1500}]
    kept = trim_history(turns)
    assert kept == turns[-2:] and sum(len(t["content"]) for t in kept) <= MAX_CHARS
    assert trim_history(turns, max_chars=3000) == turns[-2:]
    assert trim_history(turns, max_chars=2999) == turns[-1:]
    # A newest turn longer than the budget keeps its end (where an agent's reply has its answer).
    long = [{"role": "assistant", "content": "x" * 5000 + "\nAnswer: guitar"}]
    kept = trim_history(long)
    assert len(kept[0]["content"]) == MAX_CHARS and kept[0]["content"].endswith("Answer: guitar")


def test_the_cli_reads_a_history_file_whole_and_refuses_a_bad_one(tmp_path):
    import json

    from click.testing import CliRunner

    from agent.cli.ask import read_history
    from agent.cli.main import cli

    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(8)]
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(turns))
    assert read_history(path) == turns  # the agent bounds it by its own options
    assert "--history" in CliRunner().invoke(cli, ["ask", "--help"]).output
    for bad in ('{"role": "user"}', "[1, 2]", "not json"):
        path.write_text(bad)
        result = CliRunner().invoke(cli, ["ask", "Where did he die?", "--history", str(path)])
        assert result.exit_code == 2 and "a JSON list of" in result.output, result.output
