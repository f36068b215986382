"""Write ``agent/data/relations/value-types.tsv``: which of KAMEL's relations take numbers.

Usage (from the repository root)::

    .venv/bin/python tools/relation_value_types.py                 # source ../shared/data/kamel
    .venv/bin/python tools/relation_value_types.py /data/kamel --out /tmp/value-types.tsv

A relation is ``number`` when at least half of its values in every split (and three at least)
are bare numbers (``agent.pipeline.relations.is_number``: a year, a count, a measure), read from
the data, never from the relation's name. The answer check then asks an answer to a question
whose closest relation is numeric to hold a number (``agent/pipeline/asked.py``, the relation read by
``agent/pipeline/relations.py``). Written to a sibling file and renamed into place.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.pipeline.relations import MIN_VALUES, NUMERIC_SHARE, is_number  # noqa: E402


def value_types(source: Path) -> list[tuple[str, str, str]]:
    """(id, label, "number" or "item") for every relation of the KAMEL folder ``source``."""
    with open(source / "property-labels.tsv", encoding="utf-8", newline="") as stream:
        labels = {row["id"]: row["label"] for row in csv.DictReader(stream, delimiter="\t")}
    rows = []
    for folder in sorted((source / "relations").glob("P*"), key=lambda p: int(p.name[1:])):
        total = numbers = 0
        for split in sorted(folder.glob("*.jsonl")):
            with open(split, encoding="utf-8") as stream:
                for number, line in enumerate(stream, 1):
                    try:
                        values = json.loads(line)["obj_label"]
                    except (ValueError, KeyError, TypeError) as error:
                        raise SystemExit(f"{split}:{number}: not a KAMEL row ({error})") from None
                    for value in values:
                        if isinstance(value, str):
                            total += 1
                            numbers += is_number(value)
        kind = "number" if total >= MIN_VALUES and numbers >= NUMERIC_SHARE * total else "item"
        rows.append((folder.name, labels.get(folder.name, folder.name), kind))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=REPO.parent / "shared" / "data" / "kamel")
    parser.add_argument("--out", type=Path, default=REPO / "agent" / "data" / "relations" / "value-types.tsv")
    args = parser.parse_args()
    if not (args.source / "relations").is_dir():
        raise SystemExit(f"{args.source}: not a KAMEL folder (no relations/)")
    rows = value_types(args.source)
    partial = args.out.with_name(args.out.name + ".partial")
    with open(partial, "w", encoding="utf-8", newline="") as stream:
        stream.write("id\tlabel\tvalue\n")
        stream.writelines(f"{pid}\t{label}\t{kind}\n" for pid, label, kind in rows)
    os.replace(partial, args.out)
    print(f"{args.out}: {len(rows)} relations, {sum(k == 'number' for _, _, k in rows)} numeric")


if __name__ == "__main__":
    main()
