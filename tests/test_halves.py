"""The frozen dev and test halves of every evaluation set, and questions in a model's wording
(``factweave eval --half``, ``factweave eval reword``, ``--wording``)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA, REPO

from agent.errors import FactweaveError, InputError
from agent.eval.datasets import load_questions
from agent.eval.halves import half_of
from agent.eval.wordings import read_wordings, reword_questions, reworded

EVAL = DATA / "eval"
SETS = [("popqa", EVAL / "popqa_mini.json"), ("musique", EVAL / "musique_mini_with_paragraphs.json"),
        ("hotpotqa", EVAL / "hotpotqa_mini_with_context.json"), ("2wiki", EVAL / "2wiki_mini_questions.json"),
        ("kamel", DATA / "kamel_mini"), ("kamel-chat", DATA / "kamel_chat_mini")]


@pytest.mark.parametrize(("dataset", "path"), SETS, ids=[s[0] for s in SETS])
def test_every_question_is_in_one_half_whatever_the_sample(dataset, path):
    """The halves split every set: disjoint, together the whole set, and a question's half does not
    depend on the sample's size or seed (a limit takes its questions within the half; kamel-chat's
    seed also picks which relation a follow-up asks first, which makes another question)."""
    for seed in (0, 1):
        every = {q.id for q in load_questions(dataset, path, seed=seed)}
        dev = {q.id for q in load_questions(dataset, path, half="dev", seed=seed)}
        test = {q.id for q in load_questions(dataset, path, half="test", seed=seed)}
        assert dev | test == every and not dev & test
        assert {q.id for q in load_questions(dataset, path, half="test", limit=1, seed=seed)} <= test


def test_the_split_is_frozen():
    """The same ids fall in the same halves on every machine and in every version: a question read
    while building never moves into the test half (these ids are the bundled sets')."""
    pinned = {q.id: half_of(q.id) for q in load_questions("2wiki", EVAL / "2wiki_mini_questions.json")}
    assert list(pinned.values()) == ["test", "dev", "test"], pinned


def test_a_follow_up_and_its_standalone_twin_share_a_half():
    questions = load_questions("kamel-chat", DATA / "kamel_chat_mini")
    pairs = {}
    for q in questions:
        if q.meta["kind"] in ("follow-up", "standalone"):
            pairs.setdefault(q.meta["twin"], set()).add(q.meta["kind"])
    assert pairs and all(kinds == {"follow-up", "standalone"} for kinds in pairs.values())
    for half in ("dev", "test"):
        kinds = [q.meta["kind"] for q in load_questions("kamel-chat", DATA / "kamel_chat_mini", half=half)]
        assert kinds.count("follow-up") == kinds.count("standalone")


def test_an_unknown_half_is_refused():
    with pytest.raises(FactweaveError, match="unknown half 'train'"):
        load_questions("popqa", EVAL / "popqa_mini.json", half="train")


def test_a_wordings_file_names_its_bad_line_and_every_question_needs_one(tmp_path):
    questions = load_questions("popqa", EVAL / "popqa_mini.json")
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"id": questions[0].id, "text": "Reworded?", "model": "m"}) + "\n{oops\n")
    with pytest.raises(InputError, match=r"w\.jsonl:2: not JSON"):
        read_wordings(path)
    path.write_text(json.dumps({"id": questions[0].id, "text": "Reworded?", "model": "m"}) + "\n")
    with pytest.raises(FactweaveError, match=r"2 of the 3 questions have no wording"):
        reworded(questions, read_wordings(path), path)
    one = reworded(questions[:1], read_wordings(path), path)[0]
    assert (one.text, one.answers, one.id, one.meta["original"]) == \
        ("Reworded?", questions[0].answers, questions[0].id, questions[0].text)


