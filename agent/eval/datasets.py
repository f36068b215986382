"""Evaluation datasets: their questions with gold answers, and the knowledge each brings.

| dataset | ``--data`` (default) | questions | knowledge for the web |
|---|---|---|---|
| ``kamel`` | a KAMEL folder (the bundled demo KB) | a split's rows, round-robin over relations | the split's triples |
| ``popqa`` | ``popqa_500.json`` (HippoRAG-2 format) | the first N | every question's paragraphs + its gold triple |
| ``musique`` | ``musique_train100_with_paragraphs.json`` or its folder | the first N | the corpus beside it (``*_corpus.json``), else every question's paragraphs |

The shared data is read where it lies (``../shared/data`` beside the checkout), never copied; a
missing file is one line saying which and how to point at another. Question selection is
deterministic: the same arguments always give the same questions.

Example::

    questions = load_questions("popqa", limit=30)         # ../shared/data/popqa/popqa_500.json
    questions[0].text, questions[0].answers
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FactweaveError, InputError
from ..knowledge.facts import Fact
from ..web.documents import Document, read_json

DATASETS = ("kamel", "popqa", "musique")
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_DEFAULT_FILES = {
    "popqa": SHARED_DATA / "popqa" / "popqa_500.json",
    "musique": SHARED_DATA / "musique" / "musique_train100_with_paragraphs.json",
}
_MUSIQUE_QUESTIONS = "_with_paragraphs.json"
_MUSIQUE_CORPUS = "_corpus.json"


@dataclass(frozen=True)
class EvalQuestion:
    """One question: ``answers`` holds every accepted gold answer (label and aliases)."""

    id: str
    text: str
    answers: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


def data_path(dataset: str, data: str | Path | None = None) -> Path:
    """The file or folder ``dataset`` is read from: ``data`` when given, else its default; a
    missing one raises a one-line :class:`FactweaveError`."""
    if dataset not in DATASETS:
        raise FactweaveError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if data is None:
        if dataset == "kamel":
            from ..knowledge.kamel import demo_kamel_root

            return demo_kamel_root()
        path = _DEFAULT_FILES[dataset]
        if not path.is_file():
            raise FactweaveError(f"{dataset} data not found at {path}; pass --data with the path of "
                                 f"{path.name} (or a file of the same format)")
        return path
    path = Path(data).expanduser()
    if not path.exists():
        raise FactweaveError(f"{dataset} data not found at {path}")
    return path


def load_questions(dataset: str, data: str | Path | None = None, *, limit: int | None = None,
                   split: str = "dev") -> list[EvalQuestion]:
    """The first ``limit`` questions of ``dataset`` (KAMEL: of ``split``, round-robin over relations)."""
    path = data_path(dataset, data)
    if limit is not None and limit < 0:
        raise FactweaveError(f"limit must be 0 or more, got {limit}")
    if dataset == "kamel":
        from ..knowledge.kamel import kamel_questions

        return [EvalQuestion(q.id, q.text, q.answers, {"relation": q.relation, "subject": q.subject,
                                                      "objects": [list(names) for names in q.objects]})
                for q in kamel_questions(path, split=split, limit=limit)]
    reader = popqa_questions if dataset == "popqa" else musique_questions
    questions = reader(path)
    return questions if limit is None else questions[:limit]


# --- PopQA ------------------------------------------------------------------------------------


def _json_list(path: Path) -> list[dict[str, Any]]:
    data = read_json(path)
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise InputError(path, 1, "expected a list of objects")
    return data


def _string_list(value: Any, path: Path, where: str) -> list[str]:
    """A list of strings, also when stored as a JSON string (PopQA keeps aliases that way)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise InputError(path, 1, f"{where}: not a JSON list of strings") from None
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(path, 1, f"{where}: expected a list of strings")
    return [v for v in value if v.strip()]


