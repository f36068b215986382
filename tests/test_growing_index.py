"""The growing fact index (a base tree plus trees added during generation) and the ``on_fact`` hook."""
from __future__ import annotations

import math
import threading

import pytest
import torch
from conftest import enumerate_facts, word_tokenizer

from agent.decoding import FactConstrainedLogitsProcessor, FactTracker, TokenVocab
from agent.errors import IndexMismatchError
from agent.index import FactIndex, GrowingFactIndex
from agent.index.tokens import fact_token_ids
from agent.knowledge.facts import Fact
from agent.prompts import Example, FewShotPrompt

WORDS = ("Rome", "Italy", "Madrid", "Spain", "city", "river", "Seine", "Tiber", "in")
BASE = [Fact("Paris", "country", "France", "t:1"), Fact("Paris", "capital of", "France", "t:2"),
        Fact("Berlin", "country", "Germany", "t:3")]
GROWN = [[Fact("Paris", "river", "Seine", "w:1"), Fact("Rome", "country", "Italy", "w:2")],
         [Fact("Berlin", "capital of", "Germany", "w:3")],
         [Fact("Rome", "river", "Tiber", "w:4"), Fact("Madrid", "country", "Spain", "w:5"),
          Fact("Paris", "city in", "France", "w:6")]]


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer(WORDS)


def grown(tok, batches=GROWN, **kwargs) -> GrowingFactIndex:
    index = GrowingFactIndex(FactIndex.build(BASE, tok), tok, **kwargs)
    for batch in batches:
        index.grow(batch)
    return index


def same_tree(union, flat, ucur, fcur, depth=0) -> int:
    """Walk both indexes in lock step from the given cursors: the same tokens at every node, the
    same facts ending at the same places. Returns the number of facts walked."""
    assert list(union.next_tokens(ucur)) == list(flat.next_tokens(fcur))
    assert union.can_end(ucur) == flat.can_end(fcur)
    n = 0
    if flat.can_end(fcur):
        uid, _ = union.finish(ucur)
        fid, _ = flat.finish(fcur)
        assert union.facts[uid] == flat.facts[fid]
        n += 1
    for t in flat.next_tokens(fcur):
        n += same_tree(union, flat, union.step(ucur, int(t)), flat.step(fcur, int(t)), depth + 1)
    return n


def test_union_has_the_cursor_api_of_one_tree_over_the_same_facts(tok):
    union = grown(tok)
    every = BASE + [f for batch in GROWN for f in batch]
    flat = FactIndex.build(every, tok)
    assert len(union) == len(union.facts) == len(flat) == len(every)
    assert [f.text for f in union.facts] == [f.text for f in every]  # ids: base first, then each grow
    assert same_tree(union, flat, union.root(), flat.root()) == len(every)


def test_used_facts_are_never_produced_twice_across_segments(tok):
    union = grown(tok)
    flat = FactIndex.build([f for f in union.facts], tok)  # same order, so same ids
    ucur, fcur = union.root(), flat.root()
    for fact_id in [4, 0, 7, 3, 5, 1, 6, 2, 8]:  # finish facts of every segment, in mixed order
        for t in fact_token_ids(tok, [union.facts[fact_id].text])[0]:
            ucur, fcur = union.step(ucur, t), flat.step(fcur, t)
        uid, ucur = union.finish(ucur)
        fid, fcur = flat.finish(fcur)
        assert uid == fid == fact_id
        assert same_tree(union, flat, ucur, fcur) == len(flat) - len(set(fcur.used))
    assert len(union.next_tokens(ucur)) == 0 and not union.can_end(ucur)
    with pytest.raises(KeyError):
        union.step(ucur, tok.convert_tokens_to_ids(" "))


def test_grow_returns_global_ids_and_skips_facts_already_held(tok):
    index = GrowingFactIndex(FactIndex.build(BASE, tok), tok)
    ids = index.grow([BASE[0], GROWN[0][0], GROWN[0][0], GROWN[0][1]])  # one from the base, one twice
    assert ids == [3, 4] and [index.facts[i] for i in ids] == GROWN[0]
    assert index.grow(GROWN[0]) == [] and len(index.segments) == 2  # nothing new: no empty segment
    assert index.grow([GROWN[1][0], GROWN[0][1]]) == [5]
    assert index.facts[5].source == "w:3" and index.added == 3


def test_an_unchecked_base_may_repeat_a_fact_but_it_is_still_said_once(tok):
    index = GrowingFactIndex(FactIndex.build(BASE, tok), tok, check_base=False)
    assert index.grow([BASE[2]]) == [3]  # the same fact as base id 2, now twice in the union
    cur = index.root()
    for t in fact_token_ids(tok, [BASE[2].text])[0]:
        cur = index.step(cur, t)
    fact_id, cur = index.finish(cur)
    assert fact_id == 2  # the oldest segment's id
    left = {tuple(t) for t in fact_token_ids(tok, [f.text for f in BASE[:2]])}
    assert set(enumerate_facts(index, cur)) == left  # neither copy can be said again