def test_the_table_puts_the_halves_side_by_side_with_their_gaps(tmp_path):
    def report(half: str, em: float, wording: dict | None = None) -> dict:
        return {"dataset": "2wiki", "model": "m", "title": f"2WikiMultiHopQA ({half} half)",
                "settings": {"half": half, **({"wording": wording} if wording else {})}, "questions": [{}] * 4,
                "scores": {"agent": {"exact_accuracy": em, "f1": em, "proven": em, "wrong_grounded": 0.0,
                                     "seconds_per_question": 1.0}}}
    (tmp_path / "2wiki-m-dev.json").write_text(json.dumps(report("dev", 0.75)))
    test = report("test", 0.5)
    test["scores"]["agent"]["right_withheld"] = 0.25
    (tmp_path / "2wiki-m-test.json").write_text(json.dumps(test))
    (tmp_path / "2wiki-m-test-reworded.json").write_text(json.dumps(report("test", 0.25, {"model": "r", "file": "f"})))
    out = subprocess.run([sys.executable, "benchmarks/reasoning_table.py", str(tmp_path)], capture_output=True,
                         text=True, cwd=REPO, check=True).stdout
    assert "| 50.0 / 50.0 / 50.0 / 0.0 / 1.0; right withheld 25.0 |" in out, out
    assert "| 75.0 / 75.0 / 75.0 / 0.0 / 1.0 |" in out, out  # a run that did not count them says nothing
    gaps = [line for line in out.splitlines() if line.startswith("| gap")]
    assert len(gaps) == 2, out
    assert gaps[0].startswith("| gap dev - test") and gaps[0].endswith("| +25.0 / +25.0 / +25.0 / +0.0 |"), out
    assert gaps[1].startswith("| gap own wording - reworded") and gaps[1].endswith("| +25.0 / +25.0 / +25.0 / +0.0 |")


