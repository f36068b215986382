"""Greedy decoding of one sequence with ReFactX's rule, jumping over the tokens a fact forces.

Inside a ``Fact:`` line the index often allows a single next token: once a few tokens have
picked one fact out of the tree, the rest of it is fixed. Asking the model for those tokens one
forward pass at a time (what ``generate`` does) spends a decode step on each; here they are fed
to the model together in one pass, which costs about what reading as many prompt tokens costs.
The tokens chosen are the same as step-by-step greedy decoding: a token that is the only one
allowed is what greedy search would pick (the jump is the "jump-forward" of SGLang's
compressed FSM and of llguidance's forced tokens, applied to the fact tree).

A :class:`DecodeSession` also takes text the caller writes into the reply (:meth:`~DecodeSession.feed`):
the agent opens a line (``Option: X``, ``Fact:``) and the model goes on from it, with the
key/value cache kept, so a reply built in parts costs one prompt read.

It serves the agent's case, one question and one beam at a time; batches and beam search go
through transformers' ``generate`` (:class:`~agent.decoding.generate.FactGenerator` decides).
The decoder only asks its model for the logits after some tokens given the cache so far
(:class:`ModelSteps`); the rule (the tracker's walk in the index, the trigger, the forbidden
tokens of free text) stays in :class:`~agent.decoding.tracker.FactTracker`, so another engine
needs only its own ``ModelSteps``.

Example (not run: needs a model)::

    session = DecodeSession(TransformersSteps(model), vocab, eos_ids, tracker=tracker, prompt_text=prompt)
    session.feed(prompt_ids)
    for kind, value in session.generate(max_new_tokens=96):
        ...   # ("token", id) and ("fact", CompletedFact)
    session.feed(tokenizer.encode("Answer:"))
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import torch

from ..models import cache_keyword
from .spans import CompletedFact
from .tracker import FactTracker, TraceState
from .vocab import TokenVocab

if TYPE_CHECKING:
    from ..index.trie import FactIndex

# The most tokens fed in one forward pass (a long fact is fed in pieces of this size).
MAX_JUMP = 256
# With ``facts_free``, all the tokens of a reply (its facts included) stay under this many times its
# budget.
FACTS_FREE_TIMES = 8
# Tokens past its longest fact a line of :meth:`DecodeSession.state_one` may take (the newline).
LINE_SLACK = 8


class ModelSteps(Protocol):
    """What the decoder needs of a model: the next-token logits after feeding ``tokens``
    (1-D ids) on top of ``state`` (the engine's cache, opaque here), and the new state."""

    def feed(self, tokens: Sequence[int], state: Any) -> tuple[torch.Tensor, Any]: ...


class ScoringSteps(ModelSteps, Protocol):
    """Engines that can also score a continuation without keeping it (:meth:`DecodeSession.choose`)."""

    def feed_all(self, tokens: Sequence[int], state: Any) -> tuple[torch.Tensor, Any]: ...

    def length(self, state: Any) -> int: ...

    def crop(self, state: Any, length: int) -> Any: ...


class TransformersSteps:
    """:class:`ModelSteps` for a transformers causal LM with a ``DynamicCache``."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.device = getattr(model, "device", torch.device("cpu"))
        self._cache_arg = cache_keyword(model)

    def feed(self, tokens: Sequence[int], state: Any) -> tuple[torch.Tensor, Any]:
        if state is None:
            from transformers import DynamicCache

            state = DynamicCache(config=self.model.config)
        logits = None
        with torch.inference_mode():
            for first in range(0, len(tokens), MAX_JUMP):
                ids = torch.tensor([list(tokens[first:first + MAX_JUMP])], dtype=torch.long, device=self.device)
                out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self._cache_arg: state})
                logits = out.logits[0, -1]
        assert logits is not None  # the decoder never feeds an empty list of tokens
        return logits.float(), state

    def feed_all(self, tokens: Sequence[int], state: Any) -> tuple[torch.Tensor, Any]:
        """The logits after each of ``tokens`` (rows), the cache grown by them."""
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True, **{self._cache_arg: state})
        return out.logits[0].float(), state

    def length(self, state: Any) -> int:
        return int(state.get_seq_length()) if state is not None else 0

    def crop(self, state: Any, length: int) -> Any:
        extra = self.length(state) - length
        if extra > 0:
            state.crop(-extra)  # a negative count removes that many tokens (every transformers 5 release)
        return state


class DecodeSession:
    """One sequence being written: the model's cache, the tokens generated so far (``out``) and
    the tracker's state. :meth:`feed` adds tokens (the prompt, or text the caller writes into
    the reply); :meth:`generate` lets the model go on, greedily.

    ``answer_done(out)`` is asked after each generated token that holds a newline: True ends
    :meth:`generate` (e.g. the ``Answer:`` line is complete). ``cancel`` (an event) and ``stop``
    (a set the ``on_fact`` callback may add 0 to) end it after the current token.
    """

    def __init__(self, steps: ModelSteps, vocab: TokenVocab, eos_ids: set[int] | frozenset[int], *,
                 state: Any = None, tracker: FactTracker | None = None, prompt_text: str = "",
                 on_fact: Callable[[CompletedFact], None] | None = None,
                 cancel: threading.Event | None = None, stop: set[int] | None = None) -> None:
        self.steps, self.vocab, self.eos_ids = steps, vocab, frozenset(eos_ids)
        self.state, self.tracker = state, tracker
        self.trace: TraceState | None = tracker.start(prompt_text) if tracker is not None else None
        self.on_fact, self.cancel, self.stop = on_fact, cancel, stop
        self.logits: torch.Tensor | None = None
        self.out: list[int] = []
        self.fed: list[int] = []  # every token the model has read (prompt and reply)
        self.ended = False  # the model wrote its end-of-sequence token
        self._start = self.trace
        self._newline = np.asarray([("\n" in p) for p in vocab.pieces], dtype=bool)

    def feed(self, tokens: Sequence[int], *, reply: bool = False) -> list[tuple[str, Any]]:
        """Feed ``tokens`` to the model. ``reply``: they are part of the reply (the caller writing
        into it: they join ``out`` and move the tracker, as if generated), not of the prompt.
        Returns the events they make (``("token", id)``, ``("fact", ...)``)."""
        events: list[tuple[str, Any]] = []
        if reply:
            for token in tokens:
                events.extend(self._take(int(token)))
        if tokens:
            self.logits, self.state = self.steps.feed(list(tokens), self.state)
            self.fed.extend(int(t) for t in tokens)
        return events

    def rewind(self, keep: int) -> None:
        """Keep only the first ``keep`` reply tokens: the cache is cropped back to them (the
        engine must support it, :class:`ScoringSteps`), the tracker replayed over them (no
        ``on_fact`` calls: those facts were reported when first written). A fact written after
        them stays spent: the reply will not state it again (a fact that broke away from the
        chain is not offered once more)."""
        drop = len(self.out) - keep
        if drop <= 0:
            return
        spent = self.trace.cursor.used if self.tracker is not None and self.trace is not None else None
        self._crop(drop)
        self.out = self.out[:keep]
        self.ended = False
        if self.tracker is not None:
            trace = self._start
            assert trace is not None  # the tracker's start, set with it
            for pos, token in enumerate(self.out):
                trace = self.tracker.advance(trace, token, pos)
            if spent is not None and not trace.active:
                trace = trace._replace(cursor=self.tracker.index.root(spent))
            self.trace = trace

    def _crop(self, drop: int) -> None:
        """The engine's cache and ``fed`` without their last ``drop`` tokens, the logits after the
        token left last."""
        steps = cast(ScoringSteps, self.steps)  # rewinding needs an engine that crops (see rewind)
        # The cache may also hold a cached prompt start that ``fed`` does not list.
        self.state = steps.crop(self.state, steps.length(self.state) - drop - 1)
        self.fed = self.fed[:len(self.fed) - drop]
        self.logits, self.state = self.steps.feed(self.fed[-1:], self.state)

    def replay(self) -> None:
        """Walk the tracker again over the whole reply (after a line was written under another
        tracker: its fact, held by this tracker's index too, becomes one of its spans)."""
        if self.tracker is None:
            return
        trace = self._start
        assert trace is not None  # the tracker's start, set with it
        for pos, token in enumerate(self.out):
            trace = self.tracker.advance(trace, token, pos)
        self.trace = trace

    def state_one(self, tracker: FactTracker, trigger: Sequence[int], *, at_least: int = 0,
                  opened: bool = False) -> int | None:
        """One fact line under ``tracker`` alone (its index: the facts this line may state):
        ``trigger`` (the line's opening, "Fact:") is written into the reply, then the model goes
        on to the line's end, for as many tokens as the index's longest fact and a few more (at
        least ``at_least``): a fact is never cut by the budget. The session's own tracker and
        ``on_fact`` are set aside meanwhile, then walked again over the whole reply (a fact
        their index holds too becomes one of its spans). Returns the index (in ``tracker``'s
        facts) of the fact written, or None when none was completed (the line stays: the
        caller may rewind it). ``opened``: the line is constrained right after ``trigger``, an
        opening the tracker does not fire on (``Answer:``, its texts the values it may say)."""
        own, on_fact = self.tracker, self.on_fact
        self.tracker, self.on_fact = tracker, None
        self.trace = tracker.start()
        index = cast("FactIndex", tracker.index)  # callers build a FactIndex of the line's texts
        budget = max(at_least, max(len(index.fact_tokens(i)) for i in range(len(index))) + LINE_SLACK)
        try:
            self.feed(trigger, reply=True)
            if opened:
                self.trace = TraceState(self.trace.line, True, index.root(), len(self.out))
            for _ in self.generate(budget, line_done=True):
                pass
            spans = list(self.trace.spans)
        finally:
            self.tracker, self.on_fact = own, on_fact
            if own is None:
                self.trace = None
            else:
                self.replay()
        return spans[-1][0] if spans else None

    def choose(self, candidates: Sequence[Sequence[int]]) -> tuple[int, list[float]]:
        """Which of ``candidates`` (token ids that could come next) the model finds likeliest, by
        the mean log-probability of their tokens, and every score. Nothing is kept: the cache is
        cropped back after each one (the engine must support it, :class:`ScoringSteps`)."""
        if self.logits is None:
            raise RuntimeError("feed the prompt before choosing")
        steps = cast(ScoringSteps, self.steps)  # choosing needs an engine that crops (see above)
        base = steps.length(self.state)
        first = torch.log_softmax(self.logits, dim=-1)
        scores: list[float] = []
        for tokens in candidates:
            tokens = list(tokens)
            if not tokens:
                scores.append(float("-inf"))
                continue
            total = float(first[tokens[0]])
            if len(tokens) > 1:
                logits, self.state = steps.feed_all(tokens[:-1], self.state)
                logprobs = torch.log_softmax(logits, dim=-1)
                total += float(sum(logprobs[i, tokens[i + 1]] for i in range(len(tokens) - 1)))
                self.state = steps.crop(self.state, base)
            scores.append(total / len(tokens))
        best = max(range(len(scores)), key=scores.__getitem__) if scores else -1
        return best, scores

    def generate(self, max_new_tokens: int, answer_done: Callable[[list[int]], bool] | None = None,
                 line_done: bool = False, facts_free: bool = False) -> Generator[tuple[str, Any], None, None]:
        """Let the model write up to ``max_new_tokens`` tokens, greedily (constrained in fact
        lines). Ends at its end-of-sequence token, when ``answer_done`` says so, or at the end
        of the first line it completes when ``line_done``. Yields ``("token", id)`` per token
        (forced ones included) and ``("fact", CompletedFact)`` as each fact completes.

        ``facts_free``: the tokens of a fact line (after ``Fact:``) do not count, so a long fact is
        never cut in the middle; a fact is bounded by its tree, and each line still costs its
        free tokens (at most ``FACTS_FREE_TIMES`` x ``max_new_tokens`` tokens in all)."""
        if self.logits is None:
            raise RuntimeError("feed the prompt before generating")
        written = 0
        total = 0
        ceiling = max_new_tokens * FACTS_FREE_TIMES if facts_free else max_new_tokens

        def counts() -> int:
            return 0 if facts_free and self.trace is not None and self.trace.active else 1

        while written < max_new_tokens and total < ceiling:
            token = self._pick()
            if token in self.eos_ids:
                self.ended = True
                return
            feed = [token]
            step = counts()
            yield from self._take(token)
            written += step
            total += 1
            if self._ends(token, answer_done, line_done):
                self.logits, self.state = self.steps.feed(feed, self.state)
                self.fed.extend(feed)
                return
            # The tokens the fact now forces: fed with this one in a single pass.
            while (self.trace is not None and self.trace.active and written < max_new_tokens and total < ceiling
                   and len(feed) < MAX_JUMP):
                assert self.tracker is not None  # a trace is kept only with a tracker
                allowed = self.tracker.allowed(self.trace)
                if len(allowed) != 1 or int(allowed[0]) in self.eos_ids:
                    break
                forced = int(allowed[0])
                feed.append(forced)
                step = counts()
                yield from self._take(forced)
                written += step
                total += 1
                if self._ends(forced, answer_done, line_done):
                    self.logits, self.state = self.steps.feed(feed, self.state)
                    self.fed.extend(feed)
                    return
            self.logits, self.state = self.steps.feed(feed, self.state)
            self.fed.extend(feed)

    def _pick(self) -> int:
        logits = self.logits
        assert logits is not None  # generate checks that the prompt was fed
        if self.tracker is None:
            return int(torch.argmax(logits))
        assert self.trace is not None  # a tracker always has a trace
        if self.trace.active:
            allowed = self.tracker.allowed(self.trace)
            if len(allowed) == 1:
                return int(allowed[0])
            idx = torch.as_tensor(np.asarray(allowed, dtype=np.int64))
            return int(idx[int(torch.argmax(logits[idx]))])
        banned = self.tracker.forbidden_free(self.trace)
        if len(banned):
            logits = logits.clone()
            logits[torch.as_tensor(np.asarray(banned, dtype=np.int64))] = float("-inf")
        return int(torch.argmax(logits))

    def _take(self, token: int) -> list[tuple[str, Any]]:
        """Append ``token``, advance the tracker, report a completed fact."""
        self.out.append(token)
        events: list[tuple[str, Any]] = [("token", token)]
        if self.tracker is None:
            return events
        assert self.trace is not None  # a tracker always has a trace
        done = len(self.trace.spans)
        self.trace = self.tracker.advance(self.trace, token, len(self.out) - 1)
        if len(self.trace.spans) > done:
            fact_id, start, end = self.trace.spans[-1]
            fact = self.tracker.index.facts[fact_id]
            completed = CompletedFact(int(fact_id), fact.text, fact.source, 0, start, end)
            if self.on_fact is not None:
                self.on_fact(completed)
            events.append(("fact", completed))
        return events

    def _ends(self, token: int, answer_done: Callable[[list[int]], bool] | None, line_done: bool) -> bool:
        if self.cancel is not None and self.cancel.is_set() or self.stop:
            return True
        newline = token < len(self._newline) and bool(self._newline[token])
        return newline and (line_done or answer_done is not None and answer_done(self.out))
