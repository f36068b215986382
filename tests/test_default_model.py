"""Golden answers of the demo's default model (qwen2.5-coder-0.5b) over the demo KB: a two-fact
chain, and single-hop questions it used to run past (more facts, then an answer from the last).

The default model's weights come with ``make install-demo`` (about 1 GB), not with ``make test``:
without them these tests skip, saying so, and the SmolLM2 tests cover the same code paths.
"""
from __future__ import annotations

import pytest

from agent.models import PRESETS, preset_installed
from agent.pipeline.grounding import ground
from agent.settings import DEFAULT_MODEL

pytestmark = [pytest.mark.model, pytest.mark.skipif(
    not preset_installed(PRESETS[DEFAULT_MODEL]),
    reason=f"the default model {DEFAULT_MODEL} is not installed (make install-demo installs it)")]

EDITH = "What is the official language of the country Edith Frank-Holländer is a citizen of?"


@pytest.fixture(scope="module")
def default_generator():
    """The model as the demo opens it: from the cache ``make demo`` filled (converted once)."""
    from agent.runtime import open_generator
    from agent.settings import load_settings

    return open_generator(DEFAULT_MODEL, cache_dir=load_settings().cache_dir(), max_new_tokens=96, progress=False)


def test_two_facts_chained_over_the_whole_kb(default_generator):
    """Her citizenship is one fact, Germany's official language another: both stated, in order."""
    from agent.pipeline import FactAgent

    reply = FactAgent(default_generator, None, tree="kb").answer(EDITH)
    stated = [f["text"] for f in reply.facts]
    assert reply.answer == "German" and reply.trace["grounded"]
    assert stated == ["<Edith Frank-Holländer> <country of citizenship> <Germany> .",
                      "<Germany> <official language> <German> ."]
    assert all(f["fact_id"].startswith("kb:") and f["provenance"]["source"].startswith("kamel:") for f in reply.facts)


@pytest.mark.parametrize(("question", "gold"), [
    ("Where was Sargis Hovhannisyan born?", "Yerevan"),
    ("What languages has Cassius Felix written in?", "Latin"),
])
def test_single_hop_answer_is_not_replaced_by_a_later_unrelated_fact(default_generator, question, gold):
    """This model goes on stating facts after the one that answers ("<Yerzovka> <country>
    <Russia>", then "Answer: Russian"); the generation stops there and answers from the chain."""
    from agent.pipeline.chaining import answer_on_chain

    answer = answer_on_chain(default_generator, [question])[0]
    assert answer.answer == gold
    assert ground(question, answer.answer, [f.text for f in answer.facts if f.text not in answer.dropped]).grounded


def test_a_chain_one_hop_short_gets_one_more_fact(default_generator):
    """On the whole KB the model states the district's country, then answers "Russian" from what
    it knows: not in a stated fact, so withheld, until it states Russia's official language."""
    from agent.pipeline import FactAgent

    question = "What is the official language of the country Issinsky District is located in?"
    reply = FactAgent(default_generator, None, tree="kb").answer(question)
    attempts = [s for s in reply.trace["steps"] if s["step"] == "generate"]
    assert reply.answer == "Russian" and reply.trace["grounded"]
    assert [f["text"] for f in reply.facts] == ["<Issinsky District> <country> <Russia> .",
                                                "<Russia> <official language> <Russian> ."]
    assert not attempts[0]["grounded"] and attempts[-1]["continues"] == attempts[0]["attempt"]
