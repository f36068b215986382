"""When a stated fact supports an answer: it must be about the question (no model needed)."""
from __future__ import annotations

import pytest

from agent.pipeline.fact_agent import _supported, about_question, knows


@pytest.mark.parametrize(("question", "fact", "expected"), [
    # a name of the question, whole word, any case
    ("Where was Kuni Asahiko born?", "<Kuni Asahiko> <place of birth> <Kyoto> .", True),
    ("Who founded Zorblax Station?", "Zorblax was founded in 1987 by Mira Quell.", True),
    ("who is the father of ada lovelace", "Ada Lovelace was the daughter of Lord Byron.", True),
    ("How old was Marie Curie in 1900?", "In 1900 she taught physics.", True),  # a year is a name too
    # unrelated facts the per-question tree offered
    ("Where was Kuni Asahiko born?", "Konstantina Kouneva is a Bulgarian immigrant in Greece.", False),
    ("Where was Laurie Graff born?", "Mira Quell was born in Oslo in 1951.", False),
    ("What is the original language of Kalakalappu 2?", "The 2 films were shot in 2 weeks.", False),
    ("Who founded Zorblax Station?", "Zorblaxian rock is red.", False),  # whole words only
    # no name in the question: its content words count
    ("what causes tides", "The Moon's gravity causes tides.", True),
    ("what causes tides", "The Moon orbits the Earth.", False),
])
def test_about_question(question, fact, expected):
    assert about_question(question, [fact]) is expected


def test_supported_needs_an_answer_a_fact_and_a_fact_on_topic():
    assert _supported({"answer": "Kyoto", "facts": [{"text": "x"}], "on_topic": True})
    assert not _supported({"answer": "Kyoto", "facts": [], "on_topic": True})
    assert not _supported({"answer": "Kyoto", "facts": [{"text": "x"}], "on_topic": False})
    assert not _supported({"answer": "I don't know.", "facts": [{"text": "x"}], "on_topic": True})
    assert not _supported({"answer": "", "facts": [], "skipped": "no fact retrieved"})
    assert knows("Kyoto") and not knows("  i don't know, sorry") and not knows(" ")
