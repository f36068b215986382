"""What a question asks, read into a small plan: a look-up, or a step over two options.

The reasoning steps the agent computes in code (:mod:`.comparison`) need to know, before anything
is generated, whether a question compares two things and which:

| kind | what is asked | answer |
|---|---|---|
| ``lookup`` | a fact, or a chain of facts | the fact's value |
| ``choice`` | which of the options is first / last / more / less by a value, or is what it says ("American") | an option |
| ``verify`` | whether the first option comes before / after / above the other | yes or no |
| ``same`` | whether both options share a value (a country, a genre, an occupation) | yes or no |
| ``difference`` | how far apart the options' values are (years, an amount) | a number |

How each part is read, and why so:

- **The options** are the knowledge's own names: the subjects and objects of the retrieved
  triples and the titles of the retrieved passages that the question names (matched word for
  word, longest first, without overlaps); when fewer than two are found, the question's names
  (capitalised spans, :func:`agent.knowledge.keywords.extract_keywords`). No sentence pattern is
  assumed ("X or Y", "X than Y", "between X and Y", "both X and Y" all name two things).
- **The kind** comes from the local model scoring the next token after a few-shot prompt of
  questions written for this project in many wordings (``prompts/plan/kinds.tsv``, one forward
  pass over the question's own tokens; the examples' key/value cache is shared), unless the
  question says an order (below): then it is a ``choice`` when it asks which (a wh-word) and a
  ``verify`` when it asks whether (an auxiliary verb first). A step over options needs two.
- **What it says of the options** (``trait``): "Are X and Y both film directors?" -> "film
  directors" (:func:`said_of_both`); "Which singer is American, X or Y?", a question the
  examples read as a look-up but that offers two alternatives, -> a choice by "American"
  (:func:`said_of_one`). The step reads it from each option's facts (:mod:`.comparison`).
- **The order asked** (earlier, later, more, less) is read from the comparative the question
  uses ("older", "first", "more recently", "longer", "fewer", ...; :data:`ORDER_WORDS`): a
  closed class of English words, not a pattern of any dataset. Sentence embeddings cannot tell
  them apart (antonyms embed alike: on 2WikiMultiHopQA's choice questions the nearest written
  example gave the wrong order about as often as the right one) and the 0.5B model scoring
  them did no better, so the words themselves decide. Which value is compared (a birth date, a
  release date, a length) is the model's to read from the facts (the ``Value:`` line).

Example (not run: needs a model)::

    reader = PlanReader(loaded)
    reader.plan("Is Ada Varga older than Ines Varro?", names=["Ada Varga", "Ines Varro"])
    # QuestionPlan(kind="verify", options=("Ada Varga", "Ines Varro"), order="earlier", ...)
"""
from __future__ import annotations

import csv
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..knowledge.keywords import STOP_WORDS, extract_keywords
from ..prompts import prompts_dir


