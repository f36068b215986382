"""Evaluation datasets: their questions with gold answers, and the knowledge each brings.

| dataset | ``--data`` (default) | questions | knowledge for the web |
|---|---|---|---|
| ``kamel`` | a KAMEL folder (the bundled demo KB) | a split's rows, round-robin over relations | the split's triples |
| ``popqa`` | ``popqa_500.json`` (HippoRAG-2 format) | the first N | every question's paragraphs + its gold triple |
| ``musique`` | ``musique_train100_with_paragraphs.json`` or its folder | stratified by hops | the corpus beside it (``*_corpus.json``), else every question's paragraphs |
| ``hotpotqa`` | ``hotpotqa_train100_with_context.json`` or its folder | stratified by type (bridge, comparison) | the corpus beside it (``*_corpus.json``), else every question's context |
| ``2wiki`` | ``2wiki_dev100_questions.json`` (HippoRAG format) or its folder | stratified by supporting passages (2; 4: bridge-comparison) | the corpus beside it (``2wiki_corpus.json``) |
| ``kamel-chat`` | a KAMEL folder (the bundled demo KB) | follow-ups (with their standalone twins) and two-hop chains, built seeded (``agent.eval.conversations``) | the dev split's triples, as ``kamel`` |

The shared data is read where it lies (``../shared/data`` beside the checkout), never copied; a
missing file is one line saying which and how to point at another.

Question selection (:func:`sample_questions`) is stratified and seeded: questions are grouped by
their stratum (KAMEL and PopQA: the relation; MuSiQue: the number of hops; HotpotQA: the question
type; 2WikiMultiHopQA, whose file has no type: the number of supporting passages, 4 for its
bridge-comparison questions, 2 for the others), each group is shuffled with ``random.Random(seed)``, and the groups are taken round-robin
in sorted order (numbers by value: P19 before P106), so ``limit=n`` spreads over as many strata as it can and the same arguments
always give the same questions. Each question of a passage dataset carries its own passages
(``meta["passages"]``), which knowledge-guided decoding reads.

Example (not run: needs the data sets in ../shared/data)::

    questions = load_questions("popqa", limit=30)         # ../shared/data/popqa/popqa_500.json
    questions[0].text, questions[0].answers, questions[0].meta["relation"]
"""
from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import FactweaveError, InputError
from ..knowledge.facts import Fact
from ..knowledge.kamel import demo_kamel_root, kamel_questions
from ..web.documents import Document, read_documents, read_json
from .conversations import kamel_chat_questions
from .halves import HALVES, only_half
from .questions import EvalQuestion, natural_key

DATASETS = ("kamel", "popqa", "musique", "hotpotqa", "2wiki", "kamel-chat")
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_DEFAULT_FILES = {
    "popqa": SHARED_DATA / "popqa" / "popqa_500.json",
    "musique": SHARED_DATA / "musique" / "musique_train100_with_paragraphs.json",
    "hotpotqa": SHARED_DATA / "hotpotqa" / "hotpotqa_train100_with_context.json",
    "2wiki": SHARED_DATA / "2wikimultihopqa" / "2wiki_dev100_questions.json",
}
# KAMEL folders: the bundled demo KB by default.
KAMEL_DATASETS = frozenset({"kamel", "kamel-chat"})
# A passage dataset's questions file and the corpus file beside it share a stem.
_QUESTION_SUFFIX = {"musique": "_with_paragraphs.json", "hotpotqa": "_with_context.json"}
_CORPUS_SUFFIX = "_corpus.json"


def data_path(dataset: str, data: str | Path | None = None) -> Path:
    """The file or folder ``dataset`` is read from: ``data`` when given, else its default; a
    missing one raises a one-line :class:`FactweaveError`."""
    if dataset not in DATASETS:
        raise FactweaveError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if data is None:
        if dataset in KAMEL_DATASETS:
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
                   split: str = "dev", seed: int = 0, kind: str | None = None,
                   half: str | None = None) -> list[EvalQuestion]:
    """``limit`` questions of ``dataset`` (KAMEL: of ``split``), stratified and seeded
    (:func:`sample_questions`); ``kamel-chat``: ``limit`` items built from the KAMEL folder
    (:func:`agent.eval.conversations.kamel_chat_questions`; a follow-up item is two questions;
    ``kind``: follow-ups or two-hop chains only). ``half``: ``dev`` or ``test``, only the questions
    of that half (:mod:`agent.eval.halves`), sampled within it; None: every question."""
    path = data_path(dataset, data)
    if limit is not None and limit < 0:
        raise FactweaveError(f"limit must be 0 or more, got {limit}")
    if half is not None and half not in HALVES:
        raise FactweaveError(f"unknown half {half!r}; choose dev or test")
    if dataset == "kamel-chat":
        return kamel_chat_questions(path, limit=limit, seed=seed, kind=kind, half=half)
    if dataset == "kamel":
        questions = [EvalQuestion(q.id, q.text, q.answers,
                                  {"relation": q.relation, "subject": q.subject,
                                   "objects": [list(names) for names in q.objects]})
                     for q in kamel_questions(path, split=split)]
    else:
        questions = {"popqa": popqa_questions, "musique": musique_questions,
                     "hotpotqa": hotpotqa_questions, "2wiki": twowiki_questions}[dataset](path)
    return sample_questions(only_half(questions, half),
                            lambda q: str(q.meta.get("stratum", q.meta.get("relation", ""))),
                            limit=limit, seed=seed)


