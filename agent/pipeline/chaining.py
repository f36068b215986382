"""Multi-hop chaining: the per-question tree grows along the facts the model states.

A two-hop question ("the official language of the country X is a citizen of") needs a fact the
question does not name: retrieval on the question finds X's citizenship, not the country's
language. IRCoT-style interleaving closes the gap with the guarantee intact: when a ``Fact:`` line
completes, the entities it adds (a triple's subject or object that the question does not name; a
statement's names that the question does not name) are searched in the knowledge web, and their
facts join the tree (:class:`~agent.index.union.GrowingFactIndex`) before the next ``Fact:`` line
of the same generation; each is searched in the question's context (:func:`hop_query`). Hops
are bounded (``max_hops`` searches per attempt, ``k`` facts each, ``max_facts`` added in all).
A question asked through a role of a thing it names ("Where did the director of film X
study?", :func:`~.question_reading.asked_through`) hops from a fact of X to who fills the role alone (the
name right after the word that says it, :func:`role_holder`), and keeps the facts about them
(:func:`is_about`): their name opens the fact, or the fact comes from their own document.

The callback runs in the generating thread; the hop records it writes are read by the pipeline
between tokens (``take_hops``), which emits them as trace steps.

Example (not run: needs a model and a knowledge web)::

    tree = ChainingTree(hits, generator.tokenizer, web, "What is the official language of ...?")
    answer = generator.answer(question, index=tree.index, on_fact=tree.on_fact)
    tree.hit(answer.facts[1].id), tree.take_hops()
"""
from __future__ import annotations

import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..index.trie import FactIndex
from ..index.union import GrowingFactIndex
from ..knowledge.facts import Fact, parse_triple
from ..knowledge.keywords import bridge_entities
from .grounding import connected_prefix, holds_answer

if TYPE_CHECKING:
    from ..decoding.generate import Answer, FactGenerator, GenerationEvent, Prompt
    from ..decoding.spans import CompletedFact
    from ..web.retrieval import FactHit
    from ..web.retrieval import FactSearch


def hop_query(question: str, fact: str, entity: str) -> str:
    """What to search for ``entity``, a bridge ``fact`` added to ``question``: the question with
    what it names of the fact put in the entity's place ("the official language of the country
    Banff National Park Pavilion is located in" -> "... the country Canada is located in"), else
    the entity and the question. The entity alone finds whatever mentions it: Canada's facts are
    many, its official language one of them.

    >>> hop_query("What is the official language of the country Banff National Park Pavilion is located in?",
    ...           "<Banff National Park Pavilion> <country> <Canada> .", "Canada")
    'What is the official language of the country Canada is located in?'
    """
    triple = parse_triple(fact)
    named = [triple[0], triple[2]] if triple else []
    for name in sorted(named, key=len, reverse=True):
        if name and name != entity:
            pattern = re.compile(re.escape(name), re.IGNORECASE)
            if pattern.search(question):
                return pattern.sub(lambda _: entity, question, count=1)
    return f"{entity}: {question}"


def _role_word(fact: str, role: str) -> re.Match[str] | None:
    """The first word of ``fact`` that says ``role`` by its stem ("directed" for "director"),
    not one inside a name ("County" in "McDowell County" says no county of anything)."""
    stem = role[:max(4, min(5, len(role) - 1))].lower()
    for m in re.finditer(rf"\b{re.escape(stem)}\w*", fact, flags=re.IGNORECASE):
        if m.start() == 0 or not m.group(0)[0].isupper():
            return m
    return None


def nearest_after(fact: str, role: str, names: Sequence[str]) -> list[str]:
    """``names`` ordered by how soon they follow the first word of ``fact`` that says ``role``
    ("directed by Ray Taylor" for "director"); names before it come last. A name is found by its
    words, whatever stands between them ("Robert G Vignola" in "Robert G. Vignola")."""
    m = _role_word(fact, role)
    if m is None:
        return list(names)
    at = m.end()

    def where(name: str, start: int) -> int:
        found = _span(fact, name, start)
        return found[0] if found else -1

    def distance(name: str) -> int:
        after = where(name, at)
        return after - at if after >= 0 else 10_000 + where(name, 0)

    return sorted(names, key=distance)


# Names tried, nearest after the role word first, for who fills a role.
HOLDERS = 3
# Words that join two names in one capitalised run ("Oliver Drake for Charles Rogers
# Productions", "Ann Lee and Bo Rask"): a role is filled by one of them.
JOINED = re.compile(r"\s+(?:and|or|for|with|by|from|at|as|to)\s+")