KINDS = ("lookup", "choice", "verify", "same", "difference")
# Kinds the model may pick (choice and verify are said by an order word, see the docstring).
_SCORED = ("lookup", "same", "difference")
ORDERS = ("earlier", "later", "more", "less")
# English comparatives and superlatives -> the order they ask for (a date earlier or later, a
# value more or less). "older" asks for the earlier start (birth, founding, release).
ORDER_WORDS: dict[str, str] = {
    **dict.fromkeys(("first", "earlier", "earliest", "before", "sooner", "soonest", "older", "oldest", "elder",
                     "eldest", "prior"), "earlier"),
    **dict.fromkeys(("last", "later", "latest", "after", "younger", "youngest", "newer", "newest", "recently",
                     "recent"), "later"),
    **dict.fromkeys(("longer", "longest", "more", "most", "larger", "largest", "bigger", "biggest", "higher",
                     "highest", "taller", "tallest", "greater", "greatest", "heavier", "heaviest", "wider", "widest",
                     "deeper", "deepest", "farther", "further", "outlived"), "more"),
    **dict.fromkeys(("shorter", "shortest", "fewer", "fewest", "less", "least", "smaller", "smallest", "lower",
                     "lowest", "lighter", "lightest", "narrower", "narrowest", "shallower"), "less"),
}
# Order words of age: "older" is born earlier.
AGE_WORDS = frozenset({"older", "oldest", "elder", "eldest", "younger", "youngest"})
# Order words of a length: with dates, "lived longer" compares the spans of lives; "more" alone
# ("a more diverse career") says no length, and two dates then decide nothing.
LENGTH_WORDS = frozenset({"longer", "longest", "shorter", "shortest", "outlived"})
# The first word of a question that asks which (a choice) or whether (yes or no).
_WH = frozenset({"which", "who", "whom", "whose", "what", "where", "when"})
AUXILIARIES = frozenset({"is", "was", "are", "were", "did", "does", "do", "has", "had", "have", "can", "could", "will"})
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
# Words that introduce a noun naming someone or something an option leads to.
_DETERMINERS = frozenset({"the", "whose", "their", "its", "his", "her"})
# Two options offered as alternatives, in a question with its names as "X".
_EITHER = re.compile(r"\bX,? or X\b", re.IGNORECASE)
_BETWEEN = re.compile(r"\b(?:of|between) X,? and X\b", re.IGNORECASE)
# An order word that is not a comparison: "the first director of", "first name", "more about".
_NOT_ORDER_AFTER = frozenset({"name", "names", "time", "about"})


@dataclass(frozen=True)
class QuestionPlan:
    """``kind`` (one of :data:`KINDS`), the ``options`` it compares (two names, in the
    question's order; empty for a look-up), the ``order`` asked (:data:`ORDERS`, for a choice
    or verify) and ``how`` each part was read, for the trace."""

    kind: str = "lookup"
    options: tuple[str, ...] = ()
    order: str = ""
    how: dict[str, str] = field(default_factory=dict)
    role: str = ""  # whose value is compared when not the options' own: "director" (of each film)
    age: bool = False  # the order word is one of age (older, younger): birth dates are compared
    length: bool = False  # the order word is one of length (longer, outlived): spans of lives compared
    # What the question says of the options: "film directors" in "Are X and Y both film
    # directors?" (a "same" question), "American" in "Which singer is American, X or Y?" (a choice).
    trait: str = ""

    @property
    def steps(self) -> bool:
        """Whether the answer is a step over the options (not a look-up)."""
        return self.kind != "lookup"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "options": list(self.options), "order": self.order, "role": self.role,
                "age": self.age, "length": self.length, **({"trait": self.trait} if self.trait else {}),
                "how": dict(self.how)}


def question_words(question: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(question)]


def order_asked(question: str) -> tuple[str, str]:
    """The order the question asks (:data:`ORDERS`) and the word that says it, or ("", "")."""
    words = question_words(question)
    for i, word in enumerate(words):
        order = ORDER_WORDS.get(word)
        if order is None:
            continue
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if nxt in _NOT_ORDER_AFTER:
            continue
        if word in ("more", "most") and nxt in ("recently", "recent"):
            return "later", f"{word} {nxt}"
        if word in ("more", "less", "most", "least") and nxt and nxt != "than" and ORDER_WORDS.get(nxt):
            continue  # "more older": the next word says it
        return order, word
    return "", ""


def _mentions(question: str, name: str) -> int:
    """Where ``name`` occurs in ``question`` as whole words (case-insensitive), or -1."""
    if not name.strip():
        return -1
    m = re.search(rf"(?<![^\W_]){re.escape(name.strip())}(?![^\W_])", question, flags=re.IGNORECASE)
    return m.start() if m else -1


def _qualified_end(question: str, end: int) -> int:
    """Where a name ending at ``end`` ends with the qualifier written after it: "The Pit And The
    Pendulum (1913 Film)" is one name (a title's qualifier), not a title and a year."""
    m = re.match(r"\s*\([^()]{1,40}\)", question[end:])
    return end + m.end() if m else end


