"""Whether an answer is proven by the facts stated for it: grounding, not topic overlap.

A stated fact is in the knowledge (constrained decoding guarantees it), but that alone proves
nothing about the answer: a small model made to pick among facts that miss the question states
one anyway and answers from it. An answer stands when:

1. the stated facts hold a *connected chain* for the question: a first fact that names an entity
   of the (standalone) question, and each next fact sharing an entity with a fact already in the
   chain (a triple's entities are its subject and object; a statement's are its names, numbers
   and years; two triples share an entity only when it is the same one, a statement's names
   may also be part of the other's); and
2. the answer, normalized (``agent.knowledge.normalize.normalize_answer``: case, punctuation, articles),
   is contained word for word in a fact of that chain (a short sentence as answer: its words but
   small ones like "is", "in" all in one such fact), or is computed from chain facts by a step
   this module shows: a difference of two years ("how many years ..."), a count of one subject's
   objects for one relation, or a yes/no comparison of two triples with the same relation, of
   the type the question asks (:func:`~.values.answer_type_fits`: "18" years is no answer to
   "when"); and
3. the facts holding the answer reach every name of the question that a fact of the chain
   holds: a chain that anchors on two names of the question in two parts that share no entity
   proves nothing about the one its answer's part never reaches ("Lover Come Back contained the
   actress who played which part on The Brady Bunch?" is not answered by an actress of the
   series beside an unconnected fact about the film). Over the checked evaluation runs this
   withheld 11 wrong answers marked grounded (agent 2, refactx 1, web-rag 8) and no right one;
4. the facts holding the answer reach every name the question asks about (:func:`asked_about`):
   not only a name inside the phrase that asks for the answer ("What landlocked country located
   in Southern Africa is the birthplace of the artist Ayesha?" is not answered by "Lesotho is a
   landlocked country located in Southern Africa"), nor a word that only qualifies a noun ("This
   German professional basketball team ..." is not about a German edition of a game), and not
   one name of several ("When was the last time the Olympics were held in the country that
   released Han Vodka?" is not answered by a fact about the Olympics in Tokyo that never
   reaches Han Vodka). Re-grounding every saved evaluation answer with facts (1,600 distinct,
   each method), "a name" withheld 10 wrong answers marked grounded (agent 8, web-rag 2) and no
   right one; "every name" changed 28 more verdicts: 22 wrong answers withheld (agent 10, web-rag
   9, refactx 3) and 6 right ones, each missing a name of the question: HotpotQA "6.21 e6hL" (agent
   1 run, web-rag 3) for a team "originally based in Gothais", a misspelling of the Gotha its fact
   names; web-rag's "Edward Rapallo" for which of two men died more recently, from a fact about him
   alone; and one choice between two films that the agent proves by its own step (:mod:`.comparison`),
   where this rule does not apply. None of the checked table's agent look-up answers changes.

No answer stands that only repeats a whole name the question asks about ("Leonida Tonelli" for
what Leonida Tonelli's occupation is; "Mexico" for the country of Mexico City may stand).
Questions that compare two things are answered by a step over them (:mod:`.comparison`), not here;
that the fact holding an answer says what was asked is checked next (:mod:`.asked`).

Anything else is not proven, whatever it says; the agent then tries the next tree and in the
end answers "I don't know.", keeping the withheld answer in the trace.

Example::

    >>> ground("What is the official language of the country Edith Frank-Holländer is a citizen of?", "German",
    ...        ["<Edith Frank-Holländer> <country of citizenship> <Germany> .",
    ...         "<Germany> <official language> <German> ."])
    Grounding(grounded=True, how='contained in fact 2 of a chain of 2 facts', facts=(0, 1),
              short='', computed=False)
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..knowledge.facts import parse_triple
from ..knowledge.keywords import STOP_WORDS, extract_keywords
from ..knowledge.normalize import normalize_answer
from .plan import AUXILIARIES
from .values import answer_type_fits

_POSSESSIVE = re.compile(r"([^\W_])['’]s?(?![^\W_])", re.IGNORECASE)
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_YES_NO = {"yes": True, "no": False}
_ANSWER_PREFIX = re.compile(r"^\s*(?:answer\s*:\s*)+", re.IGNORECASE)
DONT_KNOW = "I don't know."
# Words a sentence answer may add to a fact's ("X is a Y", "it was in Z").
_SMALL_WORDS = frozenset({"is", "was", "are", "were", "be", "been", "it", "its", "he", "she", "they", "his", "her",
                          "their", "in", "of", "on", "at", "by", "for", "from", "to", "and", "as", "with"})
_MAX_SENTENCE_WORDS = 16
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
    plain = _POSSESSIVE.sub(r"\1", question)
    if any(name <= set(words) for name in _question_names(plain)) \
            and _contains(normalize_answer(plain).split(), words):
        return Grounding(False, "the answer only repeats a name the question asks about", tuple(chain))
    holding = [i for i in chain if _contains(_fact_words(stated[i].text), words)]
    if holding:
        broken = _broken_away(question, stated, chain, holding) or _asked_about_unreached(question, stated, chain,
                                                                                          holding)
        if broken:
            return Grounding(False, broken, tuple(chain))
        return Grounding(True, f"contained in fact {holding[0] + 1} of a chain of {len(chain)} fact"
                               f"{'' if len(chain) == 1 else 's'}", tuple(chain))
    # A sentence as answer ("Carolyn Eisele is a mathematician."): its words, less the small
    # ones, all in one fact of the chain.
    content = [w for w in words if w not in _SMALL_WORDS]
    if len(words) > 1 and content and len(words) <= _MAX_SENTENCE_WORDS:
        holding = [i for i in chain if set(content) <= set(_fact_words(stated[i].text))
                   and _names_an_end(stated[i], words)]
        if holding:
            broken = _broken_away(question, stated, chain, holding) or _asked_about_unreached(question, stated,
                                                                                              chain, holding)
            if broken:
                return Grounding(False, broken, tuple(chain))
            i = holding[0]
            return Grounding(True, f"its words are in fact {i + 1} of a chain of {len(chain)} fact"
                                   f"{'' if len(chain) == 1 else 's'}", tuple(chain), _short(stated[i], words))
    computed = _computed(norm, [(i, stated[i]) for i in chain], question)
    if computed:
        wrong_type = answer_type_fits(question, answer)
        if wrong_type:  # a step over the facts that gives what is not asked ("18" years for "when")
            return Grounding(False, f"{computed}, but {wrong_type}", tuple(chain))
        return Grounding(True, computed, tuple(chain), computed=True)
    return Grounding(False, f"the answer is in no fact of the chain ({len(chain)} fact"
                            f"{'' if len(chain) == 1 else 's'}) and no step computes it", tuple(chain))


def _names_an_end(fact: _Stated, words: Sequence[str]) -> bool:
    """Whether a sentence answer (``words``) names a triple's subject or object whole: its words
    spread over the triple's parts ("New Political Party" over ``<member of political party>
    <New Progressive Party>``) say nothing the triple says. A statement: always."""
    if fact.triple is None:
        return True
    return any(_contains(list(words), normalize_answer(end).split()) for end in (fact.triple[0], fact.triple[2]))


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


def holds_answer(fact: str, answer: str) -> bool:
    """Whether ``answer``, normalized, is in ``fact`` word for word; a name the fact writes with a
    possessive is in it ("Bo Holt's son" holds Bo Holt: normalized, "holts" would hide it)."""
    words = normalize_answer(clean_answer(answer)).split()
    if _contains(_fact_words(fact), words):
        return True
    return ("'" in fact or "’" in fact) and _contains(_fact_words(_POSSESSIVE.sub(r"\1", fact)), words)


def answer_values(facts: Sequence[str]) -> list[str]:
    """What an answer standing on ``facts`` may say, for an ``Answer:`` line constrained to them:
    each stated triple's subject and object (also with a capital first letter), and "I don't
    know."; [] when no triple was stated. The model picks among them where it wrote an answer in
    none ("Philosophy" after ``<field of work> <philology>``). A statement offers nothing: any run
    of its words as the answer gave HotpotQA's dev half one wrong answer proven ("Simon
    Schatzberger (born 1968 in Nottingham" for an American actor) and no right one."""
    values: dict[str, None] = {}
    for triple in filter(None, map(parse_triple, facts)):
        for value in (triple[0].strip(), triple[2].strip()):
            if value:
                values.setdefault(value, None)
                values.setdefault(value[0].upper() + value[1:], None)
    return [*values, DONT_KNOW] if values else []


def connected_chain(question: str, stated: Sequence[_Stated]) -> list[int]:
    """Indices of the facts connected to the question: anchors name a question entity, the rest
    share an entity with a fact already connected (in stated order, repeated to a fixed point)."""
    # "Buck Owens's instrument" names Buck Owens: the possessive is not part of the name.
    question = _POSSESSIVE.sub(r"\1", question)
    q_norm = normalize_answer(question).split()
    q_names, stated = _joined_names(question, _question_names(question), stated)
    anchors = [i for i, fact in enumerate(stated)
               if any(_contains(q_norm, e.split()) for e in fact.entities) or _names_in(fact, q_names)]
    return sorted(_reached(stated, anchors, range(len(stated))))


def _reached(stated: Sequence[_Stated], start: Iterable[int], among: Iterable[int]) -> set[int]:
    """``start`` and the facts of ``among`` linked to them (:func:`_linked`), directly or through
    one another."""
    reached, among = set(start), list(among)
    grew = bool(reached)
    while grew:
        grew = False
        for i in among:
            if i not in reached and any(_linked(stated[j], stated[i]) for j in reached):
                reached.add(i)
                grew = True
    return reached


def _linked(a: _Stated, b: _Stated) -> bool:
    """Whether two stated facts share an entity: the same one, or for a statement a name that is
    part of the other's (between triples only the same entity links: <New Zealand> ...
    <Pacific Islanders> does not lead on to <Pacific Community>, nor <Latin> to <Latin Americans>)."""
    if a.entities & b.entities:
        return True
    if a.triple is not None and b.triple is not None:
        return False
    return any(_shares(e, set(a.entities)) for e in b.entities)


def _broken_away(question: str, stated: Sequence[_Stated], chain: Sequence[int], holding: Sequence[int]) -> str:
    """Why the facts holding the answer (``holding``) do not prove it for the whole question,
    or "": a name of the question that a fact of the chain holds is not reached from them.
    "Lover Come Back contained the actress who played which part on The Brady Bunch?" is not
    answered by "Selma Archerd has also appeared on The Brady Bunch" beside a fact about Lover
    Come Back that shares no entity with it: nothing ties her to that film."""
    plain = _POSSESSIVE.sub(r"\1", question)
    q_names, stated = _joined_names(plain, _question_names(plain), stated)
    reached = _reached(stated, holding, chain)
    inside = set().union(*(_held(stated[i], q_names) for i in reached))
    for i in chain:
        if i in reached:
            continue
        for name in _held(stated[i], q_names) - inside:
            if not _among(name, inside):
                return (f"the fact about '{_said(plain, name)}' (fact {i + 1}) shares no entity with the fact "
                        f"holding the answer (fact {holding[0] + 1}): the chain breaks")
    return ""


def _among(name: frozenset[str], names: Iterable[frozenset[str]]) -> bool:
    """Whether ``name`` is one of ``names``, or part of one, or one is part of it."""
    return any(name <= other or other <= name for other in names)


def _said(question: str, name: frozenset[str]) -> str:
    """How ``question`` writes ``name`` (its significant words): the keyword holding them."""
    return next((k for k in extract_keywords(question, limit=40) if _word_set(normalize_answer(k).split()) >= name),
                " ".join(sorted(name)))


def _held(fact: _Stated, names: Iterable[frozenset[str]]) -> set[frozenset[str]]:
    """The names of ``names`` a stated fact holds (a triple: in its subject or object)."""
    spans = [_word_set(normalize_answer(e).split()) for e in (fact.triple[0], fact.triple[2])] if fact.triple \
        else [_word_set(normalize_answer(_POSSESSIVE.sub(r"\1", fact.text)).split())]
    return {name for name in names if any(name <= span for span in spans)}


def _asked_about_unreached(question: str, stated: Sequence[_Stated], chain: Sequence[int],
                           holding: Sequence[int]) -> str:
    """Why the facts holding the answer do not reach what the question asks about, or "": the
    question names things the answer must be tied to (:func:`asked_about`), and the facts
    reached from those holding the answer do not hold each of them."""
    plain = _POSSESSIVE.sub(r"\1", question)
    about = asked_about(plain)
    if not about:
        return ""
    # "Iain Banks and Irwin Shaw" is two names, unless a fact writes them as one (a title).
    parts = [part for name in about for part in re.split(r"\s+(?:and|or|&)\s+", name)]
    q_names, stated = _joined_names(plain, [_significant(name) for name in parts], stated)
    q_names = [name for name in q_names if name]
    if not q_names:  # no significant word ("CEO"): nothing to reach
        return ""
    held = set().union(*(_held(stated[i], q_names) for i in _reached(stated, holding, chain)))
    if not held:
        return (f"the facts holding the answer reach none of what the question asks about "
                f"({', '.join(repr(name) for name in about)})")
    missing = [name for name in q_names if not _among(name, held)]
    if missing:
        written = {_significant(part): part for part in parts}
        return (f"the facts holding the answer do not reach "
                f"{', '.join(repr(written.get(name) or _said(plain, name)) for name in missing)}, "
                f"which the question asks about")
    return ""


# Words before a noun phrase: a capitalised word between one and a lower-case word qualifies the
# noun ("the Swedish performance artist", "This German professional team", "what Australian city").
_DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those", "which", "what", "whose", "his", "her",
                          "its", "their"})