def _name_words(text: str) -> list[str]:
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return re.findall(r"\w+", plain.lower())


def opens_with_name(text: str, name: str) -> bool:
    """Whether ``text`` opens with ``name`` (a sentence about it), perhaps written in full:
    "Victor Arthur Eduard Janson (1884 – 1960) was ..." opens with Victor Janson, "Antony Basker
    Raj (born 1925) ..." with A. B. Raj: the name's words, in order, among the capitalised words
    the text opens with (the first word first; an initial stands for a word it begins)."""
    head = _name_words(name)
    if not head:
        return False
    opening: list[str] = []
    for token in text.split()[: len(head) + 6]:
        words = _name_words(token)
        core = token.lstrip("\"'“‘(")
        if not words or not (core[:1].isupper() or all(w in head for w in words)):
            break
        opening.extend(words)
        if re.search(r"[,;:(]", token):
            break

    def same(a: str, b: str) -> bool:
        return a == b or (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b))

    if not opening or not same(head[0], opening[0]):
        return False
    at = 1
    for word in head[1:]:
        while at < len(opening) and not same(word, opening[at]):
            at += 1
        if at == len(opening):
            return False
        at += 1
    return True


# A title's parenthesised qualifier ("Oliver Drake (filmmaker)", "Sabotage (1936 film)").
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


def bare_name(name: str) -> str:
    """``name`` without a title's trailing qualifier: "Ek Hi Bhool (1940 Film)" -> "Ek Hi Bhool"."""
    return _QUALIFIER.sub("", name).strip() or name


def is_about(hit: Any, name: str) -> bool:
    """Whether a web hit is a fact about ``name`` (a person a role led to): it opens with the
    name (:func:`opens_with_name`), or it comes from the document titled with it ("She was born
    in Oslo." from "Mira Quell"; "Oliver Drake (filmmaker)" is titled with Oliver Drake)."""
    if opens_with_name(hit.text, name):
        return True
    title = str((getattr(hit, "provenance", None) or {}).get("title", ""))
    return bool(title) and _name_words(bare_name(title)) == _name_words(name)


def role_holder(fact: str, question: str, role: str) -> list[str]:
    """Who fills ``role`` in ``fact`` ("Lamp Street is a 1961 drama directed by Ann Lee and
    starring Bo Rask" -> ["Ann Lee"]): of the names ``fact`` adds to ``question``, the one
    nearest after the word that says the role; [] when no word of ``fact`` says it."""
    return role_holders(fact, question, role)[:1]


def role_holders(fact: str, question: str, role: str, limit: int = HOLDERS) -> list[str]:
    """The names that may fill ``role`` in ``fact``, nearest after the word that says it first
    (:func:`role_holder`), at most ``limit``: "directed by pioneering French filmmaker Alice
    Guy-Blaché" -> ["French", "Alice Guy-Blaché"]. A hop takes the first the knowledge has facts
    about (no one's facts open with "French")."""
    if _role_word(fact, role) is None:
        return []
    names = [p for e in bridge_entities(fact, question, limit=8) for p in JOINED.split(e) if p and p[0].isupper()]
    ordered = nearest_after(fact, role, list(dict.fromkeys(names)))
    out = ordered[:1]
    # The next name only when it fills the same role: after "and" or "or" alone ("directed by
    # Bill Rebane and Herschell Gordon Lewis"), or after a one-word name in the same noun phrase
    # (lower-case words between, no joining word or mark: "French" describes "filmmaker Alice
    # Guy-Blaché"). "Ann Lee and starring Bo Rask" are two roles.
    for name in ordered[1:limit]:
        before, here = _span(fact, out[-1]), _span(fact, name)
        gap = fact[before[1]:here[0]] if before and here and here[0] > before[1] else ";"
        joined = re.fullmatch(r",?\s+(?:and|or)\s+|,\s+", gap) is not None
        described = len(out[-1].split()) == 1 and re.fullmatch(r"(?:\s+[a-z][\w-]*)*\s+", gap) is not None \
            and not JOINED.search(gap)
        if not (joined or described):
            break
        out.append(name)
    return out


def _span(fact: str, name: str, start: int = 0) -> tuple[int, int] | None:
    """Where ``name``'s words stand in ``fact`` from ``start`` (whatever is between them: "Robert
    G Vignola" in "Robert G. Vignola"), or None."""
    words = re.findall(r"\w+", name)
    found = re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE).search(fact, start) \
        if words else None
    return found.span() if found else None


