"""Reading a question's wording: the names it gives, what it asks, and through which relative or role.

Read by the grammar of English questions (the closed classes of words: prepositions, relative
pronouns, wh-words, forms of "be"), no list of relations or of one dataset's wordings. The asked
check (:mod:`.asked`) and the agent's hops (:mod:`.fact_agent`, :mod:`.attempts`) read questions
with these:

- **The names a question gives** (:func:`_question_names`, each once, at most
  :data:`MAX_NAMES`), and those it offers as alternatives joined by "or"
  (:func:`offered_alternatives`: "Mark King or Nick Hexum").
- **What it asks**: of the last thing it describes on its way (:func:`asked_clause`: "created by
  who?" in "Kate Ramsay is a character from an Australian soap opera created by who?"); the noun
  its last "what"/"which" asks (:func:`asked_noun`: "members of what crime family?"); whether it
  names what it asks after "what is" (:func:`asks_a_named_thing`: "What is the population of
  X?", where the relation asked decides the answer's type).
- **A question asked through a relative or role** (:func:`asks_through`: "When was X's father
  born?", "Where was the director of film X born?") is not answered by a fact about X itself
  alone: the chain must reach the one asked about. "What nationality is the director of X?" is
  one, "What city is the capital of X?" is not: the local model reads whether the role is a
  kind of the noun asked (:class:`~agent.pipeline.relation_reading.KindReader`). After "where",
  whether the role is a place or a person or organization: "Where is the headquarters of X
  located?" asks the headquarters, "Where was the director of film X born?" the director's
  birthplace. :func:`asked_through` finds the name so asked through and the noun.
- **The question asked past the role** (:func:`ask_past`): of whom the chain reached ("Who is
  the spouse of the director of film X?" of a fact about him: "Who is the spouse of John
  Farrow?"), and of who fills the role (:func:`ask_holder`: "Who is the director of film X?").

Example::

    >>> asked_through("Who is the spouse of the director of film Lamp Street?")
    ('Lamp Street', 'director')
    >>> ask_past("Who is the spouse of the director of film Lamp Street?", "Lamp Street", "director", "Ann Lee")
    'Who is the spouse of Ann Lee?'
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

from ..knowledge.keywords import STOP_WORDS, extract_keywords
from .plan import AUXILIARIES

# At most this many names of a question are checked (each is looked for in the question again):
# a question names a few; one listing more is no question the checks could read anyway.
MAX_NAMES = 30


_FIRST_WH = re.compile(r"\b(what|which|who|whom|whose|where|when|how|why)\s+([^\W_]+)", re.IGNORECASE)


# A title's qualifier after a name in a question ("Reverse (Film)", "Cristina Rodríguez
# (Noble)'s father"): part of the name. A possessive a name ends with ("Ada Quint's"): not.
_QUALIFIED = r"(?:\s*\([^()]*\))?"
_POSSESSIVE_END = re.compile(r"['’]s$")


def asks_a_named_thing(question: str) -> bool:
    """Whether ``question`` names what it asks after its first wh-word and a form of "be" ("What
    is the population of X?"): then the relation it asks decides the answer's type. After "what
    <noun>" the noun does ("In what city was X born?" asks no number, however close "date of
    birth" is to it), after "who" or "where" the wh-word does."""
    m = _FIRST_WH.search(question)
    return (m is not None and m.group(1).lower() in ("what", "which")
            and m.group(2).lower() in ("is", "was", "are", "were"))


def asks_through(question: str, name: str, kind_of: Callable[[str, str], bool] | None = None) -> str:
    """The noun through which ``question`` asks about ``name``'s relative or role, when it asks
    something further of it: "father" in "When was X's father born?", "director" in "Where
    was the director of film X born?" and "man" in "When did the man who directed X die?", not
    in "Who is X's father?" (the father is the answer).
    "" when it asks of ``name`` itself.

    "What nationality is the director of film X?" and "What city is the capital of X?" are
    written alike: the first asks a nationality the director has, the second asks the capital,
    which is a city. ``kind_of(role, noun)`` (:class:`~agent.pipeline.relation_reading.KindReader`,
    the local model) tells them apart: a role that is no kind of the noun the question opens
    with is asked through. Without it, the role is read as the answer, as before. After "where",
    words after the role do not make it asked through when the reader reads the role as a place
    (``kind_of.is_place``, not a person or an organization): "Where is the headquarters of X
    located?" asks the headquarters, "Where was the director of X born?" the director's
    birthplace."""
    masked = re.sub(rf"(?<![^\W_]){re.escape(name)}(?![^\W_]){_QUALIFIED}", "X", question, flags=re.IGNORECASE)
    words = re.findall(r"[^\W_]+(?:['’]s)?", masked.rstrip(" ?.!"))
    lower = [w.lower().replace("’", "'") for w in words]
    is_place = getattr(kind_of, "is_place", None) if lower[:1] == ["where"] else None

    def is_asked(role: str) -> bool:
        # "Where is the headquarters of X located?": the headquarters is the place asked, not
        # someone asked further of ("Where was the director of X born?").
        return is_place is not None and is_place(role)

    def has_asked(role: str, at: int) -> bool:
        # "What <noun> <is> <role phrase>" with the role phrase from ``at`` to the end (after
        # the rest of a name cut at a comma, "Sir Ed Acton, 3rd Baronet's father"): the
        # question's noun is something the role has, not what the role is.
        return (kind_of is not None and len(lower) > 3 and lower[0] in ("what", "which") and lower[2] in _COPULAS
                and at >= 3 and all(w[:1].isupper() or w[:1].isdigit() for w in words[3:at])
                and lower[1] not in _PHRASE_ENDS | _COPULAS | AUXILIARIES and lower[1] not in ("the", "a", "an")
                and not kind_of(role, lower[1]))
    # Read once for every "X" below (a name written hundreds of times is as many X's): where the
    # nearest word before each that ends a relative clause's search is, and where the first word
    # that may head a noun phrase is.
    stops = _nearest_stops(lower)
    first_plain = next((j for j, w in enumerate(lower) if w not in _ASKING and w not in _PHRASE_ENDS
                        and w not in ("the", "a", "an", "name", "x")), len(lower))
    for i, word in enumerate(lower):
        if word == "x's" and i + 1 < len(lower):  # "X's father ..."
            noun, before, after = lower[i + 1], lower[i - 1] if i else "", lower[i + 2:]
            if after and before in _COPULAS and lower[0] in ("what", "which", "who") \
                    and not noun.endswith("'s") and _noun_phrase_to_end(after):
                # "What is X's record label?": the words after the noun end the question and
                # continue its noun phrase: the whole phrase is asked, of X itself.
                return ""
            if (after and not is_asked(noun)) or before == "of" or has_asked(noun, i):
                return noun
        if word == "x" and i >= 3 and lower[i - 2] in ("who", "that", "which") and lower[i - 3] not in _PHRASE_ENDS \
                and any(w not in _PHRASE_ENDS for w in itertools.islice(lower, i + 1, None)):
            # "the man who directed X die": a relative clause, then what is asked of its noun
            # (not "the city that hosted X in": a stranded preposition is the clause's own)
            return lower[i - 3]
        if word == "x":
            noun = _relative_head(lower, stops[i], first_plain)
            if noun:
                return noun
        if word == "x" and i >= 2:
            # "the N of X", "of film X", "of the film X": the nearest "of" before X, with at most
            # an article and one word that says what X is between; not the head of a clause X
            # opens ("of the country X was born in", "the nation X holds citizenship in": a verb
            # of being after X, or a preposition left at the end).
            j = next((k for k in range(i - 1, max(0, i - 4), -1) if lower[k] == "of"), -1)
            between = [w for w in lower[j + 1:i] if w not in ("the", "a", "an")]
            clause = bool(between) and i + 1 < len(lower) and (lower[i + 1] in _COPULAS | AUXILIARIES
                                                                or lower[-1] in _PREPOSITIONS)
            if j >= 1 and len(between) <= 1 and not set(between) & (_PHRASE_ENDS | _ASKING) and not clause:
                noun = lower[j - 1]
                # Something asked after it, "of the N of X", or "the N of X" as the object of a
                # verb that is not "is" ("What movie stars A and the producer of X?": the movie
                # is asked; "Who is the producer of X?": the producer is the answer).
                if (i + 1 < len(lower) and not is_asked(noun)) or (j >= 3 and lower[j - 2] == "the"
                                     and (lower[j - 3] == "of" or lower[j - 3] not in _COPULAS | _ASKING
                                          or i + 1 == len(lower) and has_asked(noun, j - 2))):
                    if noun not in ("name", "date", "place", "year", "part", "one"):
                        return noun
    return ""


def _noun_phrase_to_end(words: Sequence[str]) -> bool:
    """Whether ``words``, the end of a question, only continue a noun phrase ("label" after
    "record", "of citizenship" after "country"): no preposition but an inner "of", no relative
    or wh-word, copula, possessive, or word of a verb form ("married", "died") but right after
    "of", which a noun follows ("number of children")."""
    return words[-1] != "of" and all(
        w == "of" or w not in _PHRASE_ENDS and w not in _COPULAS and not w.endswith("'s")
        and (i and words[i - 1] == "of" or not w.endswith(("ed", "en", "ing")))
        for i, w in enumerate(words))


def _nearest_stops(lower: Sequence[str]) -> list[int]:
    """For each word, the index of the nearest word before it (not the first word) that ends
    :func:`_relative_head`'s search (an article, a wh-word, a relative pronoun), or -1: read in one
    pass, so that each occurrence of a name costs one look-up, not a scan back."""
    stops, last = [], -1
    for j, word in enumerate(lower):
        stops.append(last)
        if j >= 1 and (word in ("the", "a", "an") or word in _ASKING or word in _RELATIVE):
            last = j
    return stops


def _relative_head(lower: Sequence[str], stop: int, first_plain: int) -> str:
    """The noun a relative clause holding the name describes, when the question asks something
    further of it: "county" in "What county shares a border with the county in which X is
    located?", "state" in "What is the population of the state where X is?"; not in "What is
    the county in which X is located?" (that county is the answer). "" otherwise. ``stop``:
    the nearest article, wh-word or relative pronoun before the name (:func:`_nearest_stops`);
    ``first_plain``: the first word that is none of those, nor a preposition, "name" or X."""
    if stop < 1 or lower[stop] not in _RELATIVE:
        return ""
    k = stop - 1
    if k >= 1 and lower[k] in _PREPOSITIONS:  # "the county in which"
        k -= 1
    if k < 1 or lower[k - 1] != "the" or lower[k] in _PHRASE_ENDS:
        return ""
    return lower[k] if first_plain < k - 1 else ""


def asked_through(question: str, kind_of: Callable[[str, str], bool] | None = None) -> tuple[str, str]:
    """The first name ``question`` gives that it asks through a relative or role, and that
    noun (:func:`asks_through`, ``kind_of`` as there): ("Lamp Street", "director") for "Who is
    the spouse of the director of film Lamp Street?"; ("", "") when it asks of what it names."""
    for name in _question_names(question):
        name = _POSSESSIVE_END.sub("", name)  # "Ada Quint's father": the name is Ada Quint
        if _only_qualifier(question, name):
            continue
        noun = _POSSESSIVE_END.sub("", asks_through(question, name, kind_of))
        if noun:
            return _titled(question, name), noun
    return "", ""


def _only_qualifier(question: str, name: str) -> bool:
    """Whether ``question`` gives ``name`` only as a title's qualifier ("Song" in "the performer
    of song Come Dance With Me (Song)"): it says what the name before it is, nothing is asked
    of it."""
    inside = [m.span() for m in re.finditer(r"\([^()]*\)", question)]
    found = [m.start() for m in re.finditer(rf"(?<![^\W_]){re.escape(name)}(?![^\W_])", question)]
    return bool(found) and all(any(a < at < b for a, b in inside) for at in found)


def _titled(question: str, name: str) -> str:
    """``name`` with the name it is the title of, written before it after a comma ("Sir Ed
    Acton, 3rd Baronet's father": the name is "Sir Ed Acton, 3rd Baronet", not "Baronet"): a run
    of capitalised words, then ", ", then capitalised words or numbers up to ``name``."""
    at = question.find(name)
    if at < 0:
        return name
    before = question[:at].split()
    i = len(before)
    while i and (before[i - 1][:1].isupper() or before[i - 1][:1].isdigit()) and not before[i - 1].endswith(","):
        i -= 1
    j = i
    while j and before[j - 1][:1].isupper() and before[j - 1].lower().strip(",") not in _ASKING | AUXILIARIES \
            and (j == i or not before[j - 1].endswith(",")):
        j -= 1
    if j == i or not before[i - 1].endswith(","):
        return name
    return " ".join([*before[j:], name])


def through_phrase(question: str, named: str, noun: str) -> tuple[int, int] | None:
    """Where ``question`` says the relative or role ``noun`` of ``named`` (:func:`asked_through`):
    "the spouse of the director of film Lamp Street" -> the span of "the director of film Lamp
    Street", "When was Ada Quint's father born?" -> "Ada Quint's father"; None when the two are
    not found in it."""
    # The name with a title's qualifier ("Reverse (Film)") and a possessive.
    name = re.search(rf"(?<![^\W_]){re.escape(named)}{_QUALIFIED}(?:['’]s)?(?![^\W_])", question, flags=re.IGNORECASE)
    role = re.search(rf"\b{re.escape(noun)}\b", question, flags=re.IGNORECASE)
    if name is None or role is None:
        return None
    start, end = min(name.start(), role.start()), max(name.end(), role.end())
    if start == role.start():
        the = re.search(r"\bthe\s+$", question[:start], flags=re.IGNORECASE)
        start = the.start() if the else start
    return start, end


def ask_past(question: str, named: str, noun: str, holder: str) -> str:
    """``question`` asked of ``holder``, who fills the relative or role ``noun`` of ``named``
    (:func:`asked_through`): "Who is the spouse of the director of film Lamp Street?" with Ann
    Lee -> "Who is the spouse of Ann Lee?", "When was Ada Quint's father born?" with Bo Quint
    -> "When was Bo Quint born?". What a fact about the holder must say. ``question`` itself
    when the two are not found in it."""
    span = through_phrase(question, named, noun)
    if span is None:
        return question
    return f"{question[:span[0]]}{holder}{question[span[1]:]}"


def ask_holder(question: str, named: str, noun: str) -> str:
    """Who fills the relative or role ``noun`` of ``named``, asked in ``question``'s own words
    (the first hop of :func:`ask_past`): "Who is the director of film Lamp Street?", "Who is Ada
    Quint's father?"; "" when the two are not found in it."""
    span = through_phrase(question, named, noun)
    if span is None:
        return ""
    phrase = question[span[0]:span[1]].strip()
    return f"Who is {phrase[0].lower() + phrase[1:] if phrase.lower().startswith('the ') else phrase}?"


# The closed classes of English words that end an indefinite noun phrase of a question: a
# preposition, a relative pronoun or a wh-word.
_PHRASE_ENDS = frozenset({"in", "from", "of", "by", "with", "for", "at", "on", "to", "into", "near", "during", "that",
                          "which", "who", "whom", "whose", "what", "where", "when", "how", "and", "or", "is", "was",
                          "are", "were", "has", "had"})
_COPULAS = frozenset({"is", "was", "are", "were", "be", "been", "being", "became", "becomes", "remains"})
_ASKING = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "how"})
_RELATIVE = frozenset({"which", "where", "whose", "that", "who", "whom"})
_PREPOSITIONS = frozenset({"in", "on", "at", "from", "of", "for", "to", "by", "with", "into", "near"})
_Q_TOKEN = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


