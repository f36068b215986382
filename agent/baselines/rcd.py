"""Retrieval-constrained decoding (RCD): the answer is one or more of a question's candidate
answers, written token for token from a per-question trie and separated by ``;``.

Per question, the candidates (e.g. every object of the question's relation in the knowledge
base) are tokenized as they follow ``Answer:`` and stored in a small prefix tree (a
:class:`~agent.index.FactIndex` whose "facts" are the surface forms). After the prompt, the
model may only continue a candidate not given yet; at the end of a candidate it may write the
separator and start another, or end the answer (a newline or end of sequence). Leaf counts make
a candidate impossible to give twice. The output parses into a set of candidates.

Works with greedy search, beams and batches through the public ``logits_processor`` argument;
state lives in the processor instance, keyed by each row's generated tokens.

Example (not run: needs a model)::

    trie = AnswerTrie.build(["Paris", "Lyon", "New York"], tokenizer)
    proc = AnswerSetLogitsProcessor([trie], tokenizer, prompt_len=inputs.input_ids.shape[1])
    out = model.generate(**inputs, logits_processor=LogitsProcessorList([proc]), max_new_tokens=24)
    parse_answer_set(tokenizer.decode(out[0, prompt_len:], skip_special_tokens=True))
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)

from ..decoding.spans import decode_tokens
from ..index import FactIndex
from ..knowledge.facts import Fact
from ..models import encode_padded
from ..prompts import FewShotPrompt, render_prompt

SEPARATOR = ";"


def surface(text: str) -> str:
    """A candidate as it may be written: whitespace folded, the separator replaced (``;`` -> ``,``)."""
    return " ".join(text.replace(SEPARATOR, ",").split())


@dataclass(frozen=True)
class AnswerTrie:
    """The prefix tree over one question's unique candidate surface forms."""

    index: FactIndex
    candidates: tuple[str, ...]

    @classmethod
    def build(cls, candidates: Iterable[str], tokenizer: Any) -> AnswerTrie:
        unique = list(dict.fromkeys(s for s in (surface(c) for c in candidates) if s))
        if not unique:
            raise ValueError("a question needs at least one candidate answer")
        index = FactIndex.build([Fact.from_statement(c) for c in unique], tokenizer)
        return cls(index, tuple(f.text for f in index.facts))


class _Row(NamedTuple):
    """Where one row stands: inside a candidate (``cursor``), inside the separator (``sep`` > 0
    tokens of it written), or ``done``."""

    cursor: Any
    sep: int = 0
    done: bool = False


