"""The immutable fact index: a prefix tree of tokenized facts in flat numpy arrays.

Nodes are numbered in depth-first pre-order, so the subtree of node ``n`` is the id range
``[n, subtree_end[n])``. That one property gives exact counts cheaply: the facts below ``n`` are the
terminal nodes in that range (``leaf_counts``), and a fact already generated in an answer (known by
its terminal node ``t``) lies below ``n`` exactly when ``n <= t < subtree_end[n]``.

Children are stored CSR-style: the edges of node ``n`` are ``edge_tokens/edge_children[child_offsets[n]
: child_offsets[n + 1]]``, sorted by token. A fact ends at a node marked in ``terminal_fact`` (an
explicit end of fact), so a fact that is a token prefix of another is kept; identical token
sequences collapse into one fact.

Usage::

    index = FactIndex.build(facts, tokenizer)
    cur = index.root()
    cur = index.step(cur, token_id)          # only tokens from index.next_tokens(cur)
    if index.can_end(cur): fact_id, cur = index.finish(cur)
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..knowledge.facts import Fact
from .cursor import FactCursor
from .table import FactTable
from .tokens import fact_token_ids, tokenizer_fingerprint

TREE_ARRAYS = ("child_offsets", "edge_tokens", "edge_children", "subtree_end", "leaf_counts", "terminal_fact", "fact_terminal")


@dataclass(frozen=True)
class FactIndex:
    """A built prefix tree over the token ids of facts, plus the facts themselves."""

    child_offsets: np.ndarray  # int64 [nodes + 1]
    edge_tokens: np.ndarray  # int32 [nodes - 1]
    edge_children: np.ndarray  # int32 [nodes - 1]
    subtree_end: np.ndarray  # int32 [nodes]
    leaf_counts: np.ndarray  # int32 [nodes]
    terminal_fact: np.ndarray  # int32 [nodes], fact id ending here or -1
    fact_terminal: np.ndarray  # int32 [facts], the node where each fact ends
    facts: FactTable
    fingerprint: str

    # ---- building -------------------------------------------------------------------------
    @classmethod
    def build(cls, facts: Iterable[Fact], tokenizer: Any, *, progress: bool = False) -> FactIndex:
        """Tokenize ``facts`` with ``tokenizer`` and build the tree; duplicates (same text) collapse,
        the first occurrence keeps its provenance."""
        unique: dict[str, Fact] = {}
        for fact in tqdm(facts, desc="reading facts", unit=" facts", disable=not progress):
            unique.setdefault(fact.text, fact)
        table_facts = list(unique.values())
        texts = list(unique.keys())
        ids: list[list[int]] = []
        step = 8192
        for i in tqdm(range(0, len(texts), step), desc="tokenizing", unit=" batches", disable=not progress):
            ids.extend(fact_token_ids(tokenizer, texts[i : i + step]))
        return cls.from_token_ids(ids, table_facts, tokenizer_fingerprint(tokenizer), progress=progress)

    @classmethod
    def from_token_ids(
        cls, sequences: Sequence[Sequence[int]], facts: Sequence[Fact], fingerprint: str, *, progress: bool = False
    ) -> FactIndex:
        """Build from already tokenized facts (``sequences[i]`` is fact ``i``). Sequences that are
        equal collapse into one fact; the surviving facts are renumbered in input order."""
        if len(sequences) != len(facts):
            raise ValueError("one token sequence per fact is required")
        order = sorted(range(len(sequences)), key=lambda i: tuple(sequences[i]))
        # Keep the first fact (by input order) of each distinct token sequence.
        keep: dict[tuple[int, ...], int] = {}
        for i in range(len(sequences)):
            keep.setdefault(tuple(sequences[i]), i)
        kept = sorted(keep.values())
        new_id = {old: new for new, old in enumerate(kept)}

        parent: list[int] = []
        token: list[int] = []
        end = [0]
        terminal = [-1]
        stack = [0]  # node ids on the path of the previous sequence, root first
        prev: tuple[int, ...] = ()
        n_nodes = 1
        for i in tqdm(order, desc="building tree", unit=" facts", disable=not progress):
            seq = tuple(sequences[i])
            if not seq:
                raise ValueError(f"fact {facts[i].text!r} tokenizes to nothing")
            lcp = 0
            limit = min(len(prev), len(seq))
            while lcp < limit and prev[lcp] == seq[lcp]:
                lcp += 1
            while len(stack) > lcp + 1:
                end[stack.pop()] = n_nodes
            for tok in seq[lcp:]:
                parent.append(stack[-1])
                token.append(tok)
                end.append(0)
                terminal.append(-1)
                stack.append(n_nodes)
                n_nodes += 1
            if terminal[stack[-1]] == -1 and keep[seq] == i:
                terminal[stack[-1]] = new_id[i]
            prev = seq
        while stack:
            end[stack.pop()] = n_nodes

        terminal_fact = np.asarray(terminal, dtype=np.int32)
        subtree_end = np.asarray(end, dtype=np.int32)
        is_terminal = np.concatenate([[0], np.cumsum(terminal_fact >= 0)]).astype(np.int64)
        leaf_counts = (is_terminal[subtree_end] - is_terminal[np.arange(n_nodes)]).astype(np.int32)
        parents = np.asarray(parent, dtype=np.int64)
        by_parent = np.argsort(parents, kind="stable")  # pre-order keeps siblings in token order
        child_offsets = np.searchsorted(parents[by_parent], np.arange(n_nodes + 1)).astype(np.int64)
        fact_terminal = np.full(len(kept), -1, dtype=np.int32)
        nodes_with_fact = np.nonzero(terminal_fact >= 0)[0]
        fact_terminal[terminal_fact[nodes_with_fact]] = nodes_with_fact
        return cls(
            child_offsets=child_offsets,
            edge_tokens=np.asarray(token, dtype=np.int32)[by_parent],
            edge_children=(by_parent + 1).astype(np.int32),
            subtree_end=subtree_end,
            leaf_counts=leaf_counts,
            terminal_fact=terminal_fact,
            fact_terminal=fact_terminal,
            facts=FactTable.from_facts(facts[i] for i in kept),
            fingerprint=fingerprint,
        )

    # ---- reading --------------------------------------------------------------------------
    @property
    def node_count(self) -> int:
        return len(self.subtree_end)

    def __len__(self) -> int:
        return len(self.fact_terminal)

    def root(self, used: tuple[int, ...] = ()) -> FactCursor:
        """A cursor at the start of a fact; ``used`` are terminal nodes of facts already said."""
        return FactCursor(0, used)

    def remaining(self, node: int, used: tuple[int, ...] = ()) -> int:
        """Facts below ``node`` that have not been generated yet."""
        n = int(self.leaf_counts[node])
        end = int(self.subtree_end[node])
        return n - sum(1 for t in used if node <= t < end)

    def _children(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.child_offsets[node], self.child_offsets[node + 1]
        return self.edge_tokens[a:b], self.edge_children[a:b]

    def next_tokens(self, cursor: FactCursor) -> np.ndarray:
        """Token ids that continue at least one fact not generated yet (sorted)."""
        tokens, children = self._children(cursor.node)
        if not cursor.used or len(children) == 0:
            return tokens
        used = np.asarray(cursor.used, dtype=np.int64)
        ends = self.subtree_end[children]
        spent = ((children[:, None] <= used[None, :]) & (used[None, :] < ends[:, None])).sum(axis=1)
        return tokens[self.leaf_counts[children] - spent > 0]

    def can_end(self, cursor: FactCursor) -> bool:
        """True when a fact ends here and has not been generated yet."""
        return self.terminal_fact[cursor.node] >= 0 and cursor.node not in cursor.used

    def child(self, node: int, token: int) -> int:
        """The child of ``node`` along ``token``, or -1."""
        tokens, children = self._children(node)
        j = int(np.searchsorted(tokens, token))
        if j < len(tokens) and tokens[j] == token:
            return int(children[j])
        return -1

    def step(self, cursor: FactCursor, token: int) -> FactCursor:
        """Follow ``token``; raises ``KeyError`` when no remaining fact continues with it."""
        node = self.child(cursor.node, token)
        if node < 0 or self.remaining(node, cursor.used) == 0:
            raise KeyError(f"token {token} continues no remaining fact at node {cursor.node}")
        return FactCursor(node, cursor.used)

    def finish(self, cursor: FactCursor) -> tuple[int, FactCursor]:
        """End the fact at the cursor: its fact id, and a root cursor that will not produce it again."""
        if not self.can_end(cursor):
            raise KeyError(f"no remaining fact ends at node {cursor.node}")
        return int(self.terminal_fact[cursor.node]), FactCursor(0, cursor.used + (cursor.node,))

    def fact_tokens(self, fact_id: int) -> list[int]:
        """The token ids of fact ``fact_id``, read back from the tree (walks up via pre-order)."""
        node = int(self.fact_terminal[fact_id])
        path: list[int] = []
        # The parent of n is the last node m < n whose subtree contains n; walk from the root down.
        cur = 0
        while cur != node:
            tokens, children = self._children(cur)
            j = int(np.searchsorted(children, node, side="right")) - 1
            path.append(int(tokens[j]))
            cur = int(children[j])
        return path

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array of the index by name (tree and fact table), for storage."""
        out = {name: getattr(self, name) for name in TREE_ARRAYS}
        out.update({f"facts.{k}": v for k, v in self.facts.arrays.items()})
        return out
