"""The figures of an evaluation report (matplotlib, written as PNG beside the Markdown).

- ``<stem>-strata.png``: per relation (KAMEL, PopQA) or question type (HotpotQA, MuSiQue's hops),
  bars per method: macro F1 for set-answer methods (RCD's metric), exact-match accuracy for the others.
- ``<stem>-accuracy-precision.png``: each method as a point, exact-match accuracy (over all
  questions) against precision (over the answered ones): up and right is better; a method that
  abstains often sits high and left.
- ``<stem>-latency.png``: seconds per question, one box per method (log scale; the median line
  resists a batch slowed by something else on the machine).

Example (not run: needs an evaluation report)::

    paths = write_plots(report, Path("runs"))     # [strata, accuracy-precision, latency]
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..extras import require
from ..files import replacing
from .questions import natural_key

if TYPE_CHECKING:
    from .report import EvalReport
    from .run import MethodResult


def stratum_f1(result: MethodResult) -> dict[str, float]:
    """Per stratum: the mean token F1 of the method's answers (rows saved before F1 was scored
    count as 0)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in result.rows:
        groups[str(row.get("stratum") or "all")].append(row)
    return {name: sum(r.get("f1", 0.0) for r in rows) / len(rows)
            for name, rows in sorted(groups.items(), key=lambda item: natural_key(item[0]))}


def stratum_scores(result: MethodResult) -> dict[str, float]:
    """Per stratum: the macro F1 of a set-answer method's questions there, else the share of
    exact matches (questions without a stratum are grouped under ``all``)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in result.rows:
        groups[str(row.get("stratum") or "all")].append(row)
    out = {}
    for name, rows in sorted(groups.items(), key=lambda item: natural_key(item[0])):
        if all("set" in r for r in rows):
            out[name] = sum(r["set"]["f1"] for r in rows) / len(rows)
        else:
            out[name] = sum(bool(r["exact"]) for r in rows) / len(rows)
    return out


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    try:
        with replacing(path, binary=True) as out:
            fig.savefig(out, format="png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def write_plots(report: EvalReport, out_dir: Path, stem: str) -> list[Path]:
    """Write the three figures for ``report`` into ``out_dir``; their paths."""
    require("eval", "the evaluation's figures")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report.results
    paths = []
    scores = {r.method: stratum_scores(r) for r in results}
    strata = sorted({s for per in scores.values() for s in per}, key=natural_key)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(strata) * max(1, len(results)) / 2), 4.2))
    width = 0.8 / max(1, len(results))
    for i, r in enumerate(results):
        xs = [j + i * width for j in range(len(strata))]
        ax.bar(xs, [100 * scores[r.method].get(s, 0.0) for s in strata], width, label=r.method)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(strata))])
    ax.set_xticklabels(strata, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("F1 (set answers) / EM accuracy, %")
    ax.set_ylim(0, 100)
    ax.set_title(f"{report.title()}: per stratum")
    ax.legend(fontsize=7, ncol=min(4, len(results)))
    paths.append(_save(fig, out_dir / f"{stem}-strata.png"))

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for r in results:
        acc, prec = r.score.exact_accuracy, r.score.exact_precision
        if acc is None:
            continue
        ax.scatter([100 * acc], [100 * (prec or 0.0)], s=40)
        ax.annotate(r.method, (100 * acc, 100 * (prec or 0.0)), fontsize=8, xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("EM accuracy (all questions), %")
    ax.set_ylabel("EM precision (answered questions), %")
    ax.set_xlim(-3, 103)
    ax.set_ylim(-3, 103)
    ax.set_title(report.title())
    paths.append(_save(fig, out_dir / f"{stem}-accuracy-precision.png"))

    fig, ax = plt.subplots(figsize=(max(5.5, 0.8 * len(results)), 4.0))
    timed = [r for r in results if r.rows]
    ax.boxplot([[max(row["seconds"], 1e-4) for row in r.rows] for r in timed], tick_labels=[r.method for r in timed])
    ax.set_yscale("log")
    ax.set_ylabel("seconds per question")
    ax.tick_params(axis="x", rotation=45, labelsize=8)
    ax.set_title(f"{report.title()}: latency")
    paths.append(_save(fig, out_dir / f"{stem}-latency.png"))
    return paths
