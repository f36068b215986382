"""The per-sequence decoding state machine: free text until ``Fact:``, then a walk in the index.

One pure function, :meth:`FactTracker.advance`, moves a sequence's :class:`TraceState` by one
token. The logits processor uses it while generating; span extraction replays it over the final
tokens, so both always agree on where each constrained fact starts and ends.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..index.base import FactTree
from ..index.cursor import FactCursor
from .vocab import OTHER, TokenVocab, advance_line


class TraceState(NamedTuple):
    """``active``: inside a ``Fact:`` line (decoding constrained). ``cursor``: position in the
    index and the facts already generated. ``start``: token position where the current fact
    began. ``spans``: completed facts as ``(fact_id, start_token, end_token)``."""

    line: str | None = ""
    active: bool = False
    cursor: FactCursor = FactCursor()
    start: int = 0
    spans: tuple[tuple[int, int, int], ...] = ()


class FactTracker:
    """Binds an index (any :class:`~agent.index.base.FactTree`) to a tokenizer's vocabulary."""

    def __init__(self, index: FactTree, vocab: TokenVocab) -> None:
        self.index = index
        self.vocab = vocab
        self._end = frozenset(int(t) for t in vocab.end_tokens)

    def start(self, prompt_text: str = "") -> TraceState:
        """The state before the first generated token. A prompt that ends with ``Fact:`` (a reply
        prefix asking for one more fact) starts inside a fact line: the first token is constrained."""
        line, fired = advance_line("", prompt_text.rsplit("\n", 1)[-1])
        if fired:
            return TraceState(line, True, self.index.root(), 0)
        return TraceState(line=line)

    def advance(self, state: TraceState, token: int, pos: int) -> TraceState:
        """The state after ``token`` was generated at token position ``pos``."""
        piece = self.vocab.pieces[token] if token < len(self.vocab.pieces) else ""
        if state.active:
            if token in self._end:
                line = advance_line(OTHER, piece)[0]
                if self.index.can_end(state.cursor):
                    fact_id, cursor = self.index.finish(state.cursor)
                    return TraceState(line, False, cursor, pos, state.spans + ((fact_id, state.start, pos),))
                # Nothing left to say on this line (every fact spent): the attempt is dropped.
                return TraceState(line, False, self.index.root(state.cursor.used), pos, state.spans)
            try:
                return state._replace(cursor=self.index.step(state.cursor, token))
            except KeyError:
                # Only reachable when decoding was not constrained (LLM-only runs, replay of
                # foreign text): the line is free text, not a fact.
                return state._replace(line=OTHER, active=False, cursor=self.index.root(state.cursor.used))
        line, fired = advance_line(state.line, piece)
        if fired:
            return TraceState(line, True, self.index.root(state.cursor.used), pos + 1, state.spans)
        return state._replace(line=line)

    def allowed(self, state: TraceState) -> np.ndarray:
        """Tokens permitted in a fact line: continuations of remaining facts, and the end tokens
        where a fact may end. When nothing remains, only the end tokens (abandon the line)."""
        nxt = self.index.next_tokens(state.cursor)
        if self.index.can_end(state.cursor):
            return np.concatenate([nxt.astype(np.int64), self.vocab.end_tokens])
        if len(nxt) == 0:
            return self.vocab.end_tokens
        return nxt

    def forbidden_free(self, state: TraceState) -> np.ndarray:
        """Tokens masked in free text: those that would run past ``Fact:`` inside one token."""
        return self.vocab.overrun[state.line]

    def replay(self, prompt_text: str, tokens: Sequence[int]) -> TraceState:
        """Run the machine over generated ``tokens`` (positions 0..n-1)."""
        state = self.start(prompt_text)
        for pos, tok in enumerate(tokens):
            state = self.advance(state, int(tok), pos)
        return state