def test_max_facts_truncates_growth(tok):
    index = GrowingFactIndex(FactIndex.build(BASE, tok), tok, max_facts=4)
    assert index.grow(GROWN[0] + GROWN[1]) == [3, 4, 5]
    assert index.grow(GROWN[2]) == [6]  # only the first fits, in the order given
    assert index.facts[6] == GROWN[2][0] and index.added == 4
    assert index.grow([Fact("Madrid", "country", "Spain")]) == []
    assert len(index) == 7 and len(index.segments) == 3


def test_another_tokenizer_is_refused(tok):
    with pytest.raises(IndexMismatchError):
        GrowingFactIndex(FactIndex.build(BASE, word_tokenizer()), tok)


def test_readers_walk_safely_while_another_thread_grows(tok):
    index = GrowingFactIndex(FactIndex.build(BASE, tok), tok)
    singles = [f for batch in GROWN for f in batch]
    base = {tuple(t) for t in fact_token_ids(tok, [f.text for f in BASE])}
    every = base | {tuple(t) for t in fact_token_ids(tok, [f.text for f in singles])}
    seen, errors, stop = [], [], threading.Event()

    def read():
        try:
            while not stop.is_set():
                seen.append(set(enumerate_facts(index, index.root())))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    for fact in singles:
        index.grow([fact])
    stop.set()
    for r in readers:
        r.join()
    assert not errors
    assert all(base <= s <= every for s in seen)
    assert set(enumerate_facts(index, index.root())) == every


# ---- the on_fact hook, driving the logits processor with SmolLM2's tokenizer -------------------
BORN = Fact("Laurie Graff", "place of birth", "New York", "kb:1")
HOP = Fact("New York", "country", "United States of America", "hop:1")  # grown after BORN is said
OSAKA = Fact("Osaka", "country", "Japan", "kb:2")


def finite(scores, row=0) -> set[int]:
    return {i for i in range(scores.shape[1]) if math.isfinite(scores[row, i].item())}


def test_facts_grown_mid_generation_are_allowed_after_the_growth_and_never_before(smollm):
    tok = smollm.tokenizer
    index = GrowingFactIndex(FactIndex.build([BORN, OSAKA], tok), tok)
    tracker = FactTracker(index, TokenVocab.from_tokenizer(tok, smollm.model.config.vocab_size))
    calls = []

    def on_fact(done):
        calls.append(done)
        if done.text == BORN.text:
            index.grow([HOP])

    proc = FactConstrainedLogitsProcessor(tracker, ["Question: x\n"], on_fact=on_fact)
    prompt = tok("Question: x\n", add_special_tokens=False)["input_ids"]
    trigger = tok("Fact:", add_special_tokens=False)["input_ids"]
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    born, hop, osaka = fact_token_ids(tok, [BORN.text, HOP.text, OSAKA.text])
    assert hop[0] == osaka[0] and hop[1] != osaka[1]  # " <" then the subject
    generated = trigger + born + newline + trigger + hop + newline
    vocab = smollm.model.config.vocab_size
    allowed = []
    for k in range(len(generated) + 1):
        scores = proc(torch.tensor([prompt + generated[:k]]), torch.zeros(1, vocab))
        allowed.append(finite(scores))
    first, second = len(trigger), len(trigger) + len(born) + len(newline) + len(trigger)
    # Before the growth the new fact's tokens are masked, at its first and second token alike.
    assert hop[0] in allowed[first] and hop[1] not in allowed[first + 1]
    assert allowed[first + 1] == {born[1], osaka[1]}
    # The growth came with the first fact's newline, before the next Fact: line was masked.
    assert [c.text for c in calls] == [BORN.text, HOP.text]
    assert calls[0].id == 0 and calls[0].source == "kb:1" and calls[0].end == len(trigger) + len(born)
    assert calls[1].id == 2 and index.facts[2] == HOP
    # After it, the grown fact continues (and the base fact already said does not).
    assert allowed[second + 1] == {hop[1], osaka[1]}
    assert all(allowed[second + i] == {hop[i]} for i in range(2, len(hop)))
    # The final replay (what spans are located from) agrees with what generation did.
    state = tracker.replay("Question: x\n", generated)
    assert [s[0] for s in state.spans] == [0, 2]


