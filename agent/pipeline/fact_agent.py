"""Conversation -> standalone question -> knowledge-web facts -> re-ranked facts -> constrained
answer, grounded in the facts it states, with a trace.

The pipeline is a LangGraph graph (so the agent is a LangChain ``Runnable``)::

    rewrite -> retrieve -> rerank -> generate --(grounded answer)-----------------------------> finish
                  ^                      '--(not grounded)--> evidence --(grounded)-----------------> finish
                  |                                              |--(rounds left)--> subquery --^ (new queries: retrieve)
                  |                                              '--(tree "both")--> generate on the KB -> finish

``rewrite`` makes a follow-up standalone from the earlier turns (:mod:`.conversation`); the
rest works on the standalone question.

The fact tree used while generating (``tree``):

- ``"kb"``: the generator's own index (the whole knowledge base); nothing is retrieved;
- ``"question"``: a tree built for this question over the re-ranked facts (about a millisecond
  for a few dozen facts), so every ``Fact:`` line is one of the facts found for it;
- ``"both"``: the per-question tree first; when that answer is not grounded, the whole knowledge
  base;
- ``"kb-first"``: the whole knowledge base first (no retrieval); when that answer is not
  grounded, retrieval, re-ranking and the per-question tree (and its sub-query rounds).

An answer stands only when it is *grounded* (:mod:`.grounding`): contained in a stated fact of a
connected chain that starts at an entity of the question, or computed from such facts by a shown
step. Otherwise it is replaced by "I don't know." (the trace keeps what was withheld and why).
When the constrained attempt on the per-question tree gives no grounded answer, the model reads
the retrieved facts listed in its prompt and answers freely (:mod:`.evidence`); a candidate that
a connected chain of those facts holds is then stated, constrained to a tree of that chain's
facts, and grounded as any attempt (a small model often reads the answer in a fact it does not
pick while generating). When that fails too, the agent searches the web again with sub-queries
(written by the chat model, else the question keywords no fact covered), at most ``max_rounds`` times, and regenerates over the grown tree.

The trace is plain data (JSON-serializable): one record per step in order (retrieval with each
fact's score parts and provenance, the re-ranker's question type and choice or fallback,
sub-queries, each generation with its fact spans and token counts), the answer, timings per step
and token totals. :meth:`FactAgent.stream` yields the same records as events while they happen,
and the generated text token by token.
"""
from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

from ..errors import FactweaveError
from .conversation import MAX_CHARS, MAX_TURNS, Rewrite, rewrite_by_rules, rewrite_with_chat, trim_history
from .chaining import (ANSWER_LINE_TOKENS, ChainGuard, ChainingTree, asks_past, connected_reply, reply_through,
                       subject_relations)
from .evidence import READ_TOKENS, ListedFactsReader, evidence_chain, reading_holds
from .grounding import DONT_KNOW, Grounding, clean_answer, connected_prefix, ground, knows

if TYPE_CHECKING:
    from ..decoding import FactGenerator
    from ..llm.client import ChatClient
    from ..rerank import Reranker
    from ..web.web import KnowledgeWeb

TREE_MODES = ("kb", "question", "both", "kb-first")
# One more fact line and the answer line after it.
_ONE_FACT_TOKENS = 64
# How a follow-up is made standalone: "chat" by the chat model, "rules" by rules, "auto" by the
# chat model when it is an OpenAI-compatible endpoint (the small local models rewrite worse than
# the rules), else by rules.
REWRITE_MODES = ("auto", "chat", "rules")


@dataclass
class AgentAnswer:
    """The answer, the generated text, its constrained fact spans, and the trace.

    Each fact is ``{"start", "end", "text", "tree", "fact_id", "source", "provenance"}``:
    ``text[start:end]`` is the fact; ``tree`` says which tree constrained it (``question`` or
    ``kb``); ``fact_id`` is the web fact's id, or ``kb:<n>`` for fact ``n`` of the KB index.
    """

    question: str
    answer: str
    text: str
    facts: list[dict[str, Any]]
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def knows(self) -> bool:
        return knows(self.answer)

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "text": self.text, "facts": self.facts,
                "trace": self.trace}