_TOKEN = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")


def asked_about(question: str) -> list[str]:
    """The names of ``question`` its answer must be tied to: those outside the phrase that asks
    for the answer (from its last "what"/"which" to the next auxiliary verb, else to the next
    article: "What landlocked country located in Southern Africa" describes the answer, "Which
    brewery sponsors" leaves "the team ..." outside), less a single word that only
    qualifies a noun (a determiner before it, a lower-case word after it: "the Swedish
    performance artist"). Grammar's closed classes only (determiners, auxiliaries)."""
    tokens = list(_TOKEN.finditer(question))
    lower = [t.group(0).lower() for t in tokens]
    asking = [i for i, w in enumerate(lower) if w in ("what", "which")]
    start = end = len(question)
    if asking:
        i = asking[-1]
        start = tokens[i].start()
        stop = next((j for j in range(i + 1, len(tokens)) if lower[j] in AUXILIARIES), None)
        if stop is None:  # "Which brewery sponsors the team ...": the verb's object is outside
            # ("what country on the Vell Sea": after a small word, the article is still inside)
            stop = next((j for j in range(i + 2, len(tokens))
                         if lower[j] in ("the", "a", "an") and lower[j - 1] not in STOP_WORDS), None)
        end = tokens[stop].start() if stop is not None else len(question)
    out = []
    for name in extract_keywords(question, limit=40):
        if not any(c.isupper() or c.isdigit() for c in name):
            continue
        m = re.search(rf"(?<![^\W_]){re.escape(name)}(?![^\W_])", question)
        if m is None or start <= m.start() < end:
            continue
        words = name.split()
        at = next((j for j, t in enumerate(tokens) if t.start() == m.start()), None)
        if at is not None and words[0].lower() in _DETERMINERS:  # "The Norvian" opening the question
            words, at = words[1:], at + 1
        if at is not None and len(words) == 1 and 0 < at < len(tokens) - 1 \
                and lower[at - 1] in _DETERMINERS and tokens[at + 1].group(0).islower() \
                and lower[at + 1] not in STOP_WORDS:
            continue
        out.append(name)
    return out


