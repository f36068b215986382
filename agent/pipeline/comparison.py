"""Which option a choice question's facts pick, by the dates they give: a comparison step.

"Who is older, Kevin Hennessy or Emilia Bayer?", "Which film came out first, X or Y?", "Which
film has the director who died earlier, X or Y?": the question names two options and asks which
is first or last by a date of a kind it says:

| the question says | date | picks |
|---|---|---|
| older, oldest, elder, born first / earlier / before | birth | the earlier |
| younger, youngest, born later / after / more recently | birth | the later |
| died first / earlier / sooner / before | death | the earlier |
| died later / last / after | death | the later |
| lived longer | death minus birth | the longer |
| (anything else) first, earlier, earliest, older, sooner | the first date a fact gives for the option (its release, founding, publication) | the earlier |
| (anything else) more recently, later, latest, newer, most recent | the same | the later |

A person's dates are read from the facts naming them: "(6 May 1813 – 25 December 1882)", "born
May 5, 1934", "died in 1995". When the question asks about a role of the option ("the film
whose director ..."), the option's fact names who fills it ("directed by Wolf Rilla") and that
person's facts give the date. Both options need a date; equal years without days decide
nothing. The step is shown in the trace: ``compared: Bernhard Afinger lived 69 years (fact 1),
Melvin Kranzberg 78 (fact 2): Melvin Kranzberg``.

Example::

    compare_options("Who lived longer, Bernhard Afinger or Melvin Kranzberg?",
                    ["Bernhard Afinger( 6 May 1813 – 25 December 1882) was a German sculptor.",
                     "Melvin Kranzberg (November 22, 1917 – December 6, 1995) was an American historian."])
    # Comparison(winner="Melvin Kranzberg", how="compared: ...", facts=(0, 1))
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ..eval.metrics import normalize_answer

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE = re.compile(rf"\b(\d{{1,2}})\s+{_MONTH}\s+(\d{{3,4}})\b|\b{_MONTH}\s+(\d{{1,2}}),?\s+(\d{{3,4}})\b"
                   rf"|\b{_MONTH}\s+(\d{{3,4}})\b|\b(1\d{{3}}|20\d{{2}})\b")
# "Which film came out first, X or Y?": the two options after the last comma.
_CHOICE = re.compile(r",\s*([^,]+?)\s+or\s+([^,]+?)\s*\?$")
_LIFESPAN = re.compile(r"\(([^()]*)\)")
_DASH = re.compile(r"\s[-–—]\s|[–—]|(?<=\d)-(?=\s*\d)")
# The question's wording -> (date kind, pick the later?).
_ASKS = [
    (re.compile(r"\blived longer\b|\blonger life\b|\blived the longest\b"), ("life", True)),
    (re.compile(r"\bdied (?:first|earlier|sooner|before)\b|\bdied the earliest\b"), ("death", False)),
    (re.compile(r"\bdied (?:later|last|after)\b|\bdied the latest\b"), ("death", True)),
    (re.compile(r"\bborn (?:first|earlier|before)\b"), ("birth", False)),
    (re.compile(r"\bborn (?:later|last|after|more recently)\b"), ("birth", True)),
]
_PERSON_OLDER = re.compile(r"\b(?:older|oldest|elder)\b")
_PERSON_YOUNGER = re.compile(r"\b(?:younger|youngest)\b")
_EARLIER = re.compile(r"\b(?:first|earlier|earliest|older|oldest|sooner)\b")
_LATER = re.compile(r"\b(?:more recently|later|latest|newer|newest|most recent|more recent)\b")
# A role the question asks about -> how an option's fact names who fills it.
_ROLES = {"director": r"directed by", "composer": r"(?:composed|music) by", "performer": r"(?:performed|sung|recorded) by",
          "writer": r"written by", "author": r"(?:written|authored) by", "producer": r"produced by",
          "creator": r"created by", "founder": r"founded by"}
_NAME = r"((?:[A-Z][\w'.-]*)(?:\s+(?:(?:de|da|van|von|der|del|di|le|la|al|bin)\s+)?[A-Z][\w'.-]*)*)"


@dataclass(frozen=True)
class Comparison:
    """``winner``: the option the dates pick, as the question writes it; ``how``: the step, one
    line; ``facts``: the indices of the facts it read."""

    winner: str
    how: str
    facts: tuple[int, ...]


@dataclass(frozen=True)
class _Dated:
    value: tuple[int, int, int]  # year, month (0: not given), day (0: not given)
    text: str


def choice_texts(question: str) -> tuple[str, str] | None:
    """The two options of a choice question as written ("Which film came out first, X or Y?")."""
    m = _CHOICE.search(question.strip())
    return (m.group(1).strip(), m.group(2).strip()) if m else None


def compare_options(question: str, facts: Sequence[str]) -> Comparison | None:
    """The option of choice question ``question`` that ``facts`` pick by date, or None when the
    question asks no date comparison or the facts do not give both options' dates."""
    options = choice_texts(question)
    asked = _asked(question)
    if options is None or asked is None:
        return None
    kind, later = asked
    role = next((r for r in _ROLES if re.search(rf"\b{r}s?\b", question.lower())), None)
    values = []
    for option in options:
        value = _option_value(option, kind, role, facts)
        if value is None:
            return None
        values.append(value)
    (a, a_how, a_facts), (b, b_how, b_facts) = values
    if a == b or _undecided(a, b):
        return None
    pick = 0 if (a > b) == later else 1
    how = f"compared: {options[0]} {a_how}, {options[1]} {b_how}: {options[pick]}"
    return Comparison(options[pick], how, tuple(sorted(set(a_facts) | set(b_facts))))


