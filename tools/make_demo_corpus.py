"""Build the demo document corpus shipped in ``agent/data/demo/web`` from MuSiQue.

Usage (from the repository root)::

    .venv/bin/python tools/make_demo_corpus.py          # source ../shared/data/musique

Takes the first ``--questions`` answerable questions of ``musique_train100_with_paragraphs.json``
and writes all their paragraphs (supporting and distractors, deduplicated by title and text) as
``corpus.json`` (a list of ``{"title", "text"}``) and the questions with their answers and the
titles of their supporting paragraphs as ``questions.json``. Texts are copied unchanged. Files are
written aside and renamed into place.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _write(path: Path, data: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default=REPO.parent / "shared" / "data" / "musique", type=Path)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "agent" / "data" / "demo" / "web")
    args = parser.parse_args()
    rows = json.loads((args.source / "musique_train100_with_paragraphs.json").read_text(encoding="utf-8"))
    corpus: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    questions = []
    for row in rows:
        if not row.get("answerable", True):
            continue
        for p in row["paragraphs"]:
            key = (p["title"], p["paragraph_text"])
            if key not in seen:
                seen.add(key)
                corpus.append({"title": p["title"], "text": p["paragraph_text"]})
        questions.append({
            "id": row["id"], "question": row["question"], "answer": row["answer"],
            "answer_aliases": row.get("answer_aliases", []),
            "supporting": [{"title": p["title"], "text": p["paragraph_text"]}
                           for p in row["paragraphs"] if p["is_supporting"]],
        })
        if len(questions) >= args.questions:
            break
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "corpus.json", corpus)
    _write(args.out / "questions.json", questions)
    print(f"{len(corpus)} paragraphs, {len(questions)} questions -> {args.out}")


if __name__ == "__main__":
    main()
