"""A request's arguments for ReFactX's rule inside vLLM, checked when it arrives, and the trees
built from requests' own facts, cached by content.

The arguments ride in ``SamplingParams.extra_args`` (the OpenAI-compatible server's
``vllm_xargs``): ``refactx`` (the rule on or off), ``refactx_facts`` (the request's own facts: its
tree instead of the server's), ``refactx_hops`` and ``refactx_question`` (that tree growing along
the facts it states; :mod:`agent.decoding.vllm_processor`). :meth:`RuleArgs.parse` checks them
where vLLM checks a request, when it arrives (the processor's ``validate_params``): a bad one is
that request's one-line 400, never an error inside the engine step.

Why caps. A request's own tree is built inside vLLM's engine step, where every request of the
batch waits for it: 64 kB of facts stalled the whole batch 0.26 s (0.10 s on this 2-core machine
with SmolLM2's tokenizer; 0.07 s at the caps below). So a request's facts are capped, and a tree
built once serves every later request with the same facts (an agent's retries, a client asking
again) from :class:`TreeCache`:

- at most :data:`MAX_FACTS` (512) facts, :data:`MAX_FACT_CHARS` (1,000) characters a fact and
  :data:`MAX_FACTS_CHARS` (32,768) characters in all: the agent's per-question trees are tens of
  facts of ~100 characters (10 retrieved, 60 at most with its hops), and a few hundred such facts
  still fit;
- a question of at most :data:`MAX_QUESTION_CHARS` (4,000) characters; at most :data:`MAX_HOPS`
  (8) hops; a reply of at most :data:`MAX_REPLY_TOKENS` (8,192) tokens walked again;
- :class:`TreeCache` holds the :data:`CACHED_TREES` (64) trees used last, keyed by the facts in
  their order (a tree's fact ids follow it), so at most 64 x 32,768 characters of facts.

No vLLM here: CI, which has none, tests all of it. Example::

    >>> args = RuleArgs.parse({"refactx": True, "refactx_facts": ["<Buck Owens> <instrument> <guitar> ."]})
    >>> args
    RuleArgs(rule=True, facts=('<Buck Owens> <instrument> <guitar> .',), hops=0, question=None, reply=0, open=False, kb=False)
    >>> tree = TreeCache(tokenizer).tree(args.facts)   # the same facts again: the same tree, not rebuilt
    ...                                                # (not run: needs a tokenizer)   # doctest: +SKIP
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..index import FactIndex, FactTree, GrowingFactIndex
from ..knowledge.facts import Fact
from .tracker import FactTracker, TraceState

#: ``extra_args`` keys: the rule on or off; a request's own facts (a list of fact texts, its tree
#: instead of the server's); how many entities that tree may grow by (0: it does not grow); the
#: question whose names are not searched (default: the prompt's text).
RULE_KEY, FACTS_KEY, HOPS_KEY, QUESTION_KEY = "refactx", "refactx_facts", "refactx_hops", "refactx_question"
#: ``extra_args`` keys of a reply written in parts: how many of the prompt's last tokens are the
#: reply so far (walked again by the rule); its last line open at the tree's root.
REPLY_KEY, OPEN_KEY = "refactx_reply", "refactx_open"
#: ``extra_args`` key: the request's facts join the server's tree instead of replacing it (a
#: worker's whole-KB attempt with the facts uploaded to its web since the server's tree was built).
KB_KEY = "refactx_kb"
MAX_HOPS = 8
MAX_REPLY_TOKENS = 8_192
#: How many prompt tokens are read back to tell whether the reply starts a line (or a fact).
PROMPT_TAIL = 16
MAX_FACTS, MAX_FACT_CHARS, MAX_FACTS_CHARS = 512, 1_000, 32_768
MAX_QUESTION_CHARS = 4_000
CACHED_TREES = 64

# The OpenAI server's vllm_xargs may carry a flag as 1 or "true".
_ON, _OFF = (True, 1, "true", "1"), (None, False, 0, "false", "0")


@dataclass(frozen=True)
class RuleArgs:
    """One request's arguments for the rule. ``rule``: on, off, or None (the server's default);
    ``facts``: its own facts, in order (empty: the server's tree)."""

    rule: bool | None = None
    facts: tuple[str, ...] = ()
    hops: int = 0
    question: str | None = None
    reply: int = 0
    open: bool = False
    kb: bool = False

    @classmethod
    def parse(cls, extra: Mapping[str, Any] | None) -> RuleArgs:
        """The arguments in ``extra`` (``SamplingParams.extra_args``), or ValueError naming the
        one that is wrong, in one line."""
        extra = extra or {}
        rule = extra.get(RULE_KEY)
        if rule not in _ON + _OFF:
            raise ValueError(f"extra_args.{RULE_KEY} must be true or false")
        facts = _facts(extra.get(FACTS_KEY))
        hops = _whole(extra.get(HOPS_KEY, 0), HOPS_KEY, MAX_HOPS)
        if hops and not facts:
            raise ValueError(f"extra_args.{HOPS_KEY} grows a request's own tree: give its facts in {FACTS_KEY}")
        question = extra.get(QUESTION_KEY)
        if question is not None and not isinstance(question, str):
            raise ValueError(f"extra_args.{QUESTION_KEY} must be a text")
        if question is not None and len(question) > MAX_QUESTION_CHARS:
            raise ValueError(f"extra_args.{QUESTION_KEY} has {len(question)} characters, over this server's limit "
                             f"of {MAX_QUESTION_CHARS}")
        reply = _whole(extra.get(REPLY_KEY, 0), REPLY_KEY, MAX_REPLY_TOKENS)
        opened, kb = extra.get(OPEN_KEY), extra.get(KB_KEY)
        for key, flag in ((OPEN_KEY, opened), (KB_KEY, kb)):
            if flag not in _ON + _OFF:
                raise ValueError(f"extra_args.{key} must be true or false")
        if kb in _ON and hops:
            raise ValueError(f"extra_args.{HOPS_KEY} grows a request's own tree, not the server's ({KB_KEY})")
        return cls(None if rule is None else rule in _ON, facts, hops, question, reply, opened in _ON, kb in _ON)

    def start(self, tracker: FactTracker, prompt_ids: Sequence[int]) -> TraceState:
        """The rule's state before the request's first token: from the prompt's tail (a line that
        ends with ``Fact:`` starts inside a fact), then walked over the reply so far when the
        prompt ends with one (``refactx_reply`` tokens: its facts are spent, its open line goes
        on), then opened at the tree's root when asked (``refactx_open``)."""
        reply = min(self.reply, len(prompt_ids))
        before = list(prompt_ids[:len(prompt_ids) - reply])
        pieces = tracker.vocab.pieces
        state = tracker.start("".join(pieces[t] for t in before[-PROMPT_TAIL:] if t < len(pieces)))
        for pos, token in enumerate(prompt_ids[len(before):]):
            state = tracker.advance(state, int(token), pos - reply)
        if self.open and not state.active:
            state = TraceState(state.line, True, tracker.index.root(state.cursor.used), 0, state.spans)
        return state

    def wants_rule(self, default: bool = False) -> bool:
        """Whether the request is under the rule; ``default`` for one that says nothing."""
        return default if self.rule is None else self.rule


def _whole(value: Any, key: str, most: int) -> int:
    """A whole number from 0 to ``most`` (the OpenAI server's vllm_xargs may carry it as a
    string), or ValueError naming ``key``."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise ValueError(f"extra_args.{key} must be a whole number from 0 to {most}")
    return value


def _facts(value: Any) -> tuple[str, ...]:
    """``refactx_facts`` within the caps (see the module docstring), or ValueError."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(f, str) and f.strip() for f in value):
        raise ValueError(f"extra_args.{FACTS_KEY} must be a list of fact texts")
    if len(value) > MAX_FACTS:
        raise ValueError(f"extra_args.{FACTS_KEY} has {len(value)} facts, over this server's limit of {MAX_FACTS}")
    longest = max(value, key=len, default="")
    if len(longest) > MAX_FACT_CHARS:
        raise ValueError(f"extra_args.{FACTS_KEY}: a fact of {len(longest)} characters, over this server's limit of "
                         f"{MAX_FACT_CHARS}: {longest[:40]!r}...")
    total = sum(map(len, value))
    if total > MAX_FACTS_CHARS:
        raise ValueError(f"extra_args.{FACTS_KEY} has {total} characters in all, over this server's limit of "
                         f"{MAX_FACTS_CHARS}")
    return tuple(value)


class TreeCache:
    """Trees of requests' own facts for one tokenizer, built once per content: the same facts in
    the same order get the same (immutable) tree; past ``max_trees`` the least recently used goes.

    Example (not run: needs a tokenizer)::

        trees = TreeCache(tokenizer)
        assert trees.tree(("<a> <b> <c> .",)) is trees.tree(("<a> <b> <c> .",))
    """

    def __init__(self, tokenizer: Any, max_trees: int = CACHED_TREES) -> None:
        self.tokenizer = tokenizer
        # Keyed by the tuple of facts itself (its hash, then equality): two lists that differ in
        # one character never share a tree.
        self._cached = lru_cache(maxsize=max_trees)(self._build)
        self._joined = lru_cache(maxsize=max_trees)(self._join)

    def tree(self, facts: tuple[str, ...]) -> FactTree:
        """The tree of ``facts`` (checked by :meth:`RuleArgs.parse`), built on first use."""
        return self._cached(facts)

    def joined(self, base: FactTree, facts: tuple[str, ...]) -> FactTree:
        """``base`` (the server's tree) with ``facts`` added (``refactx_kb``), built on first use
        (keyed by the facts: one server has one base)."""
        if getattr(self, "_base", base) is not base:
            self._joined.cache_clear()  # (one processor has one server tree: not reached)
        self._base = base
        return self._joined(facts)

    def _build(self, facts: tuple[str, ...]) -> FactTree:
        return FactIndex.build([Fact.from_statement(text) for text in facts], self.tokenizer, progress=False)

    def _join(self, facts: tuple[str, ...]) -> FactTree:
        joined = GrowingFactIndex(self._base, self.tokenizer, max_facts=len(facts))
        joined.grow(Fact.from_statement(text) for text in facts)
        return joined
