"""The comparison step: a step over a question's two options, computed in code from facts the model states.

"Which film has the director who was born first, Quiet Harbour or The Winter Gate?", "Is Ada
Varga older than Ines Varro?", "Are both from the same country?", "How many years apart were
they born?": once the question is read into a plan (:mod:`.plan`: the kind, the two options,
the order asked), the model writes one reply in parts, with the retrieved facts listed in its
prompt (``prompts/agent-options/``):

    Option: Quiet Harbour
    Fact: Quiet Harbour is a 1954 drama directed by Paul Amsel.          <- constrained
    Found: [11] Paul Amsel (12 March 1901 – 4 May 1970) was a German director.
    Fact: Paul Amsel (12 March 1901 – 4 May 1970) was a German director.  <- constrained
    Value: 12 March 1901
    Option: The Winter Gate
    ...

The agent writes each ``Option:`` line and opens the first ``Fact:`` line; every ``Fact:`` line
is constrained to the per-question tree, which grows with the facts of the entities a stated
fact brings in (:class:`~.chaining.ChainingTree`); those new facts are written into the reply
as ``Found:`` lines, so the model reads them before it goes on (IRCoT's interleaving, with one
prompt read: the key/value cache is kept throughout, :class:`~agent.decoding.greedy.DecodeSession`).
An option's facts are those that name it or come from its document (a title's qualifier,
"(1940 film)", says a fact of another document naming the bare title is a namesake's); when
none the question retrieved fits the step, the web is searched for the option by name. With a
role, the second fact is about who fills it (:func:`~.chaining.role_holder`,
:func:`~.chaining.is_about`). An order in the time of lives ("whose director died first")
reads that date of a life only (a film's year in the director's fact is not his birth); an
option named with an event of its own ("the birth of Y" beside "the forming of X") is dated by
that event (:func:`option_event`); and
"the same country" compares values the embedder puts near "country" (:func:`values_of_kind`);
"Are X and Y both film directors?" is answered from a fact of each that calls it so (yes), or
a fact that calls one by the noun with other qualifying names (no), not from the values read
(:func:`says_of`); "Which singer is American, X or Y?" (a choice with no order) is answered by
the option a fact calls so when a fact calls the other otherwise ("an English musician").
The ``Value:`` lines are the model's reading; the step itself is code (:mod:`.values`): each
value must be held by a fact stated for its option (a date by a date a fact gives, a number by
a number, a word by the same words), then the dates or numbers are compared, or the two values
matched, and the answer follows. The model's own pick is not asked for. Without both values
held, nothing is shown.

Example (not run: needs a model and a knowledge web)::

    step = ComparisonStep(generator, web)
    result = step.run(question, plan, hits)
    result.answer, result.how, result.grounded     # "Quiet Harbour", "compared: ...", True
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from ..decoding import FactGenerator
from ..decoding.greedy import DecodeSession
from ..decoding.spans import FactSpan, decode_tokens
from ..decoding.tracker import FactTracker
from ..knowledge.keywords import STOP_WORDS, bridge_entities, extract_keywords, noun_form, only_in_longer_names
from ..knowledge.normalize import normalize_answer
from ..index.trie import FactIndex
from ..knowledge.facts import Fact
from ..prompts import FewShotPrompt, listed_question
from .chaining import bare_name, is_about, role_holders
from .grounding import holds_answer, says_form
from .plan import QuestionPlan, role_words
from .values import (Dated, answer_type_fits, compare_dates, dates_in, life_dates, parse_date, parse_number, same_date,
                     years_between)

if TYPE_CHECKING:
    from ..web.retrieval import FactHit
    from ..web.retrieval import FactSearch
    from .relations import RelationMatcher

OPTIONS_PROMPT = "agent-options"
# Tokens per line of the reply (a ``Fact:`` line may take its longest fact's tokens and a few
# more: a long fact is never cut, :meth:`~agent.decoding.greedy.DecodeSession.state_one`).
LINE_TOKENS = 96
# New facts a hop writes into the reply (``Found:`` lines) after a stated fact.
FOUND_FACTS = 2
# How much closer "date of birth" must be to the question than "date of death" (or the other
# way) for the step to read that date of a life by itself.
EVENT_MARGIN = 0.03
# ... and at least this close to the question: "Who died first?" 0.45 to "date of death", "Which
# came out first?" 0.11 to either (measured with the bundled embedder).
EVENT_FLOOR = 0.25
# A margin this wide says the event however far the question is from both: "Which film was
# directed by a director born later, A or B?" 0.22 birth, 0.07 death. On the dev halves'
# comparisons (2Wiki in both wordings, HotpotQA) born/died questions lead by 0.14-0.30, the
# others ("released first", "published first", "founded") by 0.07 at most.
EVENT_CLEAR = 0.12
# Facts read of an option's own document when none retrieved fits the step (HotpotQA's and
# 2Wiki's documents hold 3-10).
DOCUMENT_FACTS = 40
# Below this cosine two values that differ in words are different (not two names of one thing).
DIFFERENT_BELOW = 0.5
# A value compared for "the same <attribute>" is of that kind when its cosine with the word is at
# least TYPE_FLOOR and within TYPE_MARGIN of the closest value's (measured with the bundled
# embedder: countries and nationalities 0.44-0.70 to "country", "Internet" 0.37, a city 0.30,
# people and titles 0.10-0.24).
TYPE_FLOOR = 0.4
TYPE_MARGIN = 0.15


@dataclass
class OptionReading:
    """What the reply says of one option: the facts stated for it (indices into the reply's
    facts), the ``Value:`` line, and whether a stated fact holds it (``held``: the fact)."""

    option: str
    question: str = ""
    facts: list[int] = field(default_factory=list)
    read_from: list[int] = field(default_factory=list)  # the facts its value may come from
    via: str = ""
    role: str = ""  # whom the value is of, when not the option itself: "director"
    value: str = ""
    held: int | None = None
    date: Dated | None = None
    number: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"option": self.option, "question": self.question, "facts": list(self.facts), "value": self.value,
                "held_by": self.held,
                **({"date": list(self.date.key)} if self.date else {}),
                **({"number": self.number} if self.number is not None else {})}


@dataclass
class OptionsResult:
    """The reply (``text``, its constrained ``spans``), each option's reading, and the step:
    ``answer`` (empty when not shown), ``grounded``, ``how`` (one line), ``facts`` (indices of
    the spans the step read)."""

    text: str
    spans: list[FactSpan]
    readings: list[OptionReading]
    answer: str
    grounded: bool
    how: str
    facts: tuple[int, ...]
    tokens: int
    prompt_tokens: int
    cached_prompt_tokens: int
    prefill_s: float
    found: list[dict[str, Any]] = field(default_factory=list)
    hops: list[dict[str, Any]] = field(default_factory=list)
    hits: dict[str, Any] = field(default_factory=dict)  # every fact met (text -> its web hit)


class ComparisonStep:
    """Runs the reply in parts and computes the step (module docstring). ``similar(a, b)``: a
    cosine of two short texts (the web's embedder), used to tell two different values from two
    names of one thing for "same" questions; without it, values that differ in words show
    nothing."""

    def __init__(self, generator: FactGenerator, web: FactSearch | None = None, *,
                 similar: Callable[[str, str], float] | None = None, matcher: RelationMatcher | None = None,
                 hop_k: int = 5, max_tree_facts: int = 60) -> None:
        self.generator = FactGenerator(generator.model, generator.tokenizer, None,
                                       prompt=FewShotPrompt.load(OPTIONS_PROMPT), max_new_tokens=LINE_TOKENS,
                                       vocab=generator.vocab, steps=generator.steps)
        self.web, self.similar, self.matcher = web, similar, matcher
        self.hop_k, self.max_tree_facts = hop_k, max_tree_facts

    def _encode(self, text: str) -> list[int]:
        return self.generator._encode(text)

    def run(self, question: str, plan: QuestionPlan, hits: Sequence[FactHit], *,
            stop: threading.Event | None = None,
            on_text: Callable[[str], None] | None = None) -> OptionsResult:
        """The reply for ``question`` over ``hits`` and the step of ``plan``; ``on_text`` gets
        the reply's text as it grows (for streaming)."""
        tokenizer = self.generator.tokenizer
        unique: dict[str, FactHit] = {}
        for h in hits:
            unique.setdefault(h.text, h)
        known = dict(unique)  # every fact met: the listed ones, then the hops' (text -> hit)
        prompt = self.generator.render([{"role": "user", "content": listed_question(question, list(unique))}])
        ids = self._encode(prompt)
        started = time.perf_counter()
        session, cached = self.generator.open_session(ids, cancel=stop)
        prefill = time.perf_counter() - started
        shown = [0]
        stated: list[str] = []
        hops: list[dict[str, Any]] = []

        def show() -> None:
            if on_text is not None:
                text = decode_tokens(tokenizer, session.out)
                if len(text) > shown[0] and not text.endswith("\ufffd"):
                    on_text(text[shown[0]:])
                    shown[0] = len(text)

        readings: list[OptionReading] = []
        attribute = same_attribute(question) if plan.kind == "same" else ""
        # An order in the time of lives ("whose director died first"): only that date of a
        # life counts (a film's year in the director's fact is not his birth). Lives for sure
        # when a role leads to them or the question says born or died; an age word alone may
        # be a film's ("Which film is older?": its year counts).
        asked_event = self.event(question, plan) if _wants_dates(plan) else ""
        event = asked_event
        lives = False

        def dated(texts: Sequence[str]) -> list[str]:
            return [t for t in texts if (_life_date(t, event) if event else dates_in(t))]

        def typed(texts: Sequence[str], option: str) -> list[str]:
            """Those of ``texts`` that hold a value of the attribute compared (all without one)."""
            return [t for t in texts if self._typed(attribute, _values(plan, [t], option))] if attribute else list(texts)

        for option in plan.options:
            if stop is not None and stop.is_set() or session.ended:
                break
            reading = OptionReading(option)
            readings.append(reading)
            # What is dated of this option: the event its own phrase names ("the birth of Y" in
            # "Which came first, the forming of X or the birth of Y?"), else the question's.
            event = option_event(self.matcher, question, plan, option, asked_event) if _wants_dates(plan) else ""
            session.feed(self._encode(f"Option: {option}\n"), reply=True)
            show()
            # Its facts: those that name it, or come from its own document (none listed: the
            # web searched for it by name; still none: the option stays unread, another's
            # facts prove nothing about it).
            about = [t for t in known if _of_option(t, known[t], option)]
            # Whose date of a life is read: the option's, or whom its facts say fills a role the
            # question names (a film has no birth: "Which director died first, A or B?").
            step = replace(plan, role=led_role(plan, question, event, about))

            def fitting(texts: Sequence[str]) -> list[str]:
                if step.role:
                    return _fitting(step, texts)
                fit = typed(_fitting(step, texts), option)
                if plan.trait:  # "both film directors": first the facts that call it so, or something
                    fit = [t for t in fit if says_of(t, plan.trait)] or \
                        [t for t in fit if _trait_phrase(t, plan.trait) is not None] or fit
                return (dated(fit) or fit) if event else fit

            fit = fitting(about)
            if not fit:  # none listed fits the step: the web asked for the option's own facts
                about = list(dict.fromkeys([*about, *self._look_up(option, about, known, hops)]))
                step = replace(plan, role=led_role(plan, question, event, about))
                fit = fitting(about)
            about = fit or about
            reading.role = step.role
            lives = bool(event) and (bool(step.role) or not plan.age)
            first = self._state(session, about, stated, known, tokenizer, show)
            if first is None:
                continue
            reading.facts.append(len(stated) - 1)
            if step.role:
                # The value is the one the role leads to: state one fact of whom the first names
                # in that role, and read the value from it alone.
                bridges = self._hop(question, option, first, known, hops, role=step.role)
                if _wants_dates(plan):
                    bridges = dated(bridges)
                elif plan.length:  # a lifespan: a fact with its birth and death
                    bridges = [t for t in bridges if all(life_dates(t))] or bridges
                bridges = typed(bridges, option) or bridges
                second = self._state(session, bridges, stated, known, tokenizer, show) if bridges else None
                if second is None:
                    reading.via = ""
                    session.feed(self._encode("Answer: unknown\n"), reply=True)
                    show()
                    continue
                reading.facts.append(len(stated) - 1)
                reading.read_from = [len(stated) - 1]
            else:
                reading.read_from = list(reading.facts)
            candidates = _values(plan, [stated[i] for i in reading.read_from], option)
            if attribute:  # "the same country": values of that kind only ("American", not a title)
                candidates = self._typed(attribute, candidates)
            known_date = self._life_value(event, [stated[i] for i in reading.read_from])
            session.feed(self._encode("Answer:"), reply=True)
            if known_date:
                reading.value = known_date
                reading.via = "the date the question asks of a life (birth or death), read by code"
                session.feed(self._encode(f" {reading.value}\n"), reply=True)
            elif candidates and not lives:
                pick, _ = session.choose([self._encode(f" {c}") for c in candidates])
                reading.value = candidates[pick]
                session.feed(self._encode(f" {reading.value}\n"), reply=True)
            else:
                session.feed(self._encode(" unknown\n"), reply=True)
            show()
        text = decode_tokens(tokenizer, session.out)
        spans = _spans(text, stated, known)
        answer, grounded, how, used = compute_step(plan, readings, stated, self.similar, attribute, question)
        return OptionsResult(text, spans, readings, answer, grounded, how, used, len(session.out), len(ids),
                             cached, round(prefill, 4), [], hops, known)

    def _state(self, session: DecodeSession, texts: Sequence[str], stated: list[str], known: dict[str, Any],
               tokenizer: Any, show: Callable[[], None]) -> str | None:
        """One ``Fact:`` line, constrained to ``texts`` (those not stated yet); the fact, or None."""
        texts = [t for t in dict.fromkeys(texts) if t not in stated]
        if not texts:
            return None
        index = FactIndex.build([Fact.from_statement(t, getattr(known.get(t), "source", "")) for t in texts],
                                tokenizer)
        picked = session.state_one(FactTracker(index, session.vocab), self._encode("Fact:"), at_least=LINE_TOKENS)
        show()
        if picked is None:
            return None
        fact = index.facts[picked].text
        stated.append(fact)
        return fact

    @staticmethod
    def _life_value(event: str, facts: Sequence[str]) -> str:
        """For an order in the time of lives: the birth or death date (``event``) the last of
        ``facts`` giving one gives, read by :func:`~.values.life_dates`; "" when none does."""
        for fact in reversed(facts if event else ()):
            date = _life_date(fact, event)
            if date is not None:
                return date.text
        return ""

    def event(self, question: str, plan: QuestionPlan) -> str:
        """Which date of a life the question compares (:func:`asked_event`)."""
        return asked_event(self.matcher, question, plan)

    def _typed(self, attribute: str, values: Sequence[str]) -> list[str]:
        return values_of_kind(self.matcher.embedder, attribute, values) if self.matcher is not None else list(values)

    def _look_up(self, option: str, about: Sequence[str], known: dict[str, Any],
                 hops: list[dict[str, Any]]) -> list[str]:
        """The facts of ``option`` the web finds by its name (without a title's "(1940 film)")
        when none of the question's retrieved facts ``about`` it fits the step, and every fact of
        its own document (the one titled with its name): "The company was founded in 1959."
        names no company, and only its document says it is Little Caesars'. They join ``known``."""
        if self.web is None:
            return []
        t = time.perf_counter()
        query = bare_name(option)
        found = [h for h in self.web.search(query, 2 * self.hop_k).hits if _of_option(h.text, h, option)]
        for hit in found[: self.hop_k]:
            known.setdefault(hit.text, hit)
        own = [hit for hit in [*(known[text] for text in about if text in known), *found[: self.hop_k]]
               if _titled(hit, option)]
        documents = list(dict.fromkeys((getattr(hit, "provenance", None) or {}).get("doc_id") for hit in own))
        read = self.web.document_hits([d for d in documents if d], limit=DOCUMENT_FACTS)
        for hit in read:
            known.setdefault(hit.text, hit)
        texts = list(dict.fromkeys([*(h.text for h in found[: self.hop_k]), *(h.text for h in read)]))
        hops.append({"step": "option", "entity": option, "query": query, "added": texts,
                     "documents": len(documents), "seconds": round(time.perf_counter() - t, 4)})
        return texts

    def _hop(self, question: str, option: str, fact: str, known: dict[str, Any],
             hops: list[dict[str, Any]], role: str = "") -> list[str]:
        """The facts about the entities ``fact`` brings in (a film's director: with ``role``,
        the names nearest after the word that says it), searched in the web in the option's
        context; they join ``known``."""
        if self.web is None:
            return []
        entities = bridge_entities(fact, f"{question} {option}", limit=8)
        if role:
            # The first name after the role word that the knowledge has facts about fills it
            # ("pioneering French filmmaker Alice Guy-Blaché": no one's facts are "French"'s).
            entities = role_holders(fact, f"{question} {option}", role) or entities[:1]
        out: list[str] = []
        for entity in entities if role else entities[:2]:
            if role and out:
                break
            t = time.perf_counter()
            # With a role, the facts about the one who fills it: searched by name alone (the
            # question's words would bring back the options' own facts).
            query = entity if role else f"{entity}: {question}"
            found = [h for h in self.web.search(query, 2 * self.hop_k).hits
                     if (is_about(h, entity) if role else _names(h.text, entity))]
            added = []
            for hit in found[: self.hop_k]:
                if hit.text not in known:
                    known[hit.text] = hit
                if hit.text != fact:
                    added.append(hit.text)
            out.extend(t2 for t2 in added if t2 not in out)
            hops.append({"step": "hop", "fact": fact, "entity": entity, "query": query,
                         "added": added, "seconds": round(time.perf_counter() - t, 4)})
        return out

def asked_event(matcher: RelationMatcher | None, question: str, plan: QuestionPlan) -> str:
    """Which date of a life the question compares: "birth" when its order word is one of age
    (older, younger: born earlier or later), else the closer of "date of birth" and "date of
    death" to the question by the relation matcher (by a margin, and close enough: "Which came
    out first?" asks neither); people ordered in time with no event named ("Who came into the
    world first, A or B?": the embedder misses the wording) are ordered by their births, never
    by the year of a film one of them was in; "" otherwise."""
    if plan.age:
        return "birth"
    event = life_event(matcher, question, [*plan.options, plan.role])
    if not event and plan.order in ("earlier", "later") and not plan.role and _asks_who(question):
        return "birth"
    return event


def _asks_who(question: str) -> bool:
    """Whether ``question`` asks who (its first wh-word): its options are people."""
    m = re.search(r"\b(who|whom|which|what|where|when)\b", question, flags=re.IGNORECASE)
    return m is not None and m.group(1).lower() in ("who", "whom")


def life_event(matcher: RelationMatcher | None, text: str, names: Sequence[str]) -> str:
    """"birth" or "death": the date of a life closer to ``text`` (its ``names`` put as "X") by
    the relation matcher, by a wide margin, or by a margin and close enough; "" when neither."""
    if matcher is None:
        return ""
    ranked = dict(matcher.ranked(text, names, ["date of birth", "date of death"]))
    birth, death = ranked.get("date of birth", -1.0), ranked.get("date of death", -1.0)
    margin = abs(birth - death)
    if margin < EVENT_CLEAR and (margin < EVENT_MARGIN or max(birth, death) < EVENT_FLOOR):
        return ""
    return "birth" if birth > death else "death"


def option_event(matcher: RelationMatcher | None, question: str, plan: QuestionPlan, option: str, asked: str) -> str:
    """The date of a life compared for ``option``: when the question names an event of it
    ("the birth of Y", "the forming of X": a noun, then "of", right before the option), the one
    that phrase asks ("birth", or "" when neither a birth nor a death: the forming of a band is
    dated by any date its facts give); else ``asked``, the question's
    (:meth:`ComparisonStep.event`). An order word of age always asks a birth."""
    if plan.age or matcher is None:
        return asked
    m = re.search(r"\bthe\s+([^\W\d_]+)\s+of\s+(?:the\s+)?" + re.escape(option) + r"(?![^\W_])", question,
                  flags=re.IGNORECASE)
    if m is None or plan.role and m.group(1).lower() == plan.role.lower():
        return asked
    return life_event(matcher, f"the {m.group(1)} of X", ["X"])


def compute_step(plan: QuestionPlan, readings: list[OptionReading], facts: Sequence[str],
                 similar: Callable[[str, str], float] | None = None,
                 attribute: str = "", question: str = "") -> tuple[str, bool, str, tuple[int, ...]]:
    """The step of ``plan`` over the options' ``readings`` (their values and the indices of the
    ``facts`` stated for them): (answer, shown, how, the facts read). A value counts only when
    a fact stated for its option holds it. ``attribute``: what a "same" question compares
    (:func:`same_attribute`). An answer of another type than ``question`` asks shows nothing
    (:func:`~.values.answer_type_fits`: "When did X become British?" read as a difference of two
    dates is not answered "18")."""
    answer, shown, how, used = _step(plan, readings, facts, similar, attribute)
    wrong_type = answer_type_fits(question, answer) if shown and question else ""
    return (answer, False, wrong_type, used) if wrong_type else (answer, shown, how, used)


def _step(plan: QuestionPlan, readings: list[OptionReading], facts: Sequence[str],
          similar: Callable[[str, str], float] | None, attribute: str) -> tuple[str, bool, str, tuple[int, ...]]:
    for reading in readings:
        _hold(reading, facts, plan.kind, plan.order)
    if len(readings) < 2:
        return "", False, "stopped before both options were read", ()
    if plan.kind == "same" and plan.trait:
        said = _said_of_both(plan.trait, readings, facts)
        if said is not None:
            return said
    if plan.kind == "choice" and plan.trait and not plan.order:
        return _said_of_one(plan.trait, readings, facts)
    missing = [r for r in readings if r.held is None]
    if missing:
        r = missing[0]
        why = f"its value {r.value!r} is in no fact stated for it" if r.value and r.facts else (
            "no fact was stated for it" if not r.facts else "no value was read")
        return "", False, f"option {r.option!r}: {why}", ()
    used = tuple(sorted({i for r in readings for i in r.facts}))
    a, b = readings[0], readings[1]
    assert a.held is not None and b.held is not None  # the readings holding no fact returned above
    if a.role != b.role:  # a film's year is not its director's birth
        return "", False, (f"{a.option!r} was read {_whose(a)}, {b.option!r} {_whose(b)}: "
                           "values of different things"), used
    if plan.kind in ("choice", "verify"):
        order = _order(plan.order, a, b, facts, plan.length)
        if order is None:
            return "", False, (f"the values of {a.option!r} ({a.value}) and {b.option!r} ({b.value}) "
                               f"do not say which is {plan.order}"), used
        first_wins = order < 0 if plan.order in ("earlier", "less") else order > 0
        pick = a if first_wins else b
        how = (f"compared: {a.option} {a.value} (fact {a.held + 1}), {b.option} {b.value} "
               f"(fact {b.held + 1}): {pick.option} is {_said(plan.order)}")
        if plan.kind == "verify":
            answer = "yes" if pick is a else "no"
            return answer, True, how + f", so {answer}", used
        return pick.option, True, how, used
    if plan.kind == "same":
        same = _same_value(a.value, b.value, similar)
        if same is None and attribute and _two_of_a_kind(a.value, facts[a.held], b.value, facts[b.held], attribute):
            return "no", True, (f"compared: fact {a.held + 1} names {a.value!r} a {attribute}, fact {b.held + 1} "
                                f"names {b.value!r} a {attribute}: two {attribute} names that share no word, "
                                "different"), used
        if same is None:
            return "", False, f"{a.option!r} is {a.value!r}, {b.option!r} is {b.value!r}: not shown the same or different", used
        answer = "yes" if same else "no"
        return answer, True, (f"compared: {a.option} {a.value!r} (fact {a.held + 1}), {b.option} {b.value!r} "
                              f"(fact {b.held + 1}): {'the same' if same else 'different'}"), used
    if plan.kind == "difference":
        if a.date and b.date:
            early, late = (a.date, b.date) if a.date.key <= b.date.key else (b.date, a.date)
            years = years_between(early, late)
            return str(years), True, f"difference: {late.text} - {early.text} = {years} years", used
        if a.number is not None and b.number is not None:
            diff = abs(a.number - b.number)
            value = int(diff) if diff == int(diff) else round(diff, 2)
            return str(value), True, f"difference: |{a.value} - {b.value}| = {value}", used
        return "", False, "the values are not two dates or two numbers", used
    return "", False, f"no step for a {plan.kind} question", used


def _fits(trait: str, reading: OptionReading, facts: Sequence[str]) -> tuple[bool | None, int, str]:
    """Whether the facts stated for an option call it ``trait``: (True, the fact, "") when one
    does (:func:`says_of`); (False, the fact, how it calls it) when one calls it by the trait's
    noun with other qualifying names ("a Hungarian and Austrian film director" for "American
    directors"; "a Walt Disney film" names a maker and says nothing); (None, -1, "") otherwise."""
    qualifiers = {w.lower() for w in re.findall(r"[^\W\d_]+", trait) if w[:1].isupper()}
    holding = next((i for i in reading.facts if says_of(facts[i], trait)), None)
    if holding is not None:
        return True, holding, ""
    for i in reading.facts:
        phrase = _trait_phrase(facts[i], trait) or []
        called = [w for w in phrase if w[:1].isupper()]
        named = any(a[:1].isupper() and b[:1].isupper() for a, b in zip(phrase, phrase[1:]))
        if qualifiers and called and not named and not qualifiers & {w.lower() for w in called}:
            return False, i, " and ".join(called)
    return None, -1, ""


def _said_of_both(trait: str, readings: Sequence[OptionReading],
                  facts: Sequence[str]) -> tuple[str, bool, str, tuple[int, ...]] | None:
    """"Are X and Y both <trait>?" read from the facts stated for each option (:func:`_fits`):
    yes when a fact of each calls it so; no when a fact of one calls it otherwise; None when the
    facts show neither (the values are then compared, :func:`compute_step`)."""
    used = tuple(sorted({j for x in readings for j in x.facts}))
    held: list[int] = []
    for r in readings:
        fits, i, called = _fits(trait, r, facts)
        if fits is None:
            return None
        if not fits:
            return "no", True, f"fact {i + 1} calls {r.option} {called}, not {trait!r}: not both, so no", used
        held.append(i)
    return "yes", True, ("both are said to be " + repr(trait) + ": " +
                         ", ".join(f"{r.option} (fact {i + 1})" for r, i in zip(readings, held)) + ", so yes"), used


def _said_of_one(trait: str, readings: Sequence[OptionReading],
                 facts: Sequence[str]) -> tuple[str, bool, str, tuple[int, ...]]:
    """"Which singer is American, X or Y?" read from the facts stated for each option
    (:func:`_fits`): the option a fact calls so, when a fact calls the other otherwise; else
    not shown (a fact that says nothing of the other proves nothing about which)."""
    used = tuple(sorted({j for x in readings for j in x.facts}))
    (a_fits, a_at, a_called), (b_fits, b_at, b_called) = (_fits(trait, r, facts) for r in readings[:2])
    a, b = readings[0], readings[1]
    if a_fits is True and b_fits is False or a_fits is False and b_fits is True:
        pick, other, at, other_at, called = (a, b, a_at, b_at, b_called) if a_fits else (b, a, b_at, a_at, a_called)
        return pick.option, True, (f"{pick.option} is said to be {trait!r} (fact {at + 1}); fact {other_at + 1} "
                                   f"calls {other.option} {called}"), used
    return "", False, f"the facts do not show which of {a.option!r} and {b.option!r} is {trait!r}", used


def says_of(fact: str, trait: str) -> bool:
    """Whether ``fact`` calls its subject ``trait`` ("film directors"): its last word as a noun
    of the fact (singular or plural), its other words in that noun phrase ("an English-American
    film director" says "American directors"; "directed an American film" does not)."""
    phrase = _trait_phrase(fact, trait)
    if phrase is None:
        return False
    if _adjective(trait):  # "American": the fact says its subject is an American something
        return trait.lower() in {part.lower() for w in phrase for part in w.split("-")}
    words = [w for w in _words(trait) if w not in STOP_WORDS]
    inside = {noun_form(part) for w in phrase for part in normalize_answer(w).split()}
    return all(noun_form(w) in inside for w in words[:-1])


# A word of a fact, hyphenated or with an apostrophe as one ("English-American").
_TRAIT_WORD = re.compile(r"[^\W\d_]+(?:[-’'][^\W\d_]+)*")


def _trait_phrase(fact: str, trait: str) -> list[str] | None:
    """The words ``fact`` says its subject is by, where ``trait`` would be said: for one
    capitalised word ("American"), those before the noun it is said to be (:func:`_described_as`);
    else those before the trait's last word as a noun of the fact (:func:`_noun_phrase`). None
    when the fact says no such thing."""
    if _adjective(trait):
        return _described_as(fact) or None
    words = [w for w in _words(trait) if w not in STOP_WORDS]
    return _noun_phrase(fact, words[-1]) if words else None


def _adjective(trait: str) -> bool:
    """A trait that is one capitalised word ("American"): it qualifies what the subject is."""
    return bool(re.fullmatch(r"[^\W\d_]+", trait.strip())) and trait.strip()[:1].isupper()


def _described_as(fact: str) -> list[str]:
    """The words before the noun a fact says its subject is ("Mark King (born 1958) is an English
    musician." -> ["English"]; "was a Hungarian and Austrian film director" -> ["Hungarian",
    "and", "Austrian"]): after its first "is/was a(n)", up to the first lower-case word that is
    not "and"."""
    m = re.search(r"\b(?:is|was|are|were)\s+(?:an?|the)\s+", fact)
    if m is None:
        return []
    out = []
    for word in _TRAIT_WORD.findall(fact[m.end():]):
        if word[:1].islower() and word != "and":
            break
        out.append(word)
    return out if out and out[-1] != "and" else out[:-1]


def _noun_phrase(fact: str, noun: str) -> list[str] | None:
    """The words ``fact`` puts before ``noun`` (singular or plural) in its noun phrase, back to
    an article or a verb of being ("was a Hungarian and Austrian film director" -> ["Hungarian",
    "and", "Austrian", "film"]); None when the fact has no such noun."""
    tokens = _TRAIT_WORD.findall(fact)
    for at, token in enumerate(tokens):
        if noun_form(token) != noun_form(noun):
            continue
        j = at - 1
        while j >= 0 and tokens[j].lower() not in ("a", "an", "the", "is", "was", "are", "were", "as"):
            j -= 1
        return tokens[j + 1:at]
    return None


def _said(order: str) -> str:
    return {"earlier": "the earlier", "later": "the later", "more": "the greater", "less": "the smaller"}[order]


def _hold(reading: OptionReading, facts: Sequence[str], kind: str, order: str) -> None:
    """Set ``reading.held`` to the stated fact of its option that holds its value (the last such),
    parsing the value as the step needs it."""
    value = reading.value.strip().rstrip(".")
    if not value or value.lower() in ("unknown", "none", "i don't know"):
        return
    wants_date = order in ("earlier", "later") or kind == "difference"
    date = parse_date(value) if wants_date or kind in ("choice", "verify") else None
    number = parse_number(value) if date is None else None
    for i in reversed(reading.read_from or reading.facts):
        if i >= len(facts):
            continue
        fact = facts[i]
        if date is not None:
            if any(same_date(date, d) for d in dates_in(fact)):
                reading.held, reading.date = i, date
                return
        elif number is not None and (kind == "difference" or order in ("more", "less")):
            # each of _numbers is a number parse_number reads
            if any(abs(cast(float, parse_number(m)) - number) < 1e-9 for m in _numbers(fact)):
                reading.held, reading.number = i, number
                return
        elif holds_answer(fact, value):
            reading.held = i
            return


def _numbers(text: str) -> list[str]:
    return re.findall(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?", text)


def _order(order: str, a: OptionReading, b: OptionReading, facts: Sequence[str], length: bool = True) -> int | None:
    """-1 when ``a``'s value is earlier / smaller than ``b``'s, 1 when later / greater, None
    when undecided. "more"/"less" of two dates compare the spans of years the options' facts
    give (a birth and a death date each) only when the order word says a ``length`` ("who lived
    longer"): "a more diverse career" is not decided by dates."""
    if order in ("earlier", "later"):
        return compare_dates(a.date, b.date) if a.date and b.date else None
    if a.number is not None and b.number is not None:
        return None if a.number == b.number else (-1 if a.number < b.number else 1)
    if not length:
        return None
    first, second = (_life_years(r, facts) for r in (a, b))
    if first is None or second is None or first == second:
        return None
    return -1 if first < second else 1


def _life_years(reading: OptionReading, facts: Sequence[str]) -> int | None:
    """Years between the first two dates the option's holding fact gives (a lifespan)."""
    if reading.held is None:
        return None
    dates = dates_in(facts[reading.held])
    if len(dates) < 2:
        return None
    return years_between(dates[0], dates[1])


def _same_value(a: str, b: str, similar: Callable[[str, str], float] | None) -> bool | None:
    na, nb = normalize_answer(a), normalize_answer(b)
    if not na or not nb:
        return None
    if na == nb:
        return True
    if similar is None:
        return None
    return False if similar(a, b) < DIFFERENT_BELOW else None


def _two_of_a_kind(a: str, fact_a: str, b: str, fact_b: str, kind: str) -> bool:
    """Whether two values that look alike to the embedder ("Jiangsu", "Jiangxi") are two
    things of ``kind``: each one's fact calls it one by name ("in Jiangsu province", "the state
    of Louisiana") and their names share no word. Two names of one thing are seldom each written
    with the kind's noun in the knowledge ("UK" and "United Kingdom" are not called "country"
    so); a name and a longer one ("New York", "New York City") share a word."""
    words_a, words_b = set(normalize_answer(a).split()), set(normalize_answer(b).split())
    return bool(words_a and words_b) and not words_a & words_b \
        and _called(fact_a, a, kind) and _called(fact_b, b, kind)


def _called(fact: str, value: str, kind: str) -> bool:
    """Whether ``fact`` calls ``value`` a ``kind`` (singular or plural, any case): "<value>
    <kind>" or "<kind> of [the] <value>"; not inside a longer name ("Ohio State University"
    calls Ohio no state)."""
    name, wanted = re.escape(value.strip()), noun_form(kind.lower())
    pattern = (rf"(?<![^\W_]){name}\s+([^\W\d_]+)(?!\s+(?-i:[A-Z]))"
               rf"|([^\W\d_]+)\s+of\s+(?:the\s+)?{name}(?![^\W_])")
    return any(noun_form((m.group(1) or m.group(2)).lower()) == wanted
               for m in re.finditer(pattern, fact, flags=re.IGNORECASE))


def _names(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` (its words, in order, case and accents aside) as itself,
    not only as the start of a longer name: a fact of "Science News for Students" says nothing
    of Science News (a look-alike entity)."""
    return holds_answer(text, name) and not only_in_longer_names(text, name)


def _values(plan: QuestionPlan, facts: Sequence[str], option: str) -> list[str]:
    """What the ``Answer:`` of an option may be: the spans of its facts of the type the step
    compares (dates for an order in time or a difference of dates; numbers and dates for more
    or less; names otherwise), each once, in order."""
    out: list[str] = []
    wants_dates = plan.order in ("earlier", "later") or plan.kind == "difference"
    for fact in facts:
        if wants_dates or plan.order in ("more", "less"):
            out.extend(d.text for d in dates_in(fact))
        if plan.order in ("more", "less") or plan.kind == "difference":
            out.extend(m for m in _numbers(fact) if not any(m in d for d in out))
        if plan.kind == "same":
            # A name within one stretch between punctuation marks: "in Rapides Parish, Louisiana,
            # United States" offers three, not one run of capitalised words.
            out.extend(k for part in _CLAUSE_MARKS.split(fact) for k in extract_keywords(part, limit=30)
                       if any(c.isupper() for c in k) and not holds_answer(option, k) and not holds_answer(k, option))
    return list(dict.fromkeys(v.strip() for v in out if v.strip()))


_CLAUSE_MARKS = re.compile(r"[,;:()\[\]]")


def _spans(text: str, stated: Sequence[str], known: dict[str, Any]) -> list[FactSpan]:
    """The stated facts as spans of ``text`` (in order; each found after the previous one)."""
    out: list[FactSpan] = []
    at = 0
    for number, fact in enumerate(stated):
        start = text.find(fact, at)
        if start < 0:
            continue
        at = start + len(fact)
        out.append(FactSpan(start, at, number, fact, getattr(known.get(fact), "source", "")))
    return out


def _words(text: str) -> list[str]:
    return normalize_answer(text.replace("<", " ").replace(">", " ")).split()


def _titled(hit: Any, option: str) -> bool:
    """Whether ``hit`` was read from the document that bears ``option``'s name."""
    title = normalize_answer((getattr(hit, "provenance", None) or {}).get("title", ""))
    return bool(title) and title == normalize_answer(option)


def _of_option(text: str, hit: Any, option: str) -> bool:
    """Whether a fact is about ``option``: it was read from the document that bears its name, or
    it names it. A title's qualifier says the bare name is shared ("Ek Hi Bhool (1940 film)",
    "Ek Hi Bhool" of 1981): then a fact naming the bare name counts only from the option's own
    document or from none named (a triple)."""
    if _titled(hit, option):
        return True
    if _names(text, option):
        return True
    bare = bare_name(option)
    title = (getattr(hit, "provenance", None) or {}).get("title", "")
    return bare != option and not title and _names(text, bare)


def values_of_kind(embedder: Any, attribute: str, values: Sequence[str]) -> list[str]:
    """Those of ``values`` that are of the kind ``attribute`` names ("country": "American",
    "Puerto Rico"; not "Eleanor Gates"), by ``embedder``: at least ``TYPE_FLOOR`` close to the
    word and within ``TYPE_MARGIN`` of the closest, closest first."""
    if not values or not attribute:
        return list(values)
    import numpy as np

    vectors = np.asarray(embedder.encode([attribute, *values]), dtype=np.float32)
    sims = vectors[1:] @ vectors[0]
    best = float(sims.max())
    keep = [(float(sim), v) for sim, v in zip(sims, values) if sim >= TYPE_FLOOR and sim >= best - TYPE_MARGIN]
    return [v for _, v in sorted(keep, key=lambda pair: -pair[0])]


def _life_date(fact: str, event: str) -> Dated | None:
    birth, death = life_dates(fact)
    return birth if event == "birth" else death


def same_attribute(question: str) -> str:
    """What a same-or-different question compares, the noun after "same" ("Are both from the
    same country?" -> "country"); "" when it does not say."""
    m = re.search(r"\bsame\s+([^\W\d_]+)", question, flags=re.IGNORECASE)
    return m.group(1).lower() if m else ""


def _fitting(plan: QuestionPlan, facts: Sequence[str]) -> list[str]:
    """The ``facts`` of an option the step can use first: with a role, those that say who fills
    it ("directed by"); for an order in time, those that give a date; for a length ("lived
    longer"), those that give two (a span); else all."""
    if plan.role:
        return [t for t in facts if says_form(_words(t), plan.role)]
    if _wants_dates(plan):
        return [t for t in facts if dates_in(t)]
    if plan.length:
        return [t for t in facts if all(life_dates(t))]
    return list(facts)


def _whose(reading: OptionReading) -> str:
    return f"through its {reading.role}" if reading.role else "as itself"


def led_role(plan: QuestionPlan, question: str, event: str, facts: Sequence[str]) -> str:
    """Whom an option's date of a life (``event``) is read of, given its ``facts``: itself when
    the plan names no role and a fact gives the option that date; else the first of the
    question's words (:func:`~.plan.role_words`, the plan's role first) that a fact follows with
    a name (:func:`~.chaining.role_holders`) and does not call the option by ("Three Violent
    People is a 1957 film directed by Rudolph Maté" -> "director" for "Which director died
    first, ...?"; "film" is what the fact calls the option); else the plan's role. Read from the
    knowledge, not the wording: "Which film is older?" compares the films' years."""
    if not event or not plan.role and any(_life_date(t, event) for t in facts):
        return plan.role
    for word in role_words(question, plan.options, plan.role):
        if any(role_holders(t, question, word) and not says_of(t, word) for t in facts):
            return word
    return plan.role


def _wants_dates(plan: QuestionPlan) -> bool:
    return plan.order in ("earlier", "later") or plan.kind == "difference"