def _described(question: str) -> list[tuple[str, int]]:
    """(head noun, where it ends in ``question``) of each indefinite noun phrase before the
    question's last wh-word: things the question describes on its way to what it asks ("a
    singer-songwriter", "a university located in"), not what it asks."""
    tokens = [(m.group(0).lower(), m.end()) for m in _Q_TOKEN.finditer(question)]
    words = [w for w, _ in tokens]
    asking = [i for i, w in enumerate(words) if w in _ASKING]
    if not asking:
        return []
    last = asking[-1]
    out = []
    for i, word in enumerate(words[:last]):
        if word not in ("a", "an"):
            continue
        phrase = _phrase(words, i + 1, last + 1)
        if phrase:
            out.append((words[phrase[-1]], tokens[phrase[-1]][1]))
    return out


def asked_clause(question: str) -> str:
    """What ``question`` asks of the last thing it describes on its way: the words after that
    noun phrase ("created by who?" in "Kate Ramsay is a character from an Australian soap opera
    created by who?"); the whole question when it describes nothing so."""
    described = _described(question)
    rest = question[described[-1][1]:].strip() if described else ""
    return rest if len(_Q_TOKEN.findall(rest)) >= 2 else question


def asked_noun(question: str) -> list[str]:
    """The words of the noun phrase the question's last "what"/"which" asks for, as written
    ("members of what crime family?" -> ["crime", "family"]; "which city is ..." -> ["city"]);
    [] when it asks none so ("what is ...", "who ...")."""
    words = _Q_TOKEN.findall(question)
    lower = [w.lower() for w in words]
    asking = [i for i, w in enumerate(lower) if w in ("what", "which")]
    if not asking:
        return []
    # a small word ends it, and so does a name ("what group belonged X to")
    phrase = _phrase(lower, asking[-1] + 1, len(words),
                     lambda j, so_far: lower[j] in STOP_WORDS or bool(so_far) and words[j][:1].isupper())
    return [words[j] for j in phrase]