def test_on_fact_is_called_once_per_fact_across_beams_and_steps(smollm):
    tok = smollm.tokenizer
    index = GrowingFactIndex(FactIndex.build([BORN, OSAKA], tok), tok)
    tracker = FactTracker(index, TokenVocab.from_tokenizer(tok, smollm.model.config.vocab_size))
    calls = []
    proc = FactConstrainedLogitsProcessor(tracker, ["Q\n"], num_beams=2, on_fact=calls.append)
    prompt = tok("Q\n", add_special_tokens=False)["input_ids"]
    trigger = tok("Fact:", add_special_tokens=False)["input_ids"]
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    born = fact_token_ids(tok, [BORN.text])[0]
    row = trigger + born + newline + tok("Answer: New York", add_special_tokens=False)["input_ids"]
    vocab = smollm.model.config.vocab_size
    for k in range(len(row) + 1):  # both beams write the same fact
        proc(torch.tensor([prompt + row[:k]] * 2), torch.zeros(2, vocab))
    assert [c.id for c in calls] == [0]
    proc(torch.tensor([prompt] * 2), torch.zeros(2, vocab))  # a new generate call starts over
    for k in range(1, len(row) + 1):
        proc(torch.tensor([prompt + row[:k]] * 2), torch.zeros(2, vocab))
    assert [c.id for c in calls] == [0, 0]


def test_a_fact_grown_by_one_row_reaches_a_row_starting_a_fact_in_the_same_step(smollm):
    """The callback runs before any row of the step is masked: a row whose ``Fact:`` ends in the
    step where another row completes a fact may begin with a grown statement's first token."""
    tok = smollm.tokenizer
    statement = Fact.from_statement("New York is a city in the United States.", "hop:2")
    for grow in (False, True):
        index = GrowingFactIndex(FactIndex.build([BORN, OSAKA], tok), tok)
        tracker = FactTracker(index, TokenVocab.from_tokenizer(tok, smollm.model.config.vocab_size))
        proc = FactConstrainedLogitsProcessor(tracker, ["Q\n"], num_beams=2,
                                              on_fact=lambda done: index.grow([statement]) if grow else None)
        prompt = tok("Q\n", add_special_tokens=False)["input_ids"]
        trigger = tok("Fact:", add_special_tokens=False)["input_ids"]
        newline = tok("\n", add_special_tokens=False)["input_ids"]
        born = fact_token_ids(tok, [BORN.text])[0]
        first = fact_token_ids(tok, [statement.text])[0][0]
        writer = trigger + born + newline  # completes BORN with its last token
        other = tok(" I", add_special_tokens=False)["input_ids"] * (len(writer) - 3) + newline + trigger
        vocab = smollm.model.config.vocab_size
        for k in range(len(writer) + 1):
            scores = proc(torch.tensor([prompt + writer[:k], prompt + other[:k]]), torch.zeros(2, vocab))
        # The other row's line has just become a fact line: without the growth only " <" may begin it.
        assert (first in finite(scores, 1)) == grow and fact_token_ids(tok, [OSAKA.text])[0][0] in finite(scores, 1)


def two_hop_generator(smollm):
    """SmolLM2 with a prompt whose examples chain two facts (its default examples state one)."""
    from agent.decoding import FactGenerator

    system = FewShotPrompt.load().system
    prompt = FewShotPrompt(system, (
        Example("In which country was Marie Curie born?",
                "Fact: <Marie Curie> <place of birth> <Warsaw> .\nFact: <Warsaw> <country> <Poland> .\nAnswer: Poland"),
        Example("Which country was the author of Hamlet from?",
                "Fact: <Hamlet> <author> <William Shakespeare> .\n"
                "Fact: <William Shakespeare> <country of citizenship> <England> .\nAnswer: England")))
    return FactGenerator(smollm.model, smollm.tokenizer, None, prompt=prompt, max_new_tokens=48)


@pytest.mark.model
def test_generation_states_a_fact_added_after_its_first_fact(smollm):
    """End to end: the tree holds only the first hop; the callback adds the second hop when the
    first is said, and the model states it in the same generation (answer and stream alike)."""
    gen = two_hop_generator(smollm)
    question = "In which country was Laurie Graff born?"
    writer = Fact("Laurie Graff", "occupation", "writer", "kb:3")
    for streamed in (False, True):
        tree = GrowingFactIndex(FactIndex.build([BORN, OSAKA, writer], smollm.tokenizer), smollm.tokenizer)
        events: list[tuple] = []

        def on_fact(done, tree=tree, events=events):
            events.append(("fact", done.id, done.text))
            if done.text == BORN.text:
                events.append(("grew", *tree.grow([HOP])))

        if streamed:
            stream = list(gen.stream(question, index=tree, on_fact=on_fact))
            answer = stream[-1].answer
            assert [e.fact for e in stream if e.kind == "fact"] == answer.facts
            assert "".join(e.text for e in stream if e.kind == "token") == answer.text
        else:
            answer = gen.answer(question, index=tree, on_fact=on_fact)
        hop_id = len(tree) - 1
        assert events == [("fact", 0, BORN.text), ("grew", hop_id), ("fact", hop_id, HOP.text)]
        assert [(s.id, s.text, s.source) for s in answer.facts] == [(0, BORN.text, "kb:1"), (hop_id, HOP.text, "hop:1")]
        for span in answer.facts:
            assert answer.text[span.start:span.end] == span.text
            assert answer.text[: span.start].endswith("Fact: ")
        assert answer.answer == "United States of America"
