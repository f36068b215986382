"""Golden answers: demo-KB questions that SmolLM2-135M (the test model) answers right, through the
agent on the whole-KB tree (ReFactX constrained decoding, then grounding). The questions are
listed in ``tests/data/golden_questions.txt``; their answers are KAMEL's gold objects, not the
model's outputs. A change that loses one of them fails here: a regression in answer quality, not
only in an invariant."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import DATA

from agent.eval.metrics import exact_match
from agent.knowledge.kamel import demo_kamel_root, kamel_questions
from agent.pipeline import FactAgent

GOLDEN = DATA / "golden_questions.txt"


def golden_lost(generator, listed) -> list[str]:
    """The questions of ``listed`` (a file of demo dev questions) that ``generator`` no longer
    answers right from a stated fact of the subject holding the gold answer, each with why."""
    wanted = [line for line in listed.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    gold = {q.text: q for q in kamel_questions(demo_kamel_root(), split="dev")}
    assert len(wanted) >= 20 and set(wanted) <= set(gold)
    # Two at a time: generations on one model overlap correctly and faster (benchmarks/concurrency.py).
    with ThreadPoolExecutor(max_workers=2) as pool:
        replies = list(pool.map(lambda text: FactAgent(generator, None, tree="kb").answer(text), wanted))
    wrong = []
    for text, reply in zip(wanted, replies):
        question = gold[text]
        stated = [f["text"] for f in reply.facts]
        holding = [s for s in stated if question.subject in s and any(a.lower() in s.lower() for a in question.answers)]
        if not (exact_match(reply.answer, question.answers) and reply.trace["grounded"] and holding):
            wrong.append(f"{text} -> {reply.answer!r} (gold {list(question.answers)}) over {stated}")
    return wrong


@pytest.mark.model
def test_the_golden_questions_are_answered_right_from_a_stated_fact(demo_generator):
    wrong = golden_lost(demo_generator, GOLDEN)
    assert not wrong, f"{len(wrong)} golden questions lost:\n" + "\n".join(wrong)