def sample_questions(questions: Sequence[EvalQuestion], stratum: Callable[[EvalQuestion], str], *,
                     limit: int | None, seed: int = 0) -> list[EvalQuestion]:
    """Up to ``limit`` of ``questions``: grouped by ``stratum``, each group shuffled with
    ``random.Random(seed)``, groups taken round-robin in sorted order (one of each, then a second
    of each, ...). Deterministic for equal arguments."""
    groups: dict[str, list[EvalQuestion]] = {}
    for q in questions:
        groups.setdefault(stratum(q), []).append(q)
    rng = random.Random(seed)
    ordered = [groups[key] for key in sorted(groups, key=natural_key)]
    for group in ordered:
        rng.shuffle(group)
    picked: list[EvalQuestion] = []
    for depth in range(max((len(g) for g in ordered), default=0)):
        picked.extend(g[depth] for g in ordered if depth < len(g))
        if limit is not None and len(picked) >= limit:
            break
    return picked if limit is None else picked[:limit]


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
        passages = [p.get("text", "") for p in row.get("paragraphs") or [] if isinstance(p, dict)]
        questions.append(EvalQuestion(f"popqa/{row.get('id', i)}", _text(row, "question", path, where),
                                      tuple(dict.fromkeys(answers)),
                                      {"relation": row.get("prop", ""), "subject": row.get("subj", ""),
                                       "passages": [p for p in passages if isinstance(p, str) and p.strip()]}))
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


def _one_file(path: Path, suffix: str) -> Path:
    """``path``, or the one ``*suffix`` file in it when it is a folder."""
    if not path.is_dir():
        return path
    found = sorted(path.glob(f"*{suffix}"))
    if len(found) != 1:
        raise FactweaveError(f"{path}: expected one *{suffix} file in the folder, found {len(found)}")
    return found[0]


def question_files(dataset: str, path: str | Path) -> tuple[Path, Path | None]:
    """The questions file and the corpus beside it of a MuSiQue or HotpotQA file or folder
    (``X_with_paragraphs.json`` / ``X_with_context.json`` -> ``X_corpus.json``); the corpus is
    None when there is none."""
    suffix = _QUESTION_SUFFIX[dataset]
    path = _one_file(Path(path), suffix)
    corpus = None
    if path.name.endswith(suffix):
        candidate = path.with_name(path.name[: -len(suffix)] + _CORPUS_SUFFIX)
        corpus = candidate if candidate.is_file() else None
    return path, corpus


def musique_questions(path: str | Path) -> list[EvalQuestion]:
    """MuSiQue rows: ``question``, ``answer`` and ``answer_aliases``."""
    path, _ = question_files("musique", path)
    questions = []
    for i, row in enumerate(_json_list(path)):
        where = f"row {i}"
        answers = [_text(row, "answer", path, where),
                   *_string_list(row.get("answer_aliases"), path, f"{where} answer_aliases")]
        hops = len(row.get("question_decomposition") or [])
        passages = [p.get("paragraph_text", "") for p in row.get("paragraphs") or [] if isinstance(p, dict)]
        questions.append(EvalQuestion(f"musique/{row.get('id', i)}", _text(row, "question", path, where),
                                      tuple(dict.fromkeys(answers)),
                                      {"hops": hops, "stratum": f"{hops} hops",
                                       "passages": [p for p in passages if isinstance(p, str) and p.strip()]}))
    return questions


def musique_documents(path: str | Path) -> Iterator[Document]:
    """The passages of a MuSiQue set: its corpus file, else every question's paragraphs."""
    questions, corpus = question_files("musique", path)
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


# --- HotpotQA ---------------------------------------------------------------------------------


def _context_passages(row: dict[str, Any], path: Path, where: str) -> list[tuple[str, str]]:
    """A HotpotQA row's ``context``: ``[[title, [sentence, ...]], ...]`` as (title, text) pairs."""
    passages = []
    for j, item in enumerate(row.get("context") or []):
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], list) or not all(isinstance(s, str) for s in item[1])):
            raise InputError(path, 1, f"{where} context {j}: expected [title, [sentence, ...]]")
        text = "".join(item[1]).strip()  # each sentence after the first keeps its leading space
        if text:
            passages.append((item[0].strip(), text))
    return passages


def hotpotqa_questions(path: str | Path) -> list[EvalQuestion]:
    """HotpotQA rows: ``question``, ``answer``, ``type`` (bridge or comparison), ``level`` and the
    ``context`` passages."""
    path, _ = question_files("hotpotqa", path)
    questions = []
    for i, row in enumerate(_json_list(path)):
        where = f"row {i}"
        kind = str(row.get("type") or "unknown")
        questions.append(EvalQuestion(f"hotpotqa/{row.get('_id', i)}", _text(row, "question", path, where),
                                      (_text(row, "answer", path, where),),
                                      {"type": kind, "level": row.get("level", ""), "stratum": kind,
                                       "passages": [text for _, text in _context_passages(row, path, where)]}))
    return questions