def _phrase(lower: Sequence[str], start: int, stop: int,
            ends: Callable[[int, list[int]], bool] | None = None) -> list[int]:
    """The indices of a noun phrase's words from ``start`` (before ``stop``): up to a
    preposition, a relative pronoun, a wh-word or an article (or where ``ends(j, so_far)``
    says), less trailing participles ("located", "headquartered", "created")."""
    phrase: list[int] = []
    for j in range(start, stop):
        if lower[j] in _PHRASE_ENDS or lower[j] in ("a", "an", "the") or ends is not None and ends(j, phrase):
            break
        phrase.append(j)
    while len(phrase) > 1 and lower[phrase[-1]].endswith("ed"):
        phrase.pop()
    return phrase


def _question_names(question: str) -> list[str]:
    """The capitalised names ``question`` gives, names joined by "and"/"or" apart: each once (by
    its case-folded form, in the order given), at most :data:`MAX_NAMES` of them. Each name read
    here is looked for in the question again by the checks, so a name written over and over
    ("Ab, Ab, Ab, ...", 2,000 characters of it) is one name, not hundreds of rescans."""
    names: dict[str, str] = {}
    for segment in re.split(r"[,;:?!()]", question):  # "Danish, Lorna Vidal": two
        for keyword in extract_keywords(segment, limit=30):
            for part in re.split(r"\s+(?:and|or)\s+", keyword):  # "Collective Soul and Counting Crows"
                if any(c.isupper() for c in part):
                    names.setdefault(part.casefold(), part)
                    if len(names) == MAX_NAMES:
                        return list(names.values())
    return list(names.values())


def offered_alternatives(question: str, names: Sequence[str] | None = None) -> list[str]:
    """The names ``question`` offers as alternatives joined by "or" ("Mark King or Nick Hexum");
    ``names``: its names (:func:`_question_names`) when already read."""
    return [name for name in (_question_names(question) if names is None else names)
            if re.search(rf"(?:\bor\s+{re.escape(name)}|{re.escape(name)}\s*,?\s+or\b)", question, flags=re.IGNORECASE)]

