"""Answering questions with ReFactX: prompt, constrained generation, answer and fact spans."""
from __future__ import annotations

import copy
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union, cast

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from ..errors import IndexMismatchError
from ..index.base import FactTree
from ..index.tokens import tokenizer_fingerprint
from ..models import cache_keyword, encode_padded, stateless_tokenizer
from ..prompts import FewShotPrompt, render_prompt
from .greedy import DecodeSession, ModelSteps, TransformersSteps
from .prefix_cache import PrefixCache, fixed_start
from .processor import FactConstrainedLogitsProcessor
from .spans import CompletedFact, FactSpan, decode_tokens, locate_spans
from .tracker import FactTracker
from .vocab import TokenVocab

log = logging.getLogger(__name__)

# A question, or a whole conversation ending with the user's question.
Prompt = Union[str, Sequence[Mapping[str, str]]]
# Called as each constrained fact completes, during generation (see FactConstrainedLogitsProcessor).
OnFact = Callable[[CompletedFact], None]

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

    question: Prompt
    answer: str
    text: str
    facts: list[FactSpan]
    truncated: bool
    constrained: bool
    timings: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    prompt_tokens: int = 0
    dropped: list[str] = field(default_factory=list)
    """Facts stated after the chain broke (see :func:`agent.pipeline.chaining.answer_on_chain`):
    still in ``text`` and ``facts``, but the answer was written without them."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question if isinstance(self.question, str) else list(self.question),
            "answer": self.answer,
            "text": self.text,
            "facts": [f.as_dict() for f in self.facts],
            "truncated": self.truncated,
            "constrained": self.constrained,
            "timings": self.timings,
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "dropped": list(self.dropped),
        }


@dataclass(frozen=True)
class GenerationEvent:
    """One step of :meth:`FactGenerator.stream`: ``"token"`` (``text`` is the new text),
    ``"fact"`` (``fact`` just completed, offsets into the text so far), then one ``"done"``
    carrying the whole :class:`Answer` (its ``text`` is the concatenation of every token's)."""

    kind: str
    text: str = ""
    fact: FactSpan | None = None
    answer: Answer | None = None


class _AnswerLineDone(StoppingCriteria):
    """Stops a row once an ``Answer:`` line is complete (newline after it): models without a
    chat end token would otherwise go on inventing the next question."""

    def __init__(self, tokenizer: Any, vocab: TokenVocab, prompt_len: int, prefixes: Sequence[str]) -> None:
        self.tokenizer, self.vocab, self.prompt_len, self.prefixes = tokenizer, vocab, prompt_len, prefixes

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        # Beam search checks its candidates (2 per beam): rows are grouped by item, whatever their number.
        rows_per_item = max(1, input_ids.shape[0] // len(self.prefixes))
        for row in range(input_ids.shape[0]):
            last = int(input_ids[row, -1])
            if last < len(self.vocab.pieces) and "\n" in self.vocab.pieces[last]:
                prefix = self.prefixes[min(row // rows_per_item, len(self.prefixes) - 1)]
                text = prefix + self.tokenizer.decode(input_ids[row, self.prompt_len :], skip_special_tokens=True)
                done[row] = any(m.group(1).strip() for m in _ANSWER.finditer(text.rsplit("\n", 1)[0]))
        return cast(torch.BoolTensor, done)  # transformers annotates BoolTensor; torch's ops return Tensor


class _Cancelled(StoppingCriteria):
    """Stops every row once ``event`` is set (the caller stopped reading a stream)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        return cast(torch.BoolTensor, torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool,
                                                 device=input_ids.device))


class _ItemsCut(StoppingCriteria):
    """Stops the rows of the batch items in ``items`` (a set the caller fills during generation,
    e.g. from ``on_fact``); the other rows go on."""

    def __init__(self, items: set[int], n_items: int) -> None:
        self.items, self.n_items = items, n_items

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        if not self.items:
            return cast(torch.BoolTensor, torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device))
        rows = torch.arange(input_ids.shape[0], device=input_ids.device) // max(1, input_ids.shape[0] // self.n_items)
        cut = torch.tensor(sorted(self.items), dtype=torch.long, device=input_ids.device)
        return cast(torch.BoolTensor, torch.isin(rows, cut))


class _FirstLogits(LogitsProcessor):
    """Notes when the first token's logits are ready: the prompt's prefill has ended."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.at is None:
            self.at = time.perf_counter()
        return scores


def _eos_id(tokenizer: Any) -> int | None:
    eos = tokenizer.eos_token_id
    return eos[0] if isinstance(eos, (list, tuple)) else eos


class _TokenQueue(BaseStreamer):
    """Hands each generated token id to the reading thread (the prompt, sent first, is skipped)."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.queue.put(("token", int(value.reshape(-1)[0])))

    def end(self) -> None:
        self.queue.put(("end", None))

    def restart(self) -> None:
        """``generate`` starts over (nothing was generated yet): its prompt comes first again."""
        self._prompt_seen = False


@dataclass
class _Run:
    """One prepared ``generate`` call: its inputs and the pieces that read its output."""

    questions: list[Prompt]
    prompts: list[str]
    inputs: dict[str, torch.Tensor]
    tracker: FactTracker | None
    kwargs: dict[str, Any]
    started: float
    prepared: float
    reply_prefixes: list[str]
    clock: _FirstLogits
    cached_tokens: int = 0

    @property
    def prompt_len(self) -> int:
        return int(self.inputs["input_ids"].shape[1])


class FactGenerator:
    """A local causal LM with an optional fact index. ``answer`` generates with ReFactX
    constrained decoding when ``constrained`` (and an index is given), else freely (LLM-only);
    ``stream`` does the same token by token.

    Thread-safe: per-call state lives in per-call objects; the tokenizer is guarded by a lock
    because fast tokenizers refuse concurrent calls that change padding.

    ``prefix_cache``: prefill the prompt's fixed start (system prompt, worked examples) once and
    reuse its key/value cache for every single-question, single-beam generation
    (:mod:`.prefix_cache`); off for prompts whose start changes per question. ``vocab``: the
    token pieces of another generator on the same tokenizer (building them reads the whole
    vocabulary: 1.7 s for qwen2.5-coder's 151k tokens). ``steps``: another engine for
    single-sequence decoding (:mod:`agent.engines`, e.g. llama.cpp; it keeps its own prompt
    cache); batches and beams stay on ``model``'s ``generate``."""

    def __init__(self, model: Any, tokenizer: Any, index: FactTree | None, *, prompt: FewShotPrompt | None = None,
                 beams: int = 1, max_new_tokens: int = 160, prefix_cache: bool = True,
                 vocab: TokenVocab | None = None, steps: ModelSteps | None = None) -> None:
        self.model, self.tokenizer, self.steps = model, tokenizer, steps
        prefix_cache = prefix_cache and steps is None
        self.prompt = prompt or FewShotPrompt.load()
        self.beams, self.max_new_tokens = beams, max_new_tokens
        vocab_size = getattr(model.config, "vocab_size", None) if hasattr(model, "config") else None
        self.vocab = vocab or TokenVocab.from_tokenizer(tokenizer, vocab_size)
        self.index = index
        stateless_tokenizer(tokenizer)  # concurrent encodes only read it (agent.models)
        self._cache_kw = cache_keyword(model) if hasattr(model, "forward") else "past_key_values"
        self.prefix_cache = PrefixCache(model, tokenizer, self.render, encode=self._encode) if prefix_cache else None

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _fixed_start(self) -> tuple[int, ...]:
        """The token ids every prompt of this generator starts with (computed once)."""
        start = getattr(self, "_start_ids", None)
        if start is None:
            start = self._start_ids = fixed_start(self._encode, self.render)
        return start

    def open_session(self, ids: Sequence[int], **options: Any) -> tuple[DecodeSession, int]:
        """A :class:`~.greedy.DecodeSession` on this generator's engine that has read the prompt
        ``ids``, its cached start reused (transformers: a copy of the prefix cache's entries;
        another engine: its own cache); ``options`` go to the session. Returns it and how many
        prompt tokens came from the prefix cache."""
        ids = list(ids)
        if self.steps is not None and hasattr(self.steps, "open_session"):  # the remote engine: its own sessions
            return self.steps.open_session(ids, self.vocab, **options), 0
        if self.steps is not None:
            session = DecodeSession(self.steps, self.vocab, self.vocab.eos_ids, **options)
            start = self._fixed_start()
            if start and len(ids) > len(start) and tuple(ids[:len(start)]) == start and hasattr(self.steps, "pending"):
                # The fixed start as a segment of its own, read with the rest: the engine reuses it.
                session.state = self.steps.pending(start, None)
                session.feed(ids[len(start):])
                return session, min(getattr(self.steps, "kept", 0), len(start))
            session.feed(ids)
            return session, 0
        cache, cached = self.prefix_cache.lookup(ids) if self.prefix_cache is not None else (None, 0)
        session = DecodeSession(TransformersSteps(self.model), self.vocab, self.vocab.eos_ids, state=cache, **options)
        session.feed(ids[cached if cache is not None else 0:])
        return session, cached if cache is not None else 0

    @property
    def index(self) -> Any | None:
        """The fact index generation is constrained to when no other is passed (the KB tree)."""
        return self._index

    @index.setter
    def index(self, index: FactTree | None) -> None:
        # The tracker is the index's reader: replacing one without the other would constrain to
        # the old facts while spans are located in the new ones.
        tracker = FactTracker(self._checked(index), self.vocab) if index is not None else None
        self._index, self.tracker = index, tracker

    def with_index(self, index: FactTree | None) -> FactGenerator:
        """A generator sharing this one's model, tokenizer, vocabulary and prompt cache, constrained
        to ``index``; this one is unchanged, so answers under way on it keep the facts they started
        with (a fact id they state means a fact of their index)."""
        other = copy.copy(self)
        other.index = index
        return other

    def close(self) -> None:
        """Release the index's resources (a PostgreSQL pool, a memory map); the model stays loaded."""
        close = getattr(self._index, "close", None)
        if close is not None:
            close()

    def _checked(self, index: FactTree) -> FactTree:
        """``index`` if it was built for this generator's tokenizer (token ids must mean the same)."""
        expected = tokenizer_fingerprint(self.tokenizer)
        if getattr(index, "fingerprint", expected) != expected:
            raise IndexMismatchError("the fact index was built for another tokenizer; build it with this model's")
        return index

    def render(self, question: Prompt) -> str:
        """The prompt text for ``question`` or a conversation (chat template when the tokenizer has one)."""
        return render_prompt(self.tokenizer, self.prompt, question)

    def answer(self, question: Prompt, **kwargs: Any) -> Answer:
        return self.answer_batch([question], **kwargs)[0]

    def answer_batch(self, questions: Sequence[Prompt], *, constrained: bool = True, beams: int | None = None,
                     max_new_tokens: int | None = None, index: FactTree | None = None,
                     on_fact: OnFact | None = None, reply_prefix: str | Sequence[str] = "",
                     cancel: threading.Event | None = None, stop_items: set[int] | None = None) -> list[Answer]:
        """Answer ``questions`` in one batched ``generate`` call.

        ``index`` replaces the generator's own index for this call only (e.g. a small tree over
        the facts retrieved for these questions); it must be built for the same tokenizer.
        ``on_fact`` is called with each distinct fact as soon as a row or beam completes it,
        before the next token is chosen; with a :class:`~agent.index.union.GrowingFactIndex` as
        ``index`` it may grow the tree, and the facts it adds can be stated from the next
        ``Fact:`` line on, in this same generation (multi-hop chaining). Beam search reports
        facts of beams that are dropped later too.

        ``reply_prefix`` is text the reply already starts with (e.g. the facts stated so far and
        ``Answer:``): the model continues it; ``Answer.text`` holds only what it wrote, and
        ``Answer.answer`` is read from the prefix and the text together; a list gives each
        question its own. ``cancel``: when it is
        set (e.g. by ``on_fact``), generation ends after the current token; ``stop_items``: a set
        of batch positions the caller may add to during generation (e.g. from ``on_fact``): those
        questions' rows end after the current token, the others go on.
        """
        if (self.steps is not None and len(questions) > 1 and (beams or self.beams) == 1 and stop_items is None):
            # Another engine decodes one sequence at a time: the questions in turn, each on it.
            prefixes = [reply_prefix] * len(questions) if isinstance(reply_prefix, str) else list(reply_prefix)
            return [self.answer_batch([q], constrained=constrained, beams=1, max_new_tokens=max_new_tokens,
                                      index=index, on_fact=on_fact, reply_prefix=prefix, cancel=cancel)[0]
                    for q, prefix in zip(questions, prefixes, strict=True)]
        run = self._prepare(questions, constrained, beams, max_new_tokens, index, on_fact, reply_prefix, cancel,
                            stop_items)
        if len(run.questions) == 1 and run.kwargs["num_beams"] == 1:
            answer = next(e.answer for e in self._stream_greedy(run, on_fact, cancel, stop_items) if e.kind == "done")
            assert answer is not None  # the "done" event carries the answer
            return [answer]
        out = self._generate(run)
        generated = time.perf_counter()
        return self._finish(run, out[:, run.prompt_len:].tolist(), generated)

    def stream(self, question: Prompt, *, constrained: bool = True, beams: int | None = None,
               max_new_tokens: int | None = None, index: FactTree | None = None,
               on_fact: OnFact | None = None, reply_prefix: str = "",
               cancel: threading.Event | None = None, stop_items: set[int] | None = None) -> Iterator[GenerationEvent]:
        """Answer ``question`` as a stream of :class:`GenerationEvent`: text as it is generated,
        each constrained fact as soon as it is complete, then the :class:`Answer` (the same one
        :meth:`answer` gives).

        Beam search keeps several candidates until the end, so with ``beams > 1`` the text
        arrives in one piece when generation is done. Closing the iterator early stops the
        generation. ``on_fact`` is as in :meth:`answer_batch`: it runs in the generating thread,
        not in step with this iterator's ``"fact"`` events (either may come first).

        Example (not run: needs a model)::

            for event in gen.stream("Where was Laurie Graff born?"):
                if event.kind == "token":
                    print(event.text, end="", flush=True)
        """
        run = self._prepare([question], constrained, beams, max_new_tokens, index, on_fact, reply_prefix, cancel,
                            stop_items)
        if run.kwargs["num_beams"] == 1:
            yield from self._stream_greedy(run, on_fact, cancel, stop_items)
            return
        if run.kwargs["num_beams"] > 1:
            answer = self.answer_batch([question], constrained=constrained, beams=beams,
                                       max_new_tokens=max_new_tokens, index=index, on_fact=on_fact,
                                       reply_prefix=reply_prefix, cancel=cancel, stop_items=stop_items)[0]
            yield GenerationEvent("token", answer.text)
            for span in answer.facts:
                yield GenerationEvent("fact", fact=span)
            yield GenerationEvent("done", answer=answer)
            return
        streamer, cancel = _TokenQueue(), threading.Event()
        run.kwargs["stopping_criteria"].append(_Cancelled(cancel))
        failure: list[BaseException] = []

        def work() -> None:
            try:
                self._generate(run, streamer=streamer)
            except BaseException as exc:  # noqa: BLE001 - handed to the reading thread, raised there
                failure.append(exc)
                streamer.queue.put(("end", None))

        worker = threading.Thread(target=work, name="factweave-generate", daemon=True)
        worker.start()
        tokens: list[int] = []
        shown = ""
        tracker = run.tracker if constrained else None
        state = tracker.start(run.prompts[0]) if tracker else None
        try:
            while True:
                kind, token = streamer.queue.get()
                if kind == "end":
                    break
                tokens.append(token)
                text = decode_tokens(self.tokenizer, tokens)
                # Hold back a partial UTF-8 character; text already shown is never rewritten.
                if text.startswith(shown) and not text.endswith("\ufffd") and len(text) > len(shown):
                    yield GenerationEvent("token", text[len(shown):])
                    shown = text
                if tracker is not None:
                    assert state is not None  # started with the tracker
                    done = len(state.spans)
                    state = tracker.advance(state, token, len(tokens) - 1)
                    if len(state.spans) > done:
                        _, spans = locate_spans(self.tokenizer, tracker.index, tokens, state.spans[done:])
                        yield GenerationEvent("fact", fact=spans[0])
            worker.join()
            if failure:
                raise failure[0]
            answer = self._finish(run, [tokens], time.perf_counter())[0]
            if answer.text.startswith(shown) and len(answer.text) > len(shown):
                yield GenerationEvent("token", answer.text[len(shown):])
            yield GenerationEvent("done", answer=answer)
        finally:
            cancel.set()
            worker.join()

    def _stream_greedy(self, run: _Run, on_fact: OnFact | None, cancel: threading.Event | None,
                       stop_items: set[int] | None) -> Iterator[GenerationEvent]:
        """One question, one beam: a :class:`~.greedy.DecodeSession` (forced fact tokens fed in one
        pass), as :class:`GenerationEvent`s."""
        prefix = run.reply_prefixes[0]

        def answer_done(tokens: list[int]) -> bool:
            text = prefix + decode_tokens(self.tokenizer, tokens)
            return any(m.group(1).strip() for m in _ANSWER.finditer(text.rsplit("\n", 1)[0]))

        ids = run.inputs["input_ids"][0].tolist()
        cache = run.kwargs.get(self._cache_kw)
        options: dict[str, Any] = {"tracker": run.tracker, "prompt_text": run.prompts[0], "on_fact": on_fact,
                                   "cancel": cancel, "stop": stop_items}
        if self.steps is not None:
            session, run.cached_tokens = self.open_session(ids, **options)
        else:  # (the prefix cache was looked up by _prepare, for generate's sake too)
            session = DecodeSession(TransformersSteps(self.model), self.vocab, self.vocab.eos_ids, state=cache,
                                    **options)
            session.feed(ids[run.cached_tokens if cache is not None else 0:])
        tokens = session.out
        shown = ""
        run.clock.at = time.perf_counter()
        events = session.generate(run.kwargs["max_new_tokens"], answer_done)
        try:
            for kind, value in events:
                if kind == "token":
                    text = decode_tokens(self.tokenizer, tokens)
                    # Hold back a partial UTF-8 character; text already shown is never rewritten.
                    if text.startswith(shown) and not text.endswith("\ufffd") and len(text) > len(shown):
                        yield GenerationEvent("token", text[len(shown):])
                        shown = text
                elif kind == "fact":
                    assert run.tracker is not None  # facts come only from a tracker
                    _, spans = locate_spans(self.tokenizer, run.tracker.index, tokens,
                                            [(value.id, value.start, value.end)])
                    yield GenerationEvent("fact", fact=spans[0])
        finally:
            events.close()
        answer = self._finish(run, [tokens], time.perf_counter())[0]
        if answer.text.startswith(shown) and len(answer.text) > len(shown):
            yield GenerationEvent("token", answer.text[len(shown):])
        yield GenerationEvent("done", answer=answer)

    def _generate(self, run: _Run, **extra: Any) -> torch.Tensor:
        """``generate`` for ``run``; a model that cannot continue from the cached prompt start
        (an unusual cache layout) is asked again with the whole prompt, and not cached again."""
        try:
            with torch.inference_mode():
                return self.model.generate(**run.inputs, **run.kwargs, **extra)
        except Exception:
            if self._cache_kw not in run.kwargs or run.clock.at is not None:
                raise  # failed for another reason, or after the prompt was read
            log.warning("this model cannot reuse the cached prompt start; prefilling whole prompts from now on")
            self.prefix_cache = None
            run.kwargs.pop(self._cache_kw)
            run.cached_tokens = 0
            if isinstance(extra.get("streamer"), _TokenQueue):
                extra["streamer"].restart()
            with torch.inference_mode():
                return self.model.generate(**run.inputs, **run.kwargs, **extra)

    def _prepare(self, questions: Sequence[Prompt], constrained: bool, beams: int | None,
                 max_new_tokens: int | None, index: FactTree | None, on_fact: OnFact | None = None,
                 reply_prefix: str | Sequence[str] = "", cancel: threading.Event | None = None,
                 stop_items: set[int] | None = None) -> _Run:
        tracker = self.tracker if index is None else FactTracker(self._checked(index), self.vocab)
        if constrained and tracker is None:
            raise ValueError("constrained generation needs a fact index")
        beams = beams or self.beams
        started = time.perf_counter()
        prefixes = [reply_prefix] * len(questions) if isinstance(reply_prefix, str) else list(reply_prefix)
        if len(prefixes) != len(questions):
            raise ValueError(f"{len(prefixes)} reply prefixes for {len(questions)} questions")
        prompts = [self.render(q) + prefix for q, prefix in zip(questions, prefixes)]
        enc = encode_padded(self.tokenizer, prompts, "left")
        device = getattr(self.model, "device", torch.device("cpu"))
        inputs = {k: v.to(device) for k, v in enc.items()}
        clock = _FirstLogits()
        processors = LogitsProcessorList([clock])
        if constrained:
            assert tracker is not None  # checked above
            processors.append(FactConstrainedLogitsProcessor(tracker, prompts, num_beams=beams, on_fact=on_fact,
                                                             stop_items=stop_items,
                                                             eos_token_id=_eos_id(self.tokenizer)))
        stop = StoppingCriteriaList([_AnswerLineDone(self.tokenizer, self.vocab, inputs["input_ids"].shape[1],
                                                     prefixes)])
        if cancel is not None:
            stop.append(_Cancelled(cancel))
        if stop_items is not None:
            stop.append(_ItemsCut(stop_items, len(questions)))
        kwargs = {"do_sample": False, "num_beams": beams, "max_new_tokens": max_new_tokens or self.max_new_tokens,
                  "logits_processor": processors, "stopping_criteria": stop,
                  "pad_token_id": self.tokenizer.pad_token_id, "eos_token_id": self.tokenizer.eos_token_id}
        cached = 0
        if self.prefix_cache is not None and len(prompts) == 1 and beams == 1:
            past, cached = self.prefix_cache.lookup(enc["input_ids"][0].tolist())
            if past is not None:
                kwargs[self._cache_kw] = past
        return _Run(list(questions), prompts, inputs, tracker if constrained else None, kwargs, started,
                    time.perf_counter(), prefixes, clock, cached)

    def _finish(self, run: _Run, rows: list[list[int]], generated: float) -> list[Answer]:
        """Answers from the generated token ids of each row (padding and end tokens removed)."""
        answers = []
        special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        mask = run.inputs.get("attention_mask")
        for i, (q, prompt, prefix, row) in enumerate(zip(run.questions, run.prompts, run.reply_prefixes, rows)):
            row = list(row)
            while row and row[-1] in special:
                row.pop()
            if run.tracker is not None:
                state = run.tracker.replay(prompt, row)
                text, spans = locate_spans(self.tokenizer, run.tracker.index, row, state.spans)
            else:
                text, spans = decode_tokens(self.tokenizer, row), []
            final, truncated = parse_answer(prefix + text)
            prompt_tokens = int(mask[i].sum()) if mask is not None else run.prompt_len
            answers.append(Answer(q, final, text, spans, truncated, run.tracker is not None, tokens=len(row),
                                  prompt_tokens=prompt_tokens))
        done = time.perf_counter()
        n_tokens = sum(a.tokens for a in answers)
        seconds = generated - run.prepared
        prefill = (run.clock.at - run.prepared) if run.clock.at is not None else seconds
        for a in answers:
            a.timings = {"prepare_s": round(run.prepared - run.started, 4), "generate_s": round(seconds, 4),
                         "prefill_s": round(prefill, 4), "cached_prompt_tokens": run.cached_tokens,
                         "spans_s": round(done - generated, 4),
                         "tokens_per_s": round(n_tokens / seconds, 2) if seconds > 0 else 0.0,
                         "batch_size": len(run.questions)}
        return answers
