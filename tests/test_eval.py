"""The first-cut KAMEL evaluation, end to end on the real model (few questions)."""
from __future__ import annotations

import pytest

from agent.eval.kamel import evaluate
from agent.knowledge.kamel import demo_kamel_root, kamel_questions


@pytest.mark.model
def test_evaluate_scores_both_modes(demo_generator):
    questions = kamel_questions(demo_kamel_root(), split="dev", limit=4)
    results = evaluate(demo_generator, questions, batch_size=4)
    assert [r.mode for r in results] == ["refactx", "llm-only"]
    for r in results:
        s = r.score
        assert s.total == 4 and len(r.rows) == 4
        assert 0 <= s.exact_correct <= s.approximate_correct <= s.answered <= s.total
        for row in r.rows:
            assert row["gold"] and row["question"].endswith("?")
            if r.mode == "llm-only":
                assert row["facts"] == []
