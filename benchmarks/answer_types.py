"""The answer check's type rule, measured: how often it would refuse a right answer.

The answer check (``agent/pipeline/asked.py``, ``relations.py``) asks an answer to hold a number when a "what is
..." question's closest relation is numeric (``RelationMatcher.asks_number``, numeric read from
the values the knowledge holds: ``agent/data/relations/value-types.tsv``). For every question of
the shared datasets (``../shared/data``) and the project's paraphrase set, the rule is applied to
the question alone and compared with its gold answers: a question the rule says asks a number
whose gold answers hold none is a right answer it would refuse (target: none); one whose gold
answers are numbers is a case it can catch (a name or place given where a number is asked).
Nothing here is timed.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/answer_types.py [--json benchmarks/results/answer_types.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.embeddings import Embedder  # noqa: E402
from agent.eval.datasets import load_questions  # noqa: E402
from agent.pipeline.question_reading import (_question_names, asked_clause, asks_a_named_thing,  # noqa: E402
                                             offered_alternatives)
from agent.pipeline.relations import RelationLabels, RelationMatcher  # noqa: E402
from agent.pipeline.values import parse_number  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
SETS = [("kamel", SHARED / "kamel", 600), ("popqa", None, 500), ("musique", None, 100), ("hotpotqa", None, 100),
        ("2wiki", None, 100), ("2wiki", REPO / "benchmarks" / "data" / "paraphrases_questions.json", None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "answer_types.json")
    args = parser.parse_args()
    matcher = RelationMatcher(Embedder(), RelationLabels.bundled())
    rows = []
    for name, data, limit in SETS:
        questions = load_questions(name, data, limit=limit)
        caught, refused, numeric = [], [], 0
        for q in questions:
            gold_number = any(parse_number(a) is not None for a in q.answers)
            numeric += gold_number
            if not asks_a_named_thing(q.text) or offered_alternatives(q.text):
                continue
            asks = matcher.asks_number(asked_clause(q.text), _question_names(q.text))
            if asks:
                (caught if gold_number else refused).append({"question": q.text, "gold": list(q.answers[:3]),
                                                             "asks": asks})
        label = f"{name} ({Path(data).name})" if data and name != "kamel" else name
        rows.append({"set": label, "questions": len(questions), "numeric_gold": numeric,
                     "asks_a_number": len(caught) + len(refused), "right_answers_refused": len(refused),
                     "refused": refused, "caught": caught})
    print("| set | questions | gold a number | rule: asks a number | right answers it would refuse |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['set']} | {r['questions']} | {r['numeric_gold']} | {r['asks_a_number']} | "
              f"{r['right_answers_refused']} |")
    out = {"environment": {"python": platform.python_version(), "machine": platform.machine()},
           "numeric_relations": sorted(matcher.labels.numeric), "results": rows}
    args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
