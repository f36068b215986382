"""The KAMEL selection shipped in the package is complete, readable and large enough."""
from __future__ import annotations

from collections import Counter

from agent.knowledge.kamel import (
    demo_kamel_root,
    kamel_questions,
    property_labels,
    question_templates,
    read_kamel,
    relation_ids,
)

ROOT = demo_kamel_root()


def test_demo_loads_with_enough_distinct_facts_and_relations():
    facts = list(read_kamel(ROOT))
    assert len({(f.subject, f.predicate, f.object) for f in facts}) >= 20_000
    assert len({f.predicate for f in facts}) >= 25


def test_every_relation_has_a_label_a_template_and_dev_questions():
    relations = relation_ids(ROOT)
    assert len(relations) >= 25
    assert set(relations) == set(property_labels(ROOT)) == set(question_templates(ROOT))
    per_relation = Counter(q.relation for q in kamel_questions(ROOT, split="dev"))
    assert set(per_relation) == set(relations)
    assert min(per_relation.values()) > 0


def test_demo_leaves_out_relations_with_a_wrong_template():
    # KAMEL gives P36 (capital) the template of P364 (original language).
    assert "P36" not in relation_ids(ROOT)


def test_a_small_limit_covers_many_relations():
    assert len({q.relation for q in kamel_questions(ROOT, limit=25)}) == 25


def test_demo_stays_small():
    size = sum(path.stat().st_size for path in ROOT.rglob("*") if path.is_file())
    assert size < 5_000_000
    assert (ROOT.parent.parent / "README.md").is_file()  # attribution travels with the data
