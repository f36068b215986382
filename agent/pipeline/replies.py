"""One constrained reply, written in one session: facts, the answer, and the repairs on the way.

The agent's attempts all go through :class:`ReplyWriter`: the prompt is read once (its fixed
start from the prefix cache), then the model writes ``Fact:`` lines constrained to a fact index
and an ``Answer:`` line (:class:`~agent.decoding.greedy.DecodeSession`: tokens a fact forces are
fed in one pass). The repairs continue the same session instead of starting again:

- **a fact breaks away** from the question's chain (:class:`~.chaining.ChainGuard`): the reply
  is rewound to the end of the last connected fact and the model answers from there
  (``Answer:``);
- **one more fact** (:meth:`ReplyWriter.one_more_fact`): when the answer stands on a chain that
  stops one hop short (the fact holding it does not say what the question asks), the reply is
  rewound to the end of its last fact and the model states one more, then answers;
  :meth:`ReplyWriter.one_of` states it among given facts alone;
- **answer from a fact** (:meth:`ReplyWriter.answer_after`): rewound to the end of one of its
  facts (those after it dropped), the model answers from there;
- **answer among its facts' values** (:meth:`ReplyWriter.answer_among`): the ``Answer:`` line
  constrained to what the stated triples say (a subject or an object) or "I don't know.".

A reply may open with a **lead** fact the agent writes (:meth:`ReplyWriter.start`), and one
``Fact:`` line may be constrained to a few facts alone (:meth:`ReplyWriter.state_one`: after
the lead, those about whom it led to). A budget counts the model's own tokens, not a fact
line's: a long fact is never cut halfway.

Each repair is a new part of the reply (:class:`ReplyPart`), for the trace; the cache is cropped
back, never read again from the start.

Example (not run: needs a model)::

    writer = ReplyWriter(generator)      # its prompt: listed facts (prompts/agent/) or ReFactX's
    reply = writer.start(messages, index, question=standalone, on_fact=tree.on_fact)
    part = writer.write(reply, budget=160)
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..decoding.generate import _ANSWER as ANSWER_LINE, parse_answer
from ..decoding.greedy import DecodeSession
from ..decoding.spans import CompletedFact, FactSpan, decode_tokens, locate_spans
from ..decoding.tracker import FactTracker, TraceState
from ..index.base import FactTree
from ..index.tokens import TRIGGER, fact_token_ids
from ..index.trie import FactIndex
from ..knowledge.facts import Fact
from .chaining import ANSWER_LINE_TOKENS, ChainGuard

if TYPE_CHECKING:
    from ..decoding import FactGenerator

ANSWER = "Answer:"
# One more fact line and the answer line after it.
ONE_FACT_TOKENS = 64


@dataclass
class ReplyPart:
    """What the reply holds after one stretch of writing: its whole ``text`` so far and the
    ``spans`` of its facts, the ``answer`` read from it, and what this stretch cost."""

    text: str
    spans: list[FactSpan]
    answer: str
    truncated: bool
    tokens: int
    seconds: float
    cut: str = ""
    dropped: list[str] = field(default_factory=list)
    stopped: bool = False
    continued: bool = False  # this stretch continues an earlier one (no prompt read of its own)


@dataclass
class Reply:
    """A reply being written: its session, prompt and the guard watching its chain."""

    session: DecodeSession
    index: FactTree
    prompt_tokens: int
    cached_tokens: int
    prefill_s: float
    guard: ChainGuard | None


def _trace(session: DecodeSession) -> TraceState:
    """A reply's session has a tracker (see :meth:`ReplyWriter.start`), so a trace."""
    assert session.trace is not None
    return session.trace


