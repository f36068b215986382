"""Relation labels, and which of them a question or a statement asks, by embedding similarity.

The asked check (:mod:`.asked`) compares what a fact says with what the question asks; this
module holds the relations it compares and the two matchers that compare them, all general
(nothing here is written for one relation or one dataset's wording). :class:`RelationLabels`:
the relations known, the bundled Wikidata relations (``agent/data/relations/``: label and
description, :meth:`RelationLabels.bundled`) and the knowledge base's own, with which of them take
numbers and which take things, read from their values, never from their names.

- **A triple's relation against what the question asks** (:class:`RelationMatcher`). The
  question, its names put as "X" (with a name's description before it: "the Swedish
  performance artist X" is "X"), is embedded (the knowledge web's sentence embedder) and
  compared with every relation known: the bundled Wikidata relations (``agent/data/relations/``:
  label and description) and the knowledge base's own. The fact passes when its relation is
  the closest, or within ``margin`` of it, or the closest of the relations the knowledge holds
  for the fact's subject and within ``wide_margin`` ("place of death" when "date of death", which
  the KB does not hold for Buck Owens, is closer). On 90 questions written for this project in
  other wordings than KAMEL's templates (three per relation of the demo KB), the right relation
  was the closest for 86% and within 0.04 of it for 94%. Only relations whose values are of
  the fact's type compete (:meth:`RelationLabels.other_type`: "Where did X die?" embeds closer
  to "date of death" than to "place of death"). Where the fact's relation is close behind
  (within ``wide_margin``) but not the closest, the local model reads the question among the
  closest relations (:class:`~agent.pipeline.relation_reading.RelationReader`), and the fact
  passes when the model reads its relation ("What country is X located in?": "country", not
  "located in/on physical feature"); measured in ``benchmarks/check_scores.py``.
- **A statement against what the question asks** (:class:`StatementMatcher`): the statement is
  compared with "X <relation> A" for the relations the question is closest to and those the
  statement is closest to; a relation the question asks must fit it about as well as the best.
  The statement is read whole and as the few words beside the answer (:func:`near_answer`):
  what a long sentence about its subject says of the answer is there. Only relations whose
  values are of the answer's type compete (a count or a year says nothing of a name; a relation
  of things nothing of a date).
- **A number or a thing asked**: a "what is ..." question whose closest relation is numeric
  asks a number (:meth:`RelationMatcher.asks_number`: "What is the population of the state
  where X is?"), numeric read from the values the knowledge holds for it
  (``agent/data/relations/value-types.tsv`` for the bundled relations), never from its name. The
  mirror (:meth:`RelationMatcher.asks_a_thing`): a triple whose value is a bare number does not
  answer a question whose closest relation is one of things, ahead of every relation of numbers
  by the same margin ("What is the native language of X?" is not answered by ``<X> <UTC date of
  spacecraft launch> <2017>``, which only relations of numbers would otherwise be compared
  with); on ``benchmarks/check_scores.py``'s dev half it refused all 5 such facts that passed
  before, and no right answer.

Measured and not kept: the 0.5B reading which relation a statement states from its subject to
the answer (seven sentences written for the prompt, each candidate label scored as for triples)
where the embeddings fail it within ``wide_margin``: on the labelled cases it kept 2 right
answers and passed 2 wrong ones on the dev half, and passed 3 wrong ones and kept no right one
on the test half (2026-12-01).

The matchers' outcome, :class:`AskedCheck`, is defined here beside them (its ``fact`` None: they
see one fact); :class:`~agent.pipeline.asked.AskedChecker` returns it with the fact's index.

Example (not run: needs the embedding model)::

    matcher = RelationMatcher(embedder, RelationLabels.bundled())
    matcher.check("What instrument did Buck Owens play?", ("Buck Owens", "field of work", "country music"))
    # AskedCheck(passed=False, fact=None, says="field of work", asks="instrument", by="relation", ...)
"""
from __future__ import annotations

import csv
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..index.base import FactTree
from ..knowledge.keywords import STOP_WORDS
from .question_reading import asked_noun
from .values import parse_date, parse_number