def _text(row: dict[str, Any], key: str, path: Path, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(path, 1, f"{where}: {key!r} must be a non-empty string")
    return value.strip()


def popqa_questions(path: str | Path) -> list[EvalQuestion]:
    """PopQA rows: ``question``, ``possible_answers`` (gold label and aliases), the gold triple."""
    path = Path(path)
    questions = []
    for i, row in enumerate(_json_list(path)):
        where = f"row {i}"
        answers = _string_list(row.get("possible_answers"), path, f"{where} possible_answers")
        answers = answers or [_text(row, "obj", path, where)]
        questions.append(EvalQuestion(f"popqa/{row.get('id', i)}", _text(row, "question", path, where),
                                      tuple(dict.fromkeys(answers)),
                                      {"relation": row.get("prop", ""), "subject": row.get("subj", "")}))
    return questions


def popqa_documents(path: str | Path) -> Iterator[Document]:
    """Every PopQA paragraph as a document (the same paragraph twice is one document in the web)."""
    path = Path(path)
    for i, row in enumerate(_json_list(path)):
        for j, paragraph in enumerate(row.get("paragraphs") or []):
            where = f"row {i} paragraph {j}"
            yield Document(_text(paragraph, "title", path, where), _text(paragraph, "text", path, where),
                           f"{path.name}#{row.get('id', i)}")


def popqa_triples(path: str | Path) -> Iterator[Fact]:
    """Every PopQA gold triple (``subj``, ``prop``, ``obj``) as a fact."""
    path = Path(path)
    for i, row in enumerate(_json_list(path)):
        where = f"row {i}"
        yield Fact(_text(row, "subj", path, where), _text(row, "prop", path, where),
                   _text(row, "obj", path, where), f"{path.name}#{row.get('id', i)}")


# --- MuSiQue ----------------------------------------------------------------------------------


def musique_files(path: str | Path) -> tuple[Path, Path | None]:
    """The questions file and the corpus beside it (``X_with_paragraphs.json`` -> ``X_corpus.json``)
    of a MuSiQue file or folder; the corpus is None when there is none."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob(f"*{_MUSIQUE_QUESTIONS}"))
        if len(found) != 1:
            raise FactweaveError(f"{path}: expected one *{_MUSIQUE_QUESTIONS} file in the folder, "
                                 f"found {len(found)}")
        path = found[0]
    corpus = None
    if path.name.endswith(_MUSIQUE_QUESTIONS):
        candidate = path.with_name(path.name[: -len(_MUSIQUE_QUESTIONS)] + _MUSIQUE_CORPUS)
        corpus = candidate if candidate.is_file() else None
    return path, corpus


def musique_questions(path: str | Path) -> list[EvalQuestion]:
    """MuSiQue rows: ``question``, ``answer`` and ``answer_aliases``."""
    path, _ = musique_files(path)
    questions = []
    for i, row in enumerate(_json_list(path)):
        where = f"row {i}"
        answers = [_text(row, "answer", path, where),
                   *_string_list(row.get("answer_aliases"), path, f"{where} answer_aliases")]
        hops = row.get("question_decomposition") or []
        questions.append(EvalQuestion(f"musique/{row.get('id', i)}", _text(row, "question", path, where),
                                      tuple(dict.fromkeys(answers)), {"hops": len(hops)}))
    return questions


def musique_documents(path: str | Path) -> Iterator[Document]:
    """The passages of a MuSiQue set: its corpus file, else every question's paragraphs."""
    questions, corpus = musique_files(path)
    if corpus is not None:
        for i, item in enumerate(_json_list(corpus)):
            where = f"item {i}"
            yield Document(_text(item, "title", corpus, where), _text(item, "text", corpus, where),
                           f"{corpus.name}#{i}")
        return
    for i, row in enumerate(_json_list(questions)):
        for paragraph in row.get("paragraphs") or []:
            where = f"row {i} paragraph {paragraph.get('idx', '?')}"
            yield Document(_text(paragraph, "title", questions, where),
                           _text(paragraph, "paragraph_text", questions, where), f"{questions.name}#{i}")


def knowledge_files(dataset: str, path: Path, split: str = "dev") -> list[Path]:
    """The files a dataset's knowledge web is built from (their bytes key the cached web)."""
    if dataset == "kamel":
        return sorted((path / "relations").glob(f"P*/{split}.jsonl")) + [path / "property-labels.tsv"]
    if dataset == "musique":
        questions, corpus = musique_files(path)
        return [corpus or questions]
    return [path]
