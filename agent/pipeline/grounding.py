"""Whether an answer is proven by the facts stated for it: grounding, not topic overlap.

A stated fact is in the knowledge (constrained decoding guarantees it), but that alone proves
nothing about the answer: a small model made to pick among facts that miss the question states
one anyway and answers from it. An answer stands when:

1. the stated facts hold a *connected chain* for the question: a first fact that names an entity
   of the (standalone) question, and each next fact sharing an entity with a fact already in the
   chain (a triple's entities are its subject and object; a statement's are its names, numbers
   and years; two triples share an entity only when it is the same one, a statement's names
   may also be part of the other's); and
2. the answer, normalized (``agent.eval.metrics.normalize_answer``: case, punctuation, articles),
   is contained word for word in a fact of that chain (a short sentence as answer: its words but
   small ones like "is", "in" all in one such fact), or is computed from chain facts by a step
   this module shows: a difference of two years ("how many years ..."), a count of one subject's
   objects for one relation, a yes/no comparison of two triples with the same relation, or a
   "yes" shown by two statements, one on each side of the question, that hold the same name or
   year ("American" for "Are both X and Y from the same country?") or both say what the
   question asks both to be ("film director" for "Are X and Y both film directors?").

A choice question ("Which film came out first, X or Y?") takes an answer naming X or Y only;
any other question, no answer that only repeats a whole name it asks about ("Leonida Tonelli"
for what Leonida Tonelli's occupation is; "Mexico" for the country of Mexico City may stand).

Anything else is not proven, whatever it says; the agent then tries the next tree and in the
end answers "I don't know.", keeping the withheld answer in the trace.

Example::

    ground("What is the official language of the country Edith Frank-Holländer is a citizen of?", "German",
           ["<Edith Frank-Holländer> <country of citizenship> <Germany> .",
            "<Germany> <official language> <German> ."])
    # Grounding(grounded=True, how="contained in fact 2 of a chain of 2 facts", facts=(0, 1))
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..eval.metrics import normalize_answer
from .comparison import asks_comparison, choice_texts, compare_options

_TRIPLE = re.compile(r"^\s*<([^<>]*)>\s*<([^<>]*)>\s*<([^<>]*)>\s*\.?\s*$")
_POSSESSIVE = re.compile(r"([^\W_])['’]s?(?![^\W_])")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_YES_NO = {"yes": True, "no": False}
# Words of a yes/no question that ask nothing of the facts.
_YES_NO_WORDS = frozenset({"both", "same", "does", "have", "were", "also", "either", "each", "other", "kind",
                           "type", "which", "what", "whether"})
# A value a statement holds: a capitalized word (a name, a nationality) of 3+ letters, or a year.
_VALUE_WORD = re.compile(r"\b(?:[A-Z][^\W\d_]{2,}|1[0-9]{3}|20[0-9]{2})\b")
_ANSWER_PREFIX = re.compile(r"^\s*(?:answer\s*:\s*)+", re.IGNORECASE)
DONT_KNOW = "I don't know."
# Words a sentence answer may add to a fact's ("X is a Y", "it was in Z").
_SMALL_WORDS = frozenset({"is", "was", "are", "were", "be", "been", "it", "its", "he", "she", "they", "his", "her",
                          "their", "in", "of", "on", "at", "by", "for", "from", "to", "and", "as", "with"})
_MAX_SENTENCE_WORDS = 16
# A question's word and the words a fact says it with ("die": "<place of death>").
_SAID_AS = {"die": ("death",), "died": ("death",), "born": ("birth",), "birthplace": ("birth", "born"),
            "married": ("spouse", "wife", "husband"), "wife": ("spouse", "married"), "husband": ("spouse", "married"),
            "spouse": ("married", "wife", "husband")}
_DONT_KNOW_PREFIXES = ("i don't know", "i do not know")


@dataclass(frozen=True)
class Grounding:
    """``grounded``: whether the answer stands; ``how``: one line for the trace; ``facts``: the
    indices (into the stated facts) of the chain it rests on; ``short``: for a sentence answer
    that says a stated triple ("Carolyn Eisele is a mathematician."), the triple's object
    ("mathematician"), the answer itself; "" otherwise. ``computed``: the answer is not in a fact
    but computed from the chain's facts by the step ``how`` shows (a comparison, a date
    difference, a count, a shared value for "yes")."""

    grounded: bool
    how: str
    facts: tuple[int, ...] = ()
    short: str = ""
    computed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"grounded": self.grounded, "how": self.how, "facts": list(self.facts),
                **({"short": self.short} if self.short else {}), **({"computed": True} if self.computed else {})}


@dataclass(frozen=True)
class _Stated:
    text: str
    triple: tuple[str, str, str] | None
    entities: frozenset[str]  # normalized


def clean_answer(answer: str) -> str:
    """The answer without a repeated ``Answer:`` label ("Answer: I don't know." is no answer)."""
    return _ANSWER_PREFIX.sub("", answer).strip()


def knows(answer: str) -> bool:
    """Whether ``answer`` is an answer: not empty, not "I don't know." (also behind an ``Answer:``)."""
    text = clean_answer(answer).lower().replace("’", "'")
    return bool(text) and not text.startswith(_DONT_KNOW_PREFIXES)


def ground(question: str, answer: str, facts: Sequence[str]) -> Grounding:
    """Whether ``answer`` to ``question`` is grounded in the stated ``facts`` (texts, in the
    order stated); see the module docstring for the rule."""
    answer = clean_answer(answer)
    if not knows(answer):
        return Grounding(False, "no answer")
    if not facts:
        return Grounding(False, "no fact was stated")
    stated = [_parse(text) for text in facts]
    chain = connected_chain(question, stated)
    if not chain:
        return Grounding(False, "no stated fact names an entity of the question")
    norm = normalize_answer(answer)
    if not norm:
        return Grounding(False, "the answer is empty once normalized")
    words = norm.split()
    options = choice_options(question)
    if options and asks_comparison(question):
        # "Who is older, X or Y?": the answer is what the chain's dates pick, whatever the model
        # said; without both dates nothing is shown (naming an option proves nothing).
        compared = compare_options(question, [stated[i].text for i in chain])
        if compared is None:
            return Grounding(False, "a comparison question: the stated facts do not give both options' dates",
                             tuple(chain))
        said = "" if _contains(normalize_answer(compared.winner).split(), words) else f" (the model said {answer!r})"
        return Grounding(True, compared.how + said, tuple(chain[i] for i in compared.facts), compared.winner,
                         computed=True)
    if options and not any(_contains(words, o) or _contains(o, words) for o in options):
        return Grounding(False, f"the question offers a choice ({' or '.join(' '.join(o) for o in options)}) "
                                "and the answer is neither", tuple(chain))
    plain = _POSSESSIVE.sub(r"\1", question)
    if not options and any(name <= set(words) for name in _question_names(plain)) \
            and _contains(normalize_answer(plain).split(), words):
        return Grounding(False, "the answer only repeats a name the question asks about", tuple(chain))
    for i in chain:
        if _contains(_fact_words(stated[i].text), words):
            return Grounding(True, f"contained in fact {i + 1} of a chain of {len(chain)} fact"
                                   f"{'' if len(chain) == 1 else 's'}", tuple(chain))
    # A sentence as answer ("Carolyn Eisele is a mathematician."): its words, less the small
    # ones, all in one fact of the chain.
    content = [w for w in words if w not in _SMALL_WORDS]
    if len(words) > 1 and content and len(words) <= _MAX_SENTENCE_WORDS:
        for i in chain:
            if set(content) <= set(_fact_words(stated[i].text)):
                return Grounding(True, f"its words are in fact {i + 1} of a chain of {len(chain)} fact"
                                       f"{'' if len(chain) == 1 else 's'}", tuple(chain), _short(stated[i], words))
    computed = _computed(norm, [(i, stated[i]) for i in chain], question)
    if computed:
        return Grounding(True, computed, tuple(chain), computed=True)
    return Grounding(False, f"the answer is in no fact of the chain ({len(chain)} fact"
                            f"{'' if len(chain) == 1 else 's'}) and no step computes it", tuple(chain))


def _short(fact: _Stated, words: Sequence[str]) -> str:
    """A triple's object when the sentence answer ``words`` says the triple (names its object,
    and nothing but the triple's words and small ones): the answer without the sentence."""
    if fact.triple is None:
        return ""
    obj_words = normalize_answer(fact.triple[2]).split()
    said = set(_fact_words(fact.text)) | _SMALL_WORDS
    if obj_words and _contains(list(words), obj_words) and set(words) <= said:
        return fact.triple[2]
    return ""


