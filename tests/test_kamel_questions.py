"""KAMEL questions: templates, gold answers with aliases, ids, round-robin limits."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.errors import FactweaveError, InputError
from agent.knowledge.kamel import Question, kamel_questions, question_templates

KAMEL = Path(__file__).resolve().parent / "data" / "kamel_mini"


def test_dev_questions_fill_the_template_with_the_subject():
    questions = kamel_questions(KAMEL)
    assert questions[0] == Question(
        id="P19/dev/1",
        text="Where was Laurie Graff born?",
        answers=("New York",),
        subject="Laurie Graff",
        relation="P19",
        objects=(("New York",),),  # one gold object: its label, then its aliases
    )
    assert len(questions) == 6


def test_round_robin_order_across_relations_in_numeric_order():
    ids = [q.id for q in kamel_questions(KAMEL)]
    assert ids == ["P19/dev/1", "P106/dev/1", "P364/dev/1", "P19/dev/2", "P106/dev/2", "P364/dev/2"]


def test_limit_takes_a_prefix_that_covers_relations_first():
    assert [q.relation for q in kamel_questions(KAMEL, limit=3)] == ["P19", "P106", "P364"]
    assert kamel_questions(KAMEL, limit=4) == kamel_questions(KAMEL)[:4]
    assert kamel_questions(KAMEL, limit=0) == []
    assert len(kamel_questions(KAMEL, limit=100)) == 6


def test_uneven_relations_keep_going_after_the_short_ones_run_out():
    ids = [q.id for q in kamel_questions(KAMEL, split="train")]
    # P106 train has a fourth (invented) row; it comes last.
    assert ids[-2:] == ["P364/train/3", "P106/train/4"]


def test_test_split_answers_include_chosen_rdf_and_aliases_once():
    by_subject = {q.subject: q for q in kamel_questions(KAMEL, split="test")}
    assert by_subject["Parandhu Sella Vaa"].answers == ("Tamil", "ta", "Tamil language")
    assert by_subject["Sewall Pettingill"].answers == ("Belgrade", "Belgrade, Maine", "Belgrade, ME")
    # Two objects: all names of both, label of each first.
    assert by_subject["Eric Schermerhorn"].answers == ("guitarist", "guitar player", "guitarists", "composer")
    assert by_subject["Invented Person"].answers == ("Tarbes",)
    assert by_subject["Invented Film"].answers == ("Tamil", "ta", "Tamil language")
    assert by_subject["Invented Film"].id == "P364/test/3"


def test_relations_filter():
    questions = kamel_questions(KAMEL, relations=["P364"])
    assert [q.text for q in questions] == [
        "What is the original language of Nee Unnai Arindhaal?",
        "What is the original language of Kalakalappu 2?",
    ]


def test_duplicate_identical_templates_are_accepted_but_conflicting_ones_are_not(tmp_path):
    root = tmp_path / "kamel"
    shutil.copytree(KAMEL, root)
    templates = root / "question-templates.csv"
    with open(templates, "a", encoding="utf-8") as out:
        out.write("P19, Where was [S] born?\n")
    assert question_templates(root)["P19"] == "Where was [S] born?"
    with open(templates, "a", encoding="utf-8") as out:
        out.write("P19, Where did [S] grow up?\n")
    with pytest.raises(InputError, match=r"question-templates\.csv:5: a second, different template for P19"):
        question_templates(root)


def test_missing_template_and_bad_template_line(tmp_path):
    root = tmp_path / "kamel"
    shutil.copytree(KAMEL, root)
    templates = root / "question-templates.csv"
    templates.write_text("P364, What is the original language of [S]?\n", encoding="utf-8")
    with pytest.raises(InputError, match="no question template for P19"):
        kamel_questions(root)
    templates.write_text("P19 Where was [S] born?\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"question-templates\.csv:1: expected 'P<id>, <question with \[S\]>'"):
        kamel_questions(root)


def test_negative_limit_is_refused():
    with pytest.raises(FactweaveError, match="limit"):
        kamel_questions(KAMEL, limit=-1)
