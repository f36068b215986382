"""Typed values read from facts: dates parsed by python-dateutil (a part not given stays 0),
numbers, the dates of a life as biographies write them, and comparisons that decide only what
the text says."""
from __future__ import annotations

import pytest

from agent.pipeline.values import compare_dates, dates_in, life_dates, parse_date, parse_number, years_between


@pytest.mark.parametrize(("text", "key"), [
    ("12 March 1901", (1901, 3, 12)), ("May 5, 1934", (1934, 5, 5)), ("1974", (1974, 0, 0)),
    ("March 1901", (1901, 3, 0)), ("2 February 1948.", (1948, 2, 2)), ("1974-07-21", (1974, 7, 21)),
])
def test_a_date_is_what_its_text_gives_and_no_more(text, key):
    assert parse_date(text).key == key


@pytest.mark.parametrize("text", ["unknown", "Oliver Drake", "20th century", ""])
def test_text_that_is_no_date_is_none(text):
    assert parse_date(text) is None


def test_dates_in_a_sentence_in_order():
    found = dates_in("Melvin Kranzberg (November 22, 1917 – December 6, 1995) taught from 1952 until 1971.")
    assert [d.key for d in found] == [(1917, 11, 22), (1995, 12, 6), (1952, 0, 0), (1971, 0, 0)]
    assert dates_in("Pi is 3.1415 and a crowd of 1,200 came.") == []


@pytest.mark.parametrize(("text", "birth", "death"), [
    ("Paul Amsel (12 March 1901 – 4 May 1970) was a German director.", (1901, 3, 12), (1970, 5, 4)),
    ("Henry King( January 24, 1886 June 29, 1982) was an American actor.", (1886, 1, 24), (1982, 6, 29)),
    ("Kevin Hennessy( born 8 March 1961) is an Irish hurler.", (1961, 3, 8), None),
    ("Emilia Bayer was born May 5, 1934 in Sofia.", (1934, 5, 5), None),
    ("Ines Varro studied in Vienna.", None, None),
])
def test_the_dates_of_a_life(text, birth, death):
    b, d = life_dates(text)
    assert (b.key if b else None, d.key if d else None) == (birth, death)


def test_comparisons_decide_only_what_the_texts_say():
    assert compare_dates(parse_date("1913"), parse_date("3 May 1914")) == -1
    assert compare_dates(parse_date("8 June 1915"), parse_date("12 March 1901")) == 1
    assert compare_dates(parse_date("1974"), parse_date("3 May 1974")) is None  # the same year, no month
    assert compare_dates(parse_date("May 1974"), parse_date("3 May 1974")) is None
    assert compare_dates(parse_date("2 May 1974"), parse_date("3 May 1974")) == -1
    assert years_between(parse_date("6 May 1813"), parse_date("25 December 1882")) == 69
    assert years_between(parse_date("22 November 1917"), parse_date("6 December 1995")) == 78
    assert parse_number("2,300 km") == 2300.0 and parse_number("4.5 m") == 4.5 and parse_number("none") is None
