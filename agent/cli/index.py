"""``factweave index ...``: build fact indexes (a file, a memory-mapped disk file or PostgreSQL tables)
and inspect them."""
from __future__ import annotations

import json
import time
from pathlib import Path

import click

from ..knowledge.kamel import demo_kamel_root
from ..knowledge.loaders import load_facts
from ..models import default_cache_dir, load_tokenizer
from .options import MODEL_HELP


@click.group("index")
def index_group() -> None:
    """Build and inspect fact indexes (prefix trees of tokenized facts)."""


@index_group.command("build")
@click.option("--kb", type=click.Path(exists=True, path_type=Path), default=None,
              help="Knowledge source: .tsv/.jsonl/.nt file (optionally .gz) or a KAMEL folder. Default: the bundled demo KB.")
@click.option("--model", default=None, help=MODEL_HELP + " Its tokenizer is used.")
@click.option("--inverse/--no-inverse", default=False, help="Also index <object> <inverse predicate> <subject> facts.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Index file to write (default: the cache).")
@click.option("--backend", type=click.Choice(["file", "disk", "postgres"]), default="file", show_default=True,
              help="Where the index goes: one file loaded in memory; a memory-mapped disk file (millions of facts, "
                   "opens at once); or tables in PostgreSQL (needs --dsn).")
@click.option("--memory-mb", type=click.IntRange(16, 1 << 20), default=1024, show_default=True,
              help="With --backend disk: memory for sorting; beyond it, sorted runs go to disk next to --out.")
@click.option("--dsn", envvar="FACTWEAVE_PG_DSN", default=None,
              help="PostgreSQL connection string, e.g. 'host=127.0.0.1 dbname=facts user=me' (FACTWEAVE_PG_DSN).")
@click.option("--name", "pg_name", envvar="FACTWEAVE_PG_INDEX", default="kb", show_default=True,
              help="Name of the index in PostgreSQL; a rebuild under the same name replaces it atomically.")
def index_build(kb: Path | None, model: str | None, inverse: bool, out: Path | None, backend: str, memory_mb: int,
                dsn: str | None, pg_name: str) -> None:
    """Build the fact index of a knowledge source for a model's tokenizer.

    \b
    Example:
      factweave index build --kb facts.tsv --model smollm2-135m --out facts.fwi
      factweave index build --kb big.tsv.gz --backend disk --memory-mb 2048 --out big.fwd
      factweave index build --kb facts.tsv --model smollm2-135m --backend postgres \\
          --dsn "host=127.0.0.1 dbname=facts" --name facts
    """
    # lazy: agent.index pulls numpy and tqdm, agent.runtime torch (CLI start stays fast)
    from ..index.files import build_index_file, default_index_path
    from ..index.tokens import tokenizer_fingerprint
    from ..runtime import DEFAULT_MODEL

    model = model or DEFAULT_MODEL
    kb = kb or demo_kamel_root()
    if backend == "postgres":
        if not dsn:
            raise click.UsageError("--backend postgres needs --dsn (or FACTWEAVE_PG_DSN)")
        if out is not None:
            raise click.UsageError("--out is for --backend file or disk")
        # lazy: agent.index pulls numpy and tqdm (CLI start stays fast)
        from ..index.pg_build import build_postgres_index

        tokenizer = load_tokenizer(model)
        report = build_postgres_index(dsn, load_facts(kb, inverse=inverse), tokenizer, name=pg_name, progress=True,
                                      meta={"model": model, "kb": str(Path(kb).resolve()), "inverse": inverse})
        size = report.tree_bytes + report.facts_bytes
        click.echo(f"{report.facts:,} facts, {report.nodes:,} nodes in {report.rows:,} rows, {size / 1e6:.1f} MB "
                   f"(tree {report.tree_bytes / max(1, report.facts):.0f} bytes/fact), {report.seconds:.1f} s "
                   f"-> PostgreSQL index {report.name!r} (schema {report.schema})")
        return
    tokenizer = load_tokenizer(model)
    out = out or default_index_path(kb, tokenizer_fingerprint(tokenizer), inverse, default_cache_dir())
    disk = backend == "disk"
    if disk and out.suffix == ".fwi":
        out = out.with_suffix(".fwd")
    _, file_report = build_index_file(kb, tokenizer, out, inverse=inverse, model_name=model, disk=disk,
                                      memory_mb=memory_mb)
    click.echo(f"{file_report.facts:,} facts, {file_report.nodes:,} nodes, {file_report.bytes / 1e6:.1f} MB, "
               f"{file_report.seconds:.1f} s -> {file_report.path}")


@index_group.command("list")
@click.option("--dsn", envvar="FACTWEAVE_PG_DSN", required=True,
              help="PostgreSQL connection string (FACTWEAVE_PG_DSN).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_list(dsn: str, as_json: bool) -> None:
    """List the fact indexes stored in a PostgreSQL database.

    \b
    Example:
      factweave index list --dsn "host=127.0.0.1 dbname=facts"
    """
    # lazy: agent.index pulls numpy and tqdm (CLI start stays fast)
    from ..index.pg_build import list_indexes

    found = list_indexes(dsn)
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        click.echo("no fact indexes")
    for i in found:
        click.echo(f"{i['name']}\t{i['facts']:,} facts\t{i['model'] or i['tokenizer_fingerprint'][:12]}\t"
                   f"built {i['built_at']}\t(schema {i['schema']})")


@index_group.command("info")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def index_info(path: Path) -> None:
    """Show an index file's header.

    \b
    Example:
      factweave index info facts.fwi
    """
    # lazy: agent.index pulls numpy and tqdm (CLI start stays fast)
    from ..index.disk_format import is_disk_index, read_disk_header
    from ..index.storage import read_header

    if is_disk_index(path):
        header = read_disk_header(path)
        header["bytes_per_fact"] = round(header["file_bytes"] / max(1, header["fact_count"]), 2)
        header["sections"] = {k: v["bytes"] for k, v in header["sections"].items()}
    else:
        header, _ = read_header(path)
        header.pop("arrays", None)
    click.echo(json.dumps(header, indent=2, ensure_ascii=False))


@index_group.command("verify")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def index_verify(path: Path) -> None:
    """Check every checksum of an index file (reads it all once); exit 1 with one line if corrupt.

    \b
    Example:
      factweave index verify big.fwd
    """
    # lazy: agent.index pulls numpy and tqdm (CLI start stays fast)
    from ..index.storage import load_index

    start = time.perf_counter()
    index = load_index(path, verify="full")
    click.echo(f"{path}: ok, {len(index):,} facts, checked in {time.perf_counter() - start:.1f} s")