class ReplyWriter:
    """Writes constrained replies with ``generator``'s model and prompt (module docstring).

    ``on_text(text)`` and ``on_fact(span)`` (set per reply with :meth:`start`) see the reply as
    it is written: new text, and each fact as it completes (offsets into the reply's text)."""

    def __init__(self, generator: FactGenerator) -> None:
        self.generator = generator
        self.tokenizer = generator.tokenizer

    def _encode(self, text: str) -> list[int]:
        return self.generator._encode(text)

    def start(self, prompt: Any, index: FactTree, *, question: str, on_fact: Callable[[CompletedFact], None] | None = None,
              cancel: threading.Event | None = None, guarded: bool = True, lead: str = "") -> Reply:
        """Read the prompt (``prompt``: a question or messages, rendered with the generator's
        prompt) and get ready to write facts of ``index``; ``on_fact`` runs as each fact
        completes (after the guard, when ``guarded``: a fact that breaks away from
        ``question``'s chain ends the writing). ``lead``: a fact of ``index`` the reply opens
        with, written by the agent as its first ``Fact:`` line (its hops run as for any fact)."""
        text = self.generator.render(prompt)
        ids = self._encode(text)
        guard = ChainGuard(question, on_fact) if guarded else None
        callback = guard.on_fact if guard is not None else on_fact
        started = time.perf_counter()
        session, cached = self.generator.open_session(
            ids, tracker=FactTracker(index, self.generator.vocab), prompt_text=text, on_fact=callback, cancel=cancel,
            stop=guard.cut if guard is not None else None)
        prefill = round(time.perf_counter() - started, 4)
        if lead:
            # The fact's tokens as the tree holds them (after ``Fact:``), then the line's end.
            session.feed([*self._encode(TRIGGER), *fact_token_ids(self.tokenizer, [lead])[0], *self._encode("\n")],
                         reply=True)
        return Reply(session, index, len(ids), cached, prefill, guard)

    def write(self, reply: Reply, budget: int, *, on_text: Callable[[str], None] | None = None,
              on_span: Callable[[FactSpan], None] | None = None) -> ReplyPart:
        """Let the model write until its ``Answer:`` line is complete (or ``budget`` tokens). When
        the guard cuts the chain, the reply is rewound to the last connected fact and answered
        from there (:attr:`ReplyPart.cut`)."""
        started = time.perf_counter()
        session = reply.session
        begin = len(session.out)
        self._run(session, budget, on_text, on_span)
        cut, dropped = "", []
        if reply.guard is not None and reply.guard.cut and not self._stopped(session):
            spans = list(_trace(session).spans)
            keep = len(reply.guard.stated[0]) - 1  # the facts before the one that broke away
            cut = f"fact {keep + 1} broke away from the chain"
            dropped = [reply.index.facts[f].text for f, _, _ in spans[keep:]]
            reply.guard.cut.clear()
            reply.guard.then = None  # no more hops: the reply answers now
            del reply.guard.stated[0][keep:]  # the facts dropped are not part of the chain (nor said again)
            if keep == 0:
                return self._part(reply, begin, started, cut, dropped, truncated=True)
            session.rewind(spans[keep - 1][2] + 1)  # through the newline after the last connected fact
            session.feed(self._encode(ANSWER), reply=True)
            self._run(session, ANSWER_LINE_TOKENS, on_text, on_span)
        return self._part(reply, begin, started, cut, dropped)

    def one_more_fact(self, reply: Reply, *, on_text: Callable[[str], None] | None = None,
                      on_span: Callable[[FactSpan], None] | None = None) -> ReplyPart | None:
        """Rewind to the end of the reply's last fact and let the model state one more, then
        answer. None when the reply has no fact."""
        if reply.guard is not None:
            reply.guard.cut.clear()
        return self._after_facts(reply, "Fact:", ONE_FACT_TOKENS, on_text, on_span)

    def answer_now(self, reply: Reply, *, on_text: Callable[[str], None] | None = None,
                   on_span: Callable[[FactSpan], None] | None = None) -> ReplyPart | None:
        """Rewind to the end of the reply's last fact and let the model write its ``Answer:``
        line from there (the reasoning it wrote after the facts dropped). None when the reply
        has no fact."""
        return self._after_facts(reply, ANSWER, ANSWER_LINE_TOKENS, on_text, on_span)

    def answer_after(self, reply: Reply, fact: int, *, on_text: Callable[[str], None] | None = None,
                     on_span: Callable[[FactSpan], None] | None = None) -> ReplyPart | None:
        """Rewind to the end of the reply's fact number ``fact`` (from 0; the facts after it
        dropped, from the chain too) and let the model write its ``Answer:`` line from there.
        None when the reply has no such fact."""
        if not 0 <= fact < len(_trace(reply.session).spans):
            return None
        self._drop_after(reply, fact)
        return self._after_facts(reply, ANSWER, ANSWER_LINE_TOKENS, on_text, on_span, fact)

    def one_of(self, reply: Reply, texts: list[str], *, on_text: Callable[[str], None] | None = None,
               on_span: Callable[[FactSpan], None] | None = None) -> ReplyPart | None:
        """Rewind to the end of the reply's last fact, state one fact constrained to ``texts``
        (facts the reply's index holds: :meth:`state_one`), then answer. None when the reply has
        no fact or no fact of ``texts`` was completed."""
        session = reply.session
        spans = list(_trace(session).spans)
        if not spans or not texts or self._stopped(session):
            return None
        started = time.perf_counter()
        session.rewind(spans[-1][2] + 1)
        begin = len(session.out)
        if self.state_one(reply, texts) is None:
            return None
        return self._go_on(reply, begin, started, ANSWER, ANSWER_LINE_TOKENS, on_text, on_span)

    def answer_among(self, reply: Reply, values: list[str], *, fact: int = -1,
                     on_text: Callable[[str], None] | None = None,
                     on_span: Callable[[FactSpan], None] | None = None) -> ReplyPart | None:
        """Rewind to the end of the reply's fact number ``fact`` (its last by default; the facts
        after it dropped, from the chain too) and write its ``Answer:`` line constrained to
        ``values`` (what its triples say, :func:`~.grounding.answer_values`), the model picking.
        None when the reply has no such fact or no value was completed."""
        session = reply.session
        spans = list(_trace(session).spans)
        values = list(dict.fromkeys(v for v in values if v.strip()))
        if not -len(spans) <= fact < len(spans) or not values or self._stopped(session):
            return None
        started = time.perf_counter()
        if fact >= 0:
            self._drop_after(reply, fact)
        session.rewind(spans[fact][2] + 1)
        begin = len(session.out)
        if self._one_line(session, values, ANSWER, opened=True) is None:
            return None
        self._show(reply, on_text, on_span)
        part = self._part(reply, begin, started, "", [])
        part.continued = True
        return part

    def text(self, reply: Reply) -> str:
        """The reply's text so far."""
        return decode_tokens(self.tokenizer, reply.session.out)

    def state_one(self, reply: Reply, texts: list[str]) -> str | None:
        """One ``Fact:`` line constrained to ``texts`` alone (facts ``reply``'s index holds too:
        after a lead, those about whom it led to), the model picking; then the reply's own
        tracker walks it as one of its facts. The fact, or None when none was completed."""
        session = reply.session
        texts = list(dict.fromkeys(texts))
        if not texts or self._stopped(session) or session.ended:
            return None
        fact = self._one_line(session, texts, TRIGGER)
        if fact is None:
            return None
        if reply.guard is not None:
            reply.guard.stated[0].append(fact)
        return fact

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _drop_after(reply: Reply, fact: int) -> None:
        """The facts after number ``fact`` dropped from the reply's guard (what it has stated, and
        what it cut), before the reply is rewound to that fact's end."""
        if reply.guard is not None:
            reply.guard.cut.clear()
            del reply.guard.stated[0][fact + 1:]

    def _one_line(self, session: DecodeSession, texts: list[str], opening: str, opened: bool = False) -> str | None:
        """One line after ``opening`` constrained to ``texts`` (a prefix tree of their tokens),
        the model picking: the text it completed, or None (the line rewound away)."""
        index = FactIndex.build([Fact.from_statement(t) for t in texts], self.tokenizer)
        begin = len(session.out)
        picked = session.state_one(FactTracker(index, self.generator.vocab), self._encode(opening), opened=opened)
        if picked is None:
            session.rewind(begin)
            return None
        return index.facts[picked].text

    def _after_facts(self, reply: Reply, opening: str, budget: int, on_text: Callable[[str], None] | None,
                     on_span: Callable[[FactSpan], None] | None, fact: int = -1) -> ReplyPart | None:
        """Rewind to the end of the reply's fact number ``fact`` (its last by default), write
        ``opening`` and let the model go on for ``budget`` tokens: the continued part, or None
        when there is no fact (or a stop)."""
        session = reply.session
        spans = list(_trace(session).spans)
        if not spans or self._stopped(session):
            return None
        started = time.perf_counter()
        session.rewind(spans[fact][2] + 1)
        return self._go_on(reply, len(session.out), started, opening, budget, on_text, on_span)

    def _go_on(self, reply: Reply, begin: int, started: float, opening: str, budget: int,
               on_text: Callable[[str], None] | None, on_span: Callable[[FactSpan], None] | None) -> ReplyPart:
        """Write ``opening`` and let the model go on for ``budget`` tokens: the part from ``begin``."""
        session = reply.session
        session.feed(self._encode(opening), reply=True)
        self._show(reply, on_text, on_span)
        self._run(session, budget, on_text, on_span)
        part = self._part(reply, begin, started, "", [])
        part.continued = True
        return part

    def _show(self, reply: Reply, on_text: Callable[[str], None] | None,
              on_span: Callable[[FactSpan], None] | None) -> None:
        """A continuation is an attempt of its own: its stream starts with what it keeps (the
        facts so far and its opening), so that its tokens and facts build up to its record."""
        session = reply.session
        if on_text is not None:
            on_text(decode_tokens(self.tokenizer, session.out))
        if on_span is not None:
            for span in locate_spans(self.tokenizer, reply.index, session.out, list(_trace(session).spans))[1]:
                on_span(span)

    @staticmethod
    def _stopped(session: DecodeSession) -> bool:
        return session.cancel is not None and session.cancel.is_set()

    def _run(self, session: DecodeSession, budget: int, on_text: Callable[[str], None] | None,
             on_span: Callable[[FactSpan], None] | None) -> None:
        prefix_len = len(decode_tokens(self.tokenizer, session.out))

        def answer_done(tokens: list[int]) -> bool:
            text = decode_tokens(self.tokenizer, tokens).rsplit("\n", 1)[0]
            return any(m.group(1).strip() for m in ANSWER_LINE.finditer(text))

        shown = prefix_len
        # A fact line's tokens are not counted: the budget is the model's own writing.
        for kind, value in session.generate(budget, answer_done, facts_free=True):
            if kind == "token" and on_text is not None:
                text = decode_tokens(self.tokenizer, session.out)
                if len(text) > shown and not text.endswith("\ufffd"):
                    on_text(text[shown:])
                    shown = len(text)
            elif kind == "fact" and on_span is not None:
                assert session.tracker is not None  # facts come only from a tracker
                _, spans = locate_spans(self.tokenizer, session.tracker.index, session.out,
                                        [(value.id, value.start, value.end)])
                on_span(spans[0])
        if on_text is not None:
            text = decode_tokens(self.tokenizer, session.out)
            if len(text) > shown:
                on_text(text[shown:])

    def _part(self, reply: Reply, begin: int, started: float, cut: str, dropped: list[str],
              truncated: bool = False) -> ReplyPart:
        session = reply.session
        text, spans = locate_spans(self.tokenizer, reply.index, session.out, list(_trace(session).spans))
        answer, missing = parse_answer(text)
        return ReplyPart(text, spans, answer, truncated or (missing and not cut), max(0, len(session.out) - begin),
                         round(time.perf_counter() - started, 4), cut, dropped, self._stopped(session))

