"""Conversation -> standalone question -> knowledge-web facts -> a plan -> a constrained reply,
proven by the facts it states, with a trace.

The pipeline is a LangGraph graph (so the agent is a LangChain ``Runnable``)::

    rewrite -> retrieve -> rerank -> plan --(two options)--> options ---------------------------------> finish
                  ^                      '--(a look-up)---> read --(proven)--------------------------------> finish
                  |                                           |--(rounds left)--> subquery --^ (retrieve)
                  |                                           '--(tree "both")--> kb -----------------------> finish

``rewrite`` makes a follow-up standalone from the earlier turns (:mod:`.conversation`); the
rest works on the standalone question. ``plan`` reads what the question asks (:mod:`.plan`):
a look-up, or a step over two options it names (which is earlier, later, more or less; whether
the first is; whether both share a value; how far apart they are). A step is computed in code
from facts the model states for each option (:mod:`.comparison`).

A look-up is **read** (:mod:`.replies`): the retrieved facts are listed in the prompt
(``prompts/agent/``) and the model copies the ones it needs as ``Fact:`` lines, constrained to
a tree of them that grows with the facts of the entities a stated fact brings in
(:mod:`.chaining`), then answers; one prompt read, the facts' forced tokens fed in one pass
(the budget counts the model's own tokens: a long fact is never cut). A look-up asked through
a role of a name it gives ("Who is the spouse of the director of film X?") opens with X's fact
that says who fills the role (:func:`~.chaining.role_lead`, stated by the agent and marked so
in the trace), then one fact the model picks among those about that person closest to the
question asked of them ("Who is the spouse of <director>?"), then the model answers: a small
model otherwise stops before any fact, or at the film's own. On 2WikiMultiHopQA with the 1.5B
preset this took the agent from 13 to 16 of 30 right.

The fact trees (``tree``):

- ``"kb"``: the generator's own index (the whole knowledge base); nothing is retrieved;
- ``"question"``: the retrieved facts, listed and in a per-question tree;
- ``"both"``: the per-question tree first; when that answer is not proven, the whole KB;
- ``"kb-first"``: the whole knowledge base first (no retrieval); when that answer is not
  proven, retrieval and the per-question tree.

An answer stands only when it is *proven* (:mod:`.grounding`, :mod:`.asked`): contained in a
stated fact of a connected chain that starts at an entity of the question (or computed from such
facts by a shown step), and the fact holding it says what the question asks (a triple's
relation is the one the question asks, by embedding similarity against the knowledge base's
relations; a statement is judged by the local model). When the relation is not the one asked
and the chain can go on, the model states one more fact and answers again. Otherwise the
answer is withheld: "I don't know.", the trace keeping what was withheld and which check failed.
Each attempt, its checks and its continuations run in :mod:`.attempts`.

The trace is plain data (JSON-serializable): one record per step in order (retrieval with each
fact's score parts and provenance, the plan, each attempt with its fact spans, token counts and
checks), the answer, timings per step and token totals. :meth:`FactAgent.stream` yields the same
records as events while they happen, and the generated text as it is written.
"""
from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, cast

from ..decoding import FactGenerator
from ..embeddings import Embedder
from ..errors import FactweaveError
from ..events import AgentEvent, AnswerEvent, StatedFact
from ..index.base import FactTree
from ..knowledge.keywords import extract_keywords
from ..llm.client import OpenAIChat
from ..models import LoadedModel
from ..prompts import FewShotPrompt, listed_question
from ..web.retrieval import merge_hits, rank
from ..web.subqueries import write_subqueries
from .agent_options import AgentOptions
from .attempts import GenerationAttempts, emit, since
from .asked import AskedChecker
from .question_reading import ask_holder, ask_past, asked_through
from .relations import RelationLabels, RelationMatcher
from .relation_reading import KindReader, RelationReader
from .trace import question_fact
from .chaining import ChainingTree, is_about, role_holders, role_lead
from .conversation import Rewrite, check_question, rewrite_by_rules, rewrite_with_chat, trim_history
from .grounding import DONT_KNOW, clean_answer, holds_answer, knows
from .comparison import ComparisonStep
from .plan import PlanReader, QuestionPlan, order_asked
from .replies import ReplyWriter

if TYPE_CHECKING:
    from ..llm.client import ChatClient
    from ..rerank import Reranker
    from ..web.retrieval import FactSearch

