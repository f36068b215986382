"""Follow-ups made standalone by rules against the previous turn (no model)."""
from __future__ import annotations

import pytest

from agent.pipeline.conversation import previous_turn, rewrite_by_rules

BUCK = [{"role": "user", "content": "Where did Buck Owens die?"},
        {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"}]


@pytest.mark.parametrize(("question", "standalone"), [
    # pronouns: subject, object, possessive
    ("What instrument did he play?", "What instrument did Buck Owens play?"),
    ("Who married her?", "Who married Buck Owens?"),
    ("And what is her occupation?", "What is Buck Owens's occupation?"),
    ("what about his brother?", "What is Buck Owens's brother?"),
    # "there" is the previous answer
    ("Who else died there?", "Who else died in Bakersfield?"),
    # ellipsis: completed from the previous question
    ("and in which year?", "Where did Buck Owens die? In which year?"),
    ("What about Merle Haggard?", "Where did Merle Haggard die?"),
    # "what about" a thing the pronoun ties to the previous subject: that thing, asked of it (the
    # previous question's relation is not kept: "the fields of work of the languages X speak")
    ("What about the languages they speak?", "What are the languages Buck Owens speak?"),
    ("And what about the city he was born in?", "What is the city Buck Owens was born in?"),
    ("what about the band she played with?", "What is the band Buck Owens played with?"),
    # a question that names nothing and refers to nothing is asked of the previous subject
    ("Where did the people who died?", "Where did the people who died? (Buck Owens)"),
    ("Which record label were the musicians signed to?", "Which record label were the musicians signed to? (Buck Owens)"),
    # a topic change names its own subject and is kept as it is
    ("Where was Marie Curie born?", "Where was Marie Curie born?"),
    ("What is the capital of Norway?", "What is the capital of Norway?"),
])
def test_rules_resolve_against_the_previous_turn(question, standalone):
    assert rewrite_by_rules(question, BUCK).standalone == standalone


def test_no_history_and_how_is_said():
    alone = rewrite_by_rules("What instrument did he play?", [])
    assert alone.standalone == "What instrument did he play?" and alone.how == "no earlier turn"
    assert "'he' -> 'Buck Owens'" in rewrite_by_rules("What instrument did he play?", BUCK).how
    assert "not a follow-up" in rewrite_by_rules("Where was Marie Curie born?", BUCK).how


def test_subject_comes_from_the_stated_fact_else_the_question():
    no_facts = [{"role": "user", "content": "Where was Laurie Graff born?"},
                {"role": "assistant", "content": "Answer: I don't know."}]
    prev = previous_turn(no_facts)
    assert prev.subject == "Laurie Graff" and prev.answer == ""
    assert rewrite_by_rules("What is her occupation?", no_facts).standalone == "What is Laurie Graff's occupation?"
    # the newest turn counts, not the first
    longer = BUCK + [{"role": "user", "content": "Where was Laurie Graff born?"},
                     {"role": "assistant", "content": "Fact: <Laurie Graff> <place of birth> <New York> .\nAnswer: New York"}]
    assert rewrite_by_rules("What is her occupation?", longer).standalone == "What is Laurie Graff's occupation?"