if TYPE_CHECKING:
    from ..embeddings import Embedder
    from .relation_reading import RelationReader

# How many of the closest relations by embedding the model reads a question among.
READ_CANDIDATES = 8
# How close to the closest relation a fact's relation may be (cosine), as measured above.
RELATION_MARGIN = 0.04
# How far from the closest of all a relation may be when it is the closest of those the
# knowledge holds for the subject.
WIDE_MARGIN = 0.12
# How much better the best fitting relation may fit a statement than one the question asks.
STATEMENT_MARGIN = 0.03
# What a statement says of its answer is also read from the words around the answer: this many
# before it and after it (chosen on the labelled cases' dev half: 4 / 2 kept 1 more right answer
# and passed no more wrong ones than the whole statement alone; 3-10 before, 1-5 after were tried;
# the test half unchanged).
NEAR_BEFORE, NEAR_AFTER = 4, 2
# At most this many of an index's facts are read for its relation labels (a larger index is
# sampled evenly: its relations recur).
MAX_SCAN = 2_000_000
# A relation is numeric when at least this share of its values (and at least MIN_VALUES of them)
# are bare numbers: KAMEL's 27 numeric relations (population, date of birth as a year, number of
# episodes...) have 86% (the rest are empty), its other 207 under 10%.
NUMERIC_SHARE = 0.5
MIN_VALUES = 3
# ... and one of things when under this share of its values are numbers.
ITEM_SHARE = 0.1
# How much closer to the question the closest numeric relation must be than every other for the
# answer to have to hold a number. Measured by benchmarks/answer_types.py over 1,432 questions of
# KAMEL, PopQA, MuSiQue, HotpotQA, 2Wiki and the paraphrase set: the 17 caught all have numeric
# gold answers (gaps 0.10-0.33); none with a non-numeric gold answer was caught.
NUMERIC_MARGIN = 0.08
# At most this many words describe a name between "the" and it ("the Swedish performance artist").
_DESCRIPTION_WORDS = 4
_BARE_NUMBER = re.compile(r"[-+]?\d[\d,.]*")


def is_number(value: str) -> bool:
    """Whether a relation's value is a bare number ("1831", "2,913,123", "591.8")."""
    return bool(_BARE_NUMBER.fullmatch(value.strip()))


@dataclass(frozen=True)
class AskedCheck:
    """The outcome for one answer: ``passed``; ``fact``: the index (into the stated facts) of
    the fact checked; ``says``: what that fact says (its relation, or "the statement");
    ``asks``: what the question asks (the closest relation) when known; ``by``: "relation"
    (embedding), "reading" (the local model's reading of the relation asked), "type" (the
    answer's type) or "chain" (asked through a relative or role);
    ``score``: the cosine gap; ``how``: one line for the trace and the UI."""

    passed: bool
    fact: int | None
    says: str
    asks: str
    by: str
    score: float
    how: str

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "fact": self.fact, "says": self.says, "asks": self.asks, "by": self.by,
                "score": round(self.score, 4), "how": self.how}


BUNDLED_RELATIONS = Path(__file__).resolve().parent.parent / "data" / "relations"
"""Where the bundled relation vocabulary is (:meth:`RelationLabels.bundled`)."""


