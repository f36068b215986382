"""The labelled cases of the answer check: (question, stated facts, answer, right?) from every saved
evaluation run, both outcomes, split into the frozen halves (agent.eval.halves).

A case is an answer the agent reached with facts stated: the one it gave (its check passed it,
``supported``) or the one it withheld (its check refused it, ``withheld``). Right: the answer
matches a gold answer (normalized exact match, or whole-word containment either way, the
reports' approximate match); a case that is neither is wrong. Cases repeat across runs (the
same question answered at several commits): one case per question, answer and facts, the verdict
of the last report in path order kept. The verdicts are those of the check at each run's commit,
not of today's check: what the labels are for is measuring a check, any check, on the same cases. The check's precision (of the answers it passed, the share right) and recall
(of the right answers, the share it passed) are given per half and per set, and what it passed
that is wrong (the "wrong but grounded" a user sees) and what it withheld that is right.

Usage::

    python benchmarks/check_cases.py                       # benchmarks/results/eval -> benchmarks/data/check_cases.jsonl
    python benchmarks/check_cases.py RESULTS_FOLDER --out cases.jsonl --json results/check.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.eval.halves import half_of  # noqa: E402
from agent.eval.metrics import approximate_match, exact_match, is_abstention  # noqa: E402


def cases_of(report: dict, where: str) -> list[dict]:
    """The check's cases in one saved report (its agent rows with an answer reached)."""
    out = []
    for q in report.get("questions", []):
        row = (q.get("methods") or {}).get("agent")
        if not row:
            continue
        supported = bool(row.get("supported"))
        answer = row.get("prediction") if supported else row.get("withheld")
        facts = [f["text"] for f in row.get("facts") or []]
        if not answer or is_abstention(str(answer)) or not facts:
            continue
        golds = q.get("gold") or []
        right = exact_match(answer, golds) or approximate_match(answer, golds)
        out.append({"id": q["id"], "half": half_of(q["id"]), "set": report.get("dataset"), "question": q["question"],
                    "facts": facts, "answer": answer, "gold": golds, "right": right, "passed": supported,
                    "from": where, "model": report.get("model")})
    return out


def collect(folder: Path) -> list[dict]:
    """Every case under ``folder``, one per (question, answer, facts): the newest report's verdict."""
    found: dict[tuple, dict] = {}
    reports = []
    for path in folder.rglob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("questions"), list) and data.get("dataset"):
            reports.append((path, data))
    for path, data in sorted(reports, key=lambda r: str(r[0])):
        for case in cases_of(data, str(path.relative_to(folder))):
            found[(case["id"], case["answer"].casefold(), tuple(case["facts"]))] = case
    return sorted(found.values(), key=lambda c: (c["set"] or "", c["id"], c["answer"]))


def scores(cases: list[dict]) -> dict:
    passed = [c for c in cases if c["passed"]]
    right = [c for c in cases if c["right"]]
    hits = sum(c["passed"] and c["right"] for c in cases)
    return {"cases": len(cases), "right": len(right), "passed": len(passed),
            "precision": round(hits / len(passed), 3) if passed else None,
            "recall": round(hits / len(right), 3) if right else None,
            "passed_wrong": len(passed) - hits, "withheld_right": len(right) - hits}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=REPO / "benchmarks" / "results" / "eval")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "data" / "check_cases.jsonl")
    parser.add_argument("--json", type=Path, default=None, help="also write the scores here")
    args = parser.parse_args()
    cases = collect(args.folder)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    table = {half: {"all": scores([c for c in cases if c["half"] == half]),
                    **{s: scores([c for c in cases if c["half"] == half and c["set"] == s])
                       for s in sorted({c["set"] for c in cases})}} for half in ("dev", "test")}
    print("| set | half | cases | right | passed | precision | recall | passed wrong | withheld right |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ["all", *sorted({c["set"] for c in cases})]:
        for half in ("dev", "test"):
            s = table[half][name]
            print(f"| {name} | {half} | {s['cases']} | {s['right']} | {s['passed']} | {s['precision']} | {s['recall']} | "
                  f"{s['passed_wrong']} | {s['withheld_right']} |")
    print(f"\n{len(cases)} cases -> {args.out}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"check": "the agent's check at each saved run's commit (supported)", "scores": table},
                                        indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
