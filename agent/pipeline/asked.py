"""Whether the fact that holds an answer says what the question asks: the check beside the chain.

A connected chain of stated facts that holds the answer's words is not yet a proof:
``<Buck Owens> <field of work> <country music>`` holds "country music" and names Buck Owens, but
"What instrument did Buck Owens play?" asks for an instrument. The checks, all general (nothing
here is written for one relation or one dataset's wording):

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
  of things nothing of a date). Past a role the chain went through, the
  question is asked again of whom it reached (:func:`ask_past`: "Who is the spouse of the
  director of film X?" of a fact about him: "Who is the spouse of John Farrow?").
  A statement whose only name is the answer says nothing of it ("The continent includes
  Madagascar ..."): "A <relation> A" fits any relation alike.
- **The type asked** (:func:`answer_type_fits`): "when" takes a date, "how many" a number; and
  so does a "what is ..." question whose closest relation is numeric
  (:meth:`RelationMatcher.asks_number`: "What is the population of the state where X is?"),
  numeric read from the values the knowledge holds for it (``agent/data/relations/value-types.tsv``
  for the bundled relations), never from its name. The mirror (:meth:`RelationMatcher.asks_a_thing`):
  a triple whose value is a bare number does not answer a question whose closest relation is one
  of things, ahead of every relation of numbers by the same margin ("What is the native language
  of X?" is not answered by ``<X> <UTC date of spacecraft launch> <2017>``, which only relations
  of numbers would otherwise be compared with); on ``benchmarks/check_scores.py``'s dev half it
  refused all 5 such facts that passed before, and no right answer.
- **A question asked through a relative or role** (:func:`asks_through`: "When was X's father
  born?", "Where was the director of film X born?") is not answered by a fact about X itself
  alone: the chain must reach the one asked about. "What nationality is the director of X?" is
  one, "What city is the capital of X?" is not: the local model reads whether the role is a
  kind of the noun asked (:class:`~agent.pipeline.relation_reading.KindReader`). After "where",
  whether the role is a place or a person or organization: "Where is the headquarters of X
  located?" asks the headquarters, "Where was the director of film X born?" the director's
  birthplace.

Removed, for no gain on the test half of ``benchmarks/check_scores.py``'s labelled cases: a
statement that calls another thing by the noun asked ("members of what crime family?" not
answered by "The American Mafia" from "... namely the DeCavalcante crime family"), a noun phrase
read by rules: 0 on the test half, 2 wrong refused on dev.

The local model as a yes/no judge was measured and not kept: on 14 hand-checked cases
qwen2.5-coder-0.5b judged 7 right (every score below zero), the 1.5B 9, at 2.5 s a case. Nor the
0.5B reading which relation a statement states from its subject to the answer (seven sentences
written for the prompt, each candidate label scored as for triples) where the embeddings fail it
within ``wide_margin``: on the labelled cases it kept 2 right answers and passed 2 wrong ones on
the dev half, and passed 3 wrong ones and kept no right one on the test half (2026-12-01).
:class:`AskedChecker` applies the checks to an answer and its chain and says which failed and
why ("the fact says field of work; the question asks instrument").

Example::

    matcher = RelationMatcher(embedder, RelationLabels.bundled())
    AskedChecker(matcher).check("What instrument did Buck Owens play?", "country music",
                                ["<Buck Owens> <field of work> <country music> ."], chain=[0])
    # AskedCheck(passed=False, fact=0, says="field of work", asks="instrument", ...)
"""
from __future__ import annotations

import csv
import itertools
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..index.base import FactTree
from ..knowledge.facts import parse_triple
from ..knowledge.keywords import STOP_WORDS, extract_keywords
from ..knowledge.normalize import normalize_answer
from .grounding import holds_answer
from .plan import AUXILIARIES
from .values import answer_type_fits, parse_date, parse_number

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
# At most this many names of a question are checked (each is looked for in the question again):
# a question names a few; one listing more is no question the checks could read anyway.
MAX_NAMES = 30
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
        asks (:func:`asked_noun`) when it is such a relation's label ("In which country ...?"
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
    judges triples; statements are judged with the same embedder (:class:`StatementMatcher`).
    ``kinds``: whether a role is a kind of the noun a question asks (:func:`asks_through`).
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
    (:func:`asks_through`)."""
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
    as :func:`asked_through` reads it)."""
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