class RelationLabels:
    """The relations a knowledge base holds: label -> description ("" when none is known), and
    ``numeric``: those whose values are numbers (a year, a count, a measure), read from the
    values the knowledge holds for them, never from their names; ``items``: those whose values
    are things (a person, a place), never numbers, read the same way."""

    def __init__(self, labels: Mapping[str, str] | None = None, numeric: Iterable[str] = (),
                 items: Iterable[str] = ()) -> None:
        self.labels: dict[str, str] = {k.strip(): (v or "").strip() for k, v in (labels or {}).items() if k.strip()}
        self.numeric: frozenset[str] = frozenset(n.strip() for n in numeric if n.strip() in self.labels)
        self.items: frozenset[str] = frozenset(n.strip() for n in items if n.strip() in self.labels) - self.numeric

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: object) -> bool:
        return label in self.labels

    @classmethod
    def bundled(cls) -> RelationLabels:
        """The bundled relation vocabulary: Wikidata's English labels and descriptions of KAMEL's
        234 relations (``agent/data/relations/property-labels.tsv``; attribution in
        ``agent/data/README.md``), and which of them take numbers (``value-types.tsv``, written
        from KAMEL's values by ``tools/relation_value_types.py``)."""
        return cls.from_tsv(BUNDLED_RELATIONS / "property-labels.tsv", values=BUNDLED_RELATIONS / "value-types.tsv")

    @classmethod
    def from_tsv(cls, path: str | Path, values: str | Path | None = None) -> RelationLabels:
        """KAMEL's ``property-labels.tsv`` (``id``, ``label``, ``description``, tab-separated);
        ``values``: a ``value-types.tsv`` (``id``, ``label``, ``value``) naming the numeric ones."""
        with open(path, encoding="utf-8", newline="") as stream:
            labels = {row["label"]: row.get("description") or "" for row in csv.DictReader(stream, delimiter="\t")
                      if row.get("label")}
        numeric: list[str] = []
        items: list[str] = []
        if values is not None:
            with open(values, encoding="utf-8", newline="") as stream:
                for row in csv.DictReader(stream, delimiter="\t"):
                    if row.get("label") and row.get("value") in ("number", "item"):
                        (numeric if row["value"] == "number" else items).append(row["label"])
        return cls(labels, numeric, items)

    @classmethod
    def from_index(cls, index: FactTree, limit: int = MAX_SCAN) -> RelationLabels:
        """The relations of the triples of a fact index (any backend with ``facts``)."""
        facts = getattr(index, "facts", None)
        if facts is None:
            return cls()
        n = len(facts)
        step = max(1, n // limit)
        counts: dict[str, list[int]] = {}
        for i in range(0, n, step):
            fact = facts[i]
            if fact.predicate:
                count = counts.setdefault(fact.predicate, [0, 0])
                count[0] += 1
                count[1] += is_number(fact.object)
        return cls(dict.fromkeys(counts, ""), [label for label, (total, numbers) in counts.items()
                                              if total >= MIN_VALUES and numbers >= NUMERIC_SHARE * total],
                   [label for label, (total, numbers) in counts.items()
                    if total >= MIN_VALUES and numbers < ITEM_SHARE * total])

    def merged(self, other: RelationLabels) -> RelationLabels:
        """Both sets; where both know a relation, this one's description and value type."""
        out = dict(other.labels)
        out.update({k: v or out.get(k, "") for k, v in self.labels.items()})
        numeric = set(self.numeric) | {label for label in other.numeric if label not in self.labels}
        items = set(self.items) | {label for label in other.items if label not in self.labels}
        return RelationLabels(out, numeric, items)

    def other_type(self, value: str) -> frozenset[str]:
        """The relations whose values cannot be ``value``: those of numbers and dates for a value
        without a digit, those of things for a date or a number."""
        if not any(c.isdigit() for c in value):
            return self.numeric
        if parse_date(value) is not None or parse_number(value) is not None:
            return self.items
        return frozenset()

    def text(self, label: str) -> str:
        description = self.labels.get(label, "")
        return f"{label}: {description}" if description else label


def _kind_ahead(ranked: Sequence[tuple[str, float]], kind: frozenset[str], rival: Callable[[str], bool]) -> str:
    """The closest relation of ``ranked`` (closest first) when it is of ``kind`` and ahead of the
    closest ``rival`` one by ``NUMERIC_MARGIN``; else ""."""
    if not ranked or ranked[0][0] not in kind:
        return ""
    other = next((sim for label, sim in ranked if rival(label)), -1.0)
    return ranked[0][0] if ranked[0][1] - other >= NUMERIC_MARGIN else ""


def _without(question: str, names: Iterable[str]) -> str:
    """``question`` with its names (and their possessive 's) as "X": what it asks of them. A
    name's description before it ("the Swedish performance artist X": "the", then words none of
    which is a small word of the language) goes with it: it says what X is, not what is asked
    ("performance" drew "location of first performance" over "place of birth")."""
    out = question
    for name in sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True):
        out = re.sub(rf"(?<![^\W_]){re.escape(name)}(?:['’]s?)?(?![^\W_])", " X ", out, flags=re.IGNORECASE)
    words = out.split()
    kept: list[str] = []
    for word in words:
        if word == "X":
            start = next((j for j in range(len(kept) - 1, max(-1, len(kept) - 1 - _DESCRIPTION_WORDS - 1), -1)
                          if kept[j].lower() == "the"), None)
            between = kept[start + 1:] if start is not None else []
            if between and all(w.lower() not in STOP_WORDS and w.isalnum() for w in between):
                del kept[start:]
        kept.append(word)
    return " ".join(kept)


