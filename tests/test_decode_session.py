"""The decoding loop of one question: the same tokens as transformers' ``generate`` (greedy),
fact tokens the tree forces fed in one pass, text written into the reply, scoring candidates,
and rewinding a reply, on SmolLM2 and the demo KB's tree."""
from __future__ import annotations

import pytest
import torch

from agent.decoding.greedy import DecodeSession, TransformersSteps
from agent.decoding.spans import decode_tokens
from agent.decoding.tracker import FactTracker

pytestmark = pytest.mark.model
QUESTIONS = ["Where did Buck Owens die?", "What is the original language of Kalakalappu 2?",
             "What instrument did Buck Owens play?"]


class _Counting(TransformersSteps):
    """Counts the forward passes and the tokens fed in each."""

    def __init__(self, model):
        super().__init__(model)
        self.passes: list[int] = []

    def feed(self, tokens, state):
        self.passes.append(len(tokens))
        return super().feed(tokens, state)


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_loop_writes_what_generate_writes(demo_generator, question):
    run = demo_generator._prepare([question], True, 1, 64, None)
    reference = demo_generator._generate(run)[0, run.prompt_len:].tolist()
    answer = demo_generator.answer(question, max_new_tokens=64)  # one question, one beam: the loop
    special = set(demo_generator.tokenizer.all_special_ids)
    while reference and reference[-1] in special:
        reference.pop()
    assert answer.text == decode_tokens(demo_generator.tokenizer, reference)
    assert answer.facts and answer.tokens == len(reference)


def test_forced_fact_tokens_are_fed_together(smollm, demo_index, demo_generator):
    prompt = demo_generator.render(QUESTIONS[0])
    ids = demo_generator._encode(prompt)
    steps = _Counting(smollm.model)
    session = DecodeSession(steps, demo_generator.vocab, demo_generator.vocab.eos_ids,
                            tracker=FactTracker(demo_index, demo_generator.vocab), prompt_text=prompt)
    session.feed(ids)
    facts = [value for kind, value in session.generate(64) if kind == "fact"]
    assert facts and facts[0].text.startswith("<Buck Owens>")
    decode_passes = steps.passes[1:]
    # Fewer forward passes than tokens written: a fact, once picked, is fed in one pass.
    assert len(decode_passes) < len(session.out) and max(decode_passes) > 3


def test_text_written_into_the_reply_moves_the_tracker(smollm, demo_index, demo_generator):
    prompt = demo_generator.render(QUESTIONS[1])
    session = DecodeSession(TransformersSteps(smollm.model), demo_generator.vocab, demo_generator.vocab.eos_ids,
                            tracker=FactTracker(demo_index, demo_generator.vocab), prompt_text=prompt)
    session.feed(demo_generator._encode(prompt))
    session.feed(demo_generator._encode("Fact:"), reply=True)  # the caller opens a fact line
    assert session.trace.active
    facts = [value for kind, value in session.generate(48, line_done=True) if kind == "fact"]
    assert len(facts) == 1 and facts[0].text in {f.text for f in demo_index.facts}
    assert decode_tokens(smollm.tokenizer, session.out).startswith("Fact:")


def test_choose_scores_candidates_without_keeping_them(smollm, demo_generator):
    prompt = demo_generator.render("What is the capital of France?")
    session = DecodeSession(TransformersSteps(smollm.model), demo_generator.vocab, demo_generator.vocab.eos_ids)
    session.feed(demo_generator._encode(prompt))
    session.feed(demo_generator._encode("Answer:"), reply=True)
    before = (len(session.out), session.steps.length(session.state), session.logits.clone())
    pick, scores = session.choose([demo_generator._encode(" Paris"), demo_generator._encode(" Zanzibar Quokka")])
    assert pick == 0 and scores[0] > scores[1]
    assert (len(session.out), session.steps.length(session.state)) == before[:2]
    assert torch.equal(session.logits, before[2])


def test_a_rewound_reply_goes_on_as_if_never_written(smollm, demo_index, demo_generator):
    prompt = demo_generator.render(QUESTIONS[2])

    def fresh():
        s = DecodeSession(TransformersSteps(smollm.model), demo_generator.vocab, demo_generator.vocab.eos_ids,
                          tracker=FactTracker(demo_index, demo_generator.vocab), prompt_text=prompt)
        s.feed(demo_generator._encode(prompt))
        return s

    session = fresh()
    list(session.generate(40))
    spans = list(session.trace.spans)
    assert spans
    keep = spans[0][2] + 1  # through the newline after the first fact
    session.rewind(keep)
    assert session.trace.spans == tuple(spans[:1]) and not session.trace.active
    session.feed(demo_generator._encode("Answer:"), reply=True)
    list(session.generate(16, line_done=True))
    other = fresh()
    list(other.generate(keep))
    other.feed(demo_generator._encode("Answer:"), reply=True)
    list(other.generate(16, line_done=True))
    assert decode_tokens(smollm.tokenizer, session.out) == decode_tokens(smollm.tokenizer, other.out)


def _fresh(smollm, demo_index, demo_generator, question):
    prompt = demo_generator.render(question)
    session = DecodeSession(TransformersSteps(smollm.model), demo_generator.vocab, demo_generator.vocab.eos_ids,
                            tracker=FactTracker(demo_index, demo_generator.vocab), prompt_text=prompt)
    session.feed(demo_generator._encode(prompt))
    session.feed(demo_generator._encode("Fact:"), reply=True)
    return session


def test_a_budget_of_free_tokens_never_cuts_a_fact_line(smollm, demo_index, demo_generator):
    """With ``facts_free`` a fact line's tokens do not count: a budget smaller than any fact
    still ends with the fact whole; counted, the same budget cuts it."""
    counted = _fresh(smollm, demo_index, demo_generator, QUESTIONS[0])
    list(counted.generate(3, line_done=True))
    assert not counted.trace.spans
    free = _fresh(smollm, demo_index, demo_generator, QUESTIONS[0])
    facts = [v for k, v in free.generate(3, line_done=True, facts_free=True) if k == "fact"]
    assert len(facts) == 1 and facts[0].text in {f.text for f in demo_index.facts}


def test_a_fact_rewound_away_is_not_stated_again(smollm, demo_index, demo_generator):
    """A reply rewound past a fact (one that broke away from the chain) does not offer it again:
    the next fact line states another."""
    session = _fresh(smollm, demo_index, demo_generator, QUESTIONS[0])
    first = [v for k, v in session.generate(48, line_done=True) if k == "fact"]
    assert len(first) == 1
    session.rewind(0)
    session.feed(demo_generator._encode("Fact:"), reply=True)
    again = [v for k, v in session.generate(48, line_done=True) if k == "fact"]
    assert len(again) == 1 and again[0].text != first[0].text
