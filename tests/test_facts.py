"""The fact verbalization, its bracket rule and inverse facts."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.knowledge.facts import Fact, clean_label, inverse_predicate, verbalize


def test_text_is_the_verbalization():
    fact = Fact("Paris", "country", "France", source="x.tsv:1")
    assert fact.text == "<Paris> <country> <France> ."


def test_brackets_in_labels_become_guillemets_and_originals_are_kept():
    fact = Fact("x <y> z", "less than", "a > b")
    assert fact.text == "<x ‹y› z> <less than> <a › b> ."
    assert fact.subject == "x <y> z"


def test_whitespace_is_folded():
    assert clean_label("  Kerala Congress  (Jacob)\t") == "Kerala Congress (Jacob)"


def test_inverse_predicate():
    assert inverse_predicate("capital of") == "has capital"
    assert inverse_predicate("place of birth") == "place of birth of"


def test_inverse_swaps_ends_and_keeps_source():
    fact = Fact("Paris", "capital of", "France", source="x.tsv:3")
    assert fact.inverse() == Fact("France", "has capital", "Paris", source="x.tsv:3")
    assert fact.inverse("capital").predicate == "capital"


@given(st.text(), st.text(), st.text())
def test_labels_never_add_delimiters(subject, predicate, obj):
    text = verbalize(subject, predicate, obj)
    # Exactly the six delimiters the format writes; labels contribute none.
    assert text.count("<") == 3 and text.count(">") == 3