# The listed-facts prompt of the read attempt.
READ_PROMPT = "agent"


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
    facts: list[StatedFact]
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def knows(self) -> bool:
        return knows(self.answer)

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "text": self.text, "facts": self.facts,
                "trace": self.trace}

    def event(self) -> AnswerEvent:
        """The stream's last event: :meth:`as_dict` with ``"event": "answer"``."""
        return {"event": "answer", "question": self.question, "answer": self.answer, "text": self.text,
                "facts": self.facts, "trace": self.trace}



class _State(TypedDict, total=False):
    asked: str               # the question as the user asked it
    question: str            # the standalone question (the follow-up rewritten)
    history: list[dict[str, str]]  # bounded (FactAgent.bounded_history)
    beams: int | None
    stop: threading.Event | None
    pool: list[Any]          # every fact hit retrieved so far, one per fact
    chosen: list[Any]        # the re-ranked hits the per-question tree is built over
    queries: list[str]       # every query searched so far
    pending: list[str]       # queries to search next
    rounds: int              # sub-query rounds done
    plan: dict[str, Any]     # the question's plan (QuestionPlan.as_dict)
    attempts: list[dict]     # generation attempts (the last one decides)
    steps: Annotated[list[dict], operator.add]


class FactAgent:
    """Answer questions from facts that exist, and say which.

    Example (not run: needs a model and a knowledge web)::

        agent = FactAgent(open_generator("qwen2.5-coder-0.5b"), KnowledgeWeb.open("my-web"), tree="both")
        reply = agent.answer("Who founded Zorblax Station?")
        reply.answer, [f["text"] for f in reply.facts], reply.trace["steps"]
        for event in agent.stream("Where was Mira Quell born?"):
            print(event["event"], event.get("text", ""))

    ``chat`` writes the sub-queries of the fact-finding rounds (default: the re-ranker's client;
    None: the question's uncovered keywords are searched instead). ``checks``: prove that the
    fact holding an answer says what the question asks (:mod:`.asked`; off: the chain and the
    answer's words alone, as before). ``relations``: the knowledge base's relations with their
    descriptions for that check (default: the relations of the generator's index, described by
    the bundled Wikidata property labels where they match). ``latest``: gives the generator an
    answer starting now runs on, when the knowledge changes while the agent runs (the web's
    uploads, :class:`~agent.pipeline.uploaded.UploadedOverlay`); an answer keeps the generator it
    started with.
    """

    def __init__(self, generator: FactGenerator, web: FactSearch | None = None,
                 reranker: Reranker | None = None, *, options: AgentOptions | None = None,
                 chat: ChatClient | None = None, relations: RelationLabels | None = None,
                 latest: Callable[[], FactGenerator] | None = None, **changes: Any) -> None:
        options = replace(options or AgentOptions(), **changes)  # a field that does not exist: TypeError
        if options.tree != "kb" and web is None:
            raise ValueError(f"tree={options.tree!r} builds a tree from retrieved facts: give a knowledge web")
        if options.tree != "question" and generator.index is None:
            raise ValueError(f"tree={options.tree!r} needs the generator's knowledge-base index")
        self.generator, self.web, self.reranker = generator, web, reranker
        self.options = options
        self.chat = chat if chat is not None else getattr(reranker, "client", None)
        self._relations = relations
        self._parts_lock = threading.RLock()  # a part may be built from another
        self._parts: dict[str, Any] = {}
        self.graph = self._build_graph()
        self._closers: list[Callable[[], None]] = []
        self._latest = latest
        self._on_latest: FactAgent | None = None  # this agent on the latest generator, when it is another

    def _now(self) -> FactAgent:
        """The agent an answer starting now runs on: this one, or one like it on the generator
        ``latest`` gives when that is another (built once per change; its parts, the listed-facts
        prompt and the checks, are built for it)."""
        generator = self._latest() if self._latest is not None else self.generator
        if generator is self.generator:
            return self
        with self._parts_lock:
            agent = self._on_latest
            if agent is None or agent.generator is not generator:
                agent = self._on_latest = FactAgent(generator, self.web, self.reranker, options=self.options,
                                                    chat=self.chat, relations=self._relations)
            return agent

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

    # --- the parts, built on first use (the listed-facts prompt, the plan reader, the checks) ----

    def _part(self, name: str, build: Callable[[], Any]) -> Any:
        with self._parts_lock:
            if name not in self._parts:
                self._parts[name] = build()
            return self._parts[name]

    @property
    def _loaded(self) -> Any:
        return self._part("loaded", lambda: LoadedModel(
            self.generator.model, self.generator.tokenizer, getattr(self.generator.model, "name_or_path", "local"),
            0.0, steps=self.generator.steps,
            engine=getattr(self.generator.steps, "engine", "transformers") if self.generator.steps else "transformers"))

    @property
    def reader(self) -> ReplyWriter:
        """Writes the read attempt: the retrieved facts listed in the prompt (``prompts/agent/``)."""
        def build() -> ReplyWriter:
            g = self.generator
            return ReplyWriter(FactGenerator(g.model, g.tokenizer, None, prompt=FewShotPrompt.load(READ_PROMPT),
                                             max_new_tokens=g.max_new_tokens, vocab=g.vocab, steps=g.steps))

        return self._part("reader", build)

    @property
    def kb_writer(self) -> ReplyWriter:
        """Writes the attempt on the whole knowledge base (the ReFactX prompt, nothing listed)."""
        return self._part("kb_writer", lambda: ReplyWriter(self.generator))

    @property
    def planner(self) -> PlanReader:
        return self._part("planner", lambda: PlanReader(self._embedder()))

    def _web(self) -> FactSearch:
        """The web the retrieval steps search (they run only when the agent has one)."""
        assert self.web is not None, "a retrieval step ran without a knowledge web"
        return self.web

    def _embedder(self) -> Any:
        if self.web is not None and getattr(self.web, "embedder", None) is not None:
            return self.web.embedder
        return shared_embedder()

    @property
    def matcher(self) -> RelationMatcher:
        def build() -> RelationMatcher:
            reader = shared_reader(self.generator.model, self.generator.tokenizer)
            if self._relations is not None:
                return RelationMatcher(self._embedder(), self._relations, reader=reader)
            return shared_matcher(self._embedder(), self.generator.index, reader)

        return self._part("matcher", build)

    @property
    def kinds(self) -> KindReader | None:
        """Whether a role is a kind of the noun a question asks (the local model; :func:`asks_through`)."""
        return self._part("kinds", lambda: shared_kinds(self.generator.model, self.generator.tokenizer))

    @property
    def checker(self) -> AskedChecker:
        return self._part("checker", lambda: AskedChecker(self.matcher, self.kinds))

    @property
    def attempts(self) -> GenerationAttempts:
        return self._part("attempts", lambda: GenerationAttempts(self.generator, lambda: self.checker, self.options.checks))

    @property
    def comparison_step(self) -> ComparisonStep:
        def similar(a: str, b: str) -> float:
            vectors = self._embedder().encode([a, b])
            return float(vectors[0] @ vectors[1])

        return self._part("comparison", lambda: ComparisonStep(self.generator, self.web, similar=similar,
                                                               matcher=self.matcher, hop_k=self.options.hop_k))

    # --- running ---------------------------------------------------------------------------------

    def answer(self, question: str, *, history: Sequence[Mapping[str, Any]] | None = None,
               beams: int | None = None, stop: threading.Event | None = None) -> AgentAnswer:
        """Answer ``question`` through the whole pipeline. ``history``: the earlier turns of the
        conversation, oldest first, as ``{"role": "user" | "assistant", "content": ...}``
        (a follow-up is made standalone from them); ``stop``: set it to cut generation short.
        ``beams`` is recorded: the agent writes greedily (its repairs continue one session);
        beam search serves bare constrained generation."""
        started = time.perf_counter()
        agent = self._now()
        state = agent.graph.invoke(agent._input(question, history, beams, stop))
        return agent._result(state, time.perf_counter() - started)

    def stream(self, question: str, *, history: Sequence[Mapping[str, Any]] | None = None,
               beams: int | None = None, stop: threading.Event | None = None) -> Generator[AgentEvent, None, None]:
        """Answer ``question`` as events (plain dicts typed in :mod:`agent.events`), in order:

        - ``{"event": "step", "step": {...}}`` when a step ends (the trace's step record);
        - ``{"event": "token", "text": ..., "attempt": n}`` as text is generated;
        - ``{"event": "fact", "fact": {...}, "attempt": n}`` when a constrained fact completes
          (offsets into attempt ``n``'s text);
        - finally ``{"event": "answer", **AgentAnswer.as_dict()}``.

        The question and the history are checked here, before any event: a bad one raises
        :class:`FactweaveError` from this call (an interface can refuse the request before it
        answers anything). Closing the iterator early stops the generation.
        """
        stop = stop or threading.Event()
        return self._events(self._input(question, history, beams, stop), stop)

    def _events(self, given: _State, stop: threading.Event) -> Generator[AgentEvent, None, None]:
        started = time.perf_counter()
        state: dict[str, Any] = {}
        agent = self._now()
        try:
            for mode, chunk in agent.graph.stream(given, stream_mode=["custom", "values"]):
                if mode == "custom":
                    yield chunk
                else:
                    state = chunk
        finally:
            stop.set()
        yield agent._result(state, time.perf_counter() - started).event()

    def bounded_history(self, history: Sequence[Any] | None) -> list[dict[str, str]]:
        """The earlier turns this agent reads a follow-up with: the newest of ``history`` within its
        options' ``max_history_turns`` and ``max_history_chars`` (:func:`trim_history`). The one
        bound on a conversation: the interfaces pass what they were given, and a session that
        keeps its turns keeps no more than this."""
        return trim_history(history, self.options.max_history_turns, self.options.max_history_chars)

    def _input(self, question: str, history: Sequence[Mapping[str, Any]] | None, beams: int | None,
               stop: threading.Event | None) -> _State:
        """The one guard on what an interface hands the agent: the question checked
        (:func:`check_question`: text, not empty, within the bound) and the history bounded."""
        question = check_question(question)
        history = self.bounded_history(history)
        return {"asked": question, "question": question, "history": history, "beams": beams, "stop": stop,
                "pool": [], "chosen": [], "queries": [], "pending": [question], "rounds": 0, "plan": {},
                "attempts": [], "steps": []}

    # --- the graph -------------------------------------------------------------------------------

    def _build_graph(self):
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(_State)
        graph.add_node("rewrite", self._rewrite)
        graph.add_node("retrieve", self._retrieve)
        graph.add_node("rerank", self._rerank)
        graph.add_node("plan", self._plan)
        graph.add_node("options", self._comparison)  # the node over the two options (its name kept)
        graph.add_node("read", self._read)
        graph.add_node("subquery", self._subquery)
        graph.add_node("kb", self._kb)
        graph.add_node("hops", self._hops)
        graph.add_edge(START, "rewrite")
        graph.add_conditional_edges("rewrite", lambda s: "kb" if self.options.tree in ("kb", "kb-first") else "retrieve",
                                    ["kb", "retrieve"])
        graph.add_edge("retrieve", "rerank")
        graph.add_conditional_edges("rerank", lambda s: "plan" if s["rounds"] == 0 else "read", ["plan", "read"])
        graph.add_conditional_edges("plan", lambda s: "options" if s["plan"].get("kind", "lookup") != "lookup"
                                    else "read", ["options", "read"])
        graph.add_edge("options", END)
        graph.add_conditional_edges("read", self._after_read, ["subquery", "kb", "hops", END])
        graph.add_conditional_edges("subquery", lambda s: "retrieve" if s["pending"] else
                                    ("kb" if self.options.tree == "both" else self._end(s)), ["retrieve", "kb", "hops", END])
        graph.add_conditional_edges("kb", self._after_kb, ["retrieve", "hops", END])
        graph.add_edge("hops", END)
        return graph.compile(name="factweave-agent")

    def _after_kb(self, state: _State) -> str:
        from langgraph.graph import END

        if state["attempts"][-1].get("grounded") or _stopped(state):
            return END
        return "retrieve" if self.options.tree == "kb-first" and not state["pool"] else self._end(state)

    def _after_read(self, state: _State) -> str:
        from langgraph.graph import END

        if state["attempts"][-1].get("grounded") or _stopped(state):
            return END
        if state["rounds"] < self.options.max_rounds:
            return "subquery"
        return "kb" if self.options.tree == "both" else self._end(state)

    def _end(self, state: _State) -> str:
        """Where an answer no attempt proved goes last: asked again hop by hop (:meth:`_hops`) when
        it is a look-up asked through a relative or role that asks no order (:func:`order_asked`),
        else the end."""
        from langgraph.graph import END

        if (not self.options.hop_by_hop or self.web is None or self.options.tree == "kb" or _stopped(state)
                or not state["attempts"]
                or state["attempts"][-1].get("grounded") or state["plan"].get("kind", "lookup") != "lookup"):
            return END
        if order_asked(state["question"])[0]:
            return END  # "a director younger than the director of X": an order, which no chain of look-ups computes
        named, noun = asked_through(state["question"], self.kinds)
        return "hops" if named and noun and ask_holder(state["question"], named, noun) else END

    # --- the steps -------------------------------------------------------------------------------

    def _rewrite(self, state: _State) -> dict[str, Any]:
        if not state["history"]:  # a first question is its own standalone form: no step to show
            return {}
        t = time.perf_counter()
        rewrite = self.make_standalone(state["asked"], state["history"])
        step = {**rewrite.as_step(), "history_turns": len(state["history"]), "seconds": since(t)}
        emit({"event": "step", "step": step})
        return {"question": rewrite.standalone, "pending": [rewrite.standalone], "steps": [step]}

    def make_standalone(self, question: str, history: Sequence[Mapping[str, Any]]) -> Rewrite:
        """``question`` as a standalone question given the earlier turns ``history``."""
        if not history:
            return Rewrite(question, question, "no earlier turn")
        if self.options.rewrite == "chat" or self.options.rewrite == "auto" and _is_endpoint(self.chat):
            if self.chat is None:
                raise FactweaveError("rewrite='chat' needs a chat model")
            return rewrite_with_chat(self.chat, question, history)
        return rewrite_by_rules(question, history)

    def _retrieve(self, state: _State) -> dict[str, Any]:
        t = time.perf_counter()
        found = [self._web().search(query, self.options.k).hits for query in state["pending"]]
        pool = rank(merge_hits(state["pool"], *found), self.options.k * (1 + state["rounds"]))
        known = {h.id for h in state["pool"]}
        step = {"step": "retrieve", "queries": list(state["pending"]),
                "hits": [h.as_dict() for h in pool], "new": [h.id for h in pool if h.id not in known],
                "seconds": since(t)}
        emit({"event": "step", "step": step})
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
                "reply": picked.raw_reply, "seconds": since(t)}
        emit({"event": "step", "step": step})
        return {"chosen": chosen, "steps": [step]}

    def _plan(self, state: _State) -> dict[str, Any]:
        t = time.perf_counter()
        names = [n for h in state["pool"] for n in _names_of(h)]
        plan = self.planner.plan(state["question"], names)
        step = {"step": "plan", **plan.as_dict(), "seconds": since(t)}
        emit({"event": "step", "step": step})
        return {"plan": plan.as_dict(), "steps": [step]}

    def _comparison(self, state: _State) -> dict[str, Any]:
        """The step over the plan's two options (:mod:`.comparison`): one reply, computed in code."""
        fields: dict[str, Any] = {k: (tuple(v) if k == "options" else v) for k, v in state["plan"].items()}
        plan = QuestionPlan(**fields)
        number = len(state["attempts"])
        t = time.perf_counter()
        hits = state["chosen"] or state["pool"]

        def on_text(text: str) -> None:
            emit({"event": "token", "text": text, "attempt": number})

        result = self.comparison_step.run(state["question"], plan, hits, stop=state.get("stop"), on_text=on_text)
        known = {h.text: h for h in hits}
        facts = []
        for span in result.spans:
            hit = known.get(span.text) or result.hits.get(span.text)
            facts.append(question_fact(span.start, span.end, span.text, hit, span.source))
        for fact in facts:
            emit({"event": "fact", "fact": fact, "attempt": number})
        grounding = {"grounded": result.grounded, "how": result.how, "facts": list(result.facts),
                     "computed": True, **({"short": result.answer} if result.answer else {})}
        record = {"step": "generate", "attempt": number, "tree": "question", "kind": plan.kind,
                  "tree_facts": len(hits), "text": result.text, "answer": result.answer or DONT_KNOW,
                  "facts": facts, "options": [r.as_dict() for r in result.readings], "truncated": False,
                  "tokens": result.tokens, "prompt_tokens": result.prompt_tokens,
                  "cached_prompt_tokens": result.cached_prompt_tokens, "prefill_s": result.prefill_s,
                  "grounded": result.grounded, "grounding": grounding, "seconds": since(t)}
        hops = [{**hop, "seconds": hop.get("seconds", 0.0)} for hop in result.hops]
        for hop in hops:
            emit({"event": "step", "step": hop})
        emit({"event": "step", "step": record})
        return {"attempts": state["attempts"] + [record], "steps": [*hops, record]}

    def _read(self, state: _State, *, opens: str = "") -> dict[str, Any]:
        """The look-up: the retrieved facts listed, the model states the ones it needs (a tree of
        them that grows with hops), then answers; checked, and one more fact when it stops short.
        ``opens``: a name the reply opens with a listed fact about, the model picking among those
        that name it (a hop of :meth:`_hops`)."""
        number = len(state["attempts"])
        chosen = state["chosen"]
        if not chosen:
            record = {"step": "generate", "attempt": number, "tree": "question", "answer": DONT_KNOW, "text": "",
                      "facts": [], "skipped": "no fact retrieved", "tokens": 0, "prompt_tokens": 0, "seconds": 0.0,
                      "tree_facts": 0}
            emit({"event": "step", "step": record})
            return {"attempts": state["attempts"] + [record], "steps": [record]}
        t = time.perf_counter()
        through = asked_through(state["question"], self.kinds)
        chain = ChainingTree(chosen, self.generator.tokenizer, self.web if self.options.max_hops else None,
                             state["question"], max_hops=self.options.max_hops, k=self.options.hop_k,
                             max_facts=self.options.max_tree_facts, through=through)
        tree_s = since(t)
        listed = [h.text for h in chosen]
        prompt = [{"role": "user", "content": listed_question(state["question"], list(dict.fromkeys(listed)))}]
        # Asked through a role ("the spouse of the director of film X"): the reply opens with X's
        # fact that names who fills it, and the tree grows with that one's facts.
        lead = role_lead(chosen, state["question"], through) if chain.web is not None else ""
        records = self.attempts.run(state["question"], "question", self.reader, prompt, chain.index, chain, number,
                                    stop=state.get("stop"), lead=lead,
                                    opens=[t for t in dict.fromkeys(listed) if holds_answer(t, opens)] if opens and not lead
                                    else ())
        records[0]["tree_facts"] = chain.size
        records[0]["tree_build_s"] = tree_s
        attempts = [r for r in records if r["step"] == "generate"]
        return {"attempts": state["attempts"] + attempts, "steps": records}

    def _kb(self, state: _State) -> dict[str, Any]:
        """The whole knowledge base's tree, nothing listed (plain ReFactX), checked as any attempt."""
        number = len(state["attempts"])
        index = self.generator.index
        assert index is not None, "checked in __init__: a kb tree needs the generator's index"
        records = self.attempts.run(state["question"], "kb", self.kb_writer, state["question"], index,
                                    None, number, stop=state.get("stop"))
        attempts = [r for r in records if r["step"] == "generate"]
        return {"attempts": state["attempts"] + attempts, "steps": records}

    def _hops(self, state: _State) -> dict[str, Any]:
        """The question asked again hop by hop, each hop with its own retrieval: who fills the
        relative or role it asks through ("Who is the director of film X?": the retrieved fact
        that names them after the word that says the role, :func:`~.chaining.role_lead`, else the
        model's proven answer), then the question asked of them ("Where was <the director>
        born?", a look-up). The two chains joined are one reply, proven and checked against the
        question as asked (the hops' own attempts are kept in the trace, marked ``hop``, and
        answer nothing themselves)."""
        question = state["question"]
        named, noun = asked_through(question, self.kinds)
        attempts, steps = list(state["attempts"]), cast(list[dict[str, Any]], [])
        holder_q = ask_holder(question, named, noun)
        sub = self._retrieved(state, holder_q, steps)
        hits = list({h.text: h for h in [*sub["chosen"], *state["chosen"]]}.values())
        lead = role_lead(hits, question, (named, noun))
        # Who fills it: the first name after the role word the web has facts about ("performed by
        # English singer Ann Lee": not "English").
        holder = [name for name in (role_holders(lead, question, noun) if lead else [])
                  if any(is_about(hit, name) for hit in self._web().search(name, self.options.hop_k).hits)][:1]
        first: dict[str, Any] | None
        if holder:
            stated = self._stated(next(h for h in hits if h.text == lead), holder[0], holder_q, len(attempts))
            attempts.append(stated)
            steps.append(stated)
            first = stated
        else:
            first = self._hop(sub, named, 1, attempts, steps)
        if first is not None:
            holder_name = (first.get("grounding") or {}).get("short") or clean_answer(first["answer"])
            asked = ask_past(question, named, noun, holder_name)
            second = self._hop(self._retrieved(state, asked, steps), holder_name, 2, attempts, steps)
            if second is not None:
                record = self._joined(question, first, second, len(attempts))
                attempts.append(record)
                steps.append(record)
        return {"attempts": attempts, "steps": steps}

    def _retrieved(self, state: _State, question: str, steps: list[dict[str, Any]]) -> _State:
        """``state`` for ``question`` asked on its own: retrieved and re-ranked (steps to ``steps``)."""
        sub = cast(_State, {**state, "question": question, "pending": [question], "pool": [], "chosen": [],
                            "queries": [], "rounds": 0})
        for node in (self._retrieve, self._rerank):
            update = node(sub)
            steps.extend(update.pop("steps", []))
            sub.update(update)  # type: ignore[typeddict-item]
        return sub

    def _stated(self, hit: Any, holder: str, question: str, number: int) -> dict[str, Any]:
        """The first hop when a retrieved fact names who fills the role: that fact, stated by the
        agent, answers ``question`` with ``holder``."""
        text = f"Fact: {hit.text}\nAnswer: {holder}\n"
        fact = question_fact(6, 6 + len(hit.text), hit.text, hit)
        record = {"step": "generate", "attempt": number, "tree": "question", "answer": holder, "text": text,
                  "facts": [fact], "truncated": False, "tokens": 0, "prompt_tokens": 0, "seconds": 0.0,
                  "grounded": True, "grounding": {"grounded": True, "how": "the fact that says who fills the role",
                                                  "facts": [0], "short": holder},
                  "lead": {"fact": hit.text, "why": "the fact that says who fills the role the question asks "
                                                    "through, stated by the agent"},
                  "hop": {"hop": 1, "question": question}}
        emit({"event": "token", "text": text, "attempt": number})
        emit({"event": "fact", "fact": fact, "attempt": number})
        emit({"event": "step", "step": record})
        return record

    def _hop(self, sub: _State, about: str, hop: int, attempts: list[dict[str, Any]],
             steps: list[dict[str, Any]]) -> dict[str, Any] | None:
        """One hop of :meth:`_hops`: ``sub`` (its question retrieved) read as a look-up that opens
        with a listed fact naming ``about``, its attempts numbered after ``attempts`` and added to
        it (and its steps to ``steps``). The attempt that answers it when proven, else None."""
        if _stopped(sub):
            return None
        update = self._read(cast(_State, {**sub, "attempts": attempts}), opens=about)
        steps.extend(update["steps"])
        new = update["attempts"][len(attempts):]
        for record in new:
            record["hop"] = {"hop": hop, "question": sub["question"]}
        attempts.extend(new)
        final = _final(new) if new else None
        return final if final is not None and final.get("grounded") and not final.get("stopped") else None

    def _joined(self, question: str, first: dict[str, Any], second: dict[str, Any], number: int) -> dict[str, Any]:
        """The two hops' replies as one, proven and checked against ``question``."""
        head = first["text"].rstrip("\n") + "\n"
        facts = [*first["facts"], *({**f, "start": f["start"] + len(head), "end": f["end"] + len(head)}
                                    for f in second["facts"])]
        record: dict[str, Any] = {
            "step": "generate", "attempt": number, "tree": "hops", "answer": second["answer"],
            "text": head + second["text"], "facts": facts, "truncated": False, "tokens": 0, "prompt_tokens": 0,
            "hops": [first["hop"]["question"], second["hop"]["question"]], "seconds": 0.0}
        self.attempts.judge(question, record, second["answer"])
        emit({"event": "token", "text": record["text"], "attempt": number})
        for fact in facts:
            emit({"event": "fact", "fact": fact, "attempt": number})
        emit({"event": "step", "step": record})
        return record

    def _subquery(self, state: _State) -> dict[str, Any]:
        t = time.perf_counter()
        asked = {q.casefold() for q in state["queries"]}
        if self.chat is not None and self.options.max_subqueries:
            try:
                queries = write_subqueries(self.chat, state["question"], state["pool"], self.options.max_subqueries)
                how = "written by the chat model"
            except FactweaveError as exc:
                queries, how = [], f"the chat model failed: {exc}"
        else:
            covered = {kw.casefold() for h in state["pool"] for kw in h.keywords}
            queries = [kw for kw in extract_keywords(state["question"]) if kw.casefold() not in covered]
            queries = queries[: self.options.max_subqueries]
            how = "question keywords no retrieved fact is linked to"
        queries = [q for q in queries if q.casefold() not in asked]
        step = {"step": "subquery", "round": state["rounds"] + 1, "queries": queries, "how": how,
                "seconds": since(t)}
        emit({"event": "step", "step": step})
        return {"pending": queries, "rounds": state["rounds"] + 1, "steps": [step]}

    # --- the result ------------------------------------------------------------------------------

    def _result(self, state: dict[str, Any], seconds: float) -> AgentAnswer:
        steps = list(state.get("steps", []))
        attempts = state.get("attempts", [])
        last: dict[str, Any] = _final(attempts) if attempts else {"answer": "", "text": "", "facts": []}
        grounded = bool(last.get("grounded"))
        # A sentence that says a stated triple is answered by the triple's object.
        answer = ((last.get("grounding") or {}).get("short") or clean_answer(last["answer"])) if grounded else DONT_KNOW
        # prefill_s: the part of generate_s spent reading the prompts before the first token.
        timings = {"rewrite_s": 0.0, "hop_s": 0.0, "retrieve_s": 0.0, "rerank_s": 0.0, "plan_s": 0.0,
                   "subquery_s": 0.0, "tree_build_s": 0.0, "generate_s": 0.0, "prefill_s": 0.0}
        for step in steps:
            timings[f"{step['step']}_s"] = timings.get(f"{step['step']}_s", 0.0) + step.get("seconds", 0.0)
            timings["tree_build_s"] += step.get("tree_build_s", 0.0)
            if step["step"] == "generate":
                timings["prefill_s"] += step.get("prefill_s", 0.0)
        timings = {name: round(value, 4) for name, value in timings.items()}
        timings["total_s"] = round(seconds, 4)
        trace = {
            "question": state.get("asked", ""), "standalone": state.get("question", ""), "tree": self.options.tree,
            "settings": {"k": self.options.k, "rerank": self.reranker is not None, "max_rounds": self.options.max_rounds,
                         "beams": 1, "checks": self.options.checks},
            "plan": state.get("plan") or {},
            "steps": steps, "answer": answer, "attempt": last.get("attempt"), "grounded": grounded, "supported": grounded,
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


_SHARED_LOCK = threading.Lock()
_SHARED: dict[Any, Any] = {}


def shared_embedder() -> Any:
    """The packaged sentence embedder, loaded once per process (an agent without a web)."""
    with _SHARED_LOCK:
        if "embedder" not in _SHARED:
            _SHARED["embedder"] = Embedder()
        return _SHARED["embedder"]


def shared_reader(model: Any, tokenizer: Any) -> RelationReader | None:
    """One :class:`RelationReader` per model (its examples' key/value cache kept), None for a
    model that is not a transformers causal LM."""
    return _per_model("reader", RelationReader.of, model, tokenizer)


def shared_kinds(model: Any, tokenizer: Any) -> KindReader | None:
    """One :class:`KindReader` per model (its readings kept), None for a model that is not a
    transformers causal LM."""
    return _per_model("kinds", KindReader.of, model, tokenizer)


def _per_model(kind: str, make: Callable[[Any, Any], Any], model: Any, tokenizer: Any) -> Any:
    """One reader of ``kind`` per model (the last two models' kept)."""
    key = (kind, id(model))
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None or entry[0] is not model:
            entry = (model, make(model, tokenizer))
            _SHARED[key] = entry
            for old in [k for k in _SHARED if k[0] == kind][:-2]:
                del _SHARED[old]
        return entry[1]


def shared_matcher(embedder: Any, index: FactTree | None, reader: RelationReader | None = None) -> RelationMatcher:
    """One :class:`RelationMatcher` per embedder, KB index and reader (its relations read and
    embedded once: agents are made per question in places)."""
    key = ("matcher", id(embedder), id(index), id(reader))
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None or entry[0] is not embedder or entry[1] is not index or entry[3] is not reader:
            entry = (embedder, index, RelationMatcher(embedder, default_relations(index), reader=reader), reader)
            _SHARED[key] = entry
            matchers = [k for k in _SHARED if k[0] == "matcher"]
            for old in matchers[:-4]:  # a few at most: each holds its index
                del _SHARED[old]
        return entry[2]


def default_relations(index: FactTree | None) -> RelationLabels:
    """The relations the answer check compares a question with: the bundled Wikidata property
    labels and descriptions (``agent/data/relations/``), and every relation of ``index``'s
    triples (described there when the label matches)."""
    labels = RelationLabels.bundled()
    if index is not None:
        labels = RelationLabels.from_index(index).merged(labels)
    return labels


def _names_of(hit: Any) -> list[str]:
    """The knowledge's names a hit carries: a triple's subject and object, a passage's title."""
    p = getattr(hit, "provenance", {}) or {}
    names = [p.get("subject"), p.get("object"), p.get("title")]
    return [n for n in names if isinstance(n, str) and n.strip()]


def _final(attempts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The attempt that answers: the last one (not counting the attempts of a hop of
    :meth:`FactAgent._hops`), unless it went one fact past a grounded answer and is not grounded
    itself (then that answer stands)."""
    attempts = [a for a in attempts if "hop" not in a] or attempts  # a hop's own attempt answers its hop
    last = attempts[-1]
    if not last.get("grounded") and last.get("continues") is not None:
        base = next((a for a in attempts if a["attempt"] == last["continues"]), None)
        if base is not None and base.get("grounded"):
            return base
    return last


def _is_endpoint(chat: Any) -> bool:
    """Whether ``chat`` is a chat model behind an OpenAI-compatible endpoint (not the local one)."""
    return isinstance(chat, OpenAIChat)


def _stopped(state: _State) -> bool:
    stop = state.get("stop")
    return stop is not None and stop.is_set()