class RelationMatcher:
    """Which relation of ``labels`` a question asks, by embedding similarity (see the module
    docstring). Relations met later (a fact's own) are embedded when first seen."""

    def __init__(self, embedder: Embedder, labels: RelationLabels, *, margin: float = RELATION_MARGIN,
                 wide_margin: float = WIDE_MARGIN, reader: RelationReader | None = None) -> None:
        self.embedder, self.labels, self.margin, self.wide_margin = embedder, labels, margin, wide_margin
        self.reader = reader
        self._lock = threading.Lock()
        self._names: list[str] = []
        self._vectors = np.zeros((0, embedder.dim), dtype=np.float32)
        self._add(list(labels.labels))

    def _add(self, labels: Sequence[str]) -> None:
        new = [label for label in dict.fromkeys(labels) if label and label not in self._names]
        if not new:
            return
        vectors = self.embedder.encode([self.labels.text(label) for label in new])
        with self._lock:
            self._names.extend(new)
            self._vectors = np.vstack([self._vectors, np.asarray(vectors, dtype=np.float32)])

    def ranked(self, question: str, names: Sequence[str] = (), extra: Sequence[str] = ()) -> list[tuple[str, float]]:
        """Every relation with its cosine to ``question`` without ``names``, closest first
        (``extra``: relations to consider beside the KB's, e.g. the fact's own)."""
        self._add(list(extra))
        asked = _without(question, names) or question
        vector = np.asarray(self.embedder.encode([asked])[0], dtype=np.float32)
        with self._lock:
            names_, vectors = list(self._names), self._vectors
        sims = vectors @ vector
        order = np.argsort(-sims)
        return [(names_[i], float(sims[i])) for i in order]

    def asks_number(self, question: str, names: Sequence[str] = ()) -> str:
        """The numeric relation ``question`` asks (closer to it than every other relation by
        ``NUMERIC_MARGIN``: "What is the population of the state where X is?"), else ""."""
        if not self.labels.numeric:
            return ""
        numeric = self.labels.numeric
        return _kind_ahead(self.ranked(question, names), numeric, lambda label: label not in numeric)

    def asks_a_thing(self, ranked: Sequence[tuple[str, float]]) -> str:
        """The relation of things a question asks, from its relations ``ranked`` closest first:
        the closest of all, ahead of every relation of numbers by ``NUMERIC_MARGIN`` (the mirror
        of :meth:`asks_number`); else ""."""
        return _kind_ahead(ranked, self.labels.items, self.labels.numeric.__contains__)

    def check(self, question: str, triple: tuple[str, str, str], answer: str = "",
              held: Sequence[str] = (), used: Sequence[str] = (), onward: Sequence[str] = ()) -> AskedCheck:
        """Whether ``triple``'s relation is what ``question`` asks: the closest of every
        relation, or within ``margin`` of it; or, when ``held`` lists the relations the
        knowledge holds for the triple's subject, the closest of those and within
        ``wide_margin`` of the closest of all ("place of death" when the question might also
        mean "date of death", which the knowledge does not hold for this subject).

        A chain spends a relation at each step: ``used`` are the relations of the facts before
        this one in the chain, left out of what the question may still ask ("the official
        language of the country of origin of X": after ``country of origin``, what is left is
        the official language). ``onward``: the relations the knowledge holds for the fact's
        object. A relation the question asks more closely than the fact's own, which the
        object has and the subject has not, says the object is a step on the way and not the
        answer ("Canada" from ``<CBY-3> <country of origin> <Canada>`` when Canada has an
        official language and CBY-3 has none); so does the noun the question's "which"/"what"
        asks (:func:`~.question_reading.asked_noun`) when it is such a relation's label ("In which country ...?"
        answered "Reno", which has a ``country``). A knowledge that gives a country a
        ``country`` of its own has the chain go one more fact, to that triple; a fact whose
        relation is that noun says what is asked."""
        subject, predicate, obj = triple
        spent = {u for u in used if u != predicate}
        # Only relations whose values are of the fact's type compete, as for statements: a
        # relation of dates or numbers says nothing of "Golegã" ("Where did X die?" embeds
        # closer to "date of death" than to "place of death"), one of things nothing of a date.
        other_type = self.labels.other_type(obj)
        every = [(label, sim) for label, sim in self.ranked(question, [subject, obj, answer],
                                                            [predicate, *held, *onward]) if label not in spent]
        # ... unless the question asks a thing outright (asks_a_thing): a bare number does not
        # answer "What is the native language of X?", whatever relation of numbers states it.
        thing = self.asks_a_thing(every) if is_number(obj) else ""
        if thing:
            return AskedCheck(False, None, predicate, thing, "type", 0.0,
                              f"the question asks {thing!r}, a thing; {obj!r} is a number")
        ranked = [(label, sim) for label, sim in every if label == predicate or label not in other_type]
        best, best_sim = ranked[0]
        sims = dict(ranked)
        own = sims[predicate]
        noun = " ".join(asked_noun(question)).lower()  # what "which"/"what" asks, by name
        if onward:
            own_held = set(held) | {predicate}
            if noun in onward and noun not in own_held:
                # "In which country is X's death?" answered "Reno" from X's place of death: the
                # question's "which" asks a relation by its label, which Reno has.
                return AskedCheck(False, None, predicate, noun, "chain", 0.0,
                                  f"the question asks which {noun}; {obj!r} has a {noun!r} of its own: "
                                  f"{obj!r} is a step on the way, not the answer")
            for label, sim in ranked:
                if sim <= own:
                    break
                if label in onward and label not in own_held:
                    return AskedCheck(False, None, predicate, label, "chain", best_sim - own,
                                      f"the fact says {predicate!r} of {subject!r}; the question asks {label!r}, "
                                      f"which {obj!r} has: {obj!r} is a step on the way, not the answer")
        if predicate.lower() == noun:
            # "In which country did X die?" stated through X's place of death, then
            # ``<Reno> <country> <Italy>``: the question's "which" names the fact's relation.
            return AskedCheck(True, None, predicate, predicate, "relation", 0.0,
                              f"the question asks which {predicate}, the fact's relation")
        gap = best_sim - own
        if gap <= self.margin:
            how = f"the fact says {predicate!r}, what the question asks" + ("" if best == predicate else
                                                                             f" (closest: {best!r})")
            return AskedCheck(True, None, predicate, best, "relation", gap, how)
        holds = [h for h in dict.fromkeys([*held, predicate]) if h in sims]
        best_held = max(holds, key=sims.__getitem__) if holds else predicate
        if held and sims[best_held] - own <= self.margin / 2 and gap <= self.wide_margin:
            how = (f"the fact says {predicate!r}, the closest to the question of the relations known for "
                   f"{subject!r} (closest of all: {best!r})")
            return AskedCheck(True, None, predicate, best, "relation", gap, how)
        if self.reader is not None and gap <= self.wide_margin:
            # The embeddings read another relation, the fact's own close behind: the model reads
            # the question among the closest relations, the fact's own and those the knowledge
            # holds for its subject.
            candidates = list(dict.fromkeys([*(label for label, _ in ranked[:READ_CANDIDATES]), predicate,
                                             *(h for h in held if h in sims)]))
            read = self.reader.best(_without(question, [subject, obj, answer]) or question, candidates)
            if read == predicate:
                return AskedCheck(True, None, predicate, best, "reading", gap,
                                  f"the fact says {predicate!r}, the relation the model reads the question as "
                                  f"asking among {len(candidates)} (closest by embedding: {best!r})")
        asks = best_held if held and best_held != predicate and sims[best_held] > own else best
        return AskedCheck(False, None, predicate, asks, "relation", gap,
                          f"the fact says {predicate!r}; the question asks {asks!r}")


