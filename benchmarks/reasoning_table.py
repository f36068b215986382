"""The reasoning table (docs/evaluation.md, "Reasoning, checked"; its commands are in the README): one row per evaluation report under a folder,
each method's EM / token F1 / proven / wrong-but-grounded / seconds per question (and for the
agent, the right chains withheld: an attempt stated facts and answered right, the checks withheld it).

proven: right (EM) and grounded, over all the questions; wrong but grounded: share of the
answers marked grounded that are wrong. A run on one half (``factweave eval ... --half dev|test``,
agent.eval.halves) is named so; where a folder holds both halves of a run, a third row gives the
gap, dev minus test, in points (EM / F1 / proven / wrong but grounded), and where it holds a test
half asked in a model's words too (``--wording``), the gap own wording minus reworded: a gap is a
finding. Usage::

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
    """EM / F1 / proven / wrong but grounded / s per question; where the run counted them (the
    agent's runs), then the right chains withheld, as a share of the questions."""
    text = " / ".join([_pct(score.get("exact_accuracy")), _pct(score.get("f1")), _pct(score.get("proven")),
                       _pct(score.get("wrong_grounded")), f"{score.get('seconds_per_question', 0):.1f}"])
    return text + (f"; right withheld {_pct(score['right_withheld'])}" if score.get("right_withheld") is not None
                   else "")


GAP_KEYS = ("exact_accuracy", "f1", "proven", "wrong_grounded")


def gap_cell(dev: dict, test: dict) -> str:
    """dev minus test, in points, for each of :data:`GAP_KEYS` ("-" where either lacks it)."""
    def one(key: str) -> str:
        if dev.get(key) is None or test.get(key) is None:
            return "-"
        return f"{100 * (dev[key] - test[key]):+.1f}"
    return " / ".join(one(key) for key in GAP_KEYS)


def _gap_row(title: str, first: dict, second: dict) -> str:
    return "| " + " | ".join([title, *(gap_cell(first[m], second[m]) if m in first and m in second else ""
                                        for m in METHODS)]) + " |"


def rows(folder: Path) -> list[str]:
    """One row per report under ``folder``, then the gap rows of the runs on halves: dev minus
    test (the set's own wording), and the test half's own wording minus its rewording."""
    out = []
    runs: dict[tuple[str, str], dict[tuple[str, bool], dict]] = {}
    for path in sorted(folder.rglob("*.json")):
        data = json.loads(path.read_text())
        if "scores" not in data:
            continue
        scores = data["scores"]
        n = len(data.get("questions", []))
        where = str(path.parent.relative_to(folder) or ".")
        name = f"{data.get('title') or data['dataset']} ({n}; {where})"
        out.append("| " + " | ".join([name, *(cell(scores[m]) if m in scores else "" for m in METHODS)]) + " |")
        settings = data.get("settings") or {}
        if settings.get("half"):
            runs.setdefault((where, f"{data['dataset']}, {data.get('model')}"), {})[
                (settings["half"], bool(settings.get("wording")))] = scores
    for (where, label), seen in runs.items():
        for first, second, what in ((("dev", False), ("test", False), "dev - test"),
                                    (("test", False), ("test", True), "own wording - reworded, test half")):
            if first in seen and second in seen:
                out.append("| " + " | ".join([f"gap {what}, points ({label}; {where})",
                                              *(gap_cell(seen[first][m], seen[second][m])
                                                if m in seen[first] and m in seen[second] else "" for m in METHODS)])
                           + " |")
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[1] if len(argv) > 1 else "benchmarks/results/eval/reasoning/checked")
    print("| dataset (questions; folder) | " + " | ".join(METHODS) + " |")
    print("|---|" + "---|" * len(METHODS))
    print("\n".join(rows(folder)))
    print("\nCells: EM / F1 / proven / wrong but grounded / s per question (the agent's: then the right chains "
          "withheld, share of the questions); gap rows: dev minus test, points.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