class _State(TypedDict, total=False):
    asked: str               # the question as the user asked it
    question: str            # the standalone question (the follow-up rewritten)
    history: list[Mapping[str, Any]]
    beams: int | None
    stop: threading.Event | None
    pool: list[Any]          # every fact hit retrieved so far, one per fact
    chosen: list[Any]        # the re-ranked hits the per-question tree is built over
    queries: list[str]       # every query searched so far
    pending: list[str]       # queries to search next
    rounds: int              # sub-query rounds done
    evidence_round: int      # the last round the evidence attempt ran in (-1: none yet)
    attempts: list[dict]     # generation attempts (the last one decides)
    steps: Annotated[list[dict], operator.add]


class FactAgent:
    """Answer questions from facts that exist, and say which.

    Example::

        agent = FactAgent(open_generator("qwen2.5-coder-0.5b"), KnowledgeWeb.open("my-web"),
                          Reranker(chat_client_from_env()), tree="both")
        reply = agent.answer("Who founded Zorblax Station?")
        reply.answer, [f["text"] for f in reply.facts], reply.trace["steps"]
        for event in agent.stream("Where was Mira Quell born?"):
            print(event["event"], event.get("text", ""))

    ``chat`` writes the sub-queries of the fact-finding loop (default: the re-ranker's client;
    None: the question's uncovered keywords are searched instead).
    """

    def __init__(self, generator: FactGenerator, web: KnowledgeWeb | None = None,
                 reranker: Reranker | None = None, *, tree: str = "both", k: int = 10, max_rounds: int = 1,
                 max_subqueries: int = 2, chat: ChatClient | None = None, rewrite: str = "auto",
                 max_hops: int = 3, hop_k: int = 5, max_tree_facts: int = 60, evidence: bool = True,
                 max_history_turns: int = MAX_TURNS, max_history_chars: int = MAX_CHARS) -> None:
        if tree not in TREE_MODES:
            raise ValueError(f"tree must be one of {', '.join(TREE_MODES)}, not {tree!r}")
        if rewrite not in REWRITE_MODES:
            raise ValueError(f"rewrite must be one of {', '.join(REWRITE_MODES)}, not {rewrite!r}")
        if tree != "kb" and web is None:
            raise ValueError(f"tree={tree!r} builds a tree from retrieved facts: give a knowledge web")
        if tree != "question" and generator.index is None:
            raise ValueError(f"tree={tree!r} needs the generator's knowledge-base index")
        if k < 1 or max_rounds < 0 or max_subqueries < 0:
            raise ValueError("k must be >= 1, max_rounds and max_subqueries >= 0")
        self.generator, self.web, self.reranker = generator, web, reranker
        self.tree, self.k = tree, k
        self.max_rounds, self.max_subqueries = max_rounds, max_subqueries
        self.chat = chat if chat is not None else getattr(reranker, "client", None)
        self.rewrite = rewrite
        self.max_hops, self.hop_k, self.max_tree_facts = max_hops, hop_k, max_tree_facts
        self.evidence = evidence
        self._reader: ListedFactsReader | None = None
        self.max_history_turns, self.max_history_chars = max_history_turns, max_history_chars
        self.graph = self._build_graph()
        self._closers: list[Callable[[], None]] = []

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the agent is closed (e.g. stop the web it was opened with)."""
        self._closers.append(closer)

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()

    def __enter__(self) -> FactAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- running ---------------------------------------------------------------------------------

    def answer(self, question: str, *, history: Sequence[Mapping[str, Any]] | None = None,
               beams: int | None = None, stop: threading.Event | None = None) -> AgentAnswer:
        """Answer ``question`` through the whole pipeline. ``history``: the earlier turns of the
        conversation, oldest first, as ``{"role": "user" | "assistant", "content": ...}``
        (a follow-up is made standalone from them); ``stop``: set it to cut generation short."""
        started = time.perf_counter()
        state = self.graph.invoke(self._input(question, history, beams, stop))
        return self._result(state, time.perf_counter() - started)

    def stream(self, question: str, *, history: Sequence[Mapping[str, Any]] | None = None,
               beams: int | None = None, stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
        """Answer ``question`` as events (plain dicts), in order:

        - ``{"event": "step", "step": {...}}`` when a step ends (the trace's step record);
        - ``{"event": "token", "text": ..., "attempt": n}`` as text is generated;
        - ``{"event": "fact", "fact": {...}, "attempt": n}`` when a constrained fact completes
          (offsets into attempt ``n``'s text);
        - finally ``{"event": "answer", **AgentAnswer.as_dict()}``.

        Closing the iterator early stops the generation.
        """
        started = time.perf_counter()
        stop = stop or threading.Event()
        state: dict[str, Any] = {}
        try:
            for mode, chunk in self.graph.stream(self._input(question, history, beams, stop),
                                                 stream_mode=["custom", "values"]):
                if mode == "custom":
                    yield chunk
                else:
                    state = chunk
        finally:
            stop.set()
        yield {"event": "answer", **self._result(state, time.perf_counter() - started).as_dict()}

    def _input(self, question: str, history: Sequence[Mapping[str, Any]] | None, beams: int | None,
               stop: threading.Event | None) -> _State:
        if not isinstance(question, str) or not question.strip():
            raise FactweaveError("the question is empty")
        question = " ".join(question.split())
        history = trim_history(history or [], self.max_history_turns, self.max_history_chars)
        return {"asked": question, "question": question, "history": history, "beams": beams, "stop": stop,
                "pool": [], "chosen": [],
                "queries": [], "pending": [question], "rounds": 0, "evidence_round": -1, "attempts": [], "steps": []}

    # --- the graph -------------------------------------------------------------------------------

    def _build_graph(self):
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(_State)
        graph.add_node("rewrite", self._rewrite)
        graph.add_node("retrieve", self._retrieve)
        graph.add_node("rerank", self._rerank)
        graph.add_node("generate", self._generate)
        graph.add_node("evidence", self._evidence)
        graph.add_node("subquery", self._subquery)
        graph.add_node("generate_kb", self._generate_kb)
        graph.add_edge(START, "rewrite")
        graph.add_conditional_edges("rewrite", lambda s: "generate_kb" if self.tree in ("kb", "kb-first") else "retrieve",
                                    ["generate_kb", "retrieve"])
        graph.add_edge("retrieve", "rerank")
        graph.add_edge("rerank", "generate")
        graph.add_conditional_edges("generate", self._after_generate, ["evidence", "subquery", "generate_kb", END])
        graph.add_conditional_edges("evidence", self._after_generate, ["evidence", "subquery", "generate_kb", END])
        graph.add_conditional_edges("subquery", self._after_subquery, ["retrieve", "generate_kb", END])
        graph.add_conditional_edges("generate_kb", self._after_kb, ["retrieve", END])
        return graph.compile(name="factweave-agent")

    def _after_kb(self, state: _State) -> str:
        from langgraph.graph import END

        if self.tree != "kb-first" or _final(state["attempts"]).get("grounded") or _stopped(state):
            return END
        return "retrieve"

    def _after_generate(self, state: _State) -> str:
        from langgraph.graph import END

        if _final(state["attempts"]).get("grounded") or _stopped(state):
            return END
        if self.evidence and state["evidence_round"] < state["rounds"] and state["pool"]:
            return "evidence"
        if state["rounds"] < self.max_rounds:
            return "subquery"
        return "generate_kb" if self.tree == "both" else END

    def _after_subquery(self, state: _State) -> str:
        from langgraph.graph import END

        if state["pending"]:
            return "retrieve"
        return "generate_kb" if self.tree == "both" else END

    # --- the steps -------------------------------------------------------------------------------

    def _rewrite(self, state: _State) -> dict[str, Any]:
        if not state["history"]:  # a first question is its own standalone form: no step to show
            return {}
        t = time.perf_counter()
        rewrite = self.make_standalone(state["asked"], state["history"])
        step = {**rewrite.as_step(), "history_turns": len(state["history"]), "seconds": _since(t)}
        _emit({"event": "step", "step": step})
        return {"question": rewrite.standalone, "pending": [rewrite.standalone], "steps": [step]}

    def make_standalone(self, question: str, history: Sequence[Mapping[str, Any]]) -> Rewrite:
        """``question`` as a standalone question given the earlier turns ``history``."""
        if not history:
            return Rewrite(question, question, "no earlier turn")
        if self.rewrite == "chat" or self.rewrite == "auto" and _is_endpoint(self.chat):
            if self.chat is None:
                raise FactweaveError("rewrite='chat' needs a chat model")
            return rewrite_with_chat(self.chat, question, history)
        return rewrite_by_rules(question, history)

    def _retrieve(self, state: _State) -> dict[str, Any]:
        from ..web.retrieval import merge_hits, rank

        t = time.perf_counter()
        found = [self.web.search(query, self.k).hits for query in state["pending"]]
        pool = rank(merge_hits(state["pool"], *found), self.k * (1 + state["rounds"]))
        known = {h.id for h in state["pool"]}
        step = {"step": "retrieve", "queries": list(state["pending"]),
                "hits": [h.as_dict() for h in pool], "new": [h.id for h in pool if h.id not in known],
                "seconds": _since(t)}
        _emit({"event": "step", "step": step})
        return {"pool": pool, "queries": state["queries"] + state["pending"], "pending": [], "steps": [step]}

    def _rerank(self, state: _State) -> dict[str, Any]:
        pool = state["pool"]
        if self.reranker is None or not pool:
            return {"chosen": pool}
        t = time.perf_counter()
        # The hits themselves are the re-ranker's candidates (FactLike): one object from retrieval
        # to the trace.
        picked = self.reranker.rerank(state["question"], pool)
        chosen = list(picked.selected)
        step = {"step": "rerank", "question_type": picked.question_type, "used_fallback": picked.used_fallback,
                "reason": picked.reason, "selected": [c.id for c in picked.selected],
                "reply": picked.raw_reply, "seconds": _since(t)}
        _emit({"event": "step", "step": step})
        return {"chosen": chosen, "steps": [step]}

    def _generate(self, state: _State) -> dict[str, Any]:
        return self._attempt(state, "question")

    def _generate_kb(self, state: _State) -> dict[str, Any]:
        return self._attempt(state, "kb")

    def _attempt(self, state: _State, tree: str) -> dict[str, Any]:
        number = len(state["attempts"])
        record: dict[str, Any] = {"step": "generate", "attempt": number, "tree": tree}
        chain = None
        if tree == "question":
            chosen = state["chosen"]
            if not chosen:
                record.update(answer=DONT_KNOW, text="", facts=[], skipped="no fact retrieved", tokens=0,
                              prompt_tokens=0, seconds=0.0, tree_facts=0)
                _emit({"event": "step", "step": record})
                return {"attempts": state["attempts"] + [record], "steps": [record]}
            t = time.perf_counter()
            chain = ChainingTree(chosen, self.generator.tokenizer, self.web if self.max_hops else None,
                                 state["question"], max_hops=self.max_hops, k=self.hop_k,
                                 max_facts=self.max_tree_facts)
            record["tree_facts"] = chain.size
            record["tree_build_s"] = _since(t)
        hops: list[dict[str, Any]] = []
        self._generate_into(record, state, tree, chain, hops)
        records = [*hops, record]
        if record.get("grounded"):
            # A grounded answer may be a bridge the question goes past: then one more fact.
            asked = asks_past(state["question"], record["answer"], [f["text"] for f in record["facts"]],
                              self._facts_about(record["answer"], chain))
            if asked:
                record["asks_past"] = asked
                records.extend(self._one_more_fact(record, state, tree, chain, number + 1))
        elif record.get("grounded") is False and not record.get("stopped"):
            repair = self._reanswer(record, state, tree, chain, number + 1)
            if repair is not None:
                records.append(repair)
            else:
                records.extend(self._one_more_fact(record, state, tree, chain, number + 1))
        attempts = [r for r in records if r["step"] == "generate"]
        return {"attempts": state["attempts"] + attempts, "steps": records}

    def _generate_into(self, record: dict[str, Any], state: _State, tree: str, chain: ChainingTree | None,
                       hops: list[dict[str, Any]], reply_prefix: str = "",
                       prefix_facts: Sequence[dict[str, Any]] = (), budget: int = ANSWER_LINE_TOKENS,
                       guarded: bool = True, reading: str = "") -> None:
        """Run one generation for ``record`` (streaming its tokens, facts and hops) and fill it in.
        ``guarded``: cut the generation when a fact breaks away from the question's chain (not
        for a tree whose facts were checked to be connected as a whole: any order is fine; its
        budget is then ``budget``). ``reading``: the evidence attempt's candidate, which is the
        answer when the facts stated ground it."""
        number = record["attempt"]
        t = time.perf_counter()
        answer = None
        stop = state.get("stop")
        if reply_prefix:
            _emit({"event": "token", "text": reply_prefix, "attempt": number})
            for fact in prefix_facts:
                _emit({"event": "fact", "fact": fact, "attempt": number})
        shift = len(reply_prefix)
        options: dict[str, Any] = {"beams": state.get("beams"), "reply_prefix": reply_prefix}
        hop = chain.on_fact if chain is not None and chain.web is not None else None
        guard = None
        if reply_prefix or not guarded:
            options["max_new_tokens"] = budget
        elif (state.get("beams") or self.generator.beams) == 1:
            guard = ChainGuard(state["question"], hop)
            hop = guard.on_fact
            options["stop_items"] = guard.cut
        if chain is not None:
            options["index"] = chain.index
        options["on_fact"] = hop
        for event in self.generator.stream(state["question"], **options):
            if chain is not None:
                for hop in chain.take_hops():
                    hops.append(hop)
                    _emit({"event": "step", "step": hop})
            if event.kind == "token":
                _emit({"event": "token", "text": event.text, "attempt": number})
            elif event.kind == "fact":
                _emit({"event": "fact", "fact": self._fact(event.fact, tree, chain, shift), "attempt": number})
            else:
                answer = event.answer
            if stop is not None and stop.is_set():
                break
        if chain is not None:
            hops.extend(chain.take_hops())
        if answer is None:  # stopped early: what was generated so far is not an answer
            record.update(answer="", text="", facts=[], truncated=True, stopped=True, tokens=0, prompt_tokens=0,
                          seconds=_since(t))
            return
        cut = guard is not None and bool(guard.cut)
        if cut:  # ended by the agent, not by the token budget: not a truncated answer
            record["cut"] = f"fact {len(guard.stated[0])} broke away from the chain"
        record.update(answer=answer.answer, text=reply_prefix + answer.text,
                      facts=[*prefix_facts, *(self._fact(f, tree, chain, shift) for f in answer.facts)],
                      truncated=answer.truncated and not cut, tokens=answer.tokens, prompt_tokens=answer.prompt_tokens,
                      cached_prompt_tokens=answer.timings.get("cached_prompt_tokens", 0),
                      prefill_s=answer.timings.get("prefill_s", 0.0), seconds=_since(t))
        if chain is not None:
            record["tree_facts_final"] = len(chain.index.facts)
        verdict = ground(state["question"], answer.answer, [f["text"] for f in record["facts"]])
        if reading:
            # The reading's answer, when the facts stated hold it, stands: the model restating it
            # as a sentence, or running out of tokens after the facts, changes nothing.
            held = reading_holds(state["question"], reading, [f["text"] for f in record["facts"]])
            if held.grounded:
                verdict = Grounding(True, held.how, held.facts, held.short or reading)
                record.update(truncated=False, answer_from="the reading of the listed facts")
        record["grounded"] = verdict.grounded
        record["grounding"] = verdict.as_dict()
        _emit({"event": "step", "step": record})

    def _reanswer(self, failed: dict[str, Any], state: _State, tree: str, chain: ChainingTree | None,
                  number: int) -> dict[str, Any] | None:
        """When the stated facts broke away from the question (a fact after the first ones shares
        nothing with them), answer again from the facts before the break: the reply so far up to
        the end of the last connected fact, then ``Answer:``. The model writes the answer; the
        facts it rests on were stated in the failed attempt, so nothing new is claimed."""
        facts = failed["facts"]
        keep, prefix = connected_reply(state["question"], failed["text"], [(f["text"], f["end"]) for f in facts])
        if not prefix:
            return None
        record: dict[str, Any] = {"step": "generate", "attempt": number, "tree": tree,
                                  "reanswer_of": failed["attempt"], "kept_facts": keep,
                                  "dropped": [f["text"] for f in facts[keep:]]}
        if chain is not None:
            record["tree_facts"] = failed.get("tree_facts", chain.size)
        self._generate_into(record, state, tree, None if chain is None else _Frozen(chain), [], prefix,
                            facts[:keep])
        return record

    def _facts_about(self, answer: str, chain: ChainingTree | None) -> list[str]:
        """The tree's triples that go on from ``answer``: on a per-question tree its facts; on
        the whole KB, whose facts are not listed, ``<answer> <relation> <...>`` for each relation
        the tree holds for it (:func:`~.chaining.subject_relations`)."""
        if chain is not None:
            return [f.text for f in chain.index.facts]
        name = clean_answer(answer).rstrip(".").strip()
        if not name or self.generator.index is None:
            return []
        return [f"<{name}> <{r}> <...> ." for r in subject_relations(self.generator.index, self.generator.tokenizer, name)]

    def _one_more_fact(self, failed: dict[str, Any], state: _State, tree: str, chain: ChainingTree | None,
                       number: int) -> list[dict[str, Any]]:
        """When the chain stopped one hop short, the reply so far, then ``Fact:``: the model states
        one more fact (constrained, from a tree the hops have grown) before it answers. Short:
        every stated fact is on the chain but the answer is in none of them ("<Eisbrecher>
        <country of origin> <Germany>", then "Answer: German"), or the answer is a bridge the
        question asks past (:func:`~.chaining.asks_past`: "Canada" for the official language of
        the country X is located in). Nothing is claimed that is not stated. Returns the new
        attempt after the hops it made (none when it does not apply)."""
        facts = failed["facts"]
        if not facts or failed.get("cut") or failed.get("truncated"):
            return []
        if connected_prefix(state["question"], [f["text"] for f in facts]) < len(facts):
            return []
        prefix = reply_through(failed["text"], facts[-1]["end"], "Fact:")
        record: dict[str, Any] = {"step": "generate", "attempt": number, "tree": tree,
                                  "continues": failed["attempt"]}
        if chain is not None:
            record["tree_facts"] = len(chain.index.facts)
        hops: list[dict[str, Any]] = []
        self._generate_into(record, state, tree, chain, hops, prefix, facts, budget=_ONE_FACT_TOKENS)
        return [*hops, record]

    def _evidence(self, state: _State) -> dict[str, Any]:
        """The model reads the listed facts (the pool's first ``k``) and answers freely; a
        candidate grounded in a connected chain of them is stated on a tree of that chain's facts
        and grounded as any attempt (:mod:`.evidence`)."""
        t = time.perf_counter()
        listed = state["pool"][: self.k]
        read_before = [s["listed"] for s in state["steps"] if s["step"] == "evidence"]
        if read_before and read_before[-1] == [h.id for h in listed]:  # the same facts: the same reading
            return {"evidence_round": state["rounds"]}
        texts = [h.text for h in listed]
        if self._reader is None:
            self._reader = ListedFactsReader(self.generator, max_new_tokens=READ_TOKENS)
        read = self._reader.read(state["question"], texts, cancel=state.get("stop"))
        candidate = clean_answer(read.answer)
        step: dict[str, Any] = {"step": "evidence", "round": state["rounds"], "listed": [h.id for h in listed],
                                "reply": read.text, "candidate": candidate}
        out: dict[str, Any] = {"evidence_round": state["rounds"]}
        check, chain = evidence_chain(state["question"], candidate, texts) if knows(candidate) else (None, [])
        step["grounded"] = bool(chain)
        step["how"] = ("the model found no answer in the listed facts" if check is None
                       else f"in the listed facts: {check.how}")
        step["chain"] = [listed[i].id for i in chain]
        step["seconds"] = _since(t)
        _emit({"event": "step", "step": step})
        if not chain or _stopped(state):
            return {**out, "steps": [step]}
        number = len(state["attempts"])
        record: dict[str, Any] = {"step": "generate", "attempt": number, "tree": "question", "evidence": candidate}
        t = time.perf_counter()
        tree = ChainingTree([listed[i] for i in chain], self.generator.tokenizer, None, state["question"],
                            max_hops=0, max_facts=len(chain))
        record["tree_facts"] = tree.size
        record["tree_build_s"] = _since(t)
        # The tree's facts are connected as a whole: stated in any order, no fact is cut. A budget
        # for stating them all and the answer line.
        self._generate_into(record, state, "question", tree, [], guarded=False,
                            budget=_ONE_FACT_TOKENS * len(chain) + ANSWER_LINE_TOKENS, reading=candidate)
        return {**out, "attempts": state["attempts"] + [record], "steps": [step, record]}

    def _subquery(self, state: _State) -> dict[str, Any]:
        t = time.perf_counter()
        asked = {q.casefold() for q in state["queries"]}
        if self.chat is not None and self.max_subqueries:
            from ..web.subqueries import write_subqueries

            try:
                queries = write_subqueries(self.chat, state["question"], state["pool"], self.max_subqueries)
                how = "written by the chat model"
            except FactweaveError as exc:
                queries, how = [], f"the chat model failed: {exc}"
        else:
            from ..web.keywords import extract_keywords

            covered = {kw.casefold() for h in state["pool"] for kw in h.keywords}
            queries = [kw for kw in extract_keywords(state["question"]) if kw.casefold() not in covered]
            queries = queries[: self.max_subqueries]
            how = "question keywords no retrieved fact is linked to"
        queries = [q for q in queries if q.casefold() not in asked]
        step = {"step": "subquery", "round": state["rounds"] + 1, "queries": queries, "how": how,
                "seconds": _since(t)}
        _emit({"event": "step", "step": step})
        return {"pending": queries, "rounds": state["rounds"] + 1, "steps": [step]}

    # --- the result ------------------------------------------------------------------------------

    def _fact(self, span: Any, tree: str, chain: ChainingTree | None, shift: int = 0) -> dict[str, Any]:
        out = {"start": span.start + shift, "end": span.end + shift, "text": span.text, "tree": tree}
        if tree == "question":
            hit = chain.hit(span.id) if chain is not None else None
            out.update(fact_id=hit.id if hit else None, source=hit.source if hit else span.source,
                       provenance={"kind": hit.kind, **hit.provenance} if hit else {})
        else:
            fact = self.generator.index.facts[span.id]
            out.update(fact_id=f"kb:{span.id}", source=fact.source,
                       provenance={"kind": "statement" if fact.statement else "triple", "source": fact.source,
                                   **({} if fact.statement else {"subject": fact.subject,
                                                                 "predicate": fact.predicate,
                                                                 "object": fact.object})})
        return out

    def _result(self, state: dict[str, Any], seconds: float) -> AgentAnswer:
        steps = list(state.get("steps", []))
        attempts = state.get("attempts", [])
        last = _final(attempts) if attempts else {"answer": "", "text": "", "facts": []}
        grounded = bool(last.get("grounded"))
        # A sentence that says a stated triple is answered by the triple's object.
        answer = ((last.get("grounding") or {}).get("short") or clean_answer(last["answer"])) if grounded else DONT_KNOW
        # prefill_s: the part of generate_s spent reading the prompts before the first token.
        timings = {"rewrite_s": 0.0, "hop_s": 0.0, "retrieve_s": 0.0, "rerank_s": 0.0, "evidence_s": 0.0,
                   "subquery_s": 0.0, "tree_build_s": 0.0, "generate_s": 0.0, "prefill_s": 0.0}
        for step in steps:
            timings[f"{step['step']}_s"] += step.get("seconds", 0.0)
            timings["tree_build_s"] += step.get("tree_build_s", 0.0)
            if step["step"] == "generate":
                timings["prefill_s"] += step.get("prefill_s", 0.0)
        timings = {name: round(value, 4) for name, value in timings.items()}
        timings["total_s"] = round(seconds, 4)
        trace = {
            "question": state.get("asked", ""), "standalone": state.get("question", ""), "tree": self.tree,
            "settings": {"k": self.k, "rerank": self.reranker is not None, "max_rounds": self.max_rounds,
                         "beams": state.get("beams") or self.generator.beams},
            "steps": steps, "answer": answer, "grounded": grounded, "supported": grounded,
            "grounding": last.get("grounding", {"grounded": False, "how": "no attempt ran", "facts": []}),
            "facts": last["facts"],
            "truncated": bool(last.get("truncated")),
            "subqueries": [q for s in steps if s["step"] == "subquery" for q in s["queries"]],
            "timings": timings,
            "tokens": {"prompt": sum(a.get("prompt_tokens", 0) for a in attempts),
                       "prompt_cached": sum(a.get("cached_prompt_tokens", 0) for a in attempts),
                       "generated": sum(a.get("tokens", 0) for a in attempts)},
        }
        if not grounded and knows(clean_answer(last.get("answer", ""))):
            trace["withheld"] = clean_answer(last["answer"])
            trace["withheld_because"] = trace["grounding"]["how"]
        if any(a.get("stopped") for a in attempts):
            trace["stopped"] = True
        return AgentAnswer(trace["question"], answer, last["text"], last["facts"], trace)


def _final(attempts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The attempt that answers: the last one, unless it went one fact past a grounded answer
    and is not grounded itself (then that answer stands)."""
    last = attempts[-1]
    if not last.get("grounded") and last.get("continues") is not None:
        base = next((a for a in attempts if a["attempt"] == last["continues"]), None)
        if base is not None and base.get("grounded"):
            return base
    return last


class _Frozen:
    """A chaining tree seen by a re-answer: the same facts and ids, no more hops."""

    def __init__(self, chain: ChainingTree) -> None:
        self.index, self.web, self._chain = chain.index, None, chain

    def hit(self, fact_id: int) -> Any:
        return self._chain.hit(fact_id)

    def take_hops(self) -> list[dict[str, Any]]:
        return []


def _is_endpoint(chat: Any) -> bool:
    """Whether ``chat`` is a chat model behind an OpenAI-compatible endpoint (not the local one)."""
    from ..llm.client import OpenAIChat

    return isinstance(chat, OpenAIChat)


def _stopped(state: _State) -> bool:
    stop = state.get("stop")
    return stop is not None and stop.is_set()


def _since(t: float) -> float:
    return round(time.perf_counter() - t, 4)


def _emit(event: dict[str, Any]) -> None:
    """Hand ``event`` to :meth:`FactAgent.stream`'s reader (nothing happens under ``invoke``)."""
    from langgraph.config import get_stream_writer

    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run
        return
    writer(event)
