"""The reasoning table (docs/evaluation.md, "Reasoning, checked"; its commands are in the README): one row per evaluation report under a folder,
each method's EM / token F1 / proven / wrong-but-grounded / seconds per question.

proven: right (EM) and grounded, over all the questions; wrong but grounded: share of the
answers marked grounded that are wrong. Usage::

    python benchmarks/reasoning_table.py benchmarks/results/eval/reasoning/checked
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

METHODS = ("llm-only", "refactx", "web-rag", "agent")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def cell(score: dict) -> str:
    return " / ".join([_pct(score.get("exact_accuracy")), _pct(score.get("f1")), _pct(score.get("proven")),
                       _pct(score.get("wrong_grounded")), f"{score.get('seconds_per_question', 0):.1f}"])


def rows(folder: Path) -> list[str]:
    out = []
    for path in sorted(folder.rglob("*.json")):
        data = json.loads(path.read_text())
        if "scores" not in data:
            continue
        scores = data["scores"]
        n = len(data.get("questions", []))
        name = f"{data.get('title') or data['dataset']} ({n}; {path.parent.relative_to(folder) or '.'})"
        out.append("| " + " | ".join([name, *(cell(scores[m]) if m in scores else "" for m in METHODS)]) + " |")
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[1] if len(argv) > 1 else "benchmarks/results/eval/reasoning/checked")
    print("| dataset (questions; folder) | " + " | ".join(METHODS) + " |")
    print("|---|" + "---|" * len(METHODS))
    print("\n".join(rows(folder)))
    print("\nCells: EM / F1 / proven / wrong but grounded / s per question.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