def connected_prefix(question: str, facts: Sequence[str]) -> int:
    """How many of ``facts``, from the first, form a connected chain for ``question`` (0 when the
    first names no entity of it): the facts after that broke away from the question."""
    stated = [_parse(text) for text in facts]
    n = 0
    while n < len(stated) and n in connected_chain(question, stated[: n + 1]):
        n += 1
    return n


def names_question_entity(question: str, fact: str) -> bool:
    """Whether ``fact`` by itself names an entity of ``question`` (could start a chain)."""
    return bool(connected_chain(question, [_parse(fact)]))


def holds_answer(fact: str, answer: str) -> bool:
    """Whether ``answer``, normalized, is in ``fact`` word for word."""
    return _contains(_fact_words(fact), normalize_answer(clean_answer(answer)).split())


def says_what_is_asked(question: str, fact: str) -> bool:
    """Whether ``fact`` holds a word (or a form of it) of what ``question`` asks beyond its names:
    "director" for "Who was the first director of Zorblax Station?" is not in "It was founded in
    1987 by Mira Quell."; True when the question asks nothing beyond its names."""
    from ..web.keywords import STOP_WORDS

    plain = _POSSESSIVE.sub(r"\1", question)
    names = set().union(*_question_names(plain))
    asked = [w for w in normalize_answer(plain).split()
             if w not in STOP_WORDS and w not in names and w not in _SMALL_WORDS and len(w) >= 3 and not w.isdigit()]
    words = _fact_words(fact)
    return not asked or any(says_form(words, w) or any(says_form(words, o) for o in _SAID_AS.get(w, ()))
                            for w in asked)


