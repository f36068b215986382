"""A conversation as the agent takes it (the question, the earlier turns, bounded), and a follow-up
made standalone before retrieval (the history-aware retriever pattern).

## Taking a conversation

Every entry point (the UI, the OpenAI-compatible server, the LangChain runnable, the MCP ``ask``
tool, the CLI) turns what it was given into ``(question, history)`` here
(:func:`split_conversation`) and passes both on whole: the agent checks the question
(:func:`check_question`) and bounds the history (:func:`trim_history`) itself, by its own
options (``AgentOptions.max_history_turns``/``max_history_chars``, by default the last
``MAX_TURNS`` messages within ``MAX_CHARS`` characters), so one guard decides what reaches it
whatever the door. A follow-up needs the turn or two before it; a long history would only slow
the rewriting and drown the entities it looks for.

A message is ``{"role": ..., "content": ...}`` (OpenAI's roles), a LangChain message, or a
``(role, content)`` pair. ``user``/``human`` and ``assistant``/``ai`` messages are turns;
system and tool messages are not part of what was said, and are dropped.

Example::

    >>> question, history = split_conversation([
    ...     {"role": "user", "content": "Where did Buck Owens die?"},
    ...     {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\\nAnswer: Bakersfield"},
    ...     {"role": "user", "content": "What instrument did he play?"}])
    >>> question
    'What instrument did he play?'
    >>> history     # the two earlier turns, oldest first
    [{'role': 'user', 'content': 'Where did Buck Owens die?'},
     {'role': 'assistant', 'content': 'Fact: <Buck Owens> <place of death> <Bakersfield> .\\nAnswer: Bakersfield'}]

## Making a follow-up standalone

Retrieval and the fact tree are built from one question; "And what is her occupation?" names
nobody, so searched as it is it finds facts about whoever the words happen to match. Before
anything is retrieved, the question is rewritten into a standalone one:

- with a chat model able to do it (an OpenAI-compatible endpoint), by the prompt
  ``prompts/conversation/rewrite.txt``; a reply that is not one plausible question falls back to
  the rules below;
- otherwise by rules (:func:`rewrite_by_rules`), against the previous turn: its standalone
  question's names, its answer and the facts it stated (the ``Fact: <s> <p> <o> .`` lines of the
  assistant's reply). Person pronouns (he, she, his, her, they, ...) and ``it``/``its`` become
  the previous turn's subject (the first name in its question, else the subject of its first
  stated triple); ``there`` becomes its answer; an elliptical fragment ("and in which year?",
  "what about Paris?") is completed from the previous question; a question that names nothing
  and refers to nothing is asked of the previous subject (its name added in brackets). A question
  that names its own subject and refers to nothing earlier is a topic change and stays as it is.

Example::

    >>> history = [{"role": "user", "content": "Where did Buck Owens die?"},
    ...            {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\\nAnswer: Bakersfield"}]
    >>> rewrite_by_rules("What instrument did he play?", history).standalone
    'What instrument did Buck Owens play?'
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError
from ..knowledge.keywords import extract_keywords, noun_form
from ..prompts import read_prompt
from ..web.retrieval import MAX_QUESTION_CHARS
from .grounding import DONT_KNOW

if TYPE_CHECKING:
    from ..llm.client import ChatClient

MAX_TURNS = 6
"""Earlier messages (user or assistant, each one a turn) the agent gets at most."""
MAX_CHARS = 4000
"""Characters of earlier turns the agent gets at most (the newest turns are kept)."""

_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}


def as_turn(message: Any) -> dict[str, str] | None:
    """``message`` as ``{"role": "user" | "assistant", "content": str}``, or None for a message
    that is not a turn (system, tool). Raises :class:`FactweaveError` for what is no message."""
    if isinstance(message, Mapping):
        role, content = message.get("role", message.get("type")), message.get("content")
    elif isinstance(message, (tuple, list)) and len(message) == 2:
        role, content = message
    elif hasattr(message, "type") and hasattr(message, "content"):  # a LangChain message
        role, content = message.type, getattr(message, "text", message.content)
    else:
        raise FactweaveError(f"a conversation message is {{\"role\", \"content\"}}, not {type(message).__name__}")
    if not isinstance(role, str):
        raise FactweaveError(f"a conversation message needs a role, got {role!r}")
    if role not in _ROLES:
        return None
    if isinstance(content, list):  # OpenAI's / LangChain's list of content parts: the text ones
        content = "".join(p if isinstance(p, str) else str(p.get("text") or "") for p in content
                          if isinstance(p, str) or isinstance(p, Mapping) and p.get("type", "text") == "text")
    if not isinstance(content, str):
        content = "" if content is None else str(content)
    return {"role": _ROLES[role], "content": content}


def check_question(question: Any) -> str:
    """``question`` with its whitespace collapsed; :class:`FactweaveError` (one line) when it is
    not text, is empty or is longer than :data:`MAX_QUESTION_CHARS`."""
    if not isinstance(question, str):
        raise FactweaveError(f"the question is {type(question).__name__}, not text")
    question = " ".join(question.split())
    if not question:
        raise FactweaveError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise FactweaveError(f"the question is too long ({len(question):,} characters; "
                             f"{MAX_QUESTION_CHARS:,} at most)")
    return question


def trim_history(history: Iterable[Any] | None, max_turns: int = MAX_TURNS,
                 max_chars: int = MAX_CHARS) -> list[dict[str, str]]:
    """The newest turns of ``history`` (oldest first, as ``{"role", "content"}``): at most
    ``max_turns`` of them, within ``max_chars`` characters of content. Empty turns and non-turns
    (system, tool) are dropped. When even the newest turn is longer than ``max_chars``, its last
    ``max_chars`` characters are kept (an agent's reply ends with its answer).

    >>> trim_history([{"role": "user", "content": "a" * 10}, {"role": "assistant", "content": "b" * 10}],
    ...              max_chars=15)
    [{'role': 'assistant', 'content': 'bbbbbbbbbb'}]
    """
    if max_turns < 0 or max_chars < 0:
        raise ValueError("max_turns and max_chars must be >= 0")
    turns = as_turns(history)
    kept: list[dict[str, str]] = []
    used = 0
    for turn in reversed(turns[-max_turns:] if max_turns else []):
        size = len(turn["content"])
        if used + size > max_chars:
            if not kept and max_chars:
                kept.append({"role": turn["role"], "content": turn["content"][-max_chars:]})
            break
        kept.append(turn)
        used += size
    return kept[::-1]


def assistant_turn(reply: Mapping[str, Any]) -> str:
    """What the agent said in a finished reply (``AgentAnswer.as_dict()`` or the stream's answer
    event), as an assistant turn for the next question's history: the generated text, its
    ``Fact:`` lines and all; when the answer was withheld, a last line ``Answer: I don't know.``
    says so (as the server's reply does)."""
    text = (reply.get("text") or "").strip()
    answer = reply.get("answer") or DONT_KNOW
    if not text:
        return f"Answer: {answer}"
    trace = reply.get("trace") or {}
    if trace.get("withheld") or answer == DONT_KNOW and f"Answer: {DONT_KNOW}" not in text:
        text += f"\nAnswer: {DONT_KNOW}"
    return text


def as_turns(history: Iterable[Any] | None) -> list[dict[str, str]]:
    """Every turn of ``history`` as ``{"role", "content"}``, oldest first, none left out but
    empty ones and non-turns (system, tool): what an interface passes on for the agent to bound
    (:func:`trim_history`). :class:`FactweaveError` for what is no message."""
    return [t for t in (as_turn(m) for m in history or []) if t is not None and t["content"].strip()]


def split_conversation(messages: Sequence[Any]) -> tuple[str, list[dict[str, str]]]:
    """``(question, history)`` from a conversation: the question is the last user message's
    text; the history, every turn before it (:func:`as_turns`; the agent bounds it by its own
    options). Raises :class:`FactweaveError` when no user message has text."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise FactweaveError(f"a conversation is a list of messages, not {type(messages).__name__}")
    turns = [as_turn(m) for m in messages]
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if turn is not None and turn["role"] == "user" and turn["content"].strip():
            return turn["content"].strip(), as_turns([t for t in turns[:i] if t])
    raise FactweaveError("the conversation has no user message with text to answer")


_TRIPLE = re.compile(r"<([^<>]+)>\s*<([^<>]+)>\s*<([^<>]+)>\s*\.")
_FACT_LINE = re.compile(r"^[ \t]*fact:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
_ANSWER_LINE = re.compile(r"^[ \t]*answer:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# Pronouns that stand for the previous turn's subject, by the form they take in the sentence.
_SUBJECT_PRONOUNS = {"he", "she", "they", "it", "him", "them"}
_POSSESSIVES = {"his", "her", "their", "its", "hers", "theirs"}
_PLACE_ADVERBS = {"there"}
_PRONOUN = re.compile(r"\b(?:" + "|".join(sorted({*_SUBJECT_PRONOUNS, *_POSSESSIVES, *_PLACE_ADVERBS}, key=len,
                                                  reverse=True)) + r")\b", re.IGNORECASE)
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


@dataclass(frozen=True)
class PreviousTurn:
    """What a follow-up may refer to: the previous question, its subject, answer and facts."""

    question: str
    subject: str
    answer: str
    facts: tuple[tuple[str, str, str], ...]


def previous_turn(history: Sequence[Mapping[str, Any]]) -> PreviousTurn | None:
    """The last user question of ``history`` with the assistant reply after it (if any)."""
    question, reply = "", ""
    for turn in reversed(history):
        if turn.get("role") == "assistant" and not reply and not question:
            reply = _text(turn.get("content"))
        elif turn.get("role") == "user":
            question = _text(turn.get("content"))
            break
    if not question and not reply:
        return None
    facts = tuple((m.group(1).strip(), m.group(2).strip(), m.group(3).strip()) for line in _FACT_LINE.findall(reply)
                  for m in [_TRIPLE.search(line)] if m)
    answers = [a.strip() for a in _ANSWER_LINE.findall(reply)]
    answer = answers[-1] if answers else ""
    if answer.lower().startswith("i don't know") or answer.lower().startswith("i do not know"):
        answer = ""
    names = [k for k in extract_keywords(question) if _is_name(k)]
    # The question's own name first: a withheld reply's facts may be about someone else.
    subject = names[0] if names else (facts[0][0] if facts else "")
    return PreviousTurn(question, subject, answer, facts)


def rewrite_by_rules(question: str, history: Sequence[Mapping[str, Any]]) -> Rewrite:
    """``question`` made standalone by rules (see the module docstring); as asked when that
    would be longer than :data:`MAX_QUESTION_CHARS` (every "he" of "he he he ..." made a name
    would make a question no door takes, and each step after reads it whole)."""
    rewrite = _rewrite_by_rules(question, history)
    if len(rewrite.standalone) > MAX_QUESTION_CHARS:
        return Rewrite(rewrite.question, rewrite.question,
                       f"kept as asked: made standalone it would be over {MAX_QUESTION_CHARS:,} characters")
    return rewrite


def _rewrite_by_rules(question: str, history: Sequence[Mapping[str, Any]]) -> Rewrite:
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
    if what_about and prev.subject:
        # "what about the languages they speak?" asks a new thing of the previous subject (the
        # pronoun refers to it), not the previous question of a new subject.
        phrase, replaced = _resolve(what_about.group(1), prev)
        if replaced and phrase.split()[0].lower() in ("the", "a", "an"):
            return Rewrite(question, f"What {'are' if _plural(phrase) else 'is'} {phrase}?",
                           f"'what about {what_about.group(1)}' asked of '{prev.subject}' (the previous subject)")
    if what_about and prev.question:
        target = _resolve(what_about.group(1), prev)[0]
        base = _without_subject(prev.question, prev)
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
    if prev.subject:
        # It names nothing, so asked alone it is about nobody ("Where did the people who died?"
        # found a composer in a sentence about Strauss): it is asked of the previous subject.
        return Rewrite(question, f"{question.rstrip()} ({prev.subject})",
                       f"names nothing: asked of '{prev.subject}' (the previous subject)")
    return Rewrite(question, question, "no reference to an earlier turn")


def _without_subject(question: str, prev: PreviousTurn) -> str | None:
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
    if not standalone or len(standalone) > min(3 * len(question) + 200, MAX_QUESTION_CHARS) \
            or standalone.lower().startswith("answer"):
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

    out = _PRONOUN.sub(swap, text)
    out = re.sub(r"\bin in\b", "in", out)
    return out, replaced


def _plural(phrase: str) -> bool:
    """Whether a noun phrase opening with an article names several ("the languages ..."): its
    next word has a singular form (:func:`~agent.knowledge.keywords.noun_form`) other than itself."""
    words = phrase.lower().split()
    return len(words) > 1 and noun_form(words[1]) != words[1]


def _ends_clause(text: str, end: int) -> bool:
    """Whether the word ending at ``end`` closes its clause ("who married her?"): then "her" is
    an object, not a possessive ("her occupation")."""
    rest = text[end:].lstrip()
    nxt = _WORD.match(rest)
    return not rest or rest[0] in "?.!,;" or (nxt is not None and nxt.group(0).lower() in _CLAUSE_WORDS)


def _names_own_subject(question: str) -> bool:
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
