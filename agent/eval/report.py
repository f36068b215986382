"""An evaluation run's report: JSON (settings, scores, every question's answers) and a Markdown table.

``<out>/<dataset>-<model>.json`` holds ``settings``, ``scores`` (per method) and ``questions``
(one row per question: question, gold answers, and per method the prediction, whether it was
answered, matched and judged correct, the facts it stated or was given, tokens and seconds).
``<out>/<dataset>-<model>.md`` holds the table::

    | method | answered | EM acc | EM prec | approx acc | approx prec | F1 | grounded | proven | wrong but grounded | judge acc | judge prec | s/question | tokens/question |

(F1: mean token F1 over all questions; grounded: share of the answered questions whose answer is
in the facts the method stated or was given, ``-`` for methods without facts; proven: share of
all the questions answered right and grounded; wrong but grounded: share of the grounded answers
that are wrong, not even an approximate match), then, where they
apply, the set answers' macro P/R/F1 over relations, best-of-n accuracy, follow-ups against the
same questions asked standalone (KAMEL conversations), the right chains withheld (the agent: an
attempt stated facts and answered right, its checks withheld it), the scores per stratum (relation or
question type: EM and F1), and the figures of ``agent.eval.plots``
(``<stem>-strata.png``, ``<stem>-accuracy-precision.png``, ``<stem>-latency.png``).

Both files are written aside and renamed into place, so a reader never sees half a report.

Example (not run: needs evaluation results)::

    report = EvalReport("popqa", "smollm2-135m", settings, results, wall_seconds=812.4)
    json_path, md_path = report.write(Path("runs"))
    print(report.markdown())
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import write_text
from .plots import stratum_f1, stratum_scores, write_plots
from .questions import natural_key
from .run import MethodResult

COLUMNS = ("method", "answered", "EM acc", "EM prec", "approx acc", "approx prec", "F1", "grounded", "proven",
           "wrong but grounded", "judge acc", "judge prec", "s/question", "tokens/question")
DATASET_TITLES = {"kamel": "KAMEL", "popqa": "PopQA", "musique": "MuSiQue", "hotpotqa": "HotpotQA",
                  "2wiki": "2WikiMultiHopQA", "kamel-chat": "KAMEL conversations"}


def percent(value: float | None) -> str:
    """``0.4567`` -> ``45.7%``; undefined rates (no answers, no judge) -> ``-``."""
    return "-" if value is None else f"{100 * value:.1f}%"


def table_rows(results: list[MethodResult]) -> list[list[str]]:
    """The table's cells, one list per method, in :data:`COLUMNS` order."""
    rows = []
    for r in results:
        s = r.score
        rows.append([r.method, f"{s.answered}/{s.total}", percent(s.exact_accuracy), percent(s.exact_precision),
                     percent(s.approximate_accuracy), percent(s.approximate_precision), percent(s.f1),
                     percent(r.grounded_rate), percent(r.proven_rate), percent(r.wrong_grounded_rate),
                     percent(s.judge_accuracy), percent(s.judge_precision), f"{r.seconds_per_question:.2f}",
                     f"{r.tokens['generated'] / max(1, len(r.rows)):.1f}"])
    return rows


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table."""
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def file_stem(dataset: str, model: str, *tags: str | None) -> str:
    """``popqa-smollm2-135m``, then each tag given (``popqa-smollm2-135m-test-reworded``: a run on
    the test half in a model's wording); a model path or Hub id becomes a safe file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model.strip("/").replace("/", "--")).strip("_") or "model"
    return "-".join([dataset, safe, *(tag for tag in tags if tag)])


def run_tags(settings: dict[str, Any]) -> tuple[str | None, ...]:
    """The file-name tags of a run with ``settings``: its half, and ``reworded`` for a run in a
    model's wording."""
    return settings.get("half"), "reworded" if settings.get("wording") else None


@dataclass
class EvalReport:
    """One run: a dataset, a model, the settings it ran with, and each method's result."""

    dataset: str
    model: str
    settings: dict[str, Any]
    results: list[MethodResult]
    wall_seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)  # file names, set by write()

    def title(self) -> str:
        total = self.results[0].score.total if self.results else 0
        how = [f"{self.settings['half']} half"] if self.settings.get("half") else []
        if self.settings.get("wording"):
            how.append(f"reworded by {self.settings['wording']['model']}")
        how_text = f" ({', '.join(how)})" if how else ""
        return f"{DATASET_TITLES.get(self.dataset, self.dataset)}, {total} questions{how_text}, {self.model}"

    def as_dict(self) -> dict[str, Any]:
        questions: list[dict[str, Any]] = []
        if self.results:
            for i, first in enumerate(self.results[0].rows):
                per_method = {}
                for r in self.results:
                    row = r.rows[i]
                    per_method[r.method] = {k: v for k, v in row.items() if k not in ("id", "question", "gold")}
                questions.append({"id": first["id"], "question": first["question"], "gold": first["gold"],
                                  "methods": per_method})
        return {"dataset": self.dataset, "model": self.model, "title": self.title(),
                "methods": [r.method for r in self.results], "settings": self.settings,
                "wall_seconds": round(self.wall_seconds, 1), **self.meta,
                "scores": {r.method: r.summary() for r in self.results}, "questions": questions}

    def markdown(self) -> str:
        """The tables with a title line and a line on how to read them."""
        lines = [f"### {self.title()}", "", *markdown_table(COLUMNS, table_rows(self.results))]
        sets = [(r.method, r.set_scores) for r in self.results if r.set_scores is not None]
        if sets:
            lines += ["", "Set answers, macro-averaged over relations (the RCD paper's metric):", ""]
            lines += markdown_table(("method", "macro P", "macro R", "macro F1", "relations"),
                                    [[m, percent(s["precision"]), percent(s["recall"]), percent(s["f1"]),
                                      str(s["groups"])] for m, s in sets])
        sampled = [(r.method, r.best_of_n) for r in self.results if r.best_of_n is not None]
        if sampled:
            lines += ["", "Best-of-n (one of n sampled answers matches; the KGD paper's metric):", ""]
            lines += markdown_table(("method", "n", "EM acc", "approx acc"),
                                    [[m, str(b["n"]), percent(b["exact_accuracy"]),
                                      percent(b["approximate_accuracy"])] for m, b in sampled])
        follow = [(r.method, r.follow_up) for r in self.results if r.follow_up is not None]
        if follow:
            lines += ["", "Follow-ups (pronoun, the first turn given) against the same questions asked standalone "
                      "(the name in the question); share = follow-up / standalone:", ""]
            lines += markdown_table(("method", "items", "EM follow-up", "EM standalone", "EM share", "F1 follow-up",
                                     "F1 standalone", "F1 share"),
                                    [[m, str(f["items"]), percent(f["exact"]), percent(f["standalone_exact"]),
                                      percent(f["exact_share"]), percent(f["f1"]), percent(f["standalone_f1"]),
                                      percent(f["f1_share"])] for m, f in follow])
        withheld = [(r, rate) for r in self.results if (rate := r.right_withheld_rate) is not None]
        if withheld:
            lines += ["", "Right chains withheld (an attempt stated facts and answered right; the checks withheld "
                      "it and the question ended unanswered right), share of all questions: "
                      + ", ".join(f"{r.method} {percent(w)} ({round(w * len(r.rows))})" for r, w in withheld) + "."]
        lines += self._strata_lines()
        judge = self.settings.get("judge") or {}
        lines += ["", "Accuracy over all questions, precision over the answered ones (abstentions and truncated "
                  "answers excluded); EM: normalized exact match; approx: whole-word containment either way; "
                  "F1: token F1 (SQuAD normalization, best gold alias; unanswered: 0), mean over all questions; "
                  "grounded: share of answered questions whose answer is in the facts the method stated (web-rag: "
                  "was given; agent: its own verdict, with its checks); proven: right (EM) and grounded, over all "
                  "questions; wrong but grounded: share of the grounded answers that are wrong (no approximate "
                  "match); "
                  f"judge: {judge.get('model', 'none')} ({judge.get('kind', 'no judge')}). "
                  + (f"Engine: {self.settings['engine']}. " if self.settings.get("engine") else "")
                  + f"Wall time {self.wall_seconds:.0f} s.", ""]
        if self.figures:
            lines += [f"![{name}]({name})" for name in self.figures] + [""]
        return "\n".join(lines)

    def _strata_lines(self) -> list[str]:
        scores = {r.method: stratum_scores(r) for r in self.results}
        strata = sorted({s for per in scores.values() for s in per}, key=natural_key)
        if len(strata) < 2:
            return []
        counts = Counter(str(row.get("stratum") or "all") for row in self.results[0].rows)
        lines = ["", "Per stratum (relation or question type): macro F1 for set answers, else EM accuracy:", ""]
        lines += markdown_table(("stratum", "questions", *scores),
                                [[s, str(counts[s]), *(percent(per.get(s)) for per in scores.values())]
                                 for s in strata])
        f1 = {r.method: stratum_f1(r) for r in self.results if not all("set" in row for row in r.rows)}
        if f1:
            lines += ["", "Per stratum: mean token F1:", ""]
            lines += markdown_table(("stratum", "questions", *f1),
                                    [[s, str(counts[s]), *(percent(per.get(s)) for per in f1.values())]
                                     for s in strata])
        return lines

    def paths(self, out_dir: Path) -> tuple[Path, Path]:
        """Where :meth:`write` puts the JSON and the Markdown."""
        stem = file_stem(self.dataset, self.model, *run_tags(self.settings))
        return Path(out_dir) / f"{stem}.json", Path(out_dir) / f"{stem}.md"

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        """Write ``<dataset>-<model>.json``, the figures and ``.md`` into ``out_dir`` (created),
        each atomically."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = file_stem(self.dataset, self.model, *run_tags(self.settings))
        json_path, md_path = self.paths(out_dir)
        if self.results:
            self.figures = [p.name for p in write_plots(self, out_dir, stem)]
        write_text(json_path, json.dumps(self.as_dict(), ensure_ascii=False, indent=1) + "\n")
        write_text(md_path, self.markdown())
        return json_path, md_path
