"""Sub-queries for the fact-finding loop, written by a chat model."""
from __future__ import annotations

import re
from collections.abc import Sequence
from string import Template
from typing import TYPE_CHECKING

from ..prompts import read_prompt
from .retrieval import FactHit

if TYPE_CHECKING:
    from ..llm.client import ChatClient

_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)]|query\s*\d*\s*:)\s*", re.IGNORECASE)


def parse_queries(reply: str, limit: int, question: str = "") -> list[str]:
    """Queries of a reply: one per line, list marks and quotes removed, no repeats, no echo of
    the question itself."""
    queries: list[str] = []
    seen = {question.strip().casefold()}
    for line in reply.splitlines():
        query = _LIST_MARK.sub("", line).strip().strip("\"'").strip()
        if len(query) < 3 or query.endswith(":") or query.casefold() in seen:
            continue
        seen.add(query.casefold())
        queries.append(query)
        if len(queries) >= limit:
            break
    return queries


def write_subqueries(client: ChatClient, question: str, hits: Sequence[FactHit], limit: int) -> list[str]:
    """Ask ``client`` for at most ``limit`` queries for what ``hits`` do not say about ``question``."""
    facts = "\n".join(f"- {hit.text}" for hit in hits[:8]) or "(none)"
    prompt = Template(read_prompt("web/subqueries.txt")).safe_substitute(
        question=question, facts=facts, limit=limit)
    reply = client.complete([{"role": "user", "content": prompt}], max_tokens=24 * limit + 16)
    return parse_queries(reply, limit, question)
