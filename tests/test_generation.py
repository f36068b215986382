"""ReFactX generation on the real SmolLM2 model over the bundled demo KB."""
from __future__ import annotations

import sys
import threading
import time

import pytest

from agent.knowledge.kamel import demo_kamel_root, kamel_questions
from agent.knowledge.loaders import load_facts
from agent.prompts import FewShotPrompt

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def kb_texts():
    return {f.text for f in load_facts(demo_kamel_root())}


@pytest.fixture(scope="module")
def questions():
    return [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=20)]


def check_spans(answer, index, kb_texts):
    ids = [span.id for span in answer.facts]
    assert len(ids) == len(set(ids)), "a fact was generated twice"
    for span in answer.facts:
        assert answer.text[span.start : span.end] == span.text
        assert span.text == index.facts[span.id].text
        assert span.text in kb_texts
        assert answer.text[: span.start].endswith("Fact: ")


@pytest.mark.parametrize("beams", [1, 3])
def test_every_fact_span_is_a_kb_fact(demo_generator, demo_index, kb_texts, questions, beams):
    assert len(questions) == 20
    asked = questions[:12] if beams == 1 else questions[12:18]  # (beam search costs beams x: half the questions)
    answers = demo_generator.answer_batch(asked, beams=beams, max_new_tokens=48)
    for a in answers:
        check_spans(a, demo_index, kb_texts)
    # the claim is not vacuous: the model does state facts
    assert sum(len(a.facts) for a in answers) >= 5


def test_fact_lines_in_the_output_are_exactly_the_spans(demo_generator, demo_index, kb_texts, questions):
    answers = demo_generator.answer_batch(questions[:6], max_new_tokens=64)
    for a in answers:
        check_spans(a, demo_index, kb_texts)
        lines = [ln[len("Fact: "):] for ln in a.text.split("\n") if ln.startswith("Fact: ") and ln.endswith(" .")]
        assert lines == [s.text for s in a.facts]


def test_no_fact_repeats_in_a_long_answer(demo_generator, demo_index, kb_texts):
    a = demo_generator.answer("List every fact you know about Kalakalappu 2.", max_new_tokens=120)
    assert len(a.facts) >= 2, a.text  # a repeat needs two facts at least: fewer would prove nothing
    check_spans(a, demo_index, kb_texts)


def test_parallel_generations_do_not_interfere(demo_generator, questions):
    qs = questions[:2]
    sequential = [demo_generator.answer(q, max_new_tokens=40) for q in qs]
    results: dict[int, object] = {}

    def run(i):
        results[i] = demo_generator.answer(qs[i], max_new_tokens=40)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert results[i].text == sequential[i].text
        assert [f.as_dict() for f in results[i].facts] == [f.as_dict() for f in sequential[i].facts]


def test_batched_prompts_and_per_question_trees_share_the_tokenizer_safely(smollm, questions):
    """Concurrent answers: one thread reads a batch of prompts (padded, as ``answer_batch`` does
    before generating) while another builds small per-question trees in a tight loop with the same
    tokenizer, thread switches made as frequent as Python allows. Before the tokenizer's padding was
    made stateless a tree build switched padding off under the batch ("Unable to create tensor ...
    activate padding") in under a second, three runs of three on the code before d46145a; now every
    batch is read whole for 15 s. (Reading prompts, not generating: generation takes the GIL for
    long stretches and hides the race.)"""
    from agent.decoding import FactGenerator
    from agent.index import FactIndex

    facts = list(load_facts(demo_kamel_root()))[:50]
    generator = FactGenerator(smollm.model, smollm.tokenizer, FactIndex.build(facts, smollm.tokenizer),
                              max_new_tokens=1, prefix_cache=False)
    prompts = [questions[0], questions[1] + " And where?"]
    errors: list[str] = []
    done = threading.Event()

    def build() -> None:
        try:
            while not done.is_set():
                FactIndex.build(facts[:8], smollm.tokenizer)  # a per-question tree's size
        except Exception as exc:  # noqa: BLE001 - the failure under test
            errors.append(repr(exc))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    builder = threading.Thread(target=build)
    builder.start()
    batches = 0
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not errors:
            run = generator._prepare(prompts, True, None, 1, None)
            ids = run.inputs["input_ids"]
            assert ids.shape[0] == 2 and run.inputs["attention_mask"].sum(1).tolist() == [
                len(generator._encode(p)) for p in run.prompts]
            batches += 1
    except Exception as exc:  # noqa: BLE001
        errors.append(repr(exc))
    finally:
        done.set()
        builder.join()
        sys.setswitchinterval(switch)
    assert not errors, errors[:2]
    assert batches > 0


