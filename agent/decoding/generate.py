"""Answering questions with ReFactX: prompt, constrained generation, answer and fact spans."""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from ..errors import IndexMismatchError
from ..index.tokens import tokenizer_fingerprint
from ..prompts import FewShotPrompt
from .processor import FactConstrainedLogitsProcessor
from .spans import FactSpan, locate_spans
from .tracker import FactTracker
from .vocab import TokenVocab

_ANSWER = re.compile(r"^[ \t]*answer:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_answer(text: str) -> tuple[str, bool]:
    """The final answer (text after the first ``Answer:`` line) and whether it is missing
    (generation stopped before an answer was given)."""
    m = _ANSWER.search(text)
    if not m or not m.group(1).strip():
        return "", True
    return m.group(1).strip(), False


@dataclass
class Answer:
    """One answered question: ``text`` is everything generated, ``answer`` the final answer."""

    question: str
    answer: str
    text: str
    facts: list[FactSpan]
    truncated: bool
    constrained: bool
    timings: dict[str, float] = field(default_factory=dict)
    tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "text": self.text,
            "facts": [f.as_dict() for f in self.facts],
            "truncated": self.truncated,
            "constrained": self.constrained,
            "timings": self.timings,
            "tokens": self.tokens,
        }


class _AnswerLineDone(StoppingCriteria):
    """Stops a row once an ``Answer:`` line is complete (newline after it): models without a
    chat end token would otherwise go on inventing the next question."""

    def __init__(self, tokenizer: Any, vocab: TokenVocab, prompt_len: int) -> None:
        self.tokenizer, self.vocab, self.prompt_len = tokenizer, vocab, prompt_len

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for row in range(input_ids.shape[0]):
            last = int(input_ids[row, -1])
            if last < len(self.vocab.pieces) and "\n" in self.vocab.pieces[last]:
                text = self.tokenizer.decode(input_ids[row, self.prompt_len :], skip_special_tokens=True)
                done[row] = any(m.group(1).strip() for m in _ANSWER.finditer(text.rsplit("\n", 1)[0]))
        return done


class FactGenerator:
    """A local causal LM with an optional fact index. ``answer`` generates with ReFactX
    constrained decoding when ``constrained`` (and an index is given), else freely (LLM-only).

    Thread-safe: per-call state lives in per-call objects; the tokenizer is guarded by a lock
    because fast tokenizers refuse concurrent calls that change padding."""

    def __init__(self, model: Any, tokenizer: Any, index: Any | None, *, prompt: FewShotPrompt | None = None,
                 beams: int = 1, max_new_tokens: int = 160) -> None:
        self.model, self.tokenizer, self.index = model, tokenizer, index
        self.prompt = prompt or FewShotPrompt.load()
        self.beams, self.max_new_tokens = beams, max_new_tokens
        vocab_size = getattr(model.config, "vocab_size", None) if hasattr(model, "config") else None
        self.vocab = TokenVocab.from_tokenizer(tokenizer, vocab_size)
        self.tracker = FactTracker(index, self.vocab) if index is not None else None
        self._tok_lock = threading.Lock()

    def _checked(self, index: Any) -> Any:
        """``index`` if it was built for this generator's tokenizer (token ids must mean the same)."""
        expected = tokenizer_fingerprint(self.tokenizer)
        if getattr(index, "fingerprint", expected) != expected:
            raise IndexMismatchError("the fact index was built for another tokenizer; build it with this model's")
        return index

    def render(self, question: str) -> str:
        """The prompt text for ``question`` (chat template when the tokenizer has one)."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(self.prompt.messages(question), tokenize=False,
                                                      add_generation_prompt=True)
        return self.prompt.plain(question)

    def answer(self, question: str, **kwargs: Any) -> Answer:
        return self.answer_batch([question], **kwargs)[0]

    def answer_batch(self, questions: Sequence[str], *, constrained: bool = True, beams: int | None = None,
                     max_new_tokens: int | None = None, index: Any | None = None) -> list[Answer]:
        """Answer ``questions`` in one batched ``generate`` call.

        ``index`` replaces the generator's own index for this call only (e.g. a small tree over
        the facts retrieved for these questions); it must be built for the same tokenizer.
        """
        tracker = self.tracker if index is None else FactTracker(self._checked(index), self.vocab)
        if constrained and tracker is None:
            raise ValueError("constrained generation needs a fact index")
        beams = beams or self.beams
        t0 = time.perf_counter()
        prompts = [self.render(q) for q in questions]
        with self._tok_lock:
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        device = getattr(self.model, "device", torch.device("cpu"))
        enc = {k: v.to(device) for k, v in enc.items()}
        prompt_len = enc["input_ids"].shape[1]
        processors = LogitsProcessorList()
        if constrained:
            processors.append(FactConstrainedLogitsProcessor(tracker, prompts, num_beams=beams))
        stop = StoppingCriteriaList([_AnswerLineDone(self.tokenizer, self.vocab, prompt_len)])
        t1 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                **enc, do_sample=False, num_beams=beams, max_new_tokens=max_new_tokens or self.max_new_tokens,
                logits_processor=processors, stopping_criteria=stop,
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.tokenizer.eos_token_id,
            )
        t2 = time.perf_counter()
        answers = []
        special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        for q, prompt, row in zip(questions, prompts, out[:, prompt_len:].tolist()):
            while row and row[-1] in special:
                row.pop()
            if constrained:
                state = tracker.replay(prompt, row)
                text, spans = locate_spans(self.tokenizer, tracker.index, row, state.spans)
            else:
                text = self.tokenizer.decode(row, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                spans = []
            final, truncated = parse_answer(text)
            answers.append(Answer(q, final, text, spans, truncated, constrained, tokens=len(row)))
        t3 = time.perf_counter()
        n_tokens = sum(a.tokens for a in answers)
        for a in answers:
            a.timings = {"prepare_s": round(t1 - t0, 4), "generate_s": round(t2 - t1, 4),
                         "spans_s": round(t3 - t2, 4),
                         "tokens_per_s": round(n_tokens / (t2 - t1), 2) if t2 > t1 else 0.0,
                         "batch_size": len(questions)}
        return answers
