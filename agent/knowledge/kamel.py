"""The KAMEL benchmark layout, read as facts and as questions.

A KAMEL folder holds::

    property-labels.tsv          id<TAB>label<TAB>description, one line per relation
    question-templates.csv       P364, What is the original language of [S]?
    relations/P364/train.jsonl   {"sub_label": "...", "obj_label": ["Tamil", ...]}
    relations/P364/dev.jsonl
    relations/P364/test.jsonl    obj_label entries are {"chosen", "rdf", "alternative"} objects

Each row is one subject with all its objects for that relation. An object entry is either a
label string or an object whose label is ``chosen`` (else ``rdf``) and whose ``alternative``
list holds aliases. Relation folders are taken in numeric order of their ids (P17 before P101);
entries that are not ``P<digits>`` folders (``config.json``) are not relations.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from agent.errors import FactweaveError, InputError
from agent.knowledge.facts import Fact
from agent.knowledge.rows import checked_fact, json_objects, numbered_lines

DEFAULT_SPLITS: tuple[str, ...] = ("train", "dev", "test")
_RELATION_ID = re.compile(r"P[1-9][0-9]*")
_SUBJECT_SLOT = "[S]"


@dataclass(frozen=True)
class Question:
    """A KAMEL question: ``id`` is ``relation/split/line`` (``P364/dev/12``); ``answers`` are all
    gold labels and aliases; ``relation`` is the property id."""

    id: str
    text: str
    answers: tuple[str, ...]
    subject: str
    relation: str
    # One tuple per gold object: its label first, then its aliases (for set answers).
    objects: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class _Row:
    line: int
    subject: str
    # One tuple per object: its label first, then its aliases.
    objects: tuple[tuple[str, ...], ...]


def demo_kamel_root() -> Path:
    """The small KAMEL selection shipped inside the package (see ``agent/data/README.md``)."""
    return Path(__file__).resolve().parent.parent / "data" / "demo" / "kamel"


def _relation_key(relation: str) -> int:
    return int(relation[1:])


def relation_ids(root: str | Path, relations: Iterable[str] | None = None) -> list[str]:
    """The relation ids of a KAMEL folder in numeric order, or the requested ones after checking
    that each has a folder."""
    folder = Path(root) / "relations"
    if not folder.is_dir():
        raise FactweaveError(f"{root}: not a KAMEL folder (no relations/ folder inside)")
    if relations is None:
        found = [
            entry.name
            for entry in folder.iterdir()
            if entry.is_dir() and _RELATION_ID.fullmatch(entry.name)
        ]
        return sorted(found, key=_relation_key)
    wanted = set()
    for relation in relations:
        if not _RELATION_ID.fullmatch(relation):
            raise FactweaveError(f"{relation!r} is not a Wikidata property id like P364")
        if not (folder / relation).is_dir():
            raise FactweaveError(f"{folder / relation}: no such relation folder")
        wanted.add(relation)
    return sorted(wanted, key=_relation_key)


def property_labels(root: str | Path) -> dict[str, str]:
    """``{"P364": "original language of film or TV show", ...}`` from ``property-labels.tsv``."""
    path = Path(root) / "property-labels.tsv"
    labels: dict[str, str] = {}
    for line_number, line in numbered_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if line_number == 1 and fields[0] == "id":
            continue
        if len(fields) < 2 or not _RELATION_ID.fullmatch(fields[0]) or not fields[1].strip():
            message = "expected id<TAB>label<TAB>description, like P17<TAB>country"
            raise InputError(path, line_number, message)
        labels[fields[0]] = fields[1].strip()
    return labels


def question_templates(root: str | Path) -> dict[str, str]:
    """``{"P364": "What is the original language of [S]?", ...}`` from ``question-templates.csv``.

    A relation listed twice must have the same template both times (KAMEL lists P495 twice).
    """
    path = Path(root) / "question-templates.csv"
    templates: dict[str, str] = {}
    for line_number, line in numbered_lines(path):
        if not line.strip():
            continue
        relation, comma, template = line.partition(",")
        relation, template = relation.strip(), template.strip()
        if not comma or not _RELATION_ID.fullmatch(relation) or _SUBJECT_SLOT not in template:
            raise InputError(path, line_number, "expected 'P<id>, <question with [S]>'")
        if templates.get(relation, template) != template:
            raise InputError(path, line_number, f"a second, different template for {relation}")
        templates[relation] = template
    return templates


def _names(entry: object, path: Path, line: int) -> tuple[str, ...]:
    if isinstance(entry, str):
        if not entry.strip():
            raise InputError(path, line, "empty label in 'obj_label'")
        return (entry,)
    if not isinstance(entry, dict):
        kind = type(entry).__name__
        raise InputError(path, line, f"'obj_label' entries must be strings or objects, got {kind}")
    label = entry.get("chosen") or entry.get("rdf")
    if not isinstance(label, str) or not label.strip():
        raise InputError(path, line, "'obj_label' entry has neither a 'chosen' nor an 'rdf' label")
    aliases = entry.get("alternative") or []
    if not isinstance(aliases, list) or not all(isinstance(name, str) for name in aliases):
        raise InputError(path, line, "'obj_label' 'alternative' must be a list of strings")
    rdf = entry.get("rdf")
    # rdf is null for dates and counts in KAMEL; dict.fromkeys keeps first occurrences in order.
    candidates = [label, rdf if isinstance(rdf, str) else "", *aliases]
    return tuple(dict.fromkeys(name for name in candidates if name.strip()))


def _rows(path: Path) -> Iterator[_Row]:
    for line_number, row in json_objects(path):
        subject, objects = row.get("sub_label"), row.get("obj_label")
        if not isinstance(subject, str) or not subject.strip():
            raise InputError(path, line_number, "'sub_label' must be a non-empty string")
        if not isinstance(objects, list) or not objects:
            raise InputError(path, line_number, "'obj_label' must be a non-empty list")
        names = tuple(_names(entry, path, line_number) for entry in objects)
        yield _Row(line=line_number, subject=subject, objects=names)


def _split_file(root: Path, relation: str, split: str) -> Path:
    path = root / "relations" / relation / f"{split}.jsonl"
    if not path.is_file():
        raise FactweaveError(f"{path}: no such file (KAMEL keeps a split in relations/P*/<split>.jsonl)")
    return path


def read_kamel(
    root: str | Path,
    splits: Iterable[str] = DEFAULT_SPLITS,
    relations: Iterable[str] | None = None,
) -> Iterator[Fact]:
    """Yield one :class:`Fact` per (subject, object) of each row: ``Fact(sub_label, <property
    label>, <object label>, source="kamel:P364/train.jsonl:12")``.

    Aliases are not facts (they name the same object). A relation whose id has no line in
    ``property-labels.tsv`` raises :class:`InputError` naming that file. Labels and split files
    are all checked before the first fact is yielded; rows are checked as they are read.
    """
    root = Path(root)
    splits = (splits,) if isinstance(splits, str) else tuple(splits)
    labels = property_labels(root)
    files: list[tuple[str, Path]] = []
    for relation in relation_ids(root, relations):
        if relation not in labels:
            message = f"no label for property {relation} (relations/{relation})"
            raise InputError(root / "property-labels.tsv", None, message)
        files.extend((relation, _split_file(root, relation, split)) for split in splits)
    for relation, path in files:
        predicate = labels[relation]
        for row in _rows(path):
            source = f"kamel:{relation}/{path.name}:{row.line}"
            for names in row.objects:
                yield checked_fact(row.subject, predicate, names[0], source=source, path=path, line=row.line)


def kamel_questions(
    root: str | Path,
    split: str = "dev",
    relations: Iterable[str] | None = None,
    limit: int | None = None,
) -> list[Question]:
    """The questions of one split, ordered round-robin across relations in numeric id order:
    the first row of every relation, then the second of every relation, and so on.

    So ``limit=n`` (which takes the first ``n``) covers as many relations as it can, and the
    same arguments always give the same questions.
    """
    if limit is not None and limit < 0:
        raise FactweaveError(f"limit must be 0 or more, got {limit}")
    root = Path(root)
    templates = question_templates(root)
    per_relation: list[list[Question]] = []
    for relation in relation_ids(root, relations):
        if relation not in templates:
            message = f"no question template for {relation}"
            raise InputError(root / "question-templates.csv", None, message)
        template = templates[relation]
        questions = []
        for row in _rows(_split_file(root, relation, split)):
            answers = tuple(dict.fromkeys(name for names in row.objects for name in names))
            questions.append(
                Question(
                    id=f"{relation}/{split}/{row.line}",
                    text=template.replace(_SUBJECT_SLOT, row.subject.strip()),
                    answers=answers,
                    subject=row.subject,
                    relation=relation,
                    objects=row.objects,
                )
            )
        per_relation.append(questions)
    interleaved = [q for layer in zip_longest(*per_relation) for q in layer if q is not None]
    return interleaved if limit is None else interleaved[:limit]


def relation_rows(root: str | Path, relation: str,
                  split: str) -> Iterator[tuple[int, str, tuple[tuple[str, ...], ...]]]:
    """The rows of one relation's split: ``(line, subject, objects)``, each object its label
    then its aliases."""
    for row in _rows(_split_file(Path(root), relation, split)):
        yield row.line, row.subject, row.objects


def relation_objects(root: str | Path, splits: Iterable[str] = DEFAULT_SPLITS,
                     relations: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Every object label of each relation in ``splits``, most frequent first (ties: first seen):
    the candidate answers of retrieval-constrained decoding."""
    root = Path(root)
    splits = (splits,) if isinstance(splits, str) else tuple(splits)
    out: dict[str, list[str]] = {}
    for relation in relation_ids(root, relations):
        counts: Counter[str] = Counter()
        for split in splits:
            for row in _rows(_split_file(root, relation, split)):
                counts.update(names[0] for names in row.objects)
        out[relation] = [label for label, _ in counts.most_common()]
    return out


def majority_objects(root: str | Path, split: str = "train",
                     relations: Iterable[str] | None = None) -> dict[str, str]:
    """The most frequent object label of each relation in ``split`` (the majority baseline; use a
    split the questions do not come from)."""
    return {relation: labels[0] for relation, labels in relation_objects(root, (split,), relations).items() if labels}
