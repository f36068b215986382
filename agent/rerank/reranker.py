"""The LLM re-ranker: given a question and retrieved facts, an LLM picks the facts that matter.

Method (Sinha & Shiramatsu): detect the question's type by keyword rules, show the LLM the
retrieved facts with the prompt for that type, keep the facts it names; when its reply is
unusable or the call fails, fall back to the top-3 retrieved facts.

Choices made here:

* Facts are shown numbered ``[1]..[n]`` and the LLM answers with those numbers, mapped back
  to ids afterwards: short numbers are far easier for small models than hashes or long ids.
* Selected facts keep the **LLM's order** (the prompt asks for the most useful first, and
  that ordering is what re-ranking means); repeats and numbers outside ``1..n`` are dropped.
* An explicit "none" (or ``[]``) is treated as unusable and falls back to the top-3, as the
  paper does for every reply it cannot use: an answerer given no facts can only say "I don't
  know", the top retrieved facts are still the best guess, and small models say "none"
  wrongly far more often than rightly. ``reason`` says that this is what happened.
* Candidates are taken to be best-first (retrieval order); the fallback is their first
  ``fallback_k``, and only the first ``max_facts`` are shown to the LLM.
* A missing or malformed prompt file raises: that is a configuration error, not a bad reply.

Example (not run: needs a model or an OpenAI endpoint)::

    reranker = Reranker(chat_client_from_env())
    result = reranker.rerank("How old was Marie Curie when she died?", [
        Candidate("f1", "Marie Curie was born on 7 November 1867.", 0.82),
        Candidate("f2", "Marie Curie died on 4 July 1934.", 0.80),
        Candidate("f3", "Marie Curie was born in Warsaw.", 0.55),
    ])
    result.question_type, [f.id for f in result.selected], result.used_fallback
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Generic, Protocol, TypeVar

from agent.errors import FactweaveError
from agent.llm.client import ChatClient, Message
from agent.prompts import prompts_dir as default_prompts_root
from agent.prompts import read_prompt

from .qtype import QuestionType, QuestionTypeRules

log = logging.getLogger(__name__)

_REQUIRED_PLACEHOLDERS = ("question", "facts")


class FactLike(Protocol):
    """What the re-ranker needs of a retrieved fact: any object with these attributes."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def score(self) -> float: ...


F = TypeVar("F", bound=FactLike)


@dataclass(frozen=True)
class Candidate:
    """A retrieved fact: its id in the knowledge source, its text, and its retrieval score.

    Example::

        >>> Candidate("fact:42", "Paris is the capital of France.", 0.91)
        Candidate(id='fact:42', text='Paris is the capital of France.', score=0.91)
    """

    id: str
    text: str
    score: float = 0.0


@dataclass(frozen=True)
class RerankResult(Generic[F]):
    """What the re-ranker chose, and why.

    ``selected`` holds the caller's own candidate objects. ``used_fallback`` is true when
    they are the top ``fallback_k`` retrieved facts instead of the LLM's choice; ``reason``
    then says why. ``raw_reply`` is the LLM's text (None when it was not called or failed).
    """

    question_type: str
    selected: list[F] = field(default_factory=list)
    used_fallback: bool = False
    reason: str | None = None
    raw_reply: str | None = None

    @property
    def ids(self) -> list[str]:
        """The ids of the selected facts, in order."""
        return [f.id for f in self.selected]


# --- reading the LLM's reply --------------------------------------------------------------

_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_INTEGER = re.compile(r"(?<![\d.])\d+(?!\.\d|\d)")
# "Fact 2", "facts: 2, 5 and 7", "fact #3", "fact numbers 1 & 4"
_AFTER_FACT_WORD = re.compile(
    r"\bfacts?\s*(?:numbers?|nos?\.?|#)?\s*[:#]?\s*"
    r"(\d+(?:\s*(?:,|;|/|&|\band\b|\bor\b)\s*#?\d+)*)",
    re.IGNORECASE,
)
_SAYS_NONE = re.compile(
    r"^\W*(?:none(?: of (?:them|the facts))?|nothing|no facts?(?: (?:is|are) (?:needed|relevant))?"
    r"|\[\s*\])\W*$",
    re.IGNORECASE,
)


def parse_fact_numbers(reply: str, count: int) -> list[int]:
    """The fact numbers (1-based) that ``reply`` names, in its order, each once, in ``1..count``.

    Tried in order, the first that yields a number wins: numbers inside square brackets
    (a JSON list ``[2, 5]``, citations ``[2] and [5]``, ``{"facts": [2]}``), numbers after the
    word "fact(s)" ("Facts: 2, 5", "fact #3"), then any whole number in the text ("1, 3",
    prose). Decimals are skipped. An empty list means the reply named no usable fact.

    Example::

        >>> parse_fact_numbers("The relevant facts are [3] and [1].", 5)
        [3, 1]
        >>> parse_fact_numbers("Facts: 2, 2, 9", 5)
        [2]
    """
    for numbers in (_bracketed(reply), _after_fact_word(reply), _INTEGER.findall(reply)):
        picked = _in_range_once(numbers, count)
        if picked:
            return picked
    return []


def says_none(reply: str) -> bool:
    """Whether the reply, as a whole, says that no fact is needed ("none", "[]", ...)."""
    return bool(_SAYS_NONE.match(reply.strip()))


def _bracketed(reply: str) -> list[str]:
    found: list[str] = []
    for inside in _BRACKETS.findall(reply):
        try:
            # JSON first: it also accepts quoted numbers such as ["2", "5"].
            items = json.loads(f"[{inside}]")
            found += [str(i).strip() for i in items if isinstance(i, int | str)]
        except ValueError:
            found += _INTEGER.findall(inside)
    return found


