"""Constrained generation that stops where the stated facts break away from the question
(answer_on_chain / stream_on_chain), on the real SmolLM2 model over the bundled demo KB."""
from __future__ import annotations

import pytest

from agent.pipeline.chaining import answer_on_chain, stream_on_chain
from agent.pipeline.grounding import ground

pytestmark = pytest.mark.model

# SmolLM2-135M's first fact for this one is about a cannon; left alone it goes on to another
# unrelated fact and answers "France" from them.
OFF = "What is the occupation of Debra Mullins?"
ON = "Where was Laurie Graff born?"


@pytest.fixture(scope="module")
def guarded(demo_generator):
    return answer_on_chain(demo_generator, [OFF, ON])


def test_a_fact_off_the_chain_stops_its_question_and_only_its_question(demo_generator, guarded):
    plain = demo_generator.answer_batch([OFF, ON])

    # Without the guard: an answer resting on nothing that names Debra Mullins.
    assert plain[0].answer and len(plain[0].facts) >= 2
    assert not ground(OFF, plain[0].answer, [f.text for f in plain[0].facts]).grounded
    # With it: stopped right after that first fact, no answer claimed, the fact listed as dropped.
    off = guarded[0]
    assert off.answer == "" and not off.truncated and "Answer:" not in off.text
    assert [f.text for f in off.facts] == [plain[0].facts[0].text] and off.dropped == [plain[0].facts[0].text]
    assert off.tokens < plain[0].tokens
    # The other question of the same batch is untouched, and grounded.
    on = guarded[1]
    assert on.text == plain[1].text and on.answer == "New York" and on.dropped == []
    assert ground(ON, on.answer, [f.text for f in on.facts]).grounded


@pytest.mark.parametrize("item", [0, 1])
def test_stream_on_chain_adds_up_to_answer_on_chain(demo_generator, guarded, item):
    question, whole = [OFF, ON][item], guarded[item]
    text, facts, done = "", [], None
    for event in stream_on_chain(demo_generator, question):
        if event.kind == "token":
            text += event.text
        elif event.kind == "fact":
            facts.append(event.fact)
        else:
            done = event.answer
    assert done is not None and text == done.text == whole.text
    assert done.answer == whole.answer and done.dropped == whole.dropped
    assert [f.text for f in facts] == [f.text for f in whole.facts]
    for span in done.facts:
        assert done.text[span.start:span.end] == span.text


def test_a_reply_that_ends_with_fact_continues_with_a_constrained_fact(demo_generator, demo_index):
    """What the agent sends when a chain stopped one hop short: the reply so far, then ``Fact:``."""
    answer = demo_generator.answer("Where was Laurie Graff born?", reply_prefix="Fact:")
    assert answer.facts and answer.facts[0].start <= 1  # the very first tokens are the fact
    assert answer.facts[0].text in {f.text for f in demo_index.facts}
    assert answer.text[answer.facts[0].start:answer.facts[0].end] == answer.facts[0].text


def test_the_whole_kb_says_what_it_holds_about_a_bridge(smollm, demo_index):
    """Read from the tree itself (the KB's facts are not listed): the relations of <Canada>,
    not those of <Canada Lee> or <Canada at War>, which share its first tokens (the answer check
    reads what the KB holds for a subject this way)."""
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts
    from agent.index.about import subject_relations

    facts = list(load_facts(demo_kamel_root()))
    for subject in ("Canada", "Canada Lee", "Germany"):
        expected = {f.predicate for f in facts if f.subject == subject}
        assert expected and set(subject_relations(demo_index, smollm.tokenizer, subject)) == expected
    assert subject_relations(demo_index, smollm.tokenizer, "Qwxvbrt Plimsoll") == []


def test_the_facts_a_tree_holds_about_a_name_are_read_from_it(smollm, tmp_path):
    """What a grown tree gets in vLLM (agent.decoding.vllm_processor): a name's triples as subject
    and the statements that open with it, in memory and on disk alike; not those of a longer name
    sharing its first tokens (<Canada Lee>, "Buck Owensby"), not those that name it later."""
    from agent.index import DiskFactIndex, FactIndex, build_disk_index
    from agent.index.about import facts_about
    from agent.knowledge.facts import Fact
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts

    statements = ["Buck Owens was born in Sherman, Texas.", "Buck Owens's first band was the Buckaroos.",
                  "Buck Owensby is another man.", "The Buckaroos backed Buck Owens."]
    facts = list(load_facts(demo_kamel_root())) + [Fact.from_statement(t) for t in statements]
    build_disk_index(facts, smollm.tokenizer, tmp_path / "kb.fidx")
    disk = DiskFactIndex.open(tmp_path / "kb.fidx", smollm.tokenizer)
    for tree in (FactIndex.build(facts, smollm.tokenizer), disk):
        for name in ("Canada", "Buck Owens", "Germany"):
            got = {f.text for f in facts_about(tree, smollm.tokenizer, name)}
            triples = {f.text for f in facts if f.subject == name}
            assert triples and triples <= got
            assert got - triples == ({statements[0], statements[1]} if name == "Buck Owens" else set())
        assert facts_about(tree, smollm.tokenizer, "Qwxvbrt Plimsoll") == []
        assert len(facts_about(tree, smollm.tokenizer, "Buck Owens", limit=2)) == 2
