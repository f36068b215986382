"""A conversation's follow-up made standalone before retrieval (the history-aware retriever pattern).

Retrieval and the fact tree are built from one question; "And what is her occupation?" names
nobody, so searched as it is it finds facts about whoever the words happen to match. Before
anything is retrieved, the question is rewritten into a standalone one:

- with a chat model able to do it (an OpenAI-compatible endpoint), by the prompt
  ``prompts/conversation/rewrite.txt``; a reply that is not one plausible question falls back to
  the rules below;
- otherwise by rules (:func:`rewrite_by_rules`), against the previous turn: its standalone
  question's names, its answer and the facts it stated (the ``Fact: <s> <p> <o> .`` lines of the
  assistant's reply). Person pronouns (he, she, his, her, they, ...) and ``it``/``its`` become
  the previous turn's subject (the subject of its first stated triple, else the first name in
  its question); ``there`` becomes its answer; an elliptical fragment ("and in which year?",
  "what about Paris?") is completed from the previous question. A question that names its own
  subject and refers to nothing earlier is a topic change and stays as it is.

History is bounded (:func:`trim_history`: the last turns within a character budget), so a long
chat does not grow the prompt or the rewrite without end.

Example::

    history = [{"role": "user", "content": "Where did Buck Owens die?"},
               {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\\nAnswer: Bakersfield"}]
    rewrite_by_rules("What instrument did he play?", history).standalone
    # 'What instrument did Buck Owens play?'
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError
from ..prompts import read_prompt

if TYPE_CHECKING:
    from ..llm.client import ChatClient

MAX_TURNS = 6
MAX_CHARS = 4000

_TRIPLE = re.compile(r"<([^<>]+)>\s*<([^<>]+)>\s*<([^<>]+)>\s*\.")
_FACT_LINE = re.compile(r"^[ \t]*fact:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
_ANSWER_LINE = re.compile(r"^[ \t]*answer:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# Pronouns that stand for the previous turn's subject, by the form they take in the sentence.
_SUBJECT_PRONOUNS = {"he": "", "she": "", "they": "", "it": "", "him": "", "them": ""}
_POSSESSIVES = {"his", "her", "their", "its", "hers", "theirs"}
_PLACE_ADVERBS = {"there"}
_ELLIPSIS_OPENERS = re.compile(r"^\s*(?:and|so|also|then)\b[\s,]*", re.IGNORECASE)
_WHAT_ABOUT = re.compile(r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(.+?)\s*\??\s*$", re.IGNORECASE)
_CLAUSE_WORDS = {"in", "at", "on", "to", "for", "with", "from", "by", "and", "or", "as", "after", "before", "when"}
_QUESTION_WORDS = {"who", "what", "when", "where", "which", "why", "how", "whom", "whose", "is", "are", "was",
                   "were", "did", "does", "do", "in", "on", "at"}


@dataclass(frozen=True)
class Rewrite:
    """``standalone``: the question retrieval and generation use; ``how``: one line for the trace."""

    question: str
    standalone: str
    how: str

    @property
    def changed(self) -> bool:
        return self.standalone != self.question

    def as_step(self) -> dict[str, Any]:
        return {"step": "rewrite", "question": self.question, "standalone": self.standalone, "how": self.how}


def split_conversation(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """The last user message (the question) and the user/assistant turns before it.

    System messages are dropped (the agent has its own); a conversation without a user message
    with text raises :class:`FactweaveError`.
    """
    turns = [{"role": str(m.get("role", "")), "content": _text(m.get("content"))} for m in messages]
    for i in range(len(turns) - 1, -1, -1):
        if turns[i]["role"] == "user" and turns[i]["content"].strip():
            history = [t for t in turns[:i] if t["role"] in ("user", "assistant") and t["content"].strip()]
            return turns[i]["content"].strip(), history
    raise FactweaveError("the conversation has no user message with text to answer")


def trim_history(history: Sequence[Mapping[str, Any]], max_turns: int = MAX_TURNS,
                 max_chars: int = MAX_CHARS) -> list[dict[str, str]]:
    """The last ``max_turns`` messages of ``history`` whose contents fit in ``max_chars``
    (newest kept first; a message never cut in the middle, so a stated fact stays whole)."""
    kept: list[dict[str, str]] = []
    used = 0
    for turn in reversed(list(history)[-max_turns:] if max_turns > 0 else []):
        content = _text(turn.get("content"))
        if used + len(content) > max_chars:
            break
        kept.append({"role": str(turn.get("role", "")), "content": content})
        used += len(content)
    return kept[::-1]


@dataclass(frozen=True)
class PreviousTurn:
    """What a follow-up may refer to: the previous question, its subject, answer and facts."""

    question: str
    subject: str
    answer: str
    facts: tuple[tuple[str, str, str], ...]


def previous_turn(history: Sequence[Mapping[str, Any]]) -> PreviousTurn | None:
    """The last user question of ``history`` with the assistant reply after it (if any)."""
    from ..web.keywords import extract_keywords

    question, reply = "", ""
    for turn in reversed(history):
        if turn.get("role") == "assistant" and not reply and not question:
            reply = _text(turn.get("content"))
        elif turn.get("role") == "user":
            question = _text(turn.get("content"))
            break
    if not question and not reply:
        return None
    facts = tuple(tuple(part.strip() for part in m.groups()) for line in _FACT_LINE.findall(reply)
                  for m in [_TRIPLE.search(line)] if m)
    answers = [a.strip() for a in _ANSWER_LINE.findall(reply)]
    answer = answers[-1] if answers else ""
    if answer.lower().startswith("i don't know") or answer.lower().startswith("i do not know"):
        answer = ""
    names = [k for k in extract_keywords(question) if _is_name(k)]
    subject = facts[0][0] if facts else (names[0] if names else "")
    return PreviousTurn(question, subject, answer, facts)


def rewrite_by_rules(question: str, history: Sequence[Mapping[str, Any]]) -> Rewrite:
    """``question`` made standalone by rules (see the module docstring)."""
    question = " ".join(question.split())
    prev = previous_turn(history) if history else None
    if prev is None:
        return Rewrite(question, question, "no earlier turn")
    what_about = _WHAT_ABOUT.match(question)
    if what_about and prev.subject and what_about.group(1).split()[0].lower() in _POSSESSIVES:
        # "what about her brother?" asks for the brother itself: "What is X's brother?"
        thing = what_about.group(1).split(None, 1)[1] if len(what_about.group(1).split()) > 1 else ""
        if thing:
            return Rewrite(question, f"What is {prev.subject}'s {thing}?",
                           f"'what about {what_about.group(1)}' asked of '{prev.subject}' (the previous subject)")
    if what_about and prev.question:
        target = _resolve(what_about.group(1), prev)[0]
        base = rewrite_target(prev.question, prev)
        if base is not None:
            return Rewrite(question, base.replace("\0", target),
                           f"'what about {what_about.group(1)}' applied to the previous question")
    resolved, replaced = _resolve(question, prev)
    if replaced:
        resolved = _ELLIPSIS_OPENERS.sub("", resolved)
        resolved = resolved[:1].upper() + resolved[1:]
        return Rewrite(question, resolved, "; ".join(replaced) + " (from the previous turn)")
    if _names_own_subject(question):
        return Rewrite(question, question, "names its own subject: not a follow-up")
    words = _WORD.findall(question)
    elliptical = _ELLIPSIS_OPENERS.match(question) is not None or len(words) <= 4
    if elliptical and prev.question:
        fragment = _ELLIPSIS_OPENERS.sub("", question).strip()
        fragment = fragment[:1].upper() + fragment[1:]
        base = prev.question.rstrip()
        if not base.endswith(("?", ".", "!")):
            base += "?"
        return Rewrite(question, f"{base} {fragment}", "elliptical follow-up completed with the previous question")
    return Rewrite(question, question, "no reference to an earlier turn")


def rewrite_target(question: str, prev: PreviousTurn) -> str | None:
    """``question`` with its subject replaced by a NUL placeholder (for "what about X?")."""
    if prev.subject and prev.subject in question:
        return question.replace(prev.subject, "\0", 1)
    return None


def rewrite_with_chat(chat: ChatClient, question: str, history: Sequence[Mapping[str, Any]]) -> Rewrite:
    """``question`` made standalone by ``chat`` (``prompts/conversation/rewrite.txt``); the rules
    when the reply is not one plausible question or the model fails."""
    if not history:
        return Rewrite(question, question, "no earlier turn")
    lines = [f"{'User' if t['role'] == 'user' else 'Assistant'}: {' '.join(_text(t['content']).split())}"
             for t in history]
    prompt = Template(read_prompt("conversation/rewrite.txt")).safe_substitute(
        conversation="\n".join(lines), question=question)
    try:
        reply = chat.complete([{"role": "user", "content": prompt}], max_tokens=64, temperature=0.0)
    except FactweaveError as exc:
        fallback = rewrite_by_rules(question, history)
        return Rewrite(question, fallback.standalone, f"{fallback.how} (the chat model failed: {exc})")
    standalone = " ".join(reply.strip().splitlines()[0].split()) if reply.strip() else ""
    standalone = re.sub(r"^(?:standalone question|question)\s*:\s*", "", standalone, flags=re.IGNORECASE)
    if not standalone or len(standalone) > 3 * len(question) + 200 or standalone.lower().startswith("answer"):
        fallback = rewrite_by_rules(question, history)
        return Rewrite(question, fallback.standalone, f"{fallback.how} (the chat model's reply was not a question)")
    how = "written by the chat model" if standalone != question else "the chat model kept it as it is"
    return Rewrite(question, standalone, how)


def _resolve(text: str, prev: PreviousTurn) -> tuple[str, list[str]]:
    """``text`` with pronouns replaced by what they refer to in the previous turn."""
    replaced: list[str] = []

    def swap(match: re.Match) -> str:
        word = match.group(0)
        low = word.lower()
        if low in _PLACE_ADVERBS:
            target = prev.answer
            if not target:
                return word
            replaced.append(f"'{word}' -> '{target}'")
            return f"in {target}"
        if low in _POSSESSIVES and not (low == "her" and _ends_clause(text, match.end())):
            target = prev.subject
            if not target:
                return word
            replaced.append(f"'{word}' -> '{target}'")
            return f"{target}'s"
        if low in _SUBJECT_PRONOUNS or low == "her":
            target = prev.subject
            if not target:
                return word
            replaced.append(f"'{word}' -> '{target}'")
            return target
        return word

    pattern = r"\b(?:" + "|".join(sorted({*_SUBJECT_PRONOUNS, *_POSSESSIVES, *_PLACE_ADVERBS}, key=len,
                                            reverse=True)) + r")\b"
    out = re.sub(pattern, swap, text, flags=re.IGNORECASE)
    out = re.sub(r"\bin in\b", "in", out)
    return out, replaced


def _ends_clause(text: str, end: int) -> bool:
    """Whether the word ending at ``end`` closes its clause ("who married her?"): then "her" is
    an object, not a possessive ("her occupation")."""
    rest = text[end:].lstrip()
    nxt = _WORD.match(rest)
    return not rest or rest[0] in "?.!,;" or (nxt is not None and nxt.group(0).lower() in _CLAUSE_WORDS)


def _names_own_subject(question: str) -> bool:
    from ..web.keywords import extract_keywords

    return any(_is_name(k) for k in extract_keywords(question))


def _is_name(keyword: str) -> bool:
    words = keyword.split()
    if not words or words[0].lower() in _QUESTION_WORDS and len(words) == 1:
        return False
    return any(c.isupper() or c.isdigit() for c in keyword)


def _text(content: Any) -> str:
    """Message content as text (OpenAI-style content parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return " ".join(part.get("text", "") if isinstance(part, Mapping) else str(part) for part in content)
    return str(content)
