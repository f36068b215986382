"""Runs side by side: ``factweave eval compare RUN...`` reads the JSON reports of
``factweave eval`` and writes one Markdown table per metric, methods down, runs across.

A cell is empty (``-``) where a run did not have the method or the metric does not apply (no
judge, no set answers, no sampling). Runs keep the order given; methods follow
:data:`agent.eval.methods.METHODS`.

Example (not run: needs saved evaluation runs)::

    runs = [load_run(p) for p in Path("benchmarks/results/eval").glob("*.json")]
    print(compare_markdown(runs, ["exact_accuracy", "set_f1"]))
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import FactweaveError
from .methods import METHODS
from .report import DATASET_TITLES, markdown_table, percent


def _get(*keys: str) -> Callable[[dict[str, Any]], float | None]:
    def read(scores: dict[str, Any]) -> float | None:
        value: Any = scores
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    return read


# name -> (heading, reader of a method's scores, cell format)
METRICS: dict[str, tuple[str, Callable[[dict[str, Any]], float | None], str]] = {
    "exact_accuracy": ("EM accuracy (all questions)", _get("exact_accuracy"), "percent"),
    "exact_precision": ("EM precision (answered questions)", _get("exact_precision"), "percent"),
    "approximate_accuracy": ("approximate-match accuracy", _get("approximate_accuracy"), "percent"),
    "f1": ("token F1 (mean over all questions)", _get("f1"), "percent"),
    "grounded": ("grounded answers (share of answered questions)", _get("grounded"), "percent"),
    "proven": ("proven answers: right and grounded (share of all questions)", _get("proven"), "percent"),
    "wrong_grounded": ("wrong but grounded (share of the grounded answers)", _get("wrong_grounded"), "percent"),
    "follow_up_share": ("follow-up EM as a share of standalone EM", _get("follow_up", "exact_share"), "percent"),
    "judge_accuracy": ("LLM-judge accuracy", _get("judge_accuracy"), "percent"),
    "set_f1": ("set answers: macro F1 over relations", _get("set_macro", "f1"), "percent"),
    "best_of_n": ("best-of-n EM accuracy (sampling methods)", _get("best_of_n", "exact_accuracy"), "percent"),
    "seconds": ("seconds per question (median)", _get("seconds_per_question_median"), "seconds"),
}
DEFAULT_METRICS = ("exact_accuracy", "exact_precision", "approximate_accuracy", "f1", "grounded", "proven",
                   "wrong_grounded", "follow_up_share", "set_f1", "seconds")


def load_run(path: str | Path) -> dict[str, Any]:
    """A report written by ``factweave eval --out``; anything else is a one-line error."""
    path = Path(path)
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FactweaveError(f"{path}: no such run report") from None
    except (ValueError, UnicodeDecodeError):
        raise FactweaveError(f"{path}: not a JSON run report") from None
    if not isinstance(run, dict) or not isinstance(run.get("scores"), dict) or "dataset" not in run:
        raise FactweaveError(f"{path}: not a report of `factweave eval` (no dataset and scores)")
    run.setdefault("path", str(path))
    return run


def expand_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Files as given; a folder stands for the reports in it (``*.json``, sorted)."""
    out: list[Path] = []
    for given in paths:
        p = Path(given)
        out.extend(sorted(q for q in p.glob("*.json") if not q.name.startswith(".")) if p.is_dir() else [p])
    if not out:
        raise FactweaveError("no run reports given")
    return out


def run_label(run: dict[str, Any]) -> str:
    """``KAMEL dev, smollm2-135m (25 q)``."""
    settings = run.get("settings") or {}
    name = DATASET_TITLES.get(run["dataset"], run["dataset"])
    if settings.get("split"):
        name += f" {settings['split']}"
    return f"{name}, {run.get('model', '?')} ({settings.get('questions', '?')} q)"


def _cell(value: float | None, kind: str) -> str:
    if value is None:
        return "-"
    return percent(value) if kind == "percent" else f"{value:.2f}"


def compare_markdown(runs: Sequence[dict[str, Any]], metrics: Sequence[str] = DEFAULT_METRICS) -> str:
    """One table per metric in ``metrics`` (names of :data:`METRICS`); a metric no run has is left out."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise FactweaveError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    seen = {m for run in runs for m in run["scores"]}
    methods = [m for m in METHODS if m in seen] + sorted(seen - METHODS.keys())
    labels = [run_label(run) for run in runs]
    parts = []
    for metric in metrics:
        heading, read, kind = METRICS[metric]
        cells = [[_cell(read(run["scores"][m]) if m in run["scores"] else None, kind) for run in runs]
                 for m in methods]
        keep = [(m, row) for m, row in zip(methods, cells) if any(c != "-" for c in row)]
        if not keep:
            continue
        parts.append("\n".join([f"#### {heading}", "", *markdown_table(("method", *labels),
                                                                        [[m, *row] for m, row in keep])]))
    sources = ", ".join(f"`{Path(run['path']).name}`" for run in runs)
    return "\n\n".join(parts) + f"\n\nRuns: {sources}.\n"
