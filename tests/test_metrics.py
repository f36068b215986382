"""Answer normalization, matching and the accuracy / precision scores, on hand-checked cases."""
from __future__ import annotations

import pytest

from agent.eval.metrics import (
    Record,
    Score,
    approximate_match,
    exact_match,
    is_abstention,
    normalize_answer,
    score,
    token_f1,
)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Beatles!", "beatles"),
        ("  an   Apple\tPie. ", "apple pie"),
        ("A", ""),  # an answer that is only an article is empty
        ("Guinea-Bissau", "guinea bissau"),
        ("AC/DC", "ac dc"),
        ("U.S.", "us"),
        ("don’t", "dont"),  # typographic apostrophe
        ("ＴＡＭＩＬ", "tamil"),  # fullwidth letters fold under NFKC
        ("Straße", "strasse"),
        ("C++", "c++"),
        ("C#", "c#"),
        ("Theatre", "theatre"),  # "the" is dropped as a word only
        ("", ""),
        ("...", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


@pytest.mark.parametrize(
    "text",
    ["I don't know", "I don't know.", "i do not know", "I DON'T KNOW!", "Unknown", "unknown.",
     "I don’t know the answer.", "No idea", "I cannot answer"],
)
def test_abstentions(text):
    assert is_abstention(text)


@pytest.mark.parametrize("text", ["", "   ", "Paris", "I know", "unknown soldier", "I don't know Paris well"])
def test_not_abstentions(text):
    assert not is_abstention(text)


def test_exact_match_normalizes_case_punctuation_and_articles():
    assert exact_match("the united states of america.", ["United States of America"])
    assert exact_match("TAMIL", ["Malayalam", "Tamil"])  # any gold
    assert not exact_match("Tamil language film", ["Tamil"])
    assert not exact_match("C", ["C++", "C#"])


def test_empty_prediction_never_matches():
    for prediction in ["", "  ", "?!", "The"]:
        assert not exact_match(prediction, ["", "The"])
        assert not approximate_match(prediction, ["Paris", ""])


def test_empty_gold_never_matches():
    assert not exact_match("Paris", [""])
    assert not approximate_match("Paris", ["", "..."])


def test_approximate_match_is_whole_word_containment_either_way():
    assert approximate_match("It was filmed in Paris, France.", ["Paris"])
    assert approximate_match("York", ["New York City"])  # prediction inside gold
    assert approximate_match("New York", ["York"])
    assert not approximate_match("Parisian", ["Paris"])  # not a whole word
    assert not approximate_match("Paris Texas", ["Texas Paris"])  # order matters
    assert not approximate_match("C", ["C++"])


def test_score_counts_and_rates():
    records = [
        Record("Tamil", ["Tamil", "ta"]),  # exact
        Record("It is Tamil.", ["Tamil"]),  # approximate only
        Record("Hindi", ["Tamil"]),  # wrong
        Record("I don't know.", ["Tamil"]),  # abstained: not answered
        Record("", ["Tamil"]),  # empty: not answered, not an abstention
        Record("Tamil", ["Tamil"], answered=False),  # truncated: not answered, not correct
    ]
    result = score(records)
    # F1: 1 (exact) + 0.5 ("it is tamil": 1 of 3 words) + 0 (wrong); the unanswered score 0.
    assert result == Score(total=6, answered=3, exact_correct=1, approximate_correct=2, f1_sum=1.5)
    assert result.f1 == pytest.approx(1.5 / 6) and result.f1_answered == pytest.approx(1.5 / 3)
    assert result.exact_accuracy == pytest.approx(1 / 6)
    assert result.exact_precision == pytest.approx(1 / 3)
    assert result.approximate_accuracy == pytest.approx(2 / 6)
    assert result.approximate_precision == pytest.approx(2 / 3)


def test_score_accepts_plain_tuples_and_has_no_precision_without_answers():
    result = score([("I don't know", ["Paris"], True), ("Paris", ["Paris"], False)])
    assert (result.total, result.answered) == (2, 0)
    assert result.exact_accuracy == 0.0
    assert result.exact_precision is None and result.approximate_precision is None
    assert result.as_dict()["exact_precision"] is None


def test_score_of_nothing():
    result = score([])
    assert result.total == 0 and result.exact_accuracy is None and result.exact_precision is None


def test_token_f1_on_hand_checked_cases():
    assert token_f1("Paris", ["Paris"]) == 1.0
    # Partial overlap: 2 shared words, precision 2/4, recall 2/2 -> F1 2/3.
    assert token_f1("Eiffel Tower in Paris", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    # Articles and punctuation are normalized away before counting ("the", ",", ".").
    assert token_f1("The Eiffel Tower, Paris.", ["eiffel tower paris"]) == 1.0
    # The best gold alias counts: "Detroit" is 1/2 of "Detroit, Michigan" but all of "Detroit".
    assert token_f1("Detroit", ["Detroit, Michigan"]) == pytest.approx(2 / 3)
    assert token_f1("Detroit", ["Detroit, Michigan", "Detroit"]) == 1.0
    # Repeated words count once per occurrence in both (SQuAD's multiset overlap).
    assert token_f1("New New York", ["New York"]) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    # Abstentions, empty predictions, no overlap, empty golds: 0.
    assert token_f1("I don't know.", ["Paris"]) == 0.0
    assert token_f1("", ["Paris"]) == 0.0
    assert token_f1("the", ["the"]) == 0.0  # only an article: empty once normalized
    assert token_f1("Lyon", ["Paris"]) == 0.0
    assert token_f1("Paris", []) == 0.0 and token_f1("Paris", [""]) == 0.0
