"""What the decoder needs to know about a tokenizer's vocabulary, computed once per model.

The trigger ``Fact:`` is detected on text, not on hard-coded token ids, so it works for any
tokenizer however it splits the word. Each token's decoded string drives a tiny line state
(what the current line holds, while it is still a prefix of ``fact:``). Tokens that would run
past the trigger inside a single token (``": <"``, ``"Fact: The"``) are masked at the start of a
line, so the trigger always ends on a token boundary and the fact's own tokens follow it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TRIGGER = "fact:"
# Line states: the lower-cased line (leading blanks dropped) while it is a proper prefix of the
# trigger; OTHER once it cannot become the trigger any more.
LINE_STATES = tuple(TRIGGER[:k] for k in range(len(TRIGGER)))
OTHER = None


def advance_line(line: str | None, piece: str) -> tuple[str | None, bool]:
    """Feed ``piece`` to the line state. Returns the new state and whether the trigger was
    completed exactly at the end of ``piece``. A trigger completed earlier inside ``piece`` does
    not count (such tokens are masked; see :func:`overrunning_tokens`)."""
    fired = False
    for ch in piece:
        fired = False
        if ch == "\n":
            line = ""
        elif line is OTHER or (line == "" and ch in " \t"):
            continue
        else:
            cand = line + ch.lower()
            if cand == TRIGGER:
                fired, line = True, OTHER
            elif TRIGGER.startswith(cand):
                line = cand
            else:
                line = OTHER
    return line, fired


def _overruns(line: str | None, piece: str) -> bool:
    """True when the trigger completes inside ``piece`` with more of ``piece`` after it."""
    for i, ch in enumerate(piece):
        line, fired = advance_line(line, ch)
        if fired and i < len(piece) - 1:
            return True
    return False


@dataclass(frozen=True)
class TokenVocab:
    """Per-token strings and the masks derived from them, for one tokenizer."""

    pieces: tuple[str, ...]
    end_tokens: np.ndarray  # tokens that may end a fact: pure newlines
    overrun: dict[str | None, np.ndarray]  # line state -> token ids to mask in free text
    eos_ids: frozenset[int]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocab_size: int | None = None) -> TokenVocab:
        n = max(vocab_size or 0, len(tokenizer))
        ids = list(range(len(tokenizer)))
        pieces = list(tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=False,
                                             clean_up_tokenization_spaces=False))
        pieces += [""] * (n - len(pieces))
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for i in special:
            if i < n:
                pieces[i] = ""  # special tokens write no text into the line
        eos = tokenizer.eos_token_id
        eos_ids = frozenset([eos] if isinstance(eos, int) else list(eos or []))
        newline = [i for i, p in enumerate(pieces) if p and set(p) == {"\n"}]
        # Only a newline ends a fact line: ending the whole answer right after a fact would skip
        # the Answer: line (beam search likes such short finished hypotheses).
        end_tokens = np.asarray(sorted(newline), dtype=np.int64)
        end_tokens = end_tokens[end_tokens < (vocab_size or n)]
        # Ids past the model's output layer can never be scored; leave them out of the masks.
        limit = vocab_size or n
        with_colon = [i for i, p in enumerate(pieces[:limit]) if ":" in p and len(p) > 1]
        overrun = {
            state: np.asarray([i for i in with_colon if _overruns(state, pieces[i])], dtype=np.int64)
            for state in (*LINE_STATES, OTHER)
        }
        return cls(tuple(pieces), end_tokens, overrun, eos_ids)