def names(text: str, name: str) -> bool:
    """Whether ``text`` names ``name``: word for word, or as its opening, perhaps in full
    (:func:`opens_with_name`)."""
    return holds_answer(text, name) or opens_with_name(text, name)


def role_lead(hits: Sequence[Any], question: str, through: tuple[str, str]) -> str:
    """For a question asked through a role of a name it gives (``through``: ("West of Shanghai",
    "director") for "Who is the spouse of the director of film West of Shanghai?"): the first of
    ``hits`` (in rank order) about that name that says who fills the role ("West of Shanghai is
    a 1937 film directed by John Farrow ..."); "" when none does. The agent states it first, so
    the chain starts at the one the question asks about (a small model otherwise stops before
    any fact, or at the film's own facts)."""
    named, role = through
    if not named or not role:
        return ""
    leads = [(hit.text, holder[0]) for hit in hits
             if (holds_answer(hit.text, named) or is_about(hit, named))
             for holder in [role_holder(hit.text, question, role)] if holder]
    # One that names the holder after the word that says the role ("founded in 1987 by Mira
    # Quell") first: before it ("Quell founded ...") the name is often a shortened one.
    after = [text for text, holder in leads if _named_after_role(text, role, holder)]
    return (after or [text for text, _ in leads] or [""])[0]


def _named_after_role(fact: str, role: str, name: str) -> bool:
    m = _role_word(fact, role)
    return m is not None and _span(fact, name, m.end()) is not None


class ChainingTree:
    """The per-question tree over ``hits`` that grows as facts are stated (see the module
    docstring). ``hit(fact_id)`` is the web hit behind a fact of the tree, found by id."""

    def __init__(self, hits: Sequence[FactHit], tokenizer: Any, web: FactSearch | None, question: str, *,
                 max_hops: int = 3, k: int = 5, max_facts: int = 60, through: tuple[str, str] = ("", "")) -> None:
        unique: dict[str, FactHit] = {}
        for h in hits:
            unique.setdefault(h.text, h)
        self._hits: list[FactHit] = list(unique.values())
        base = FactIndex.build([Fact.from_statement(h.text, h.source) for h in self._hits], tokenizer)
        self.index = GrowingFactIndex(base, tokenizer, max_facts=max_facts)
        self.web, self.question = web, question
        self.max_hops, self.k = max_hops, k
        # A question asked through a role of a name it gives ("the spouse of the director of
        # film X": ("X", "director")): a fact of X hops to who fills the role alone.
        self.named, self.role = through
        self._texts = set(unique)
        self._searched: set[str] = set()
        self._found: set[str] = set()  # the role holders whose search found facts about them
        self._hops: list[dict[str, Any]] = []
        self._taken = 0
        self._base = self._hits_taken = len(self._hits)
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self._hits)

    def hit(self, fact_id: int) -> FactHit | None:
        return self._hits[fact_id] if 0 <= fact_id < len(self._hits) else None

    def on_fact(self, done: CompletedFact) -> None:
        """Search the entities ``done`` adds and grow the tree with their facts (bounded)."""
        if self.web is None:
            return
        holder = role_holders(done.text, self.question, self.role) if self.role and holds_answer(done.text, self.named) else []
        holder_found = False
        for entity in holder or bridge_entities(done.text, self.question):
            if holder_found:
                break  # the role's holder is found: the names after them do not fill it
            with self._lock:
                if entity.casefold() in self._searched:
                    holder_found = bool(holder) and entity.casefold() in self._found
                    continue
                if len(self._searched) >= self.max_hops:
                    continue
                self._searched.add(entity.casefold())
            t = time.perf_counter()
            query = hop_query(self.question, done.text, entity)
            if holder:
                # Who fills the role: the facts about them (:func:`is_about`), found by the name
                # alone and with the question (the question alone brings X's facts back); those
                # that name them (a fact of their document that does not, "He studied in Łódź.",
                # connects to no stated fact: the chain would break there).
                hits = [h for q in (entity, query) for h in self.web.search(q, 2 * self.k).hits
                        if is_about(h, entity) and names(h.text, entity)]
                holder_found = bool(hits)
                if hits:
                    with self._lock:
                        self._found.add(entity.casefold())
            else:
                hits = self.web.search(query, 2 * self.k).hits
            # Twice k: facts the tree already holds (the anchor's own) are skipped, not counted.
            found = list({h.text: h for h in hits if h.text not in self._texts}.values())[: self.k]
            ids = self.index.grow(Fact.from_statement(h.text, h.source) for h in found) if found else []
            added = found[: len(ids)]
            with self._lock:
                # grow() keeps the order it was given and adds from the front, so ids align.
                self._hits.extend(added)
                self._texts.update(h.text for h in added)
                self._hops.append({"step": "hop", "fact": done.text, "entity": entity, "query": query,
                                   "added": [h.text for h in added], "added_ids": [h.id for h in added],
                                   "seconds": round(time.perf_counter() - t, 4)})

    def take_hits(self) -> list[FactHit]:
        """The hits the hops added to the tree since the last call (the first ``size`` hits,
        the question's own, are never returned)."""
        with self._lock:
            start = max(self._hits_taken, self._base)
            new = self._hits[start:]
            self._hits_taken = len(self._hits)
        return new

    def hops_after(self, fact: str) -> list[tuple[str, list[str]]]:
        """(entity, the facts added to the tree) of each hop from stated ``fact``, in order."""
        with self._lock:
            return [(hop["entity"], list(hop["added"])) for hop in self._hops if hop["fact"] == fact]

    def take_hops(self) -> list[dict[str, Any]]:
        """Hop records written since the last call (for the trace, in order)."""
        with self._lock:
            new = self._hops[self._taken:]
            self._taken = len(self._hops)
        return new