def _significant(name: str) -> frozenset[str]:
    """A name's significant words (4+ letters, or a year), as :func:`_question_names` keeps them
    (a word the name repeats, as many times: :func:`_word_set`)."""
    return _word_set(w for w in normalize_answer(name).split()
                     if (len(w) >= 4 and not w.isdigit() or w.isdigit() and len(w) == 4) and w not in STOP_WORDS)


def _word_set(words: Iterable[str]) -> frozenset[str]:
    """``words`` as a set that keeps repeats ("simon", "simon#2"): a name that says a word twice
    ("Simon & Simon") is held only by a text that says it twice, not by "Simon Schatzberger"."""
    seen: dict[str, int] = {}
    out = []
    for word in words:
        seen[word] = seen.get(word, 0) + 1
        out.append(word if seen[word] == 1 else f"{word}#{seen[word]}")
    return frozenset(out)


_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")
_JOINER = re.compile(r"\s+(?:or|and)\s+")


def joined_names(text: str) -> list[str]:
    """Two runs of capitalised words (words apart by whitespace only) joined by "or"/"and"
    ("Broadway or Bust", "Pride and Prejudice"), left to right, each word in one at most. Read
    in one pass over the capitalised words: a regular expression of runs backtracked over every
    word of a long run (2,000 characters of "Ab Ab ..." took 70 ms, this under 1)."""
    runs: list[list[int]] = []
    for m in _CAPITALISED.finditer(text):
        if runs and text[runs[-1][1]:m.start()].isspace():
            runs[-1][1] = m.end()
        else:
            runs.append([m.start(), m.end()])
    out, i = [], 0
    while i + 1 < len(runs):
        if _JOINER.fullmatch(text, runs[i][1], runs[i + 1][0]):
            out.append(text[runs[i][0]:runs[i + 1][1]])
            i += 2
        else:
            i += 1
    return out