def _after_fact_word(reply: str) -> list[str]:
    return [n for group in _AFTER_FACT_WORD.findall(reply) for n in _INTEGER.findall(group)]


def _in_range_once(numbers: Sequence[str], count: int) -> list[int]:
    picked: list[int] = []
    for item in numbers:
        if not item.isdigit():
            continue
        n = int(item)
        if 1 <= n <= count and n not in picked:
            picked.append(n)
    return picked


# --- the re-ranker -------------------------------------------------------------------------


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


class Reranker:
    """Picks the facts that a question needs with an LLM, per question type, with a fallback.

    ``client`` is any :class:`ChatClient` (None: always the fallback). Prompts are read from
    ``prompts_dir`` (default ``prompts/rerank``), one file per question type, with the
    placeholders ``$question``, ``$facts`` and ``$count``. ``rules`` decides the question
    type (default: calculation, inference, else plain). ``max_tokens`` bounds the LLM's
    reply, which only has to list numbers.

    Example (not run: needs a model)::

        reranker = Reranker(LocalChat("qwen2.5-coder-0.5b"))
        result = reranker.rerank(question, hits)        # anything with id, text, score
        facts = result.selected          # the LLM's choice, or the top 3 with result.reason
    """

    def __init__(
        self,
        client: ChatClient | None,
        prompts_dir: Path | None = None,
        fallback_k: int = 3,
        max_facts: int = 30,
        *,
        rules: QuestionTypeRules | None = None,
        max_tokens: int = 48,
        max_fact_chars: int = 300,
    ) -> None:
        if fallback_k < 0 or max_facts < 1:
            raise FactweaveError("fallback_k must be >= 0 and max_facts >= 1")
        self.client = client
        self.prompts_dir = Path(prompts_dir) if prompts_dir else default_prompts_root() / "rerank"
        self.fallback_k = fallback_k
        self.max_facts = max_facts
        self.rules = rules or QuestionTypeRules.default()
        self.max_tokens = max_tokens
        self.max_fact_chars = max_fact_chars
        self._templates: dict[str, Template] = {}

    def template(self, qtype: QuestionType) -> Template:
        """The prompt template of ``qtype``, read once and checked for its placeholders."""
        path = self.prompts_dir / qtype.prompt_file
        key = str(path)
        if key not in self._templates:
            # read_prompt joins onto prompts/, and joining an absolute path keeps it as is.
            text = read_prompt(str(path.resolve()))
            missing = [p for p in _REQUIRED_PLACEHOLDERS
                       if f"${p}" not in text and f"${{{p}}}" not in text]
            if missing:
                raise FactweaveError(
                    f"prompt file {path} lacks the placeholder(s) "
                    f"{', '.join('$' + m for m in missing)}"
                )
            self._templates[key] = Template(text)
        return self._templates[key]

    def prompt_messages(self, question: str, facts: Sequence[FactLike],
                        qtype: QuestionType) -> list[Message]:
        """The chat messages sent to the LLM for ``question`` over ``facts``."""
        lines = [f"[{i}] {self._fact_line(f.text)}" for i, f in enumerate(facts, start=1)]
        try:
            text = self.template(qtype).substitute(
                question=_one_line(question, 1000), facts="\n".join(lines), count=len(facts)
            )
        except (KeyError, ValueError) as exc:
            raise FactweaveError(
                f"prompt file {self.prompts_dir / qtype.prompt_file}: bad placeholder ({exc}); "
                "use $question, $facts, $count, and $$ for a literal $"
            ) from None
        return [{"role": "user", "content": text}]

    def rerank(self, question: str, candidates: Sequence[F]) -> RerankResult[F]:
        """The facts ``question`` needs among ``candidates`` (best-first retrieval order)."""
        qtype = self.rules.detect(question)
        shown = list(candidates[: self.max_facts])
        if not shown:
            return RerankResult(qtype.name, [], False, "no candidates to choose from", None)
        if self.client is None:
            return self._fallback(qtype, shown, "no LLM client configured", None)
        messages = self.prompt_messages(question, shown, qtype)
        try:
            reply = self.client.complete(messages, max_tokens=self.max_tokens, temperature=0.0)
        except Exception as exc:  # noqa: BLE001 - any failure of the call must degrade to
            # the retrieval order, never break answering; the reason is kept and logged.
            detail = str(exc) if isinstance(exc, FactweaveError) else f"{type(exc).__name__}: {exc}"
            return self._fallback(qtype, shown, f"LLM call failed: {_one_line(detail)}", None)
        numbers = parse_fact_numbers(reply, len(shown))
        if not numbers:
            why = ("the LLM said no fact is needed" if says_none(reply)
                   else f"the reply names no fact number in 1..{len(shown)}")
            return self._fallback(qtype, shown, why, reply)
        return RerankResult(qtype.name, [shown[n - 1] for n in numbers], False, None, reply)

    def _fallback(self, qtype: QuestionType, shown: list[F], reason: str,
                  reply: str | None) -> RerankResult[F]:
        log.info("re-ranker fallback to the top %d retrieved facts: %s", self.fallback_k, reason)
        return RerankResult(qtype.name, shown[: self.fallback_k], True, reason, reply)

    def _fact_line(self, text: str) -> str:
        # One line per fact, so a fact's own newlines or brackets cannot look like a new [n].
        return _one_line(text, self.max_fact_chars)
