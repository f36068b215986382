"""KAMEL conversations (`factweave eval kamel-chat`): follow-ups with their standalone twins and
two-hop chains built from the KB, deterministic by seed; a CLI run on SmolLM2."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import DATA, run_cli

from agent.baselines.web_rag import ListedFactsReader
from agent.errors import FactweaveError
from agent.eval.conversations import FOLLOW_UPS, kamel_chat_questions
from agent.eval.datasets import load_questions
from agent.eval.methods import conversation
from agent.knowledge.kamel import demo_kamel_root
from agent.knowledge.loaders import load_facts

MINI = DATA / "kamel_chat_mini"


@pytest.fixture(scope="module")
def demo():
    root = demo_kamel_root()
    return {"questions": kamel_chat_questions(root, limit=40, seed=0),
            "kb": {f.text for f in load_facts(root)}, "dev": {f.text for f in load_facts(root, splits=("dev",))}}


def test_the_fixture_folder_gives_known_items():
    questions = load_questions("kamel-chat", MINI)
    assert [q.id for q in questions] == [
        "kamel-chat/follow-up/P106/dev/1+P19/train/1", "kamel-chat/standalone/P106/dev/1+P19/train/1",
        "kamel-chat/two-hop/P17/dev/1+P37/dev/1", "kamel-chat/two-hop/P27/dev/1+P37/dev/2"]
    follow, alone, banff, rivera = questions
    assert follow.text in FOLLOW_UPS["P19"]["they"] and follow.answers == ("Xushui District",)
    assert follow.history == ({"role": "user", "content": "What is the occupation of Shi Changxu?"},
                              {"role": "assistant",
                               "content": "Fact: <Shi Changxu> <occupation> <scientist> .\nAnswer: scientist"})
    assert not follow.meta["in_web"]  # the place of birth is on a train row: not in the web
    assert alone.text == "Where was Shi Changxu born?" and alone.history == () and alone.answers == follow.answers
    assert banff.text == "What is the official language of the country Banff National Park Pavilion is located in?"
    assert banff.answers == ("French", "English") and banff.meta["bridge"] == "Canada" and banff.meta["in_web"]
    assert rivera.text == "What is the official language of the country Ariel Rivera is a citizen of?"
    # limit counts items: one follow-up item is two questions.
    assert [q.meta["stratum"] for q in load_questions("kamel-chat", MINI, limit=2)] == \
        ["follow-up", "standalone", "two-hop"]


def test_construction_is_deterministic_by_seed(demo):
    again = kamel_chat_questions(demo_kamel_root(), limit=40, seed=0)
    assert [(q.id, q.text, q.answers, q.history) for q in again] == \
        [(q.id, q.text, q.answers, q.history) for q in demo["questions"]]
    other = kamel_chat_questions(demo_kamel_root(), limit=40, seed=1)
    assert [q.id for q in other] != [q.id for q in demo["questions"]]
    counts = Counter(q.meta["stratum"] for q in demo["questions"])
    assert counts == Counter({"follow-up": 20, "standalone": 20, "two-hop": 20})
    # Items whose facts are all in the web (the dev split) come first: 40 items are all such.
    assert all(q.meta["in_web"] for q in demo["questions"])
    assert len({tuple(q.meta["relations"]) for q in demo["questions"] if q.meta["kind"] == "two-hop"}) > 3
    # One kind only: the same items of that kind, first as many as asked.
    chains = kamel_chat_questions(demo_kamel_root(), limit=30, seed=0, kind="two-hop")
    assert len(chains) == 30 and {q.meta["stratum"] for q in chains} == {"two-hop"}
    mixed = [q.id for q in demo["questions"] if q.meta["kind"] == "two-hop"]
    assert [q.id for q in chains][:len(mixed)] == mixed
    with pytest.raises(ValueError, match="kind must be one of"):
        kamel_chat_questions(demo_kamel_root(), limit=2, kind="three-hop")


def test_follow_ups_name_no_subject_and_their_history_does(demo):
    questions = demo["questions"]
    follow_ups = [q for q in questions if q.meta["kind"] == "follow-up"]
    twins = {q.id.replace("/standalone/", "/"): q for q in questions if q.meta["kind"] == "standalone"}
    for q in follow_ups:
        subject = q.meta["subject"]
        assert subject not in q.text and subject.split()[0] not in q.text.split()
        asked, reply = q.history
        assert asked["role"] == "user" and subject in asked["content"]
        fact_line, answer_line = reply["content"].split("\n")
        assert fact_line.startswith(f"Fact: <{subject}> <") and fact_line[len("Fact: "):] in demo["kb"]
        assert answer_line == "Answer: " + fact_line.rsplit("<", 1)[1].split(">")[0]
        twin = twins[q.id.replace("/follow-up/", "/")]
        assert subject in twin.text and twin.history == () and twin.answers == q.answers
        assert all(f in demo["kb"] for f in q.meta["facts"])
        assert q.meta["in_web"] == all(f in demo["dev"] for f in q.meta["facts"])
        # The gold is the second relation's objects, named in its facts.
        assert {f.rsplit("<", 1)[1].split(">")[0] for f in q.meta["facts"]} <= set(q.answers)


def test_two_hop_golds_follow_real_kb_chains(demo):
    chains = [q for q in demo["questions"] if q.meta["kind"] == "two-hop"]
    for q in chains:
        subject, bridge = q.meta["subject"], q.meta["bridge"]
        first, *second = q.meta["facts"]
        assert first.startswith(f"<{subject}> <") and first.endswith(f"<{bridge}> .") and first in demo["kb"]
        assert second and all(f.startswith(f"<{bridge}> <") and f in demo["kb"] for f in second)
        assert {f.rsplit("<", 1)[1].split(">")[0] for f in second} <= set(q.answers)
        assert subject in q.text and bridge not in q.text and q.history == ()
        assert q.meta["in_web"] == all(f in demo["dev"] for f in q.meta["facts"])


def test_methods_put_the_conversation_in_the_prompt(demo):
    follow = next(q for q in demo["questions"] if q.meta["kind"] == "follow-up")
    messages = conversation(follow)
    assert messages[:2] == list(follow.history) and messages[2] == {"role": "user", "content": follow.text}
    alone = next(q for q in demo["questions"] if q.meta["kind"] == "standalone")
    assert conversation(alone) == alone.text
    reader = ListedFactsReader.__new__(ListedFactsReader)  # only its prompt: no model
    from string import Template

    reader.facts_template = Template("Facts:\n$facts")
    turns = reader.conversation(conversation(follow), ["<a> <b> <c> ."])
    assert turns[0] == {"role": "system", "content": "Facts:\n[1] <a> <b> <c> ."} and turns[1:] == messages


def test_kamel_chat_takes_only_conversational_methods(tmp_path):
    from agent.eval.evaluation import run_evaluation
    from agent.settings import load_settings

    with pytest.raises(FactweaveError, match="kgd does not take a conversation"):
        run_evaluation("kamel-chat", settings=load_settings(model="smollm2-135m", cache=tmp_path), data=MINI,
                       methods=("refactx", "kgd"), limit=1, loaded=object(), progress=False)


@pytest.mark.model
def test_cli_kamel_chat_llm_only_and_refactx(tmp_path, cache_dir):
    out = tmp_path / "out"
    proc = run_cli("eval", "kamel-chat", "--data", str(MINI), "--method", "llm-only", "--method", "refactx",
                   "--limit", "2", "--no-judge", "--model", "smollm2-135m", "--max-tokens", "24", "--out", str(out),
                   cache=cache_dir)
    assert proc.returncode == 0, proc.stderr
    md = (out / "kamel-chat-smollm2-135m.md").read_text()
    assert md.splitlines()[0] == "### KAMEL conversations, 3 questions, smollm2-135m"
    header = next(line for line in md.splitlines() if line.startswith("| method | answered"))
    assert "| F1 | grounded |" in header
    assert "Follow-ups (pronoun, the first turn given)" in md and "Per stratum: mean token F1:" in md
    data = json.loads((out / "kamel-chat-smollm2-135m.json").read_text())
    assert data["methods"] == ["llm-only", "refactx"]
    # Every fact of the folder, all splits: 6 rows, two official languages each for Canada and the Philippines.
    assert data["settings"]["knowledge"]["kb_facts"] == 8
    assert data["settings"]["web_reachable"] == 1  # the follow-up's fact is on a train row
    scores = data["scores"]
    assert "f1" in scores["refactx"] and scores["llm-only"]["grounded"] is None
    assert scores["refactx"]["follow_up"]["items"] == 1
    first = data["questions"][0]
    assert first["id"].startswith("kamel-chat/follow-up/") and "Shi Changxu" not in first["question"]
    for method in ("llm-only", "refactx"):
        row = first["methods"][method]
        assert row["history"][0]["content"] == "What is the occupation of Shi Changxu?"
        assert row["in_web"] is False and 0.0 <= row["f1"] <= 1.0
    kb = {f.text for f in load_facts(MINI)}
    for q in data["questions"]:
        assert all(f["text"] in kb for f in q["methods"]["refactx"]["facts"])