def _joined_names(question: str, q_names: list[frozenset[str]],
                  stated: Sequence[_Stated]) -> tuple[list[frozenset[str]], list[_Stated]]:
    """Two names the question joins by "or"/"and" taken as one where a stated fact writes them
    so, word for word ("Broadway or Bust" is a title there): in ``q_names``, and in the entities
    of the facts that write it (its parts are not names of their own there). "Broadway Gold", a
    look-alike, then shares no name with the question or with the title's facts."""
    stated = list(stated)
    for written in joined_names(question):
        joined = normalize_answer(written).split()
        writing = [i for i, f in enumerate(stated) if _contains(normalize_answer(f.text).split(), joined)]
        if not writing:
            continue
        whole = _word_set(w for w in joined if (len(w) >= 4 and not w.isdigit()) and w not in STOP_WORDS)
        if whole:
            q_names = [n for n in q_names if not n < whole] + [whole]
        name = " ".join(joined)
        for i in writing:
            f = stated[i]
            if f.triple is None:
                parts = frozenset(e for e in f.entities if not set(e.split()) < set(joined))
                stated[i] = _Stated(f.text, f.triple, parts | {name})
    return q_names, stated


def _parse(text: str) -> _Stated:
    triple = parse_triple(text)
    if triple:
        s, p, o = triple
        return _Stated(text, (s, p, o), frozenset(e for e in (normalize_answer(s), normalize_answer(o)) if e))
    names = [k for k in extract_keywords(text, limit=40) if any(c.isupper() or c.isdigit() for c in k)]
    return _Stated(text, None, frozenset(e for e in (normalize_answer(n) for n in names) if e))