def find_options(question: str, names: Sequence[str], limit: int = 2) -> tuple[list[str], str]:
    """The names of ``names`` (the knowledge's) that ``question`` names, longest first without
    overlaps, in the question's order; fewer than two: the question's own capitalised names.
    Returns them and how they were found."""
    spans: list[tuple[int, int, str]] = []
    # A title's qualifier is the knowledge's, not the question's: "Mark King (musician)".
    names = [*names, *(re.sub(r"\s*\([^()]*\)\s*$", "", n) for n in names if n)]
    for name in sorted({n.strip() for n in names if n and len(n.strip()) > 2}, key=len, reverse=True):
        at = _mentions(question, name)
        if at < 0:
            continue
        before = re.search(r"([^\W\d_][\w'’.-]*)\s+$", question[:at])
        if before and before.group(1)[:1].isupper() and before.group(1).lower() not in _WH | AUXILIARIES | {
                "both", "between", "of"}:
            continue  # the tail of a longer name the question writes ("Sunday Afternoon" in "One Sunday Afternoon")
        end = _qualified_end(question, at + len(name))
        if any(at < e and s < end for s, e, _ in spans):
            continue
        spans.append((at, end, question[at:end]))
    how = "names of the knowledge the question names"
    if len(spans) < 2:
        # The question's own names beside the one of the knowledge it names, never inside it
        # ("To Get to Heaven, First You Have to Die" is one title, not two names at its comma).
        how = "the question's capitalised names" + (" beside a name of the knowledge" if spans else "")
        # A comma ends a name: the keyword "American Mark King" is written "American, Mark King".
        for keyword in (piece for k in extract_keywords(question, limit=20) for piece in _comma_parts(question, k)):
            # "Were Ada Varga and Ines Varro" is two names after a capitalised first word.
            for name in re.split(r"\s+(?:and|or|than|vs\.?|versus)\s+", keyword):
                parts = name.split()
                while parts and parts[0].lower() in _WH | AUXILIARIES | {"both", "between", "of"}:
                    parts = parts[1:]
                name = " ".join(parts)
                if not name or not any(c.isupper() or c.isdigit() for c in name):
                    continue
                at = _mentions(question, name)
                if at < 0:
                    continue
                end = _qualified_end(question, at + len(name))
                if any(at < e and s < end for s, e, _ in spans):
                    continue
                spans.append((at, end, question[at:end]))
    spans.sort()
    return [text for _, _, text in spans[:limit] if text], how


