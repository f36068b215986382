"""How the agent answers, in one frozen dataclass: :class:`AgentOptions`.

One definition for every place that sets them: the settings file and environment
(:meth:`agent.settings.Settings.agent_options`), a UI session's settings panel (its tree and k
over the settings') and :class:`~agent.pipeline.fact_agent.FactAgent` itself, which takes an
``AgentOptions`` and, for convenience, any of its fields as keywords.

Example::

    >>> options = AgentOptions(tree="question", k=8)
    >>> agent = FactAgent(generator, web, options=options)   # not run: needs a model and a web   # doctest: +SKIP
    >>> agent = FactAgent(generator, web, tree="question", k=8)   # the same   # doctest: +SKIP
    >>> import dataclasses
    >>> dataclasses.replace(options, checks=False)                 # another agent's options
    AgentOptions(tree='question', k=8, ..., checks=False, ...)
"""
from __future__ import annotations

from dataclasses import dataclass

from .conversation import MAX_CHARS, MAX_TURNS

# The fact trees, in the order tried: the whole KB ("kb"), the retrieved facts ("question"), the
# retrieved facts then the KB ("both"), the KB then retrieval ("kb-first").
TREE_MODES = ("kb", "question", "both", "kb-first")
# How a follow-up is made standalone: "chat" by the chat model, "rules" by rules, "auto" by the
# chat model when it is an OpenAI-compatible endpoint (the small local models rewrite worse than
# the rules), else by rules.
REWRITE_MODES = ("auto", "chat", "rules")


@dataclass(frozen=True)
class AgentOptions:
    """``tree``: the fact trees (:data:`TREE_MODES`); ``k``: facts retrieved per query;
    ``max_rounds``/``max_subqueries``: fact-finding rounds after a first look-up that is not proven,
    and sub-queries per round; ``rewrite``: how a follow-up is made standalone
    (:data:`REWRITE_MODES`); ``max_hops``/``hop_k``/``max_tree_facts``: bridge entities searched
    while generating, facts each brings, and the per-question tree's cap; ``checks``: prove that the
    fact holding an answer says what the question asks; ``hop_by_hop``: a look-up asked through a
    relative or role that no attempt proved is asked again in two questions, who fills the role and
    then the question of them, each with its own retrieval (:meth:`FactAgent._hops`);
    ``max_history_turns``/``max_history_chars``:
    how much of a conversation a follow-up is read with."""

    tree: str = "both"
    k: int = 10
    max_rounds: int = 0
    max_subqueries: int = 2
    rewrite: str = "auto"
    max_hops: int = 3
    hop_k: int = 5
    max_tree_facts: int = 60
    checks: bool = True
    hop_by_hop: bool = True
    max_history_turns: int = MAX_TURNS
    max_history_chars: int = MAX_CHARS

    def __post_init__(self) -> None:
        if self.tree not in TREE_MODES:
            raise ValueError(f"tree must be one of {', '.join(TREE_MODES)}, not {self.tree!r}")
        if self.rewrite not in REWRITE_MODES:
            raise ValueError(f"rewrite must be one of {', '.join(REWRITE_MODES)}, not {self.rewrite!r}")
        if self.k < 1 or self.max_rounds < 0 or self.max_subqueries < 0:
            raise ValueError("k must be >= 1, max_rounds and max_subqueries >= 0")
        if self.max_hops < 0 or self.hop_k < 1 or self.max_tree_facts < 1:
            raise ValueError("max_hops must be >= 0, hop_k and max_tree_facts >= 1")
