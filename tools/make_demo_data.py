"""Build the demo knowledge base shipped in ``agent/data/demo/kamel`` from a KAMEL folder.

Usage (from the repository root)::

    .venv/bin/python tools/make_demo_data.py                # source ../shared/data/kamel
    .venv/bin/python tools/make_demo_data.py /data/kamel --out /tmp/demo

Copies the chosen relations' ``train/dev/test.jsonl`` unchanged, and the lines of
``property-labels.tsv`` and ``question-templates.csv`` that belong to them. The result is built
in a sibling folder and renamed into place, so an interrupted run leaves the old copy intact.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPLITS = ("train", "dev", "test")
MAX_BYTES = 5_000_000

# Relations whose objects are short named entities a small model may know. Each maps to a word
# its question template must contain: KAMEL pairs some properties with another property's
# template, and a question that asks for the wrong thing makes every gold answer wrong.
CHOSEN: dict[str, str] = {
    "P17": "country",
    "P19": "born",
    "P20": "die",
    "P27": "citizenship",
    "P37": "official language",
    "P59": "constellation",
    "P101": "field",
    "P102": "party",
    "P103": "native language",
    "P106": "occupation",
    "P136": "genre",
    "P140": "religion",
    "P159": "headquarter",
    "P172": "ethnic group",
    "P176": "manufacturer",
    "P241": "military branch",
    "P264": "record label",
    "P277": "programming language",
    "P364": "original language",
    "P407": "language",
    "P412": "voice type",
    "P413": "position",
    "P449": "broadcaster",
    "P495": "country of origin",
    "P641": "sport",
    "P740": "formed",
    "P1303": "instrument",
    "P1412": "languages",
    "P1532": "countries",
    "P6886": "written in",
}

# Considered and left out, with the reason (kept here so the choice can be reviewed).
EXCLUDED: dict[str, str] = {
    "P36": "capital: its template asks 'What is the original language of [S]?'",
    "P1066": "student of: its template asks for the students of [S], the inverse relation",
    "P30": "continent: 83% of the objects are Antarctica, a majority guess wins",
    "P1376": "capital of: objects are mostly historical provinces, not short well-known names",
}


def _read_templates(source: Path) -> dict[str, str]:
    templates: dict[str, str] = {}
    for line in (source / "question-templates.csv").read_text(encoding="utf-8").splitlines():
        relation, _, template = line.partition(",")
        templates.setdefault(relation.strip(), template.strip())
    return templates


def _read_labels(source: Path) -> dict[str, str]:
    labels = {}
    for line in (source / "property-labels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        fields = line.split("\t")
        labels[fields[0]] = fields[1]
    return labels


def check_relations(source: Path) -> None:
    """Stop unless every chosen relation exists and its template asks for its property."""
    templates, labels = _read_templates(source), _read_labels(source)
    for relation, word in CHOSEN.items():
        if relation in EXCLUDED:
            sys.exit(f"{relation} is both chosen and excluded")
        if not all((source / "relations" / relation / f"{split}.jsonl").is_file() for split in SPLITS):
            sys.exit(f"{source}/relations/{relation}: missing split files")
        template, label = templates.get(relation, ""), labels.get(relation, "")
        if word not in template.lower():
            sys.exit(f"{relation} ({label}): template {template!r} does not mention {word!r}")
        print(f"  {relation:6} {label:40} {template}")


def _count_facts(path: Path) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return sum(len(json.loads(line)["obj_label"]) for line in lines if line.strip())


def build(source: Path, target: Path) -> tuple[int, int]:
    """Write the selection to ``target``; return (facts, bytes)."""
    facts = size = 0
    for relation in sorted(CHOSEN, key=lambda r: int(r[1:])):
        (target / "relations" / relation).mkdir(parents=True)
        for split in SPLITS:
            name = Path("relations") / relation / f"{split}.jsonl"
            shutil.copyfile(source / name, target / name)
            facts += _count_facts(target / name)
    labels = (source / "property-labels.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [labels[0]] + [line for line in labels[1:] if line.split("\t", 1)[0] in CHOSEN]
    (target / "property-labels.tsv").write_text("".join(kept), encoding="utf-8")
    seen: set[str] = set()
    templates = []
    # KAMEL lists P495 twice; one line per relation is enough.
    for line in (source / "question-templates.csv").read_text(encoding="utf-8").splitlines():
        relation = line.partition(",")[0].strip()
        if relation in CHOSEN and relation not in seen:
            seen.add(relation)
            templates.append(line + "\n")
    (target / "question-templates.csv").write_text("".join(templates), encoding="utf-8")
    size = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    return facts, size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", nargs="?", type=Path, default=REPO.parent / "shared" / "data" / "kamel")
    parser.add_argument("--out", type=Path, default=REPO / "agent" / "data" / "demo" / "kamel")
    args = parser.parse_args(argv)
    source, out = args.source.resolve(), args.out.resolve()
    print(f"checking {len(CHOSEN)} relations in {source}")
    check_relations(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        facts, size = build(source, staging / "kamel")
        if size > MAX_BYTES:
            sys.exit(f"selection is {size:,} bytes, over the {MAX_BYTES:,} byte budget")
        old = staging / "old"
        if out.exists():
            os.replace(out, old)
        os.replace(staging / "kamel", out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"wrote {out}: {len(CHOSEN)} relations, {facts:,} facts, {size:,} bytes")


if __name__ == "__main__":
    main()
