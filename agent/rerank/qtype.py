"""Question-type detection by keyword rules (Sinha & Shiramatsu's GPT re-ranker).

A question is *calculation*-type when answering needs arithmetic or ordering over facts
(ages, counts, durations, dates, comparisons), *inference*-type when it asks for causes,
reasons or effects, and *plain* otherwise. Each type names the prompt that tells the LLM
which facts matter for that kind of question.

Rules are tried in order and the first type with a matching pattern wins. Calculation comes
before inference because its phrases contain inference words ("how many" contains "how").
Generic words that mostly mark look-ups ("born", "age", "after": "named after") are left out
on purpose; a question with an explicit year counts as calculation, since its facts must be
compared by date.

Example::

    >>> detect_question_type("How old was Ada Lovelace when she died?").name
    'calculation'
    >>> detect_question_type("Why did the empire fall?").name
    'inference'
    >>> detect_question_type("However, who wrote Emma?").name
    'plain'

    >>> rules = QuestionTypeRules.default()
    >>> rules.add(QuestionType("location", ("where", "which country"), "location.txt"), before="inference")
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent.errors import FactweaveError

Pattern = str | re.Pattern[str]


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A case-insensitive regex for ``phrase`` as whole words, any whitespace between them.

    Whole words, so "how" matches "How did..." but not "however" or "show".
    """
    words = phrase.split()
    if not words:
        raise FactweaveError("a question-type phrase must contain a word")
    return re.compile(r"\b" + r"\s+".join(re.escape(w) for w in words) + r"\b", re.IGNORECASE)


@dataclass(frozen=True)
class QuestionType:
    """A kind of question: its name, what marks it, and the prompt file for the re-ranker.

    ``patterns`` are phrases (matched as whole words, case-insensitively) or compiled regexes
    (used as given). ``prompt_file`` is relative to the re-ranker's prompt folder
    (``prompts/rerank`` by default) or absolute.

    Example::

        >>> comparison = QuestionType("comparison", ("compared to", re.compile(r"\\bvs\\.?\\b", re.IGNORECASE)), "plain.txt")
        >>> comparison.matches("Paris vs. Rome: which is older?")
        True
    """

    name: str
    patterns: tuple[Pattern, ...]
    prompt_file: str
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple(p if isinstance(p, re.Pattern) else phrase_pattern(p) for p in self.patterns)
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "_compiled", compiled)

    def matches(self, question: str) -> bool:
        """Whether any of the patterns occurs in ``question``."""
        return any(p.search(question) for p in self._compiled)


CALCULATION = QuestionType(
    "calculation",
    (
        # quantities and durations
        "how old", "how many", "how much", "how long", "how far", "how tall", "how big",
        "how often", "number of", "total", "sum", "average", "percent", "percentage",
        # time
        "when", "what year", "which year", "in what year", "what date", "which date",
        "what century",
        # comparison and order
        "difference", "older", "younger", "oldest", "youngest", "earlier", "later",
        "earliest", "latest", "first", "last", "more than", "less than", "fewer than",
        "longer", "shorter", "larger", "smaller", "bigger",
        # an explicit year (1000-2099) or arithmetic between numbers in the question
        re.compile(r"\b(?:1\d{3}|20\d{2})\b"),
        re.compile(r"\d\s*[-+*/x]\s*\d"),
    ),
    "calculation.txt",
)

INFERENCE = QuestionType(
    "inference",
    (
        "why", "how", "cause", "causes", "caused", "reason", "reasons", "effect", "effects",
        "affect", "affected", "lead to", "leads to", "led to", "result in", "resulted in",
        "because", "due to", "consequence", "consequences", "impact", "influence",
        "influenced", "explain", "what made", "purpose",
    ),
    "inference.txt",
)

PLAIN = QuestionType("plain", (), "plain.txt")


class QuestionTypeRules:
    """An ordered list of question types and a fallback; :meth:`detect` picks the first match.

    Example::

        >>> rules = QuestionTypeRules.default()
        >>> rules.add(QuestionType("definition", ("what is", "define"), "/my/prompts/definition.txt"))
        >>> rules.detect("Define entropy.").name
        'definition'
    """

    def __init__(self, types: Iterable[QuestionType], default: QuestionType = PLAIN) -> None:
        self._types: list[QuestionType] = []
        self.fallback = default  # the type of a question no other type matches
        for qtype in types:
            self.add(qtype)

    @classmethod
    def default(cls) -> QuestionTypeRules:
        """Calculation, then inference, else plain: the paper's rules."""
        return cls([CALCULATION, INFERENCE], PLAIN)

    @property
    def types(self) -> Sequence[QuestionType]:
        """The types in the order they are tried (the fallback not included)."""
        return tuple(self._types)

    def all_types(self) -> Sequence[QuestionType]:
        """Every type a question can get, the fallback last."""
        return (*self._types, self.fallback)

    def add(self, qtype: QuestionType, *, before: str | None = None) -> None:
        """Add ``qtype`` at the end, or just before the type named ``before``.

        A type with the same name is replaced in place, so a user can override the built-in
        calculation or inference rules.
        """
        names = [t.name for t in self._types]
        if qtype.name in names:
            self._types[names.index(qtype.name)] = qtype
            return
        if before is None:
            self._types.append(qtype)
            return
        if before not in names:
            raise FactweaveError(
                f"no question type {before!r} to insert {qtype.name!r} before; "
                f"known: {', '.join(names) or 'none'}"
            )
        self._types.insert(names.index(before), qtype)

    def detect(self, question: str) -> QuestionType:
        """The first type whose patterns occur in ``question``, else the fallback."""
        for qtype in self._types:
            if qtype.matches(question):
                return qtype
        return self.fallback


_DEFAULT_RULES = QuestionTypeRules.default()


def detect_question_type(question: str) -> QuestionType:
    """The question's type by the default rules (calculation, inference, else plain)."""
    return _DEFAULT_RULES.detect(question)
