"""One generation attempt of the agent and its checks: a reply written on one fact tree, the
answer grounded in the facts it states (:mod:`.grounding`) and checked to say what the question
asks (:mod:`.asked`), with the two continuations of the same reply (:mod:`.replies`):

- **answer again**: the model stated a triple that says what is asked, then wrote "I don't
  know." — the reply is rewound to after its facts and the model answers from there;
- **answer from an earlier fact**: the chain went on past a triple about a name of the question
  that says what it asks, and the answer at its end does not stand — the reply is rewound to the
  end of that triple and the model answers from there;
- **one more fact**: the fact holding the answer says something else than what is asked, or
  the answer is in none of the connected facts — the chain may go on one more fact; where that
  fact is about a name of the question and the knowledge holds the relation the check reads the
  question as asking for it ("the label of Buono!" answered with ``<Buono!> <genre> <J-pop>``),
  the next fact is one of that relation about it (the model picking among them);
- **answer among the facts' values**: the answer is in none of the stated facts (the model
  paraphrased one: "Philosophy" after ``<field of work> <philology>``) — the answer line is
  written again, constrained to the stated triples' subjects and objects or "I don't know."
  (:func:`~.grounding.answer_values`; a statement offers none).

Each continuation is recorded as the next attempt (``continues``, ``why``). The records are plain
data (:mod:`.trace`); the events go to :meth:`~agent.pipeline.fact_agent.FactAgent.stream`'s
reader as they happen.

Example (not run: needs a model)::

    attempts = GenerationAttempts(generator, lambda: checker, checks=True)
    records = attempts.run(question, "question", writer, messages, tree.index, tree, number=0)
    records[-1]["answer"], records[-1]["grounded"], records[-1]["grounding"]["how"]
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..embeddings import closest
from ..events import AgentEvent, StatedFact
from ..index.about import facts_about, subject_relations
from ..index.base import FactTree
from ..knowledge.facts import parse_triple
from ..knowledge.normalize import normalize_answer
from .asked import AskedChecker
from .chaining import ChainingTree
from .grounding import Grounding, answer_values, clean_answer, ground, knows
from .question_reading import ask_past, asked_through
from .relations import AskedCheck
from .replies import Reply, ReplyPart, ReplyWriter
from .trace import question_fact

if TYPE_CHECKING:
    from ..decoding import FactGenerator


# After a lead fact, the facts about whom it led to that the next fact is chosen among: at most
# LEAD_CHOICES, within LEAD_MARGIN (cosine) of the closest to the question asked of them. The
# model's own first-token pick among all of them took "Borys Lankosz is the creator of the
# documentary series ..." for "Where did he study?" (0.51 against 0.76 for "... graduated from
# National Film School in Łódź.").
LEAD_CHOICES = 3
LEAD_MARGIN = 0.05


class GenerationAttempts:
    """Runs attempts with ``generator``; ``checker()`` gives the relation check (built on first
    use: it loads the embedder); ``checks`` off: grounding alone, as before the check."""

    def __init__(self, generator: FactGenerator, checker: Callable[[], AskedChecker], checks: bool = True) -> None:
        self.generator = generator
        self._checker = checker
        self.checks = checks

    @property
    def checker(self) -> AskedChecker:
        return self._checker()

    def run(self, question: str, tree: str, writer: ReplyWriter, prompt: Any, index: FactTree,
            chain: ChainingTree | None, number: int, *, stop: threading.Event | None = None,
            lead: str = "", opens: Sequence[str] = ()) -> list[dict[str, Any]]:
        """One reply on ``index`` (written by ``writer``), its check, and one more fact when the
        fact holding the answer does not say what the question asks but the chain can go on.
        ``lead``: a fact the reply opens with (:func:`~.chaining.role_lead`); when the model
        answers nothing after it, it states one more fact (about whom the lead led to). ``opens``:
        without a lead, facts the reply opens with one of (the model picking, constrained to them:
        a reply that answers before it states a fact proves nothing)."""
        t = time.perf_counter()
        hops: list[dict[str, Any]] = []
        current = [number]

        def on_text(text: str) -> None:
            if chain is not None:
                for hop in chain.take_hops():
                    hops.append(hop)
                    emit({"event": "step", "step": hop})
            emit({"event": "token", "text": text, "attempt": current[0]})

        def on_span(span: Any) -> None:
            emit({"event": "fact", "fact": self.fact(span, tree, chain), "attempt": current[0]})

        reply = writer.start(prompt, index, question=question,
                             on_fact=chain.on_fact if chain is not None and chain.web is not None else None,
                             cancel=stop, lead=lead)
        if lead and chain is not None:
            # The next fact is one about whom the lead led to, the model picking among those
            # closest to the question asked of them.
            writer.state_one(reply, self._about_holder(question, chain, lead))
            on_text(writer.text(reply))
        elif opens:
            writer.state_one(reply, list(opens))
            on_text(writer.text(reply))
        part = writer.write(reply, self.generator.max_new_tokens, on_text=on_text, on_span=on_span)
        record = self._record(number, tree, part, reply, chain, t)
        if lead:
            record["lead"] = {"fact": lead, "why": "the fact that says who fills the role the question asks through, "
                                                   "stated by the agent"}
        self._verdict(question, record, part, chain)
        records = [record]
        if chain is not None:
            hops.extend(chain.take_hops())

        def go_on(step: Callable[..., ReplyPart | None], why: str) -> ReplyPart | None:
            """One continuation of the same reply, recorded as the next attempt."""
            t = time.perf_counter()
            current[0] = number + len(records)
            more = step(reply, on_text=on_text, on_span=on_span)
            if more is not None:
                again = self._record(current[0], tree, more, reply, chain, t)
                again["continues"], again["why"] = number, why
                self._verdict(question, again, more, chain)
                records.append(again)
                if chain is not None:
                    hops.extend(chain.take_hops())
            return more

        named = self._named_checks(question, record, chain) if not record["grounded"] else []
        says = next((i for i, check in named if check.passed and check.by in ("relation", "reading")), None)
        if says is not None and not knows(part.answer):
            # The model stated a fact that says what is asked, then wrote "I don't know.".
            part = go_on(writer.answer_now, "a stated fact says what the question asks") or part
        elif says is not None and says < len(record["facts"]) - 1 and not part.stopped:
            # The chain went on past a fact about a name of the question that says what it
            # asks, and its answer does not stand: the reply is rewound to the end of that fact
            # (the facts after it dropped) and the model answers from there.
            part = go_on(lambda r, **kw: writer.answer_after(r, says, **kw),
                         f"fact {says + 1} says what the question asks; the chain went on past it") or part
        last = records[-1]
        short = last.get("check", {}).get("passed") is False or last["grounding"]["how"].startswith(
            "the answer is in no fact of the chain")
        # Only the lead was stated (the model answered, or its next fact broke away): one fact
        # about whom it leads to.
        lead_only = bool(lead) and len(last["facts"]) <= 1
        asks, about = self._asked_of(question, last, reply, named if last is record else None, chain) \
            if not last["grounded"] and not part.stopped else ("", [])
        if about:
            # The fact holding the answer is about what the question names but says another
            # relation than the one the check reads it as asking, which the knowledge holds
            # for it: the next fact is one of that relation about it, the model picking.
            go_on(lambda r, **kw: writer.one_of(r, about, **kw),
                  f"the question asks {asks!r} of what the fact is about")
        elif not last["grounded"] and (short and not part.cut or lead_only) and not part.stopped:
            # The fact holding the answer says something else than what is asked, or the answer
            # is in none of the (connected) facts: the chain may go on one more fact (a bridge
            # answered: "Canada" for the official language of its country).
            go_on(writer.one_more_fact, "the chain may go on one more fact")
        # The last attempt that gave an answer: a continuation that went on one more fact and
        # answered nothing leaves the answer before it standing.
        last, answered = records[-1], next((r for r in reversed(records) if knows(r["answer"])), None)
        if not last["grounded"] and answered is not None and answered["facts"] \
                and (answered is last or not last["answer"].strip()) \
                and answered["grounding"]["how"].startswith("the answer is in no fact of the chain") \
                and normalize_answer(answered["answer"]) not in ("yes", "no"):
            # The answer is in none of the stated facts ("Philosophy" after `<Conrad Bursian>
            # <field of work> <philology>`): the answer line again, after the facts it was
            # written on, constrained to what they say.
            kept = -1 if answered is last else len(answered["facts"]) - 1
            values = answer_values([f["text"] for f in answered["facts"]])
            go_on(lambda r, **kw: writer.answer_among(r, values, fact=kept, **kw),
                  "the answer is in no stated fact: the answer line says one of their values")
        for r in records:
            emit({"event": "step", "step": r})
        return [*hops, *records]

    def _asked_of(self, question: str, record: dict[str, Any], reply: Reply,
                  named: list[tuple[int, AskedCheck]] | None, chain: ChainingTree | None) -> tuple[str, list[str]]:
        """The facts of the relation the question asks about a thing it names (asked of directly:
        nothing asked through a role or relative of it) when a stated triple about that thing
        says another relation, that the reply's index holds and has not stated: at most
        ``LEAD_CHOICES``. The triple is the one the failed check judged; when nothing was
        checked (no answer, or one in no fact), the last stated triple about a name of the
        question, checked with its object as the answer (``named``: those checks when already
        made for ``record``). The relation and the facts; none when the check failed otherwise,
        passed, or the index holds no such fact."""
        if not self.checks or asked_through(question, self.checker.kinds)[1]:
            return "", []
        facts = [f["text"] for f in record["facts"]]
        if named is None:
            named = self._named_checks(question, record, chain)
        check = record.get("check")
        if check is None and named:
            check = named[-1][1].as_dict()
            check["fact"] = named[-1][0]
        if not check or check.get("passed") is not False or check.get("by") != "relation" \
                or check.get("fact") not in {i for i, _ in named} or not check.get("asks"):
            return "", []
        subject = parse_triple(facts[check["fact"]])[0]  # type: ignore[index]
        stated = set(facts)
        found = [f.text for f in facts_about(reply.index, self.generator.tokenizer, subject)]
        return check["asks"], [text for text in found if text not in stated
                               and (parse_triple(text) or ("", "", ""))[:2] == (subject, check["asks"])][:LEAD_CHOICES]

    def _about_holder(self, question: str, chain: ChainingTree, lead: str) -> list[str]:
        """The facts the hop from ``lead`` found about who fills the role, the ``LEAD_CHOICES``
        closest to the question asked of them ("Where did Borys Lankosz study?" for "Where did
        the director of film Reverse study?"; the web's embedder)."""
        hops = chain.hops_after(lead)
        if not hops:
            return []
        entity, texts = hops[0]  # the role's holder: the first hop of the lead
        asked = ask_past(question, *asked_through(question, self.checker.kinds if self.checks else None), entity)
        return closest(getattr(chain.web, "embedder", None), asked, texts, LEAD_MARGIN, LEAD_CHOICES)

    def _record(self, number: int, tree: str, part: ReplyPart, reply: Reply, chain: ChainingTree | None,
                started: float) -> dict[str, Any]:
        record: dict[str, Any] = {"step": "generate", "attempt": number, "tree": tree, "answer": part.answer,
                                  "text": part.text, "facts": [self.fact(s, tree, chain) for s in part.spans],
                                  "truncated": part.truncated, "tokens": part.tokens,
                                  "prompt_tokens": reply.prompt_tokens, "cached_prompt_tokens": reply.cached_tokens,
                                  "prefill_s": 0.0 if part.continued else reply.prefill_s,
                                  "seconds": since(started)}
        if chain is not None:
            record["tree_facts_final"] = len(chain.index.facts)
        if part.cut:
            record.update(cut=part.cut, dropped=part.dropped)
        if part.stopped:
            record["stopped"] = True
        return record

    def _verdict(self, question: str, record: dict[str, Any], part: ReplyPart,
                 chain: ChainingTree | None = None) -> None:
        """Ground ``record``'s answer in its stated facts, then check that the fact holding it
        says what the question asks (:mod:`.asked`)."""
        facts = [f["text"] for f in record["facts"]]
        verdict = ground(question, part.answer, facts)
        check: AskedCheck | None = None
        if verdict.grounded and not verdict.computed and self.checks:
            check = self.checker.check(question, verdict.short or clean_answer(part.answer), facts, verdict.facts,
                                       held=lambda subject: self._relations_held(subject, chain))
            if not check.passed:
                verdict = Grounding(False, check.how, verdict.facts)
        record["grounded"] = verdict.grounded
        record["grounding"] = verdict.as_dict()
        if check is not None:
            record["check"] = check.as_dict()
            record["grounding"]["check"] = check.as_dict()

    def judge(self, question: str, record: dict[str, Any], answer: str) -> None:
        """Ground and check ``record`` (a reply put together from others' facts and texts) as an
        attempt's own: ``answer`` in its facts, the fact holding it saying what is asked."""
        self._verdict(question, record, ReplyPart(record["text"], [], answer, False, 0, 0.0))

    def _named_checks(self, question: str, record: dict[str, Any],
                      chain: ChainingTree | None) -> list[tuple[int, AskedCheck]]:
        """Each stated triple about a name of ``question``, by its place among the facts, with the
        check of what it says (its object taken as the answer, for the check alone), up to the
        first that says what is asked. [] without checks, facts, or for a cut reply."""
        if not self.checks or not record["facts"] or record.get("truncated"):
            return []
        facts = [f["text"] for f in record["facts"]]
        out = []
        for i, text in enumerate(facts):
            triple = parse_triple(text)
            if triple is None or not normalize_answer(triple[0]) \
                    or normalize_answer(triple[0]) not in normalize_answer(question):
                continue
            out.append((i, self.checker.check(question, triple[2], facts, [i],
                                              held=lambda subject: self._relations_held(subject, chain))))
            if out[-1][1].passed and out[-1][1].by in ("relation", "reading"):
                break  # the first that says what is asked: the reply answers from it
        return out

    def _relations_held(self, subject: str, chain: ChainingTree | None) -> list[str]:
        """The relations the knowledge holds for ``subject``: read from the whole KB's tree
        (:func:`~agent.index.about.subject_relations`) and from the per-question tree's triples."""
        held: dict[str, None] = {}
        if self.generator.index is not None:
            held.update(dict.fromkeys(subject_relations(self.generator.index, self.generator.tokenizer, subject)))
        for fact in (chain.index.facts if chain is not None else ()):
            triple = parse_triple(fact.text)
            if triple is not None and triple[0] == subject:
                held.setdefault(triple[1], None)
        return list(held)

    def fact(self, span: Any, tree: str, chain: ChainingTree | None) -> StatedFact:
        """A fact span as the trace shows it: offsets, text, tree, and where the fact came from."""
        if tree == "question":
            return question_fact(span.start, span.end, span.text, chain.hit(span.id) if chain is not None else None,
                                 span.source)
        index = self.generator.index
        assert index is not None, "a fact outside the per-question tree comes from the KB index"
        fact = index.facts[span.id]
        return {"start": span.start, "end": span.end, "text": span.text, "tree": tree, "fact_id": f"kb:{span.id}",
                "source": fact.source,
                "provenance": {"kind": "statement" if fact.statement else "triple", "source": fact.source,
                               **({} if fact.statement else {"subject": fact.subject, "predicate": fact.predicate,
                                                             "object": fact.object})}}


def since(t: float) -> float:
    return round(time.perf_counter() - t, 4)


def emit(event: AgentEvent) -> None:
    """Hand ``event`` to :meth:`FactAgent.stream`'s reader (nothing happens under ``invoke``)."""
    from langgraph.config import get_stream_writer  # lazy: only while a graph runs

    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run
        return
    writer(event)
