"""What a fact tree holds about a name, read from the tree itself.

A whole-KB tree (a disk file, a PostgreSQL table) does not list its facts; its facts are sorted by
their tokens, so those that open with a name sit under one branch: the triples whose subject it is
(``<Canada> <capital> <Ottawa> .``) under the tokens of ``<Canada>``, the statements that begin
with it ("Buck Owens was born in Sherman, Texas.") under those of ``Buck Owens``. Both functions
walk that branch through the cursor API only, so they work on every backend
(:class:`~agent.index.base.FactTree`), and bound the walk (``max_nodes`` tree steps). A longer name
that shares the first tokens ("<Canada Lee>", "Buck Owensby") is not the name's.

- :func:`subject_relations`: the relations of a subject's triples (what the agent's answer check
  reads for a bridge);
- :func:`facts_about`: the facts themselves (what a per-question tree grows by inside vLLM,
  :mod:`agent.decoding.vllm_processor`).

Example (not run: needs a fact index and a tokenizer)::

    subject_relations(tree, tokenizer, "Canada")      # ['capital', 'official language', ...]
    [f.text for f in facts_about(tree, tokenizer, "Buck Owens")]
"""
from __future__ import annotations

from typing import Any

from ..knowledge.facts import Fact
from .base import FactTree, walk
from .tokens import fact_token_ids


def subject_relations(index: FactTree, tokenizer: Any, subject: str, *, max_nodes: int = 400) -> list[str]:
    """The relations of the triples ``<subject> <relation> <...>`` in a fact tree: the subject's
    tokens are followed, then the branches below them until each relation's closing ``>`` (at most
    ``max_nodes`` tree steps). [] when no triple has that subject."""
    ids = fact_token_ids(tokenizer, [f"<{subject}"])[0]
    cursor = walk(index, ids)
    if cursor is None:
        return []
    found: dict[str, None] = {}
    stack: list[tuple[Any, list[int]]] = [(cursor, [])]
    steps = 0
    while stack and steps < max_nodes:
        at, path = stack.pop()
        text = tokenizer.decode(path)
        if path and not text.startswith(">"):
            continue  # a longer subject: "<Canada Dry>" is not "<Canada>"
        _, sep, rest = text.partition("<")
        if sep and ">" in rest:
            found.setdefault(rest.split(">", 1)[0].strip(), None)
            continue
        for token in index.next_tokens(at)[::-1]:
            steps += 1
            stack.append((index.step(at, int(token)), [*path, int(token)]))
    return [r for r in found if r]


def facts_about(index: FactTree, tokenizer: Any, name: str, *, limit: int = 64, max_nodes: int = 4000) -> list[Fact]:
    """The facts of a tree that open with ``name``: its triples as subject, then the statements
    that begin with it (followed by a character that is not a letter or digit), in the tree's
    order, at most ``limit`` of them and ``max_nodes`` tree steps in all."""
    name = name.strip()
    out: list[Fact] = []
    budget = [max_nodes]
    for opening, closed in ((f"<{name}>", True), (name, False)):
        if name and len(out) < limit:
            out.extend(_opening_with(index, tokenizer, opening, closed, limit - len(out), budget))
    return out


def _opening_with(index: FactTree, tokenizer: Any, opening: str, closed: bool, limit: int,
                  budget: list[int]) -> list[Fact]:
    """The facts whose text starts with ``opening`` (``closed``: the opening ends a token of its
    own, as ``>`` does; else a letter or digit may not follow it). The walk follows the opening's
    tokens but its last (that one may merge with what follows, "Owens" in "Owens's"), then reads
    the text below: a branch is left as soon as its text parts from the opening."""
    ids = fact_token_ids(tokenizer, [opening])[0]
    head = ids[:-1]
    cursor = walk(index, head)
    if cursor is None:
        return []
    found: list[Fact] = []
    stack: list[tuple[Any, list[int], bool]] = [(cursor, [], False)]
    while stack and budget[0] > 0 and len(found) < limit:
        at, path, inside = stack.pop()
        if not inside:
            text = tokenizer.decode(head + path, skip_special_tokens=True, clean_up_tokenization_spaces=False).lstrip()
            if len(text) > len(opening):
                if not text.startswith(opening) or (not closed and text[len(opening)].isalnum()):
                    continue
                inside = True  # everything below opens with the name: no more reading
            elif not opening.startswith(text):
                continue
        if index.can_end(at):
            if inside:
                found.append(index.facts[index.finish(at)[0]])
        for token in index.next_tokens(at)[::-1]:
            budget[0] -= 1
            stack.append((index.step(at, int(token)), [*path, int(token)], inside))
    return found