class StatementMatcher:
    """Whether a statement that holds an answer says what a question asks, by embedding
    similarity: the statement against "X <relation> A" written with each relation the question
    is closest to and each the statement is closest to (X the question's entity it names, A
    the answer). It passes when a relation the question asks fits the statement as well as the
    best fitting one, within ``margin``: "Zorblax Station was founded in 1987 by Mira Quell."
    fits "Zorblax Station founded by Mira Quell" better than "Zorblax Station director Mira
    Quell", so it does not say who directed it.

    The statement is read twice: whole, and as the few words around the answer
    (:func:`near_answer`), and it passes when either reading fits. A long statement is mostly
    about its subject ("Ada Quint (born 1966 in Tarnow) is a film director, screenwriter and
    editor" embeds as ``director``); what it says *of the answer* is in the words beside it
    ("Quint (born 1966 in Tarnow) is": ``place of birth``)."""

    def __init__(self, relations: RelationMatcher, *, margin: float = STATEMENT_MARGIN, asked: int = 3,
                 said: int = 8) -> None:
        self.relations, self.margin, self.asked, self.said = relations, margin, asked, said

    def check(self, question: str, statement: str, subject: str, answer: str) -> AskedCheck:
        asked = [label for label, _ in self.relations.ranked(question, [subject, answer])[: self.asked]]
        near = near_answer(statement, answer)
        readings = [statement, *([near] if near and near != statement else [])]
        # What a statement says *of the answer* is a relation whose values are of its type: one
        # of numbers (a count, a year) says nothing of a name ("had seven children by his wife,
        # Maureen O'Sullivan" says no number of children of her), one of things nothing of a
        # date ("Oskar Lind (2 May 1890 - 9 June 1957) was a film director" gives no director).
        other_type = self.relations.labels.other_type(answer)
        said = [label for text in readings for label in
                [label for label, _ in self.relations.ranked(text, [subject, answer]) if label not in other_type]
                [: self.said]]
        candidates = list(dict.fromkeys([*asked, *said]))
        vectors = self.relations.embedder.encode([*readings, *(f"{subject} {label} {answer}" for label in candidates)])
        vectors = np.asarray(vectors, dtype=np.float32)
        fits = []
        for i in range(len(readings)):
            sims = vectors[len(readings):] @ vectors[i]
            best = int(np.argmax(sims))
            fits.append((float(sims[best]) - float(max(sims[: len(asked)])), best, i))
        gap, best, i = min(fits)
        where = "" if i == 0 else " (read beside the answer)"
        if gap <= self.margin:
            return AskedCheck(True, None, candidates[best], asked[0], "relation", gap,
                              f"the statement says {candidates[best]!r} of {subject!r}{where}, what the question asks")
        gap, best, _ = fits[0]
        return AskedCheck(False, None, candidates[best], asked[0], "relation", gap,
                          f"the statement says {candidates[best]!r} of {subject!r}; the question asks {asked[0]!r}")


def near_answer(statement: str, answer: str, before: int = NEAR_BEFORE, after: int = NEAR_AFTER) -> str:
    """The words of ``statement`` around ``answer``'s first occurrence (case-insensitive):
    ``before`` words before it, the answer, ``after`` words after; "" when it does not occur
    as written."""
    found = re.search(re.escape(answer.strip()), statement, flags=re.IGNORECASE) if answer.strip() else None
    if found is None:
        return ""
    head = statement[:found.start()].split()[-before:] if before else []
    tail = statement[found.end():].split()[:after] if after else []
    return " ".join([*head, found.group(0), *tail])
