"""The prompt's fixed start prefilled once: the same greedy tokens as without it, fewer prefilled."""
from __future__ import annotations

import pytest

QUESTIONS = ["Where was Laurie Graff born?", "What is the genre of Cellulite Soul?",
             "Who is the manufacturer of BSA Sloper?"]


@pytest.fixture(scope="module")
def uncached(smollm, demo_index):
    from agent.decoding import FactGenerator

    return FactGenerator(smollm.model, smollm.tokenizer, demo_index, max_new_tokens=64, prefix_cache=False)


@pytest.mark.parametrize("constrained", [True, False])
def test_cached_start_gives_the_same_tokens_as_the_whole_prompt(demo_generator, uncached, constrained):
    for question in QUESTIONS[:1] if constrained else QUESTIONS[1:2]:
        cached = demo_generator.answer(question, constrained=constrained)
        whole = uncached.answer(question, constrained=constrained)
        assert cached.text == whole.text and cached.text.strip()
        assert [f.text for f in cached.facts] == [f.text for f in whole.facts]
        # The cache was used: only the question's own tokens were prefilled.
        start = cached.timings["cached_prompt_tokens"]
        assert start > 0.8 * cached.prompt_tokens and whole.timings["cached_prompt_tokens"] == 0
    assert constrained is False or cached.facts  # constrained answers state a fact


def test_a_conversation_streamed_uses_the_cache_and_matches(demo_generator, uncached):
    turns = [{"role": "user", "content": "Where was Laurie Graff born?"},
             {"role": "assistant", "content": "Fact: Laurie Graff place of birth New York.\nAnswer: New York"},
             {"role": "user", "content": "What is her occupation?"}]
    events = list(demo_generator.stream(turns))
    answer = events[-1].answer
    assert "".join(e.text for e in events if e.kind == "token") == answer.text
    assert answer.text == uncached.answer(turns).text
    assert answer.timings["cached_prompt_tokens"] > 0


def test_prompts_that_do_not_start_alike_are_not_cached(demo_generator, uncached):
    # A system message of the caller's own changes the prompt's start: the whole prompt is prefilled.
    turns = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": QUESTIONS[0]}]
    answer = demo_generator.answer(turns)
    assert answer.timings["cached_prompt_tokens"] == 0
    assert answer.text == uncached.answer(turns).text
    # A batch is padded on the left (the start moves) and beams grow their own cache: no cache.
    batch = demo_generator.answer_batch(QUESTIONS[:2], max_new_tokens=8)
    assert [a.timings["cached_prompt_tokens"] for a in batch] == [0, 0] and all(a.text for a in batch)
    beams = demo_generator.answer(QUESTIONS[0], beams=2, max_new_tokens=8)
    assert beams.timings["cached_prompt_tokens"] == 0 and beams.text