class PlanReader:
    """Reads a question into a :class:`QuestionPlan` (module docstring) with ``embedder``, the
    knowledge web's sentence embedder: the question, its names put as "X", against the written
    examples (``prompts/plan/kinds.tsv``, names likewise), ``K`` nearest voting by similarity."""

    K = 5

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._lock = threading.Lock()
        self._examples: list[dict[str, str]] = []
        self._vectors: Any = None

    def _ready(self) -> None:
        with self._lock:
            if self._vectors is None:
                rows = plan_examples()
                for row in rows:
                    row["nouns"] = " ".join(role_nouns(row["question"], find_options(row["question"], [])[0]))
                masked = [masked_question(r["question"], find_options(r["question"], [])[0]) for r in rows]
                self._vectors = self.embedder.encode(masked)
                self._examples = rows

    def _neighbours(self, question: str, options: Sequence[str], kinds: Sequence[str],
                    with_nouns: bool = False) -> list[tuple[dict[str, str], float]]:
        import numpy as np

        self._ready()
        vector = self.embedder.encode([masked_question(question, options)])[0]
        sims = np.asarray(self._vectors) @ np.asarray(vector)
        ranked = [int(i) for i in np.argsort(-sims) if self._examples[int(i)]["kind"] in kinds
                  and (not with_nouns or self._examples[int(i)]["nouns"])]
        return [(self._examples[i], float(sims[i])) for i in ranked[: self.K]]

    def plan(self, question: str, names: Sequence[str] = ()) -> QuestionPlan:
        """The plan of ``question``; ``names``: the knowledge's names retrieved for it (triple
        subjects and objects, passage titles)."""
        options, found = find_options(question, names)
        masked = masked_question(question, options)
        # An order word inside a name ("To Get to Heaven, First You Have to Die") asks nothing.
        order, word = order_asked(masked)
        words = question_words(question)
        first = words[0] if words else ""
        how: dict[str, str] = {}
        if len(options) < 2:
            return QuestionPlan("lookup", (), "", {"kind": "fewer than two things named"})
        how["options"] = found
        asks_which = any(w in _WH for w in words)
        if order and (asks_which or first in AUXILIARIES):
            # "Was X or Y born first?" opens with an auxiliary verb but offers the two as
            # alternatives: it asks which, not whether.
            either = _EITHER.search(masked) is not None
            kind = "verify" if first in AUXILIARIES and not asks_which and not either else "choice"
            how["kind"] = f"{'asks whether' if kind == 'verify' else 'asks which'}, by an order ({word!r})"
            how["order"] = f"{word!r} asks for the {order}"
        else:
            near = self._neighbours(question, options, _SCORED)
            votes: dict[str, float] = {}
            for example, sim in near:
                votes[example["kind"]] = votes.get(example["kind"], 0.0) + sim
            if asks_which and first not in AUXILIARIES:
                # A question with a wh-word that does not open with an auxiliary verb asks for a
                # thing ("... located in what city?"), not whether: it is not answered yes or no.
                votes.pop("same", None)
            if any(w in ("what", "which") and nxt not in AUXILIARIES for w, nxt in zip(words, words[1:])):
                # "which century", "what city": it asks for a thing of that kind, not how far
                # apart two values are (a number: "how many years", "what is the gap").
                votes.pop("difference", None)
            kind = max(votes, key=votes.__getitem__) if votes else "lookup"
            how["kind"] = "nearest written examples: " + ", ".join(f"{k} {v:.2f}" for k, v in votes.items())
            trait = said_of_one(question, options) if kind == "lookup" else ""
            if trait:
                # "Which singer is American, X or Y?": which of the two the question's words fit
                # (read as a look-up, it would name one of the two with no step to show why).
                kind = "choice"
                how["kind"] = f"asks which of the two is {trait!r}"
            if kind == "lookup":
                return QuestionPlan("lookup", (), "", how)
            order = ""
        role, said = self.compared(question, options)
        how["role"] = said
        trait = said_of_both(question, options) if kind == "same" else said_of_one(question, options) \
            if kind == "choice" and not order else ""
        if trait:
            how["trait"] = f"what the question says of the options: {trait!r}"
        return QuestionPlan(kind, tuple(options), order, how, role, word in AGE_WORDS, word in LENGTH_WORDS, trait)

    def compared(self, question: str, options: Sequence[str]) -> tuple[str, str]:
        """Whose value the question compares: "" for the options themselves, else the noun it
        names them by ("director" in "Which film has the director who died first, X or Y?").
        The candidates are the nouns the question introduces with a determiner ("the
        director", "whose director", "their fathers") outside the options' names; whether the
        value is theirs is voted by the nearest written examples that compare two things."""
        nouns = role_nouns(question, options)
        if not nouns:
            return "", "the question names no one else: the options themselves"
        # Among the examples that also name someone with a determiner: is it whose value it is?
        near = self._neighbours(question, options, ("choice", "verify", "same", "difference"), with_nouns=True)
        yes = sum(sim for example, sim in near if example.get("role"))
        no = sum(sim for example, sim in near if not example.get("role"))
        said = f"nearest written examples: {yes:.2f} for a role, {no:.2f} for the options themselves"
        return (nouns[0] if yes > no else ""), said


def said_of_both(question: str, options: Sequence[str]) -> str:
    """What a question says of both its options when it names the property itself ("Are X and Y
    both film directors?", "Were both X and Y painters?", "Are both magazines, X and Y, British
    publications?" -> "film directors", "painters", "British publications"): the words after
    "both" or after the last option, whichever ends later; "" when it says "same" (a value
    compared, :func:`~.comparison.same_attribute`), does not say "both", or says nothing after."""
    if "same" in question_words(question) or "both" not in question_words(question):
        return ""
    ends = [m.end() for m in re.finditer(r"\bboth\b", question, flags=re.IGNORECASE)]
    for option in options:
        ends.extend(m.end() for m in re.finditer(re.escape(option), question, flags=re.IGNORECASE))
    rest = question[max(ends):].strip(" \t,;:?!.")
    rest = re.sub(r"^(?:of them|each)\b\s*", "", rest, flags=re.IGNORECASE)
    return rest if _WORD.search(rest) else ""


