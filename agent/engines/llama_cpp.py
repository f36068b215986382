"""llama.cpp as the engine that computes next-token logits for ReFactX decoding
(``llama-cpp-python``, the ``[llama]`` extra): the presets' GGUF files are read directly, quantized
weights and all, and decoding stays the project's own (:class:`~agent.decoding.greedy.DecodeSession`:
the ``Fact:`` trigger, the fact-tree walk, growing trees, spans, forced-token jumps). llama.cpp only
answers "the logits after these tokens", which is the whole of :class:`~agent.decoding.greedy.ModelSteps`.

Why not llama.cpp's own sampler or grammar: the rule needs the fact index's cursor per token (and
an index that grows mid-generation), which a GBNF grammar cannot express; a logits hook per
token is what ReFactX needs, and this is one, kept outside the engine.

The context holds the tokens of one sequence at a time. A state is what a sequence has read: its
tokens, and where each feed began (a *segment*). A feed first brings the context to the state:
it keeps the longest stretch of whole segments the context shares with it (their key/value
entries are reused, nothing is copied) and reads the rest segment by segment, each in the batches
a fresh read would use. So the logits are the same bits with or without the reuse: llama.cpp's
kernels are not batch-invariant (one token read alone and the same token at the end of a batch
of 40 differ in the last bits, enough to flip a greedy tie), and reusing at any other point would
make an answer depend on what the context held before. A prompt's fixed start (the system prompt
and worked examples) is fed as its own segment (:meth:`agent.decoding.FactGenerator.open_session`),
so every question reuses it: the transformers engine's prefix cache comes free here. The agent asks
through several prompts (the answer's, the evidence reader's, the options', ...), each with its
own fixed start, more than there are contexts; so once a fixed start is read, its key/value
entries are kept aside (a *snapshot*: llama.cpp's per-sequence state, a few MB) and a context
that does not hold it gets it back by a copy instead of a read. The copy is the bits the read
made, so answers stay independent of what a context held. Snapshots are also kept on disk
(``kept_dir``: ``<cache>/engines/kv/<model>/``, a few MB each, checksummed, named by the model file,
the library build, the CPU, the threads and the tokens), so a new process (``factweave ask``, a
server just started) reads no fixed start an earlier one read: its first answer costs what a later
one does. Measured on the 20 questions of
``benchmarks/agent_latency.py`` (0.5B preset, 2 contexts): without snapshots 12 answers read all
their fixed starts again and 4 some of them (agent p50 12.6 s); with them, none after the first
question (p50 5.7 s).

Answers at once (the UI's and the server's concurrency) each get a context of their own: the
engine keeps ``contexts`` of them over the same weights (loaded once), and a feed takes the free
one that holds the most of its tokens. Past that many sequences, a feed waits for a context and
may have to read its sequence again after another one's.

Example (not run: needs llama.cpp and a GGUF model)::

    steps = LlamaCppSteps.open(Path("qwen2.5-coder-0.5b-instruct.gguf"))
    logits, state = steps.feed(prompt_ids, None)
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import FactweaveError
from ..extras import require
from ..files import replacing

#: Tokens the context holds at most: a prompt with its examples and evidence, and the reply.
DEFAULT_CONTEXT = 8192


@dataclass(frozen=True)
class Read:
    """What a sequence has read: its tokens, and the position where each feed began."""

    tokens: tuple[int, ...] = ()
    segments: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.tokens)

    def then(self, tokens: Sequence[int]) -> Read:
        return Read(self.tokens + tuple(int(t) for t in tokens), self.segments + (len(self.tokens),))

    def cut(self, length: int) -> Read:
        length = max(0, length)
        return Read(self.tokens[:length], tuple(b for b in self.segments if b < length))


def _common_prefix(held: np.ndarray, tokens: Sequence[int]) -> int:
    n = min(len(held), len(tokens))
    if n == 0:
        return 0
    diff = np.flatnonzero(held[:n] != np.asarray(tokens[:n], dtype=held.dtype))
    return int(diff[0]) if len(diff) else n


class _Context:
    """One llama.cpp context (its key/value cache) and what it holds."""

    def __init__(self, ctx: Any, batch: Any, n_ctx: int) -> None:
        self.ctx, self.batch = ctx, batch
        self.tokens = np.zeros(n_ctx, dtype=np.int64)
        self.n_tokens = 0
        self.segments: list[int] = []  # where each segment it holds began
        self.lock = threading.Lock()
        self.used = 0  # when a feed last took it (the engine's counter): the least recent is reused first

    def reusable(self, read: Read, first: int) -> int:
        """How many of ``read``'s tokens this context holds, in whole segments read the same way
        (at most up to ``first``, whose logits must be computed)."""
        shared = min(_common_prefix(self.tokens[:self.n_tokens], read.tokens), first)
        ends = set(self.segments) | {self.n_tokens}  # where the segments it holds begin and end
        keep = 0
        for start in read.segments:
            if start > shared or start not in ends:
                break
            keep = start
        if [b for b in self.segments if b < keep] != [b for b in read.segments if b < keep]:
            return 0
        return keep


class LlamaCppSteps:
    """:class:`~agent.decoding.greedy.ScoringSteps` over llama.cpp contexts (see the module
    docstring). ``kept``: the tokens the last feed found in its context (not read again)."""

    engine = "llama.cpp"

    def __init__(self, llama: Any, contexts: int = 2, *, kept_dir: Path | None = None, build: str = "") -> None:
        from llama_cpp import _internals  # lazy: the [llama] extra (only an engine opened needs it)

        self.llama = llama
        self.n_vocab = int(llama.n_vocab())
        self.n_ctx = int(llama.n_ctx())
        self.n_batch = int(llama.n_batch)
        self._contexts = [_Context(llama._ctx, llama._batch, self.n_ctx)]
        for _ in range(max(1, contexts) - 1):  # more contexts over the same weights
            ctx = llama._stack.enter_context(contextlib.closing(
                _internals.LlamaContext(model=llama._model, params=llama.context_params, verbose=False)))
            batch = llama._stack.enter_context(contextlib.closing(
                _internals.LlamaBatch(n_tokens=self.n_batch, embd=0, n_seq_max=1, verbose=False)))
            self._contexts.append(_Context(ctx, batch, self.n_ctx))
        self._choosing = threading.Lock()
        self._clock = 0
        self.kept = 0
        #: Fixed starts (see :meth:`pending`) -> their snapshot once read (None until then), most
        #: recent last; at most :attr:`snapshots` of them are kept.
        self._starts: dict[tuple[int, ...], bytes | None] = {}
        self.snapshots = 8
        #: Where snapshots are kept across processes (None: in memory only), and what they were
        #: made by (the model file, the library build, this CPU, the threads: see :meth:`open`).
        self.kept_dir, self._build = kept_dir, build

    @classmethod
    def open(cls, gguf: str | Path, *, context: int = DEFAULT_CONTEXT, threads: int | None = None,
             contexts: int = 2, kept_dir: Path | None = None) -> LlamaCppSteps:
        """Load ``gguf`` on the CPU with ``threads`` (default: every core) and ``contexts`` contexts
        of ``context`` tokens each; ``kept_dir``: where the fixed starts' snapshots are kept for the
        next process (see :meth:`pending`)."""
        require("llama", "the llama.cpp engine")
        from llama_cpp import Llama  # lazy: the [llama] extra

        from .llama_build import build_key

        threads = threads or os.cpu_count() or 1
        llama = Llama(model_path=str(gguf), n_ctx=context, n_batch=512, n_threads=threads, n_threads_batch=threads,
                      logits_all=False, verbose=False)
        # A snapshot is the bits one library build made on one CPU from one model file with so many
        # threads (a matrix product's sums may split otherwise): kept under all of them.
        return cls(llama, contexts, kept_dir=kept_dir, build=f"{build_key(Path(gguf))}-{threads}")

    def close(self) -> None:
        close = getattr(self.llama, "close", None)
        if close is not None:
            close()

    # --- ModelSteps / ScoringSteps ------------------------------------------------------------

    def feed(self, tokens: Sequence[int], state: Read | None) -> tuple[torch.Tensor, Read]:
        read = (state or Read()).then(tokens)
        return torch.from_numpy(self._read(read, len(read) - 1, all_rows=False)), read

    def feed_all(self, tokens: Sequence[int], state: Read | None) -> tuple[torch.Tensor, Read]:
        """The logits after each of ``tokens`` (rows)."""
        before = state or Read()
        read = before.then(tokens)
        return torch.from_numpy(self._read(read, len(before), all_rows=True)), read

    def pending(self, tokens: Sequence[int], state: Read | None) -> Read:
        """``state`` having read ``tokens`` as a segment, to be evaluated with the next feed (a
        prompt's fixed start: reused from a context that holds it, or from its snapshot)."""
        read = (state or Read()).then(tokens)
        if not read.segments[:-1] and read.tokens:  # a start at position 0: worth a snapshot
            with self._choosing:
                known = self._starts.pop(read.tokens, None)
            if known is None:
                known = self._kept(read.tokens)  # made by an earlier process (file read outside the lock)
            with self._choosing:
                self._starts[read.tokens] = known or self._starts.pop(read.tokens, None)
                while len(self._starts) > self.snapshots:
                    del self._starts[next(iter(self._starts))]
        return read

    def _kept_path(self, start: tuple[int, ...]) -> Path | None:
        if self.kept_dir is None or not self._build:
            return None
        digest = hashlib.sha256(np.asarray(start, dtype=np.int64).tobytes()).hexdigest()[:24]
        return self.kept_dir / f"{self._build}-{digest}.kv"

    def _kept(self, start: tuple[int, ...]) -> bytes | None:
        """``start``'s snapshot as an earlier process kept it (its checksum holds), or None."""
        path = self._kept_path(start)
        try:
            kept = path.read_bytes() if path is not None else b""
        except OSError:
            return None
        data, digest = kept[:-32], kept[-32:]
        if data and hashlib.sha256(data).digest() == digest:
            return data
        if kept and path is not None:
            path.unlink(missing_ok=True)  # not what was written: the next read keeps a new one
        return None

    def _keep(self, start: tuple[int, ...], data: bytes) -> None:
        """Keep ``start``'s snapshot for the next process (whole or not at all; a failure only
        costs the next process a read)."""
        path = self._kept_path(start)
        if path is None or path.exists():
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with replacing(path, binary=True) as handle:
                handle.write(data)
                handle.write(hashlib.sha256(data).digest())
            for stale in path.parent.glob("*.kv"):  # an earlier build's, or another thread count's
                if not stale.name.startswith(f"{self._build}-"):
                    stale.unlink(missing_ok=True)
        except OSError:
            pass

    def length(self, state: Read | None) -> int:
        return len(state or Read())

    def crop(self, state: Read | None, length: int) -> Read:
        return (state or Read()).cut(length)

    # --- the contexts -------------------------------------------------------------------------

    def _take(self, read: Read, first: int) -> tuple[_Context, int]:
        """The context to read ``read`` in, locked, and how many tokens it keeps: the free one
        holding the most of it, else (all busy) the one holding the most, once it is free."""
        with self._choosing:
            self._clock += 1
            # Most tokens kept first; among equals, the context used least recently.
            ranked = sorted(((c.reusable(read, first), -c.used, i) for i, c in enumerate(self._contexts)),
                            reverse=True)
            for keep, _, i in ranked:
                if self._contexts[i].lock.acquire(blocking=False):
                    self._contexts[i].used = self._clock
                    return self._contexts[i], keep
        context = self._contexts[ranked[0][2]]
        context.lock.acquire()
        context.used = self._clock
        return context, context.reusable(read, first)  # (what it holds may have changed meanwhile)

    def _start_of(self, read: Read) -> tuple[int, ...] | None:
        """``read``'s first segment when it is a fixed start (:meth:`pending`), else None."""
        end = read.segments[1] if len(read.segments) > 1 else len(read)
        start = read.tokens[:end]
        return start if start in self._starts else None

    def _restore(self, context: _Context, start: tuple[int, ...]) -> int:
        """Give ``context`` the fixed start ``start`` from its snapshot; how many tokens it then
        holds (0: no snapshot yet, or llama.cpp refused it)."""
        import ctypes

        import llama_cpp  # lazy: the [llama] extra

        with self._choosing:
            data = self._starts.get(start)
        if not data:
            return 0
        context.ctx.kv_cache_seq_rm(-1, 0, -1)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if llama_cpp.llama_state_seq_set_data(context.ctx.ctx, buffer, len(data), 0) != len(data):
            context.ctx.kv_cache_seq_rm(-1, 0, -1)
            return 0
        context.tokens[:len(start)] = start
        context.n_tokens, context.segments = len(start), [0]
        return len(start)

    def _snapshot(self, context: _Context, start: tuple[int, ...]) -> None:
        """Keep aside ``context``'s key/value entries, which hold exactly ``start`` now."""
        import ctypes

        import llama_cpp  # lazy: the [llama] extra

        size = llama_cpp.llama_state_seq_get_size(context.ctx.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(context.ctx.ctx, buffer, size, 0) != size:
            return
        data = bytes(buffer)
        with self._choosing:
            if start in self._starts:
                self._starts[start] = data
        self._keep(start, data)

    def _read(self, read: Read, first: int, *, all_rows: bool) -> np.ndarray:
        """Make a context hold ``read``; the logits after token ``first`` (``all_rows``: after
        each token from ``first`` on, one row each, ``first`` being the last segment's start)."""
        if len(read) > self.n_ctx:
            raise FactweaveError(f"the prompt and reply need {len(read)} tokens, more than the llama.cpp context "
                                 f"holds ({self.n_ctx})")
        context, keep = self._take(read, first)
        try:
            fixed = self._start_of(read) if keep == 0 else None  # (keep is 0 or past the first segment)
            if fixed is not None and len(fixed) <= first:
                keep = self._restore(context, fixed) or keep
            context.ctx.kv_cache_seq_rm(-1, keep, -1)
            context.n_tokens = self.kept = keep
            context.segments = [b for b in context.segments if b < keep]
            starts = [b for b in read.segments if b >= keep]
            ends = [*starts[1:], len(read)]
            rows: list[np.ndarray] = []
            for seg_start, seg_end in zip(starts, ends):
                context.segments.append(seg_start)
                every = all_rows and seg_end == len(read)
                for start in range(seg_start, seg_end, self.n_batch):
                    chunk = read.tokens[start:min(seg_end, start + self.n_batch)]
                    context.batch.set_batch(batch=chunk, n_past=start, logits_all=every)
                    context.ctx.decode(context.batch)
                    context.tokens[start:start + len(chunk)] = chunk
                    context.n_tokens = start + len(chunk)
                    if every:
                        rows.append(np.ctypeslib.as_array(context.ctx.get_logits(),
                                                          shape=(len(chunk), self.n_vocab)).copy())
                if seg_start == 0 and fixed is not None and seg_end == len(fixed) and self._starts.get(fixed) is None:
                    self._snapshot(context, fixed)
            if all_rows:
                return np.concatenate(rows)
            return np.ctypeslib.as_array(context.ctx.get_logits_ith(-1), shape=(self.n_vocab,)).copy()
        except BaseException:
            context.n_tokens, context.segments = 0, []  # what it holds is unknown: read again from scratch
            raise
        finally:
            context.lock.release()


def check_same_tokens(steps: LlamaCppSteps, tokenizer: Any, samples: Sequence[str]) -> None:
    """Refuse a GGUF whose vocabulary numbers tokens otherwise than ``tokenizer`` (the fact index
    and the prompts are encoded by it): each sample must encode to the same ids."""
    for text in samples:
        ours = tokenizer(text, add_special_tokens=False)["input_ids"]
        theirs = steps.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if list(ours) != list(theirs):
            raise FactweaveError("the GGUF file's vocabulary does not number tokens as the model's tokenizer does "
                                 f"({text[:40]!r}); use --engine transformers for this model")