def test_free_generation_has_no_spans(demo_generator, questions):
    a = demo_generator.answer(questions[0], constrained=False, max_new_tokens=32)
    assert a.facts == [] and not a.constrained and a.text


def test_few_shot_examples_are_not_demo_questions():
    demo = kamel_questions(demo_kamel_root(), split="dev")
    asked = {q.text.lower() for q in demo}
    subjects = {q.subject.lower() for q in demo}
    for ex in FewShotPrompt.load().examples:
        assert ex.question.lower() not in asked
        assert not any(s in ex.question.lower() for s in subjects if len(s) > 3)


def test_per_question_index_of_statements(demo_generator, smollm, questions):
    """A small tree built per call (as the agent builds from retrieved facts): whatever the model
    writes after ``Fact:`` is exactly one of its statements; the generator's own index is untouched."""
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact

    statements = ["Laurie Graff was born in New York City.", "Zorblax Station is on the island of Norvik.",
                  "The film was made in the Tamil language.", "Mira Quell was born in Oslo in 1951."]
    small = FactIndex.build([Fact.from_statement(s, f"notes.md#{i}") for i, s in enumerate(statements)],
                            smollm.tokenizer)
    spans = []
    for beams in (1, 3):
        for answer in demo_generator.answer_batch(questions[:4], index=small, beams=beams):
            check_spans(answer, small, set(statements))
            assert all(span.source.startswith("notes.md#") for span in answer.facts)
            spans.extend(answer.facts)
    assert spans, "the model wrote no Fact: line for 4 questions x 2 settings"
    assert demo_generator.index is not small and len(demo_generator.index.facts) > 40_000


def test_per_question_index_for_another_tokenizer_is_refused(demo_generator):
    from conftest import word_tokenizer

    from agent.errors import IndexMismatchError
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact

    other = FactIndex.build([Fact("Paris", "capital of", "France")], word_tokenizer())
    with pytest.raises(IndexMismatchError):
        demo_generator.answer("What is the capital of France?", index=other)


def test_stream_gives_the_same_answer_token_by_token(demo_generator, demo_index, kb_texts, questions):
    """Streaming is the same generation: the token texts add up to the answer's text, and each
    fact arrives as soon as its last token is out, equal to the answer's span."""
    facts = 0
    for question in questions[:3]:
        shown, streamed, answer = "", [], None
        for event in demo_generator.stream(question, max_new_tokens=48):
            if event.kind == "token":
                shown += event.text
            elif event.kind == "fact":
                assert shown[event.fact.start:event.fact.end] == event.fact.text  # already complete
                streamed.append(event.fact)
            else:
                answer = event.answer
        assert answer is not None and shown == answer.text
        assert streamed == answer.facts
        assert answer.text == demo_generator.answer(question, max_new_tokens=48).text
        check_spans(answer, demo_index, kb_texts)
        facts += len(streamed)
    assert facts > 0


def test_stream_with_beams_arrives_in_one_piece(demo_generator, questions):
    events = list(demo_generator.stream(questions[0], beams=3, max_new_tokens=40))
    assert [e.kind for e in events if e.kind != "fact"] == ["token", "done"]
    assert events[0].text == events[-1].answer.text == demo_generator.answer(questions[0], beams=3,
                                                                            max_new_tokens=40).text


def test_closing_a_stream_stops_the_generation(demo_generator, questions):
    stream = demo_generator.stream("List every fact you know about Kalakalappu 2.", max_new_tokens=400)
    seen = [next(stream) for _ in range(3)]
    assert all(e.kind in ("token", "fact") for e in seen)
    stream.close()  # the worker thread is stopped and joined here
    assert not [t for t in threading.enumerate() if t.name == "factweave-generate"]
    assert demo_generator.answer(questions[0], max_new_tokens=16).tokens > 0