def asks_comparison(question: str) -> bool:
    """Whether ``question`` is a choice between two options by a date (see the table above)."""
    return choice_texts(question) is not None and _asked(question) is not None


def _asked(question: str) -> tuple[str, bool] | None:
    q = question.lower()
    for pattern, asked in _ASKS:
        if pattern.search(q):
            return asked
    about_person = q.startswith("who ") or any(re.search(rf"\b{r}s?\b", q) for r in _ROLES)
    if about_person and _PERSON_OLDER.search(q):
        return "birth", False
    if about_person and _PERSON_YOUNGER.search(q):
        return "birth", True
    if _LATER.search(q):
        return "date", True
    if _EARLIER.search(q):
        return "date", False
    return None


def _plain(text: str) -> list[str]:
    """Normalized words without accents ("Tüzoltó" and "Tüzolto" alike)."""
    text = unicodedata.normalize("NFKD", text)
    return normalize_answer("".join(c for c in text if not unicodedata.combining(c))).split()


def _names(fact: str, name: str) -> bool:
    words = _plain(re.sub(r"\s*\([^)]*\)\s*$", "", name))
    text = _plain(fact)
    n = len(words)
    return n > 0 and any(text[i:i + n] == words for i in range(len(text) - n + 1))


def _option_value(option: str, kind: str, role: str | None, facts: Sequence[str]):
    """(value, how it reads, fact indices) for ``option``, or None."""
    about = [i for i, f in enumerate(facts) if _names(f, option)]
    if not about:
        return None
    if kind == "date" and role is None:
        for i in about:
            dates = _dates(facts[i])
            if dates:
                return dates[0].value, f"{dates[0].text} (fact {i + 1})", (i,)
        return None
    people = [(option, about, ())]
    if role is not None:
        pattern = re.compile(rf"\b{_ROLES[role]}\s+{_NAME}")
        people = []
        for i in about:
            for m in pattern.finditer(facts[i]):
                person = m.group(1).rstrip(".")
                named = [j for j, f in enumerate(facts) if j != i and _names(f, person)]
                people.append((person, named, (i,)))
        if kind == "date":  # "the film whose director is older" is handled as birth above
            return None
    for person, named, via in people:
        value = _person_value(person, kind, [(j, facts[j]) for j in named])
        if value is not None:
            v, how, used = value
            who = f"({person}) " if role is not None else ""
            return v, who + how, (*via, *used)
    return None


def _person_value(person: str, kind: str, facts: Sequence[tuple[int, str]]):
    birth = death = None
    for i, text in facts:
        b, d = _life(text)
        if b is not None and birth is None:
            birth = (b, i)
        if d is not None and death is None:
            death = (d, i)
    if kind == "birth" and birth:
        return birth[0].value, f"born {birth[0].text} (fact {birth[1] + 1})", (birth[1],)
    if kind == "death" and death:
        return death[0].value, f"died {death[0].text} (fact {death[1] + 1})", (death[1],)
    if kind == "life" and birth and death:
        years = _years_between(birth[0].value, death[0].value)
        return ((years, 0, 0), f"lived {years} years ({birth[0].text} - {death[0].text}, fact {birth[1] + 1})",
                tuple(sorted({birth[1], death[1]})))
    return None


def _life(text: str) -> tuple[_Dated | None, _Dated | None]:
    """A person fact's birth and death dates: "(6 May 1813 – 25 December 1882)", "born ...",
    "died ..."."""
    for m in _LIFESPAN.finditer(text):
        inner = m.group(1)
        parts = _DASH.split(inner, maxsplit=1)
        if len(parts) == 2:
            before, after = _dates(parts[0]), _dates(parts[1])
            if before and after:
                return before[-1], after[0]
        if re.search(r"\b(?:born|b\.)", inner):
            dates = _dates(inner)
            if dates:
                return dates[0], None
    birth = death = None
    born = re.search(r"\bborn\b", text)
    if born:
        dates = _dates(text[born.end():born.end() + 80])
        birth = dates[0] if dates else None
    died = re.search(r"\b(?:died|death)\b", text)
    if died:
        dates = _dates(text[died.end():died.end() + 80])
        death = dates[0] if dates else None
    return birth, death


def _dates(text: str) -> list[_Dated]:
    out = []
    for m in _DATE.finditer(text):
        if m.group(3):
            value = (int(m.group(3)), _MONTHS.index(m.group(2).lower()) + 1, int(m.group(1)))
        elif m.group(6):
            value = (int(m.group(6)), _MONTHS.index(m.group(4).lower()) + 1, int(m.group(5)))
        elif m.group(8):
            value = (int(m.group(8)), _MONTHS.index(m.group(7).lower()) + 1, 0)
        else:
            value = (int(m.group(9)), 0, 0)
        out.append(_Dated(value, m.group(0)))
    return out


def _years_between(birth: tuple[int, int, int], death: tuple[int, int, int]) -> int:
    years = death[0] - birth[0]
    if birth[1] and death[1] and (death[1], death[2]) < (birth[1], birth[2]):
        years -= 1
    return years


def _undecided(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Same year and a month or day missing on either side: the facts do not say which."""
    if a[0] != b[0]:
        return False
    if not (a[1] and b[1]):
        return True
    return a[1] == b[1] and not (a[2] and b[2])