def _question_names(question: str, split_and: bool = False) -> list[frozenset[str]]:
    """The question's names, each as its significant words (4+ letters, or years), one of which
    a statement fact must hold whole to anchor. ``split_and``: "Cupid The Cowpuncher and
    Hashimura Togo" is two names (the two sides of a comparison)."""
    keywords = extract_keywords(question)
    names = [k for k in keywords if any(c.isupper() or c.isdigit() for c in k)] or keywords
    if split_and:
        names = [part for name in names for part in re.split(r"\s+and\s+", name)]
    return [words for words in map(_significant, names) if words]


def _names_in(fact: _Stated, q_names: Sequence[frozenset[str]]) -> bool:
    """Whether a statement holds a whole name of the question: "Tony Clark played baseball" does
    not anchor a question about Tony Shields."""
    if fact.triple is not None or not q_names:
        return False
    words = _word_set(normalize_answer(fact.text).split())
    return any(name <= words for name in q_names)


def _shares(entity: str, linked: set[str]) -> bool:
    words = entity.split()
    return any(entity == other or _contains(other.split(), words) or _contains(words, other.split())
               or _middle_left_out(words, other.split()) or _middle_left_out(other.split(), words)
               for other in linked if other)


def _middle_left_out(short: Sequence[str], full: Sequence[str]) -> bool:
    """Whether ``short`` is ``full`` with middle words left out, its first and last word kept
    ("Scott Buchholz" of "Scott Andrew Buchholz"): one person's name, written in two ways."""
    if len(short) < 2 or len(full) <= len(short) or short[0] != full[0] or short[-1] != full[-1]:
        return False
    rest = iter(full[1:-1])
    return all(word in rest for word in short[1:-1])


def _fact_words(text: str) -> list[str]:
    """A fact's normalized words (a triple's angle brackets are delimiters, not text)."""
    return normalize_answer(text.replace("<", " ").replace(">", " ")).split()


def _contains(outer: Sequence[str], inner: Sequence[str]) -> bool:
    n = len(inner)
    return n > 0 and any(list(outer[i:i + n]) == list(inner) for i in range(len(outer) - n + 1))


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
    return ""


def says_form(words: Iterable[str], word: str) -> bool:
    """Whether ``words`` hold ``word`` or a form of it (its first five letters, four of a
    five-letter word: "directors" and "director", "directed"; "films" and "film")."""
    words = set(words)
    stem = word[:max(4, min(5, len(word) - 1))]
    return word in words or len(word) >= 5 and any(w.startswith(stem) for w in words)