class ChainGuard:
    """Ends a question's generation when a stated fact breaks away from the chain: it names no
    entity of the question and shares none with the facts before it
    (:func:`~.grounding.connected_prefix`). A small model made to write ``Fact:`` lines goes on
    stating whatever the tree offers once the facts it needs are said ("<Sargis Hovhannisyan>
    <place of birth> <Yerevan>", then "<Yerzovka> <country> <Russia>", then "Answer: Russian");
    those lines prove nothing and cost seconds each. Facts that stay on the chain are handed on
    to ``then`` (the hop search), so only the chain is followed.

    One guard per ``generate`` call, over its batch of ``questions``: ``cut`` holds the batch
    positions whose chain broke, to be passed as the generator's ``stop_items``. One sequence
    per question: with beam search, facts of different beams would mix (do not use it there).
    """

    def __init__(self, questions: str | Sequence[str], then: Callable[[CompletedFact], None] | None = None) -> None:
        self.questions = [questions] if isinstance(questions, str) else list(questions)
        self.then = then
        self.stated: list[list[str]] = [[] for _ in self.questions]
        self.cut: set[int] = set()

    def on_fact(self, done: CompletedFact) -> None:
        if done.item in self.cut:
            return
        stated = self.stated[done.item]
        stated.append(done.text)
        if connected_prefix(self.questions[done.item], stated) < len(stated):
            self.cut.add(done.item)
        elif self.then is not None:
            self.then(done)


def connected_reply(question: str, text: str, facts: Sequence[tuple[str, int]]) -> tuple[int, str]:
    """How many of the stated ``facts`` (text, end offset in ``text``) form the connected chain,
    and the reply to answer again from: ``text`` up to the end of the last connected fact's line,
    then ``Answer:`` ("" when no fact or every fact is connected: nothing to answer again from)."""
    keep = connected_prefix(question, [fact for fact, _ in facts])
    if keep == 0 or keep == len(facts):
        return keep, ""
    return keep, reply_through(text, facts[keep - 1][1], "Answer:")


def reply_through(text: str, end: int, then: str) -> str:
    """``text`` up to the end of the line holding offset ``end`` (a fact's end), then a new line
    starting with ``then`` (``Answer:`` or ``Fact:``): where a reply is taken up again."""
    stop = text.find("\n", end)
    return (text if stop < 0 else text[:stop]) + "\n" + then


# The re-answer writes one line: the answer (the facts it rests on are already stated).
ANSWER_LINE_TOKENS = 24


