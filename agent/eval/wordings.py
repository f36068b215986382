"""Questions in wordings nobody on the project wrote: a model's rewordings, kept as generated.

A set's own wording is the one its questions were built from, and every rule the agent has was
checked against it; a model's rewording of the same questions asks the same thing in words the
project never saw. :func:`reword_questions` asks a chat model (any
:class:`~agent.llm.client.ChatClient`: the local model of a preset, or an OpenAI-compatible
endpoint) for each question in other words, with the prompt in ``prompts/eval/reword/``
(``system.txt``; ``examples.txt``: worked cases written for this project, given as earlier chat
turns; ``user.txt``: placeholder ``$question``; ``follow-up.txt``: a question that follows earlier
turns, placeholders ``$conversation`` and ``$question``). A follow-up is reworded with the
conversation it follows, as a person rewording it would read it: without it, "What is their record
label?" came back as "What is the record label of their band?", a question about someone else.
The reply's first line is kept as it came: it is
not edited, filtered or regenerated, so a rewording that lost a name or changed the question
counts against every method alike (a reply that repeats the question word for word is kept and
counted: ``same``).

The rewordings are a JSON Lines file, one ``{"id", "text", "original", "model"}`` per question
(:func:`write_wordings`, atomically); ``factweave eval <set> --wording FILE`` asks each question
in its file's wording (:func:`reworded`), with its answers and history unchanged, and its half
unchanged (:mod:`agent.eval.halves`: the half follows the id).

Example (not run: needs the data sets and a chat model)::

    rows = reword_questions(load_questions("2wiki", limit=24, half="dev"), chat)
    write_wordings(Path("benchmarks/data/wordings/2wiki.jsonl"), rows)
    questions = reworded(load_questions("2wiki", limit=24, half="dev"), read_wordings(path))
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from ..errors import FactweaveError, InputError
from ..files import write_text
from ..prompts import read_prompt
from .questions import EvalQuestion

if TYPE_CHECKING:
    from ..llm.client import ChatClient

PROMPTS = "eval/reword"
MAX_TOKENS = 96


def _conversation(history: Sequence[dict[str, str]]) -> str:
    """Earlier turns as the rewording prompt shows them: each question asked, and the last line of
    each reply (its answer, ``Answer:`` dropped)."""
    lines = []
    for turn in history:
        content = turn.get("content", "").strip()
        if turn.get("role") == "user":
            lines.append(f"Asked before: {content}")
        elif content:
            last = content.splitlines()[-1].strip()
            lines.append(f"Answered: {last.removeprefix('Answer:').strip()}")
    return "\n".join(lines)


def _templates() -> tuple[Template, Template]:
    """The user turn's two templates: a question asked alone, and one after earlier turns."""
    return (Template(read_prompt(f"{PROMPTS}/user.txt").strip()),
            Template(read_prompt(f"{PROMPTS}/follow-up.txt").strip()))


def _ask(templates: tuple[Template, Template], question: str, history: Sequence[dict[str, str]]) -> str:
    """The user turn asking for ``question``'s rewording (after ``history``, when it has one)."""
    alone, follow_up = templates
    if not history:
        return alone.substitute(question=question)
    return follow_up.substitute(conversation=_conversation(history), question=question)


def _examples(templates: tuple[Template, Template]) -> list[dict[str, str]]:
    """The worked cases of ``examples.txt`` as chat turns (user: the question, after the turns
    before it where the case has them; assistant: the rewording)."""
    turns: list[dict[str, str]] = []
    for block in read_prompt(f"{PROMPTS}/examples.txt").strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.strip().splitlines())
        history = ([{"role": "user", "content": fields["Asked before"]},
                    {"role": "assistant", "content": fields["Answered"]}] if "Asked before" in fields else [])
        turns += [{"role": "user", "content": _ask(templates, fields["Question"], history)},
                  {"role": "assistant", "content": fields["Rewritten"]}]
    return turns


def reword_questions(questions: Sequence[EvalQuestion], chat: ChatClient, *,
                     on_progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Each question's rewording by ``chat`` (greedy): rows for :func:`write_wordings`."""
    system = read_prompt(f"{PROMPTS}/system.txt").strip()
    templates = _templates()
    examples = _examples(templates)
    rows = []
    for q in questions:
        reply = chat.complete([{"role": "system", "content": system}, *examples,
                               {"role": "user", "content": _ask(templates, q.text, q.history)}],
                              max_tokens=MAX_TOKENS, temperature=0.0, stop=["\n"])
        text = next((line.strip() for line in reply.splitlines() if line.strip()), "")
        rows.append({"id": q.id, "text": text, "original": q.text, "model": chat.name,
                     "same": text.casefold() == q.text.strip().casefold()})
        if on_progress is not None:
            on_progress(1)
    return rows


def write_wordings(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``rows`` as JSON Lines at ``path`` (folders made; written whole or not at all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_wordings(path: Path) -> dict[str, dict[str, Any]]:
    """The rewordings in ``path`` by question id; a malformed line raises naming file and line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise FactweaveError(f"cannot read the wordings file {path}: {error.strerror or error}") from None
    found: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(path, number, f"not JSON ({error.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("text"), str):
            raise InputError(path, number, 'expected {"id": "...", "text": "...", ...}')
        found[row["id"]] = row
    return found


def reworded(questions: Sequence[EvalQuestion], wordings: dict[str, dict[str, Any]],
             source: str | Path = "the wordings file") -> list[EvalQuestion]:
    """``questions`` asked in their rewordings (answers, history and id kept; ``meta["wording"]``:
    the model that wrote it, ``meta["original"]``: the set's wording). Every question must have one:
    a missing one raises, naming how many and how to write them."""
    missing = [q.id for q in questions if q.id not in wordings]
    if missing:
        raise FactweaveError(f"{len(missing)} of the {len(questions)} questions have no wording in {source} "
                             f"(first: {missing[0]}); write them with `factweave eval reword` and the same "
                             "--limit, --half and --seed")
    return [replace(q, text=wordings[q.id]["text"],
                    meta={**q.meta, "wording": wordings[q.id].get("model") or "unknown", "original": q.text})
            for q in questions]