def connected_chain(question: str, stated: Sequence[_Stated]) -> list[int]:
    """Indices of the facts connected to the question: anchors name a question entity, the rest
    share an entity with a fact already connected (in stated order, repeated to a fixed point)."""
    # "Buck Owens's instrument" names Buck Owens: the possessive is not part of the name.
    question = _POSSESSIVE.sub(r"\1", question)
    q_norm = normalize_answer(question).split()
    q_names = _question_names(question)
    chain: list[int] = []
    entities: set[str] = set()  # of triples: a knowledge graph's entities are names, matched whole
    names: set[str] = set()  # of statements: matched word for word, either way
    for i, fact in enumerate(stated):
        if any(_contains(q_norm, e.split()) for e in fact.entities) or _names_in(fact, q_names):
            chain.append(i)
            (entities if fact.triple else names).update(fact.entities)
    grew = bool(chain)
    while grew:
        grew = False
        for i, fact in enumerate(stated):
            if i in chain:
                continue
            # <New Zealand> ... <Pacific Islanders> does not lead on to <Pacific Community>, nor
            # <Latin> to <Latin Americans>: between triples only the same entity links.
            linked = names | entities if fact.triple is None else names
            if any(e in entities or _shares(e, linked) for e in fact.entities):
                chain.append(i)
                (entities if fact.triple else names).update(fact.entities)
                grew = True
    return sorted(chain)


def _parse(text: str) -> _Stated:
    from ..web.keywords import extract_keywords

    m = _TRIPLE.match(text)
    if m:
        s, p, o = (part.strip() for part in m.groups())
        return _Stated(text, (s, p, o), frozenset(e for e in (normalize_answer(s), normalize_answer(o)) if e))
    names = [k for k in extract_keywords(text, limit=40) if any(c.isupper() or c.isdigit() for c in k)]
    return _Stated(text, None, frozenset(e for e in (normalize_answer(n) for n in names) if e))


def _question_names(question: str, split_and: bool = False) -> list[frozenset[str]]:
    """The question's names, each as its significant words (4+ letters, or years), one of which
    a statement fact must hold whole to anchor. ``split_and``: "Cupid The Cowpuncher and
    Hashimura Togo" is two names (the two sides of a comparison)."""
    from ..web.keywords import STOP_WORDS, extract_keywords

    keywords = extract_keywords(question)
    names = [k for k in keywords if any(c.isupper() or c.isdigit() for c in k)] or keywords
    if split_and:
        names = [part for name in names for part in re.split(r"\s+and\s+", name)]
    out = []
    for name in names:
        words = frozenset(w for w in normalize_answer(name).split()
                          if (len(w) >= 4 and not w.isdigit() or w.isdigit() and len(w) == 4) and w not in STOP_WORDS)
        if words:
            out.append(words)
    return out


def _names_in(fact: _Stated, q_names: Sequence[frozenset[str]]) -> bool:
    """Whether a statement holds a whole name of the question: "Tony Clark played baseball" does
    not anchor a question about Tony Shields."""
    if fact.triple is not None or not q_names:
        return False
    words = set(normalize_answer(fact.text).split())
    return any(name <= words for name in q_names)


def _shares(entity: str, linked: set[str]) -> bool:
    words = entity.split()
    return any(entity == other or _contains(other.split(), words) or _contains(words, other.split())
               for other in linked if other)


def _fact_words(text: str) -> list[str]:
    """A fact's normalized words (a triple's angle brackets are delimiters, not text)."""
    return normalize_answer(text.replace("<", " ").replace(">", " ")).split()


