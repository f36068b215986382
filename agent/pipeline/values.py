"""Typed values read from facts: dates and numbers, parsed by a library, compared by code.

Dates are parsed with ``python-dateutil`` (its parser reads "12 March 1901", "May 5, 1934",
"1974", "2 February 1948"); a part the text does not give (a month, a day) is found by parsing
twice with two different defaults and seeing what changes, so "1974" is the year 1974 and
never 1 January 1974. Numbers are read as the first number of the text ("2,300 km", "4.5").
Comparing two dates decides only where the text says enough: 1974 against 3 May 1974 is
undecided.

Example::

    >>> parse_date("12 March 1901")
    Dated(year=1901, month=3, day=12, text='12 March 1901')
    >>> dates_in("Paul Amsel (12 March 1901 – 4 May 1970) was a German director.")   # two Dated
    [Dated(year=1901, month=3, day=12, text='12 March 1901'),
     Dated(year=1970, month=5, day=4, text='4 May 1970')]
    >>> print(compare_dates(parse_date("1974"), parse_date("3 May 1974")))   # None: undecided
    None
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_A = datetime(1, 1, 1)
_B = datetime(4, 12, 28)  # a leap year's late date: a missing part parses differently
# Spans that may be a date: "12 March 1901", "March 12, 1901", "March 1901", "1901" (years of
# three or four digits; a lone number of one or two digits is not a date).
_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
          r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_DATE_SPAN = re.compile(rf"\b(?:\d{{1,2}}\s+{_MONTH},?\s+\d{{3,4}}|{_MONTH}\s+\d{{1,2}},?\s+\d{{3,4}}"
                        rf"|{_MONTH}\s+\d{{3,4}}|\d{{4}}-\d{{2}}-\d{{2}}|(?<![\d.,])\d{{3,4}}(?![\d,]|\.\d))\b",
                        re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Dated:
    """A date as far as the text gives it: ``month`` and ``day`` are 0 when not given."""

    year: int
    month: int
    day: int
    text: str

    @property
    def key(self) -> tuple[int, int, int]:
        return self.year, self.month, self.day


def parse_date(text: str) -> Dated | None:
    """The date ``text`` is (one date, as a ``Value:`` line gives it), or None."""
    text = " ".join(text.replace("–", " ").split()).strip(" .,;")
    if not text or not re.search(r"\d", text):
        return None
    # Imported here, where a date is parsed: `grounding` imports this module, and the vLLM
    # server's path imports `grounding` in vLLM's environment, which has no dateutil.
    from dateutil import parser as date_parser

    try:
        a = date_parser.parse(text, default=_A, fuzzy=True)
        b = date_parser.parse(text, default=_B, fuzzy=True)
    except (ValueError, OverflowError, TypeError):
        return None
    if a.year != b.year:  # no year given: not a date this module compares
        return None
    month = a.month if a.month == b.month else 0
    day = a.day if a.day == b.day and month else 0
    return Dated(a.year, month, day, text)


def dates_in(text: str) -> list[Dated]:
    """Every date ``text`` writes, in order."""
    out = []
    for m in _DATE_SPAN.finditer(text):
        dated = parse_date(m.group(0))
        if dated is not None and 100 <= dated.year <= 2999:
            out.append(Dated(dated.year, dated.month, dated.day, m.group(0)))
    return out


def parse_number(text: str) -> float | None:
    """The first number ``text`` writes ("2,300 km" -> 2300.0), or None."""
    m = _NUMBER.search(text)
    return float(m.group(0).replace(",", "")) if m else None


def compare_dates(a: Dated, b: Dated) -> int | None:
    """-1 when ``a`` is earlier, 1 when later, None when the texts do not say which (the same
    year and a month or day missing on either side, or the very same date)."""
    if a.year != b.year:
        return -1 if a.year < b.year else 1
    if not (a.month and b.month):
        return None
    if a.month != b.month:
        return -1 if a.month < b.month else 1
    if not (a.day and b.day) or a.day == b.day:
        return None
    return -1 if a.day < b.day else 1


def years_between(start: Dated, end: Dated) -> int:
    """Whole years from ``start`` to ``end`` (a birthday not yet reached counts one less)."""
    years = end.year - start.year
    if start.month and end.month and (end.month, end.day) < (start.month, start.day):
        years -= 1
    return years


def same_date(a: Dated, b: Dated) -> bool:
    """Whether ``b`` is ``a`` as far as both say (1974 and 3 May 1974 agree on what 1974 says)."""
    return a.year == b.year and (not a.month or not b.month or a.month == b.month) and \
        (not a.day or not b.day or a.day == b.day)


_BRACKETS = re.compile(r"\(([^()]*)\)")


def life_dates(text: str) -> tuple[Dated | None, Dated | None]:
    """A person's birth and death dates as biographies write them: "(6 May 1813 – 25 December
    1882)", "(born 8 June 1915)", "born May 5, 1934", "died in 1962". (None, None) when the
    text gives neither."""
    for m in _BRACKETS.finditer(text):
        found = dates_in(m.group(1))
        if len(found) >= 2:  # "(6 May 1813 – 25 December 1882)", a dash lost or not
            return found[0], found[-1]
    birth = death = None
    born = re.search(r"\bborn\b", text, flags=re.IGNORECASE)
    if born:
        found = dates_in(text[born.end():born.end() + 60])
        birth = found[0] if found else None
    died = re.search(r"\b(?:died|death)\b", text, flags=re.IGNORECASE)
    if died:
        found = dates_in(text[died.end():died.end() + 60])
        death = found[0] if found else None
    return birth, death


# Words a question asks a date or a number with: the answer must then be one (a closed class
# of English question words, not a pattern of any dataset).
_WHEN = re.compile(r"^\s*(?:when\b|in what year\b|what year\b|which year\b)", re.IGNORECASE)
_HOW_MANY = re.compile(r"^\s*how (?:many|much|old|long)\b", re.IGNORECASE)


def answer_type_fits(question: str, answer: str) -> str:
    """"" when ``answer`` is of the type ``question`` asks for, else why not: a "when" question
    takes a date (:func:`parse_date`), a "how many" question a number. Applied to every answer
    the agent gives, a computed one too (:func:`~.grounding.ground`: a difference of two years is
    no answer to "when")."""
    if _WHEN.search(question) and parse_date(answer) is None:
        return f"the question asks when; {answer!r} is no date"
    if _HOW_MANY.search(question) and parse_number(answer) is None:
        return f"the question asks how many or how much; {answer!r} is no number"
    return ""
