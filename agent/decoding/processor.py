"""ReFactX constrained decoding as a transformers ``LogitsProcessor``."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from .spans import CompletedFact
from .tracker import FactTracker, TraceState


class FactConstrainedLogitsProcessor(LogitsProcessor):
    r"""After ``Fact:`` at the start of a line, every token that does not continue a fact of the
    index (not yet generated in this sequence) gets ``-inf``; the choice among the allowed ones
    stays the model's. At a fact's end only a newline or end-of-sequence may follow (or a longer
    fact's next token), then free generation resumes. In free text, tokens that would write
    ``Fact:`` and more inside one token are masked, so the trigger always ends on a token boundary.

    Works with greedy search, sampling, beam search and batches through the public
    ``logits_processor`` argument. State lives in this object, keyed by each row's generated
    tokens, so beams that are reordered or dropped need no bookkeeping; use one instance per
    ``generate`` call (two calls in parallel threads each have their own).

    Args:
        tracker: the index bound to the tokenizer's vocabulary.
        prompt_texts: the decoded prompt of each batch item (its last line decides whether the
            first generated token starts a line).
        num_beams: beams per batch item (``num_return_sequences`` for sampling).
        on_fact: called with a :class:`~agent.decoding.spans.CompletedFact` once per distinct
            fact (by id) that a batch item (any of its beams) completes in this ``generate`` call, in the
            generating thread, after the step's states are known and before any row of it is
            masked: facts it adds to a growing index
            (:class:`~agent.index.union.GrowingFactIndex`) are allowed from the next fact on.
        stop_items: batch items to end now (a set ``on_fact`` may add to): their rows may only
            write ``eos_token_id``, from the step that reported the fact on.

    Example (not run: needs a model)::

        proc = FactConstrainedLogitsProcessor(tracker, [prompt_text], num_beams=3)
        out = model.generate(**inputs, num_beams=3, logits_processor=LogitsProcessorList([proc]))
    """

    def __init__(self, tracker: FactTracker, prompt_texts: Sequence[str], num_beams: int = 1,
                 on_fact: Callable[[CompletedFact], None] | None = None, stop_items: set[int] | None = None,
                 eos_token_id: int | None = None) -> None:
        if stop_items is not None and eos_token_id is None:
            raise ValueError("stop_items needs the end-of-sequence token id")
        self.tracker = tracker
        self.stop_items, self.eos_token_id = stop_items, eos_token_id
        self.num_beams = num_beams
        self.on_fact = on_fact
        self._initial = [tracker.start(t) for t in prompt_texts]
        self._prompt_len: int | None = None
        self._states: dict[tuple, TraceState] = {}
        self._reported: set[tuple[int, int]] = set()
        self._rows: list[list[int]] | None = None

    def _state(self, item: int, generated: list[int]) -> TraceState:
        key = (item, *generated)
        state = self._states.get(key)
        if state is None:
            if generated:
                prev = self._states.get(key[:-1])
                if prev is None:  # not seen last step (e.g. first call after a restart): replay
                    prev = self._initial[item]
                    for pos, tok in enumerate(generated[:-1]):
                        prev = self.tracker.advance(prev, tok, pos)
                state = self.tracker.advance(prev, generated[-1], len(generated) - 1)
            else:
                state = self._initial[item]
        return state

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._prompt_len is None or input_ids.shape[1] <= self._prompt_len:
            self._prompt_len = input_ids.shape[1]
            self._states = {}
            self._reported = set()
            self._rows = None
        generated = self._generated(input_ids)
        rows_per_item = max(1, input_ids.shape[0] // max(1, len(self._initial)))
        states: dict[tuple, TraceState] = {}
        rows: list[TraceState] = []
        for row, seq in enumerate(generated):
            item = min(row // rows_per_item, len(self._initial) - 1)
            state = self._state(item, seq)
            key = (item, *seq)
            states[key] = state
            rows.append(state)
            if self.on_fact is not None and state.spans:
                self._report(item, state)
        for row, state in enumerate(rows):
            if self.stop_items and min(row // rows_per_item, len(self._initial) - 1) in self.stop_items:
                eos = scores[row, self.eos_token_id].clone()
                scores[row] = float("-inf")
                scores[row, self.eos_token_id] = eos if torch.isfinite(eos) else 0.0
            else:
                mask_row(scores, row, self.tracker, state)
        self._states = states
        return scores

    def _generated(self, input_ids: torch.LongTensor) -> list[list[int]]:
        """Each row's generated tokens. With one beam a row stays a row from step to step, so only
        the newest token is read from the device (on a GPU, one small copy per step); beams are
        reordered between steps, so their rows are read whole."""
        assert self._prompt_len is not None  # set by __call__ first
        n = input_ids.shape[1] - self._prompt_len
        rows = self._rows
        if (self.num_beams == 1 and rows is not None and len(rows) == input_ids.shape[0]
                and all(len(row) == n - 1 for row in rows)):
            for row, token in zip(rows, input_ids[:, -1].tolist()):
                row.append(token)
        else:
            rows = input_ids[:, self._prompt_len :].tolist()
        self._rows = rows
        return rows

    def _report(self, item: int, state: TraceState) -> None:
        """Hand each fact of ``state`` not reported yet in this call to ``on_fact``."""
        assert self.on_fact is not None  # __call__ reports only when there is one
        for fact_id, start, end in state.spans:
            if (item, fact_id) not in self._reported:
                self._reported.add((item, fact_id))
                fact = self.tracker.index.facts[fact_id]
                self.on_fact(CompletedFact(int(fact_id), fact.text, fact.source, item, start, end))


def mask_row(scores: torch.Tensor, row: int, tracker: FactTracker, state: TraceState) -> None:
    """The rule on one row of ``scores``, in place: inside a fact line every token that does not
    continue (or end) a remaining fact gets ``-inf``; in free text, the tokens that would run
    past ``Fact:`` inside one token. (Shared by this processor and vLLM's, :mod:`.vllm_processor`.)"""
    if state.active:
        allowed = _as_index(tracker.allowed(state), scores.device)
        keep = scores[row, allowed]
        scores[row] = float("-inf")
        scores[row, allowed] = keep
    else:
        banned = tracker.forbidden_free(state)
        if len(banned):
            scores[row, _as_index(banned, scores.device)] = float("-inf")


def _as_index(tokens: np.ndarray, device: torch.device) -> torch.Tensor:
    """Token ids as a long tensor on ``device``. Copies: index arrays may be read-only views of a
    loaded file, which ``torch.from_numpy`` would share (and warn about)."""
    return torch.tensor(tokens, dtype=torch.long, device=device)