def _contains(outer: Sequence[str], inner: Sequence[str]) -> bool:
    n = len(inner)
    return n > 0 and any(list(outer[i:i + n]) == list(inner) for i in range(len(outer) - n + 1))


def choice_options(question: str) -> list[list[str]]:
    """The two options of a choice question ("Which film came out first, X or Y?", "Who is
    older, X or Y?"), each as normalized words; [] for any other question."""
    written = choice_texts(question)
    if written is None:
        return []
    options = [normalize_answer(o).split() for o in written]
    return options if all(options) else []


def _computed(answer: str, numbered: Sequence[tuple[int, _Stated]], question: str = "") -> str:
    """How ``answer`` follows from the chain's facts (``numbered``: each with its index among
    the stated facts) by a shown step, or ""."""
    chain = [fact for _, fact in numbered]
    if _NUMBER.match(answer):
        value = float(answer)
        years = sorted({int(y) for fact in chain for y in _YEAR.findall(fact.text)})
        for a in years:
            for b in years:
                if b > a and b - a == value:
                    return f"date difference: {b} - {a} = {b - a}"
        counts: dict[tuple[str, str], set[str]] = {}
        for fact in chain:
            if fact.triple is not None:
                counts.setdefault((fact.triple[0], fact.triple[1]), set()).add(fact.triple[2])
        for (subject, predicate), objects in counts.items():
            if len(objects) == value:
                return f"count: {len(objects)} <{predicate}> fact(s) of <{subject}>"
    if answer in _YES_NO:
        by_predicate: dict[str, list[tuple[str, str]]] = {}
        for fact in chain:
            if fact.triple is not None:
                by_predicate.setdefault(fact.triple[1], []).append((fact.triple[0], fact.triple[2]))
        for predicate, pairs in by_predicate.items():
            subjects = {s for s, _ in pairs}
            if len(subjects) >= 2:
                first, second = sorted(subjects)[:2]
                same = ({o for s, o in pairs if s == first} & {o for s, o in pairs if s == second}) != set()
                if same == _YES_NO[answer]:
                    return (f"comparison: <{first}> and <{second}> {'share' if same else 'differ in'} "
                            f"<{predicate}>")
        if _YES_NO[answer] and question:
            shared = _shared_value(question, numbered)
            if shared:
                return shared
    return ""


def _shared_value(question: str, numbered: Sequence[tuple[int, _Stated]]) -> str:
    """A "yes" to "Are both X and Y from the same country?" shown by two statements, one naming
    X and one naming Y, that both hold the same name or year the question does not ("American").
    Only "yes": that two free-text facts differ in the asked respect is not shown by words."""
    q_names = _question_names(_POSSESSIVE.sub(r"\1", question), split_and=True)
    if len(q_names) < 2:
        return ""
    q_list = normalize_answer(question).split()
    q_words = set(q_list)
    # "Are X and Y both film directors?": what both must be, the question's other content words.
    skip = set().union(*q_names) | _SMALL_WORDS | _YES_NO_WORDS
    asked = list(dict.fromkeys(w for w in q_list if w not in skip and len(w) >= 4 and not w.isdigit()))
    about: list[tuple[int, frozenset[str], set[str], set[str]]] = []
    for number, fact in numbered:
        if fact.triple is not None:
            continue
        words = set(normalize_answer(fact.text).split())
        named = [n for n in q_names if n <= words]
        if len(named) != 1:  # a fact naming both (or neither) compares nothing
            continue
        values = {normalize_answer(w) for w in _VALUE_WORD.findall(fact.text)} - q_words - _SMALL_WORDS
        about.append((number, named[0], {v for v in values if v}, words))
    for i, (first, name_a, values_a, words_a) in enumerate(about):
        for second, name_b, values_b, words_b in about[i + 1:]:
            if name_a == name_b or name_a & name_b:
                continue
            if "same" in q_words:
                common = sorted(values_a & values_b)
                if common:
                    return f"comparison: facts {first + 1} and {second + 1}, one on each side, both say {common[0]!r}"
            elif "both" in q_words and asked and all(says_form(words_a, w) and says_form(words_b, w) for w in asked):
                return (f"comparison: facts {first + 1} and {second + 1}, one on each side, both say "
                        f"{' '.join(asked)!r}")
    return ""


def says_form(words: Iterable[str], word: str) -> bool:
    """Whether ``words`` hold ``word`` or a form of it (its first five letters, four of a
    five-letter word: "directors" and "director", "directed"; "films" and "film")."""
    words = set(words)
    stem = word[:max(4, min(5, len(word) - 1))]
    return word in words or len(word) >= 5 and any(w.startswith(stem) for w in words)