class AnswerSetLogitsProcessor(LogitsProcessor):
    """Mask every token that does not continue the answer set (see the module docstring).

    Args:
        tries: one :class:`AnswerTrie` per batch item.
        tokenizer: the model's tokenizer (for the separator, newline and end-of-sequence ids).
        prompt_len: the padded prompt length (generated tokens start there).
        num_beams: rows per batch item.
    """

    def __init__(self, tries: Sequence[AnswerTrie], tokenizer: Any, *, prompt_len: int, num_beams: int = 1) -> None:
        self.tries = list(tries)
        self.prompt_len = prompt_len
        self.num_beams = num_beams
        self.sep_ids = list(tokenizer(SEPARATOR, add_special_tokens=False)["input_ids"])
        newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
        ends = {int(t) for t in ([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])}
        if len(newline) == 1:
            ends.add(int(newline[0]))
        self.end_ids = sorted(ends)
        self.eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else self.end_ids[0]
        self._states: dict[tuple[int, ...], _Row] = {}

    def _advance(self, trie: AnswerTrie, row: _Row, token: int) -> _Row:
        index = trie.index
        if row.done:
            return row
        if row.sep:  # the separator's next token (the only one allowed) was written
            following = row.sep + 1
            return _Row(row.cursor, following if following < len(self.sep_ids) else 0)
        if token in self.end_ids and index.can_end(row.cursor):
            return _Row(row.cursor, done=True)
        if token == self.sep_ids[0] and index.can_end(row.cursor):
            _, cursor = index.finish(row.cursor)
            return _Row(cursor, 1) if len(self.sep_ids) > 1 else _Row(cursor)
        try:
            return _Row(index.step(row.cursor, token))
        except KeyError:  # a token this processor did not allow (e.g. forced by another processor)
            return _Row(row.cursor, done=True)

    def _state(self, item: int, generated: tuple[int, ...]) -> _Row:
        key = (item, *generated)
        state = self._states.get(key)
        if state is None:
            trie = self.tries[item]
            prev = self._states.get(key[:-1]) if generated else None
            if prev is None:
                prev = _Row(trie.index.root())
                for tok in generated[:-1]:
                    prev = self._advance(trie, prev, tok)
            state = self._advance(trie, prev, generated[-1]) if generated else prev
            self._states[key] = state
        return state

    def allowed(self, item: int, generated: Sequence[int]) -> list[int]:
        """Token ids allowed next for batch item ``item`` after ``generated``."""
        row = self._state(item, tuple(int(t) for t in generated))
        index = self.tries[item].index
        if row.done:
            return [self.eos]
        if row.sep:
            return [self.sep_ids[row.sep]]
        tokens = [int(t) for t in index.next_tokens(row.cursor)]
        if row.cursor.node != 0 and index.can_end(row.cursor):
            tokens += self.end_ids
            if index.remaining(0, row.cursor.used + (row.cursor.node,)) > 0:
                tokens.append(self.sep_ids[0])
        return tokens

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        mask = torch.full_like(scores, float("-inf"))
        for row in range(input_ids.shape[0]):
            generated = input_ids[row, self.prompt_len:].tolist()
            allowed = self.allowed(row // self.num_beams, generated)
            mask[row, allowed] = 0.0
        return scores + mask


def parse_answer_set(text: str) -> list[str]:
    """The answers of a generated answer line, in order, without repeats (``"A; B"`` -> ``[A, B]``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return list(dict.fromkeys(a for a in (" ".join(part.split()) for part in first.split(SEPARATOR)) if a))


@dataclass
class AnswerSet:
    """One question's answers: ``answers`` parsed from ``text`` (the generated line after
    ``Answer:``); ``finished`` is False when the token budget ended the line."""

    question: str
    answers: list[str]
    text: str
    finished: bool
    tokens: int
    prompt_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)


class _LineDone(StoppingCriteria):
    """Stop a row once its generated text holds a newline (the answer line is complete)."""

    def __init__(self, tokenizer: Any, prompt_len: int) -> None:
        self.tokenizer, self.prompt_len = tokenizer, prompt_len

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        done = [("\n" in self.tokenizer.decode(row[self.prompt_len:], skip_special_tokens=True))
                for row in input_ids]
        # transformers annotates a criterion's answer as BoolTensor; torch's ops return Tensor
        return cast(torch.BoolTensor, torch.tensor(done, dtype=torch.bool, device=input_ids.device))


class AnswerSetGenerator:
    """Questions in, answer sets out: with a trie per question (RCD), or free (vanilla decoding,
    VD) with the same prompt (``prompts/rcd/``), the reply opened with ``Answer:``.

    Example (not run: needs a model)::

        gen = AnswerSetGenerator(loaded.model, loaded.tokenizer)
        tries = [AnswerTrie.build(candidates, loaded.tokenizer)]
        gen.answer_batch(["Where was Laurie Graff born?"], tries)[0].answers
    """

    def __init__(self, model: Any, tokenizer: Any, *, prompt: FewShotPrompt | None = None, beams: int = 1,
                 max_new_tokens: int = 32) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.prompt = prompt or FewShotPrompt.load("rcd")
        self.beams, self.max_new_tokens = beams, max_new_tokens

    def render(self, question: str) -> str:
        return render_prompt(self.tokenizer, self.prompt, question) + "Answer:"

    def answer_batch(self, questions: Sequence[str], tries: Sequence[AnswerTrie] | None = None, *,
                     beams: int | None = None, max_new_tokens: int | None = None) -> list[AnswerSet]:
        """Answer ``questions``; ``tries`` (one per question) constrain the answers, None leaves
        them free."""
        if tries is not None and len(tries) != len(questions):
            raise ValueError("one answer trie per question is required")
        beams = beams or self.beams
        prompts = [self.render(q) for q in questions]
        enc = encode_padded(self.tokenizer, prompts)
        device = getattr(self.model, "device", torch.device("cpu"))
        inputs = {k: v.to(device) for k, v in enc.items()}
        prompt_len = inputs["input_ids"].shape[1]
        processors = LogitsProcessorList()
        if tries is not None:
            processors.append(AnswerSetLogitsProcessor(tries, self.tokenizer, prompt_len=prompt_len, num_beams=beams))
        started = time.perf_counter()
        with torch.no_grad():
            out = self.model.generate(
                **inputs, do_sample=False, num_beams=beams, max_new_tokens=max_new_tokens or self.max_new_tokens,
                logits_processor=processors, stopping_criteria=StoppingCriteriaList([_LineDone(self.tokenizer,
                                                                                               prompt_len)]),
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.tokenizer.eos_token_id)
        seconds = time.perf_counter() - started
        special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        results = []
        for i, question in enumerate(questions):
            row = [int(t) for t in out[i, prompt_len:]]
            while row and row[-1] in special:
                row.pop()
            text = decode_tokens(self.tokenizer, row)
            finished = "\n" in text or (len(row) < (max_new_tokens or self.max_new_tokens))
            results.append(AnswerSet(question, parse_answer_set(text), text.strip(), finished, len(row),
                                     int(inputs["attention_mask"][i].sum()),
                                     {"seconds": round(seconds / len(questions), 3)}))
        return results