def answer_on_chain(generator: FactGenerator, questions: Sequence[Prompt], *,
                    on_fact: Callable[[CompletedFact], None] | None = None, **options: Any) -> list[Answer]:
    """``generator.answer_batch`` with a :class:`ChainGuard`: a question whose stated facts break
    away from its chain stops there and is answered again from the connected facts (one line,
    the model writing it). The answer's ``text`` keeps every line the model wrote, then
    ``Answer:`` and the new answer; ``dropped`` lists the facts it was written without. A first
    fact that names nothing of the question leaves no answer (nothing connected to answer from).
    Without the constraint or with beam search: ``answer_batch`` unchanged.

    Example (not run: needs a model)::

        answer_on_chain(generator, ["Where was Sargis Hovhannisyan born?"])[0].answer   # 'Yerevan'
    """
    questions = list(questions)
    if not _guarded(generator, options):
        return generator.answer_batch(questions, on_fact=on_fact, **options)
    guard = ChainGuard([asked_text(q) for q in questions], on_fact)
    answers = generator.answer_batch(questions, on_fact=guard.on_fact, stop_items=guard.cut, **options)
    return _answer_again(generator, questions, guard, answers, options)


def stream_on_chain(generator: FactGenerator, question: Prompt, *,
                    on_fact: Callable[[CompletedFact], None] | None = None,
                    **options: Any) -> Iterator[GenerationEvent]:
    """:meth:`FactGenerator.stream` with a :class:`ChainGuard`, as :func:`answer_on_chain`: the
    text streamed before the cut stays; the new ``Answer:`` line follows it."""
    if not _guarded(generator, options):
        yield from generator.stream(question, on_fact=on_fact, **options)
        return
    # lazy: agent.decoding pulls torch (this module is imported without it)
    from ..decoding.generate import GenerationEvent

    guard = ChainGuard(asked_text(question), on_fact)
    first = None
    for event in generator.stream(question, on_fact=guard.on_fact, stop_items=guard.cut, **options):
        if event.kind == "done":
            first = event.answer
        else:
            yield event
    if first is None:  # the reader stopped early
        return
    final = _answer_again(generator, [question], guard, [first], options)[0]
    if len(final.text) > len(first.text):
        yield GenerationEvent("token", final.text[len(first.text):])
    for span in final.facts[len(first.facts):]:
        yield GenerationEvent("fact", fact=span)
    yield GenerationEvent("done", answer=final)


def asked_text(question: Prompt) -> str:
    """What a chain may start from: the question, or a conversation's turns (user and assistant)
    joined, newest last: a follow-up ("And what is their occupation?") names its subject only
    in an earlier turn."""
    if isinstance(question, str):
        return question
    return "\n".join(str(turn.get("content", "")) for turn in question if turn.get("role") in ("user", "assistant"))


def _guarded(generator: FactGenerator, options: dict[str, Any]) -> bool:
    return options.get("constrained", True) and (options.get("beams") or generator.beams) == 1


def _answer_again(generator: FactGenerator, questions: list[Prompt], guard: ChainGuard, answers: list[Answer],
                  options: dict[str, Any]) -> list[Answer]:
    """``answers``, those ``guard`` cut (stopped where their chain broke) answered again from
    their connected facts, in one batch."""
    from dataclasses import replace

    # lazy: agent.decoding pulls torch (this module is imported without it)
    from ..decoding.spans import FactSpan

    out, again_of, prefixes = list(answers), [], []
    for i in sorted(guard.cut):
        cut = answers[i]
        keep, prefix = connected_reply(guard.questions[i], cut.text, [(f.text, f.end) for f in cut.facts])
        # Ended by the guard, not by the token budget; without a connected fact, no answer.
        out[i] = replace(cut, answer="", truncated=False, dropped=[f.text for f in cut.facts[keep:]])
        if prefix:
            again_of.append(i)
            prefixes.append(prefix)
    if not again_of:
        return out
    again = generator.answer_batch([questions[i] for i in again_of], reply_prefix=prefixes,
                                   max_new_tokens=ANSWER_LINE_TOKENS,
                                   **{k: v for k, v in options.items() if k in ("constrained", "index")})
    for i, new in zip(again_of, again):
        cut = out[i]
        # What the model wrote, to the end of its last fact's line (a token it began after is cut).
        head = reply_through(cut.text, cut.facts[-1].end, "Answer:")
        facts = [*cut.facts, *(FactSpan(f.start + len(head), f.end + len(head), f.id, f.text, f.source)
                               for f in new.facts)]
        timings = {**cut.timings, "reanswer_s": new.timings.get("generate_s", 0.0)}
        out[i] = replace(cut, answer=new.answer, text=head + new.text, facts=facts, truncated=new.truncated,
                         tokens=cut.tokens + new.tokens, timings=timings)
    return out
