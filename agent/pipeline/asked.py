"""Whether the fact that holds an answer says what the question asks: the check beside the chain.

A connected chain of stated facts that holds the answer's words is not yet a proof:
``<Buck Owens> <field of work> <country music>`` holds "country music" and names Buck Owens, but
"What instrument did Buck Owens play?" asks for an instrument. :class:`AskedChecker` applies the
checks, all general (nothing here is written for one relation or one dataset's wording), to an
answer and its chain and says which failed and why ("the fact says field of work; the question
asks instrument"). The question is read by :mod:`.question_reading`, relations are compared by
:mod:`.relations`:

- **The type asked** (:func:`~agent.pipeline.values.answer_type_fits`): "when" takes a date, "how
  many" a number; and so does a "what is ..." question
  (:func:`~agent.pipeline.question_reading.asks_a_named_thing`) whose closest relation is numeric
  (:meth:`~agent.pipeline.relations.RelationMatcher.asks_number`).
- **A name of the question, or the whole statement, given back** (:func:`repeats_a_name`,
  :func:`repeats_the_statement`): neither says what the question asks.
- **A question asked through a relative or role**
  (:func:`~agent.pipeline.question_reading.asks_through`: "When was X's father born?") is not
  answered by a fact about X itself alone: the chain must reach the one asked about.
- **A triple's relation against what the question asks**
  (:class:`~agent.pipeline.relations.RelationMatcher`) and **a statement against it**
  (:class:`~agent.pipeline.relations.StatementMatcher`). Past a role the chain went through, the
  question is asked again of whom it reached (:func:`~agent.pipeline.question_reading.ask_past`:
  "Who is the spouse of the director of film X?" of a fact about him: "Who is the spouse of John
  Farrow?"). A statement whose only name is the answer says nothing of it ("The continent
  includes Madagascar ..."): "A <relation> A" fits any relation alike.

Removed, for no gain on the test half of ``benchmarks/check_scores.py``'s labelled cases: a
statement that calls another thing by the noun asked ("members of what crime family?" not
answered by "The American Mafia" from "... namely the DeCavalcante crime family"), a noun phrase
read by rules: 0 on the test half, 2 wrong refused on dev.

The local model as a yes/no judge was measured and not kept: on 14 hand-checked cases
qwen2.5-coder-0.5b judged 7 right (every score below zero), the 1.5B 9, at 2.5 s a case (the
0.5B reading which relation a statement states, also not kept: :mod:`.relations`).

Example (not run: needs the embedding model)::

    matcher = RelationMatcher(embedder, RelationLabels.bundled())
    AskedChecker(matcher).check("What instrument did Buck Owens play?", "country music",
                                ["<Buck Owens> <field of work> <country music> ."], chain=[0])
    # AskedCheck(passed=False, fact=0, says="field of work", asks="instrument", ...)
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..knowledge.facts import parse_triple
from ..knowledge.keywords import extract_keywords
from ..knowledge.normalize import normalize_answer
from .grounding import holds_answer
from .question_reading import (_POSSESSIVE_END, _only_qualifier, _question_names, ask_past, asked_clause, asked_through,
                               asks_a_named_thing, asks_through, offered_alternatives)
from .relations import AskedCheck, RelationMatcher, StatementMatcher
from .values import answer_type_fits, parse_number


def repeats_a_name(question: str, answer: str, stated: Sequence[str] = ()) -> str:
    """"" unless ``answer`` is a name ``question`` itself gives and does not offer as one of
    alternatives joined by "or" ("What role did they play in Counting Crows?" does not ask for
    Counting Crows), or one it offers while no ``stated`` fact says anything of the others: a
    choice between alternatives is proven only by facts about each ("Which singer is American,
    Mark King or Nick Hexum?" is not answered by a fact about Mark King alone)."""
    target = normalize_answer(answer)
    if not target or target in ("yes", "no"):
        return ""
    names = _question_names(question)
    offered = offered_alternatives(question, names)
    for name in names:
        if normalize_answer(name) != target:
            continue
        if name not in offered:
            return f"{answer!r} is named by the question itself, not asked by it"
        unread = [other for other in offered if normalize_answer(other) != target
                  and not any(holds_answer(fact, other) for fact in stated)]
        if unread:
            return (f"the question offers {' or '.join(offered)}; no stated fact says anything of "
                    f"{unread[0]!r}, so nothing shows that {answer!r} is the one")
    return ""


# An answer holding this share of a statement's words is the statement, not an answer drawn from it.
WHOLE_SHARE = 0.8


def repeats_the_statement(answer: str, fact: str) -> str:
    """"" unless ``answer`` is (nearly) the whole of the statement ``fact``: a fact restated says
    nothing of what the question asks of it (and every relation fits "X <relation> <the whole
    statement>" alike, so the statement check cannot judge it). Then why, in one line."""
    if parse_triple(fact) is not None:
        return ""
    own = normalize_answer(fact).split()
    said = set(normalize_answer(answer).split())
    # the fact's own words the answer repeats (a long answer in other words is not this case)
    if len(own) < 4 or sum(word in said for word in own) < WHOLE_SHARE * len(own):
        return ""
    return "the answer restates the whole statement; it does not say what the question asks of it"


class AskedChecker:
    """Checks that the facts an answer rests on say what the question asks (module docstring).

    ``matcher`` (None: every answer passes, nothing to check with, and the check says so)
    judges triples; statements are judged with the same embedder (:class:`~.relations.StatementMatcher`).
    ``kinds``: whether a role is a kind of the noun a question asks (:func:`~.question_reading.asks_through`).
    """

    def __init__(self, matcher: RelationMatcher | None = None,
                 kinds: Callable[[str, str], bool] | None = None) -> None:
        self.matcher, self.kinds = matcher, kinds
        self.statements = StatementMatcher(matcher) if matcher is not None else None

    def check(self, question: str, answer: str, stated: Sequence[str], chain: Sequence[int],
              held: Callable[[str], Sequence[str]] | None = None) -> AskedCheck:
        """``held(subject)``: the relations the knowledge holds for a subject (optional)."""
        chain = [i for i in chain if 0 <= i < len(stated)]
        wrong_type = answer_type_fits(question, answer)
        if (not wrong_type and self.matcher is not None and parse_number(answer) is None
                and asks_a_named_thing(question) and not offered_alternatives(question)):
            number = self.matcher.asks_number(asked_clause(question), _question_names(question))
            if number:
                wrong_type = f"the question asks {number!r}, a number; {answer!r} holds none"
        if wrong_type:
            return AskedCheck(False, chain[-1] if chain else None, "", "", "type", 0.0, wrong_type)
        repeated = repeats_a_name(question, answer, stated)
        if repeated:
            return AskedCheck(False, chain[-1] if chain else None, "", "", "name", 0.0, repeated)
        holding = [i for i in chain if holds_answer(stated[i], answer)]
        if not holding:
            holding = chain[-1:]  # a sentence answer: its last fact
        if not holding:
            return AskedCheck(False, None, "", "", "none", 0.0, "no stated fact holds the answer")
        whole = repeats_the_statement(answer, stated[holding[-1]])
        if whole:
            return AskedCheck(False, holding[-1], "the statement", "", "whole", 0.0, whole)
        failed: AskedCheck | None = None
        for i in holding:
            result = self._one(question, answer, stated, chain, i, held)
            if result.passed:
                return result
            failed = failed or result
        return failed  # type: ignore[return-value]

    def _one(self, question: str, answer: str, stated: Sequence[str], chain: Sequence[int], i: int,
             held: Callable[[str], Sequence[str]] | None) -> AskedCheck:
        triple = parse_triple(stated[i])
        # The facts before this one that it rests on: the chain up to it.
        path = [j for j in chain if j <= i]
        through = _through(question, stated[i], triple, self.kinds)
        if through and len(path) == 1:
            noun, name = through
            return AskedCheck(False, i, name, noun, "chain", 0.0,
                              f"the question asks about the {noun} of {name!r}; the fact is about {name!r} itself")
        # What is asked of the fact holding the answer: the question's last clause when it
        # describes things on its way ("...an Australian soap opera created by who?"); past a
        # role the chain went through, the question asked of whom it reached ("the spouse of
        # the director of film X" of a fact about the director: "the spouse of <director>").
        asked = asked_clause(question)
        named, noun = asked_through(question, self.kinds)
        # A statement's first name, and its first that is not the answer (read once each).
        first = _first_name(stated[i]) if triple is None else ""
        other = (_first_name(stated[i], answer) if first else "") if triple is None else ""
        if noun and len(path) > 1:
            asked = ask_past(question, named, noun, (triple[0] if triple is not None else first) or "X")
        if triple is None and self.statements is not None:
            # A fact further along the chain is about the thing the chain reached (its first
            # name), the first fact about a thing the question names.
            subject = (other if len(path) > 1 else "") or _named_subject(question, stated[i]) or other
            if subject:
                return _at(self.statements.check(asked, stated[i], subject, answer), i)
            if first:
                # "The continent includes Madagascar ...": the answer is the statement's only
                # name, so it says the answer of nothing ("Madagascar <relation> Madagascar" fits
                # any relation alike).
                return AskedCheck(False, i, "the statement", "", "name", 0.0,
                                  f"the statement names nothing but {answer!r}; it says nothing of what the "
                                  "question asks it of")
        if triple is not None and self.matcher is not None:
            used = [t[1] for t in (parse_triple(stated[j]) for j in path if j != i) if t is not None]
            result = self.matcher.check(asked, triple, answer, held(triple[0]) if held is not None else (),
                                        used=used, onward=held(triple[2]) if held is not None else ())
            return _at(result, i)
        return AskedCheck(True, i, "", "", "none", 0.0, "no relations to check with")


def _at(check: AskedCheck, fact: int) -> AskedCheck:
    return AskedCheck(check.passed, fact, check.says, check.asks, check.by, check.score, check.how)


def _through(question: str, fact: str, triple: tuple[str, str, str] | None,
             kinds: Callable[[str, str], bool] | None = None) -> tuple[str, str] | None:
    """(noun, name) when ``question`` asks through a relative or role of a name ``fact`` is about
    (:func:`~.question_reading.asks_through`)."""
    names = [triple[0]] if triple is not None else _question_names_in(question, fact)
    holder = triple[0] if triple is not None else fact
    for name in names:
        whole = _as_far_as_held(question, name, holder)
        noun = asks_through(question, whole, kinds)
        if noun:
            return noun, whole
    # The name as the question writes it ("Jára Cimrman Lying, Sleeping": its keyword drops the
    # comma, and the question does not hold that form), as far as the fact holds it ("The City"
    # is "The City of the Sun" in a fact of that title: nothing is asked through it).
    named, noun = asked_through(question, kinds)
    if noun and holds_answer(holder, named):
        whole = _as_far_as_held(question, named, holder)
        noun = asks_through(question, whole, kinds) if whole != named else noun
        if noun:
            return _POSSESSIVE_END.sub("", noun), whole
    return None


def _as_far_as_held(question: str, name: str, fact: str) -> str:
    """``name`` in ``question`` with the words after it, as long as ``fact`` holds them all; a
    possessive it ends with is not part of it ("X's father" held as "X's husband": the name is X,
    as :func:`~.question_reading.asked_through` reads it)."""
    m = re.search(re.escape(name), question, flags=re.IGNORECASE)
    if m is None:
        return name
    end = m.end()
    for word in re.finditer(r"\S+", question[m.end():]):
        stop = m.end() + word.end()
        if not holds_answer(fact, question[m.start():stop]):
            break
        end = stop
    return _POSSESSIVE_END.sub("", question[m.start():end].rstrip("?.!,;:"))


def _question_names_in(question: str, fact: str) -> list[str]:
    out = []
    for keyword in extract_keywords(question, limit=20):
        keyword = re.sub(r"['’]s?$", "", keyword)  # "Denmark's" names Denmark
        if any(c.isupper() for c in keyword) and holds_answer(fact, keyword) and not _only_qualifier(question, keyword):
            out.append(keyword)
    return sorted(out, key=len, reverse=True)


def _named_subject(question: str, fact: str) -> str:
    names = _question_names_in(question, fact)
    return names[0] if names else ""


def _first_name(fact: str, answer: str = "") -> str:
    """The first name ``fact`` gives; with ``answer``, the first that is not the answer (nor holds
    it, nor is held by it)."""
    names = [k for k in extract_keywords(fact, limit=10) if any(c.isupper() for c in k)
             and not (answer and (holds_answer(k, answer) or holds_answer(answer, k)))]
    return names[0] if names else ""
