"""How well the local model reads whether a role is a kind of the noun a question asks
(:class:`agent.pipeline.relation_reading.KindReader`), on pairs written for this project
(``benchmarks/data/kinds.tsv``: "capital" / "city" is a kind, "director" / "nationality" is not;
the sentences of ``prompts/check/kind.txt`` were chosen on it among four) and on pairs written
after that choice and never used to make one (``kinds-test.tsv``); and whether a role is the place
"where" asks ("Where is the headquarters of X located?") or a person or organization that has one
("Where was the director of X born?", ``KindReader.is_place``): ``kinds-place.tsv``, roles read
while choosing the sentences, and ``kinds-place-test.tsv``, written before any reading and
scored once after the choice.

    .venv/bin/python benchmarks/kind_reading.py [--model qwen2.5-coder-0.5b]
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

DATA = Path(__file__).parent / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = parser.parse_args()
    from agent.models import load_model
    from agent.pipeline.relation_reading import KindReader

    loaded = load_model(args.model)
    reader = KindReader(loaded.model, loaded.tokenizer)
    for name in ("kinds.tsv", "kinds-test.tsv", "kinds-place.tsv", "kinds-place-test.tsv"):
        rows = list(csv.DictReader((DATA / name).open(encoding="utf-8"), delimiter="\t"))
        place = name.startswith("kinds-place")  # "where": a place, or a person or organization
        misses = [r for r in rows if (reader.is_place(r["role"]) if place else reader(r["role"], r["noun"]))
                  != (r["kind"] == "yes")]
        print(f"{args.model}, {name}: {len(rows) - len(misses)} of {len(rows)} read right")
        for r in misses:
            print(f"  missed: {r['role']} / {r['noun']} (kind: {r['kind']})")


if __name__ == "__main__":
    main()