def _comma_parts(question: str, keyword: str) -> list[str]:
    """``keyword`` split where ``question`` writes a comma inside it ("American Mark King" in
    "Which singer is American, Mark King or Nick Hexum?" -> "American", "Mark King")."""
    words = keyword.split()
    m = re.search(r"(?<![^\W_])" + r",?\s+".join(map(re.escape, words)) + r"(?![^\W_])", question) if words else None
    return [p.strip() for p in m.group(0).split(",") if p.strip()] if m else [keyword]


def said_of_one(question: str, options: Sequence[str]) -> str:
    """What a question asking which of two options fits says of it ("Which singer is American, X
    or Y?", "Who was a film director, X or Y?", "Of X and Y, which one is a board game?" ->
    "American", "a film director", "a board game"): the words after the first auxiliary verb
    that follows the wh-word, up to a comma or an option; "" when the options are not offered as
    alternatives ("X or Y", "of X and Y", "between X and Y"), or the words are none, more than
    five, or hold another wh-word."""
    masked = masked_question(question, options)
    if not _EITHER.search(masked) and not _BETWEEN.search(masked):
        return ""  # the two are not offered as alternatives ("the spouse of X's coach X")
    tokens = list(_WORD.finditer(masked))
    lower = [t.group(0).lower() for t in tokens]
    wh = next((i for i, w in enumerate(lower) if w in _WH), None)
    aux = next((i for i in range(wh + 1, len(lower)) if lower[i] in AUXILIARIES), None) if wh is not None else None
    if aux is None:
        return ""
    rest = re.split(r"[,;:?]|\bX\b", masked[tokens[aux].end():])[0].strip()
    words = question_words(rest)
    if not words or len(words) > 5 or any(w in _WH or w in ORDER_WORDS for w in words):
        return ""
    return rest


def masked_question(question: str, names: Sequence[str]) -> str:
    """``question`` with ``names`` as "X": its form, whatever it is about."""
    out = question
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        out = re.sub(re.escape(name), "X", out, flags=re.IGNORECASE)
    return out


def role_nouns(question: str, options: Sequence[str]) -> list[str]:
    """The nouns ``question`` introduces with a determiner outside the options' names ("the
    director", "whose director", "their fathers", "which film's director", "director of film
    X")."""
    rest = masked_question(question, options)
    words = question_words(rest)
    nouns = []
    for i, word in enumerate(words[:-1]):
        nxt = words[i + 1]
        if word in _DETERMINERS or word.endswith("'s") and word != "it's":  # "which film's director"
            noun = nxt
        elif nxt == "of" and i + 2 < len(words) and word not in _WH and word not in AUXILIARIES:
            noun = word
        else:
            continue
        if noun not in _DETERMINERS and noun not in ORDER_WORDS and len(noun) > 2 and noun not in ("of", "x"):
            nouns.append(noun)
    return list(dict.fromkeys(nouns))


def role_words(question: str, options: Sequence[str], role: str = "") -> list[str]:
    """The words of ``question`` that may name whom its options lead to, ``role`` first, then
    its other words outside the options' names in the question's order, less function words,
    wh-words, auxiliaries and order words ("Which director died first, X or Y?" -> ["director",
    "died"]). Which one does is the knowledge's to say (:meth:`~.comparison.ComparisonStep.run`: a
    word the options' facts follow with a name, and do not call the option itself)."""
    words = [w for w in question_words(masked_question(question, options))
             if len(w) > 2 and w != "x" and w not in STOP_WORDS and w not in _WH and w not in AUXILIARIES
             and w not in ORDER_WORDS]
    return list(dict.fromkeys([*([role.lower()] if role else []), *words]))


def plan_examples() -> list[dict[str, str]]:
    """The written examples (``prompts/plan/kinds.tsv``: kind, pick, role, question)."""
    with open(prompts_dir() / "plan" / "kinds.tsv", encoding="utf-8", newline="") as stream:
        return [dict(r) for r in csv.DictReader(stream, delimiter="\t")]
