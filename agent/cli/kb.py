"""``factweave kb ...``: synthetic knowledge bases for tests and benchmarks."""
from __future__ import annotations

import json
import time
from pathlib import Path

import click


@click.group("kb")
def kb_group() -> None:
    """Knowledge bases: generate synthetic ones for tests and benchmarks."""


@kb_group.command("synthetic")
@click.option("--facts", "count", type=click.IntRange(1), required=True, help="How many facts to write.")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same facts.")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="A .tsv or .jsonl file (.gz appended: compressed).")
def kb_synthetic(count: int, seed: int, out: Path) -> None:
    """Write a Wikidata-shaped synthetic knowledge base (names, dates, quantities, Zipf fan-out).

    \b
    Example:
      factweave kb synthetic --facts 1000000 --seed 7 --out kb-1m.tsv
    """
    import gzip

    # lazy: pulls numpy (CLI start stays fast)
    from ..knowledge.synthetic import synthetic_facts

    suffixes = out.suffixes
    opener = gzip.open if suffixes and suffixes[-1] == ".gz" else open
    as_json = ".jsonl" in suffixes
    start = time.perf_counter()
    with opener(out, "wt", encoding="utf-8") as f:
        for fact in synthetic_facts(count, seed, with_source=False):
            if as_json:
                f.write(json.dumps({"subject": fact.subject, "predicate": fact.predicate, "object": fact.object},
                                   ensure_ascii=False) + "\n")
            else:
                f.write(f"{fact.subject}\t{fact.predicate}\t{fact.object}\n")
    click.echo(f"{count:,} facts (seed {seed}) in {time.perf_counter() - start:.1f} s -> {out}")
