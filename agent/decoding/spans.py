"""Constrained facts as character spans of the generated text."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..index.base import FactTree


@dataclass(frozen=True)
class FactSpan:
    """``text[start:end]`` of the output is fact ``id`` of the index, token for token."""

    start: int
    end: int
    id: int
    text: str
    source: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CompletedFact:
    """A fact the model has just finished writing, while it is still generating (what an
    ``on_fact`` callback gets): fact ``id`` of the index, its ``text`` and ``source``, the batch
    ``item`` whose row wrote it, and its token positions ``[start, end)`` in that row's generated
    tokens. Character offsets come with the final :class:`FactSpan`."""

    id: int
    text: str
    source: str
    item: int
    start: int
    end: int


def decode_tokens(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text of ``ids`` exactly as the answer shows it (special tokens dropped, no clean-up)."""
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def locate_spans(tokenizer: Any, index: FactTree, tokens: Sequence[int], spans: Sequence[tuple[int, int, int]]) -> tuple[str, list[FactSpan]]:
    """The decoded text of ``tokens`` and each ``(fact_id, start_token, end_token)`` as a
    :class:`FactSpan` with character offsets into that text (leading space of the fact excluded)."""
    text = decode_tokens(tokenizer, tokens)
    out: list[FactSpan] = []
    for fact_id, start_tok, end_tok in spans:
        fact = index.facts[fact_id]
        start = len(decode_tokens(tokenizer, tokens[:start_tok]))
        end = len(decode_tokens(tokenizer, tokens[:end_tok]))
        segment = text[start:end]
        start += len(segment) - len(segment.lstrip())
        end -= len(segment) - len(segment.rstrip())
        if text[start:end] != fact.text:
            # Decoders that rewrite text (e.g. byte fallback across the boundary) shift offsets;
            # the fact's own text is still there, nearest to the token-derived position.
            found = text.find(fact.text, max(0, start - 8))
            if found < 0:
                raise AssertionError(f"constrained fact {fact.text!r} not found in the output text")
            start, end = found, found + len(fact.text)
        out.append(FactSpan(start, end, int(fact_id), fact.text, fact.source))
    return text, out
