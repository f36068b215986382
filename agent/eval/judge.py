"""LLM-as-judge: a chat model says whether a prediction means one of the gold answers.

The judge is any :class:`~agent.llm.client.ChatClient`: an OpenAI-compatible endpoint
(:class:`~agent.llm.client.OpenAIChat`) or the local model (:class:`~agent.llm.client.LocalChat`
over the model already loaded). The prompt lives in ``prompts/eval/judge/``: ``system.txt``,
``user.txt`` (placeholders ``$question``, ``$golds``, ``$prediction``) and ``examples.txt``
(worked cases, given as earlier chat turns: a small model follows a one-word reply it has seen
far better than an instruction); the reply is read by :func:`parse_verdict`.
Only answered predictions are judged: an abstention or a truncated answer is not an answer.
A reply that is neither verdict, or a failed call, counts as not correct and is kept, with the
reason, in the result.

Example (not run: needs a model)::

    judge = AnswerJudge(LocalChat(loaded))
    verdict = judge.judge("Where was Laurie Graff born?", ["New York", "NYC"], "New York City")
    verdict.correct, verdict.reply
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError
from ..prompts import read_prompt

if TYPE_CHECKING:
    from ..llm.client import ChatClient

JUDGE_PROMPTS = "eval/judge"
_VERDICT_LINE = "Verdict:"

# Negative forms first, so "incorrect" and "not correct" are never read as "correct".
_VERDICTS = re.compile(
    r"\b(?P<no>incorrect|not\s+correct|wrong|false|no|invalid|mismatch)\b"
    r"|\b(?P<yes>correct|right|true|yes|valid|match(?:es)?)\b",
    re.IGNORECASE,
)
# A reply that repeats the instruction's "correct or incorrect" has not decided anything.
_ECHO = re.compile(r"\bcorrect\s+or\s+incorrect\b|\bincorrect\s+or\s+correct\b", re.IGNORECASE)
_GOLD_SEPARATOR = " | "
_MAX_GOLDS = 12


def parse_verdict(reply: str) -> bool | None:
    """True for a "correct" verdict, False for "incorrect", None when the reply has neither.

    The first verdict word decides (small models often go on after it), whatever its case,
    punctuation or markup: ``"Correct."``, ``"**incorrect**"``, ``"Verdict: correct"``,
    ``"The prediction is not correct"``, ``"yes"``. Words inside other words do not count
    ("corrected" is no verdict), nor does an echo of the instruction's "correct or incorrect".
    """
    match = _VERDICTS.search(_ECHO.sub(" ", reply or ""))
    if match is None:
        return None
    return match.group("yes") is not None


@dataclass(frozen=True)
class Verdict:
    """The judge's decision on one prediction: ``correct`` is None when the reply was unusable
    (``error`` says why when the call itself failed)."""

    correct: bool | None
    reply: str
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"correct": self.correct, "reply": self.reply}
        if self.error:
            out["error"] = self.error
        return out


class AnswerJudge:
    """Asks ``client`` whether a prediction is correct, one short call per prediction.

    ``max_tokens`` is small on purpose: the verdict is the first word, and a small local model
    asked for more tends to ramble.
    """

    def __init__(self, client: ChatClient, *, max_tokens: int = 6) -> None:
        self.client = client
        self.max_tokens = max_tokens
        self.system = read_prompt(f"{JUDGE_PROMPTS}/system.txt")
        self.user = Template(read_prompt(f"{JUDGE_PROMPTS}/user.txt"))
        self.examples = _examples(read_prompt(f"{JUDGE_PROMPTS}/examples.txt"))

    @property
    def name(self) -> str:
        return str(getattr(self.client, "name", type(self.client).__name__))

    def messages(self, question: str, golds: Sequence[str], prediction: str) -> list[dict[str, str]]:
        """The chat sent for one prediction: the system prompt, the worked cases, the case."""
        golds = _GOLD_SEPARATOR.join(g.strip() for g in list(golds)[:_MAX_GOLDS] if g.strip())
        case = self.user.safe_substitute(question=_line(question), golds=_line(golds), prediction=_line(prediction))
        messages = [{"role": "system", "content": self.system}]
        for shown, verdict in self.examples:
            messages += [{"role": "user", "content": shown}, {"role": "assistant", "content": verdict}]
        return messages + [{"role": "user", "content": case}]

    def judge(self, question: str, golds: Sequence[str], prediction: str) -> Verdict:
        """The verdict on ``prediction``; a failed call is a verdict of None with the error."""
        try:
            reply = self.client.complete(self.messages(question, golds, prediction), max_tokens=self.max_tokens,
                                         temperature=0.0, stop=["\n"])
        except FactweaveError as exc:
            return Verdict(None, "", str(exc))
        return Verdict(parse_verdict(reply), reply.strip())


def _examples(text: str) -> list[tuple[str, str]]:
    """Worked cases: blocks separated by a blank line, each the case's lines then ``Verdict: ...``."""
    cases = []
    for block in (b.strip() for b in text.split("\n\n")):
        if not block:
            continue
        *shown, last = block.splitlines()
        if not shown or not last.startswith(_VERDICT_LINE) or parse_verdict(last[len(_VERDICT_LINE):]) is None:
            raise FactweaveError(f"prompts/{JUDGE_PROMPTS}/examples.txt: each case ends with a line "
                                 f"'{_VERDICT_LINE} correct' or '{_VERDICT_LINE} incorrect'")
        cases.append(("\n".join(shown), last[len(_VERDICT_LINE):].strip()))
    return cases


def _line(text: str) -> str:
    # The prompt is line-based: a newline inside a field would start a fake "Verdict:" line.
    return " ".join(str(text).split())