def test_swapped_cases_keep_the_question_and_subject_and_take_another_relation_of_the_same_kind():
    """The check's cases it must refuse (benchmarks/check_scores.py): a right one-triple answer with
    another case's relation and object, of the same kind of value, from the same half."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from check_scores import swapped

    def case(i, half, question, fact, right=True):
        return {"id": f"kamel/{i}", "half": half, "set": "kamel", "question": question, "facts": [fact],
                "answer": fact.split("> <")[-1].rstrip(" .>"), "right": right, "passed": right}

    cases = [case(1, "dev", "Where was Ada Varga born?", "<Ada Varga> <place of birth> <Pécs> ."),
             case(2, "dev", "What does Ines Varro do?", "<Ines Varro> <occupation> <painter> ."),
             case(3, "dev", "When was Ines Varro born?", "<Ines Varro> <date of birth> <1901-02-03> ."),
             case(4, "test", "Which party is Lou Brandt in?", "<Lou Brandt> <member of political party> <Greens> ."),
             case(5, "dev", "What genre is Lou Brandt?", "<Lou Brandt> <genre> <jazz> .", right=False)]
    # The knowledge the values come from: a relation of numbers and one of things (the shared
    # data's PopQA and KAMEL are not needed).
    knowledge = [("Zorblax Station", "inception", "1987"), ("Mira Quell", "place of birth", "Lyon")]
    made = swapped(cases, knowledge)
    assert made and all(not c["right"] and c["set"] in ("kamel (swapped)", "kamel (swapped across kinds)")
                        for c in made)
    by_question: dict[str, list[str]] = {}
    for c in made:
        if c["set"] == "kamel (swapped)":
            by_question.setdefault(c["question"], []).append(c["facts"][0])
    # the same subject, another relation of the same kind, from its own half; a wrong case lends nothing
    assert sorted(by_question["Where was Ada Varga born?"]) == ["<Ada Varga> <occupation> <painter> ."]
    assert by_question["What does Ines Varro do?"] == ["<Ines Varro> <place of birth> <Pécs> ."]
    assert "When was Ines Varro born?" not in by_question  # no other date relation in its half
    assert "Which party is Lou Brandt in?" not in by_question  # alone in the test half
    # and one across kinds for each right case: a relation of numbers and one of its values (in
    # the bundled value types and the knowledge) for a thing, a relation of things for a date
    from agent.knowledge.facts import parse_triple
    from agent.pipeline.relations import is_number
    from agent.pipeline.fact_agent import default_relations

    relations = default_relations(None)
    across = {c["question"]: parse_triple(c["facts"][0]) for c in made if c["set"] == "kamel (swapped across kinds)"}
    assert set(across) == {"Where was Ada Varga born?", "What does Ines Varro do?", "When was Ines Varro born?",
                           "Which party is Lou Brandt in?"}
    for question in ("Where was Ada Varga born?", "What does Ines Varro do?", "Which party is Lou Brandt in?"):
        assert across[question][1] in relations.numeric and is_number(across[question][2]), across[question]
    assert across["When was Ines Varro born?"][1] in relations.items, across["When was Ines Varro born?"]
    assert {t[0] for t in across.values()} == {"Ada Varga", "Ines Varro", "Lou Brandt"}


def test_made_wrong_cases_cut_a_chain_short_restate_a_statement_or_take_another_name():
    """The check's other made cases (benchmarks/check_scores.py): a right two-triple chain's
    first fact answered by the step on the way; a right statement answer given as the whole
    statement; a date answered by a name the facts hold, a name answered by the question's own."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from check_scores import cut_short, renamed, restated

    chain = {"id": "kamel-chat/1", "half": "dev", "set": "kamel-chat", "right": True, "passed": True,
             "question": "What is the official language of the country Ada Varga played for?",
             "facts": ["<Ada Varga> <country for sport> <Norvania> .", "<Norvania> <official language> <Norvish> ."],
             "answer": "Norvish"}
    told = {"id": "popqa/2", "half": "dev", "set": "popqa", "right": True, "passed": True,
            "question": "When was Ines Varro born?", "facts": ["Ines Varro (born 1901 in Pécs) was a painter."],
            "answer": "1901"}
    wrong = {**told, "id": "popqa/3", "right": False}
    [short] = cut_short([chain, told, wrong])
    assert short["facts"] == chain["facts"][:1] and short["answer"] == "Norvania" and not short["right"]
    [whole] = restated([chain, told, wrong])
    assert whole["answer"] == "Ines Varro (born 1901 in Pécs) was a painter" and not whole["right"]
    made = {c["id"]: c for c in renamed([chain, told, wrong])}
    assert made["popqa/2/undated"]["answer"] == "Pécs"  # a date answered by a name of the fact
    assert made["kamel-chat/1/named"]["answer"] == "Ada Varga"  # the question's own name
    assert "popqa/3/named" not in made and "popqa/3/undated" not in made  # a wrong case lends nothing


@pytest.mark.model
def test_a_follow_up_is_reworded_in_its_conversation(local_chat):
    """A follow-up ("What about their occupation?") is reworded by a model that sees the turn before
    it, as a person rewording it would: the question asked and its answer; a question asked alone
    is reworded alone. Without the conversation the model had guessed who "they" were ("the record
    label of their band", of a singer)."""
    asked: list[list[dict]] = []

    class Recorded:
        name = local_chat.name

        def complete(self, messages, **options):
            asked.append(messages)
            return local_chat.complete(messages, **options)

    questions = load_questions("kamel-chat", DATA / "kamel_chat_mini")
    follow_up = next(q for q in questions if q.meta["kind"] == "follow-up")
    alone = next(q for q in questions if q.meta["kind"] == "standalone")
    rows = reword_questions([follow_up, alone], Recorded())
    assert [r["id"] for r in rows] == [follow_up.id, alone.id] and all(r["text"] for r in rows)
    earlier, answer = follow_up.history[0]["content"], follow_up.history[-1]["content"].splitlines()[-1]
    shown = asked[0][-1]["content"]
    assert earlier in shown and answer.removeprefix("Answer:").strip() in shown and shown.endswith(follow_up.text)
    assert asked[1][-1]["content"] == f"Question: {alone.text}"
