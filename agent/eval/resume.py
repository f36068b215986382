"""Per-question results saved as they finish, so an interrupted evaluation resumes where it stopped.

A run with an output folder appends every finished row to ``<out>/.<stem>-<key>.rows.jsonl``
(one JSON object per line: ``{"method", "row"}``), flushed at once. ``key`` hashes every setting
that changes answers (dataset, data, split, questions, methods, model, decoding, seed, judge...),
so a run with other settings never picks up these rows; the same command run again reads them
back and asks only the questions still missing. A line cut short by a crash is skipped. The log
is deleted once the report is written.

Example (not run: needs an evaluation's settings and rows; writes a run folder)::

    log = RowLog.open(Path("runs"), "popqa-smollm2-135m", settings)
    done = log.rows()                     # {(method, question id): row}
    log.append("refactx", row)
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def settings_key(settings: dict[str, Any]) -> str:
    """A short hash of JSON-able ``settings`` (key order does not matter)."""
    text = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class RowLog:
    """The append-only row file of one run's settings."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def open(cls, out_dir: Path, stem: str, settings: dict[str, Any]) -> RowLog:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        return cls(out_dir / f".{stem}-{settings_key(settings)}.rows.jsonl")

    def rows(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The rows saved so far: {(method, question id): row}; a later row of the same pair wins."""
        if not self.path.is_file():
            return {}
        saved: dict[tuple[str, str], dict[str, Any]] = {}
        with open(self.path, encoding="utf-8") as lines:
            for line in lines:
                try:
                    item = json.loads(line)
                    saved[(item["method"], item["row"]["id"])] = item["row"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a crash: that question is asked again
        return saved

    def append(self, method: str, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"method": method, "row": row}, ensure_ascii=False) + "\n")
            out.flush()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