def hotpotqa_documents(path: str | Path) -> Iterator[Document]:
    """The passages of a HotpotQA set: its corpus file (title -> sentences), else every
    question's context (the same passage twice is one document in the web)."""
    questions, corpus = question_files("hotpotqa", path)
    if corpus is not None:
        yield from read_documents([corpus])
        return
    for i, row in enumerate(_json_list(questions)):
        for title, text in _context_passages(row, questions, f"row {i}"):
            yield Document(title, text, f"{questions.name}#{i}")


# --- 2WikiMultiHopQA ---------------------------------------------------------------------------

_TWOWIKI_SUFFIX = "_questions.json"


def twowiki_files(path: str | Path) -> tuple[Path, Path | None]:
    """The questions file and the corpus beside it of a 2WikiMultiHopQA file or folder in
    HippoRAG's format: ``X_questions.json`` and ``X_corpus.json``, ``X`` shortened by its last
    ``_part`` until one exists (``2wiki_dev100_questions.json`` -> ``2wiki_corpus.json``); the
    corpus is None when there is none."""
    path = _one_file(Path(path), _TWOWIKI_SUFFIX)
    if path.name.endswith(_TWOWIKI_SUFFIX):
        parts = path.name[: -len(_TWOWIKI_SUFFIX)].split("_")
        for n in range(len(parts), 0, -1):
            candidate = path.with_name("_".join(parts[:n]) + _CORPUS_SUFFIX)
            if candidate.is_file():
                return path, candidate
    return path, None


def _titles(value: Any, path: Path, where: str) -> list[str]:
    """``supporting_facts``: titles (HippoRAG's file), or ``[title, sentence]`` pairs (the original)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(path, 1, f"{where}: expected a list of titles")
    titles = []
    for item in value:
        title = item[0] if isinstance(item, list) and item else item
        if not isinstance(title, str) or not title.strip():
            raise InputError(path, 1, f"{where}: expected a list of titles")
        titles.append(title.strip())
    return list(dict.fromkeys(titles))


def twowiki_questions(path: str | Path) -> list[EvalQuestion]:
    """2WikiMultiHopQA rows: ``question``, ``answer``, ``answer_aliases`` and ``supporting_facts``
    (the titles of the supporting passages). The file has no question type, so the stratum is the
    number of supporting passages (``4 passages``: 2Wiki's bridge-comparison questions). The
    questions carry no passages of their own (KGD reads the web's top facts)."""
    path, _ = twowiki_files(path)
    questions = []
    for i, row in enumerate(_json_list(path)):
        where = f"row {i}"
        answers = [_text(row, "answer", path, where),
                   *_string_list(row.get("answer_aliases"), path, f"{where} answer_aliases")]
        titles = _titles(row.get("supporting_facts"), path, f"{where} supporting_facts")
        stratum = row["type"] if isinstance(row.get("type"), str) else f"{len(titles)} passages"
        questions.append(EvalQuestion(f"2wiki/{row.get('id', row.get('_id', i))}", _text(row, "question", path, where),
                                      tuple(dict.fromkeys(a.strip() for a in answers)),
                                      {"supporting": titles, "stratum": stratum}))
    return questions


def twowiki_documents(path: str | Path) -> Iterator[Document]:
    """The passages of the corpus beside a 2WikiMultiHopQA questions file (``{title, text}``)."""
    questions, corpus = twowiki_files(path)
    if corpus is None:
        raise FactweaveError(f"no 2WikiMultiHopQA corpus beside {questions} (expected *{_CORPUS_SUFFIX} in "
                             f"{questions.parent})")
    for i, item in enumerate(_json_list(corpus)):
        where = f"item {i}"
        yield Document(_text(item, "title", corpus, where), _text(item, "text", corpus, where), f"{corpus.name}#{i}")


def dataset_documents(dataset: str, path: str | Path) -> Iterator[Document]:
    """The passages a passage dataset's web is built from."""
    readers = {"popqa": popqa_documents, "musique": musique_documents, "hotpotqa": hotpotqa_documents,
               "2wiki": twowiki_documents}
    if dataset not in readers:
        raise FactweaveError(f"{dataset} has no passages")
    return readers[dataset](path)


def knowledge_files(dataset: str, path: Path, split: str = "dev") -> list[Path]:
    """The files a dataset's knowledge web is built from (their bytes key the cached web)."""
    if dataset in KAMEL_DATASETS:
        return sorted((path / "relations").glob(f"P*/{split}.jsonl")) + [path / "property-labels.tsv"]
    if dataset == "2wiki":
        questions, corpus = twowiki_files(path)
        return [corpus or questions]
    if dataset in _QUESTION_SUFFIX:
        questions, corpus = question_files(dataset, path)
        return [corpus or questions]
    return [path]
