"""The ``factweave`` command line. Each command mirrors a Python function; errors print one line."""
from __future__ import annotations

import faulthandler
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent.cli.ui import ui_command

from .. import supervisor
from ..errors import FactweaveError
from ..knowledge.kamel import demo_kamel_root
from ..knowledge.loaders import load_facts
from ..models import PRESETS, default_cache_dir, load_tokenizer, preset_installed, preset_requirements
from ..pipeline.conversation import as_turns
from ..pipeline.trace import describe_step
from ..settings import config_path, load_settings
from .eval import eval_group
from .llm import llm_group
from .mcp import mcp_command
from .options import (
    MODEL_HELP,
    config_option,
    engine_option,
    model_option,
    rerank_option,
    tree_option,
    web_option,
)
from .serve import serve_command
from .web import web_group

if TYPE_CHECKING:
    from ..events import AnswerEvent
    from ..pipeline import FactAgent


def _console():
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def _plain(text: object) -> str:
    """``text`` (a question, a fact, an answer, a source) shown as it is inside Rich markup:
    knowledge may hold ``[brackets]``, which must neither style the line nor break it."""
    from rich.markup import escape

    return escape(str(text))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="factweave")
def cli() -> None:
    """factweave: answers built from facts that exist in a knowledge base, with proof.

    \b
    Example:
      factweave ask "What is the original language of Kalakalappu 2?"
    """


@cli.command("models")
def models_cmd() -> None:
    """List the packaged model presets, their PyPI packages, and whether they are installed.

    \b
    Example:
      factweave models
    """
    # lazy: agent.runtime pulls torch (CLI start stays fast)
    from ..runtime import DEFAULT_MODEL

    for name, preset in PRESETS.items():
        mark = " (default)" if name == DEFAULT_MODEL else ""
        state = "installed" if preset_installed(preset) else "not installed"
        click.echo(f"{name}{mark}\t{preset.description}\t{state}: {preset_requirements(preset)}")


@cli.command("config")
@click.option("--config", "config", type=click.Path(path_type=Path), default=None,
              help="Settings file to read (default $FACTWEAVE_CONFIG, ./factweave.toml, ~/.config/factweave/config.toml).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
def config_cmd(config: Path | None, as_json: bool) -> None:
    """Show the effective settings (file, environment and defaults merged; secrets masked).

    The output is a valid settings file: save it as factweave.toml and edit it.

    \b
    Example:
      factweave config
      FACTWEAVE_TREE=question factweave config --json
    """
    settings = _settings(config)
    data = settings.public()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    source = config_path(config)
    click.echo(f"# effective factweave settings ({'file ' + str(source) if source else 'no settings file'}, "
               "environment, defaults)")
    secrets = {name for name, value in data.items() if value == "***"}
    for name, value in data.items():
        if name in secrets:
            click.echo(f"# {name} = (set; secrets are not shown)")
        elif value is None:
            click.echo(f"# {name} = (unset)")
        else:
            click.echo(f"{name} = {json.dumps(value)}")


@cli.group("index")
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


@cli.group("kb")
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


def _generation_options(f):
    options = [
        config_option,
        model_option,
        engine_option,
        click.option("--kb", type=click.Path(exists=True, path_type=Path), default=None,
                     help="Knowledge source for the KB fact tree (default: the bundled demo KB)."),
        click.option("--index", "index_path", type=click.Path(exists=True, path_type=Path), default=None,
                     help="A prebuilt index file (must match the model's tokenizer)."),
        click.option("--inverse/--no-inverse", default=None, help="Include inverse facts in the index."),
        click.option("--beams", type=click.IntRange(1, 16), default=None, help="Beam search width (1)."),
        click.option("--max-tokens", type=click.IntRange(1, 8192), default=None,
                     help="Most tokens to generate per attempt (160)."),
        click.option("--device", default=None, help="cpu, cuda, cuda:1, mps ... (default: cpu)."),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None,
                     help="Weights dtype (default float32 on CPU)."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _settings(config, **overrides):
    return load_settings(config, **overrides)


@cli.command("ask")
@click.argument("question")
@_generation_options
@web_option
@tree_option
@rerank_option
@click.option("-k", "k", type=click.IntRange(1, 200), default=None, help="Facts retrieved per query (10).")
@click.option("--max-rounds", type=click.IntRange(0, 5), default=None,
              help="Sub-query rounds when the facts found do not support an answer (1).")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint for the re-ranker and sub-queries "
                                               "(default: OPENAI_BASE_URL, else the local model).")
@click.option("--llm-model", default=None, help="Chat model name at that endpoint.")
@click.option("--free", is_flag=True, help="Generate without facts or constraint (LLM-only), for comparison.")
@click.option("--history", "history_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A JSON file with the conversation's earlier turns, oldest first: "
                   '[{"role": "user" | "assistant", "content": ...}, ...] (the last 6 are used).')
@click.option("--json", "as_json", is_flag=True, help="Print {answer, text, facts, timings, trace} as JSON.")
def ask(question, config, model, engine, kb, index_path, inverse, beams, max_tokens, device, dtype, web_dir, tree, rerank,
        k, max_rounds, base_url, llm_model, free, history_path, as_json) -> None:
    """Answer QUESTION through the agent: knowledge-web retrieval, re-ranking, then generation where
    every `Fact:` line is constrained to a fact that exists (per-question tree, then the whole KB).

    \b
    Example:
      factweave ask "What is the original language of Kalakalappu 2?"
      factweave ask "Who founded Zorblax Station?" --web my-web --tree question --json
      factweave ask "Where was Laurie Graff born?" --kb facts.tsv     # your KB, no web: KB tree
      factweave ask "What instrument did he play?" --history turns.json   # a follow-up
    """
    if free and (web_dir or tree or rerank or history_path):
        raise click.UsageError("--free generates without facts; it does not combine with "
                               "--web/--tree/--rerank/--history")
    history = read_history(history_path) if history_path else []
    settings = _settings(config, model=model, engine=engine, kb=kb, index=index_path, inverse=inverse, beams=beams,
                         max_tokens=max_tokens, device=device, dtype=dtype, web=web_dir, tree=tree,
                         rerank=rerank, k=k, max_rounds=max_rounds, openai_base_url=base_url, llm_model=llm_model)
    t0 = time.perf_counter()
    if free:
        # lazy: agent.runtime pulls torch (CLI start stays fast)
        from ..runtime import load_settings_model, open_generator

        gen = open_generator(settings.model, loaded=load_settings_model(settings), with_index=False,
                             beams=settings.beams, max_new_tokens=settings.max_tokens)
        load_s = time.perf_counter() - t0
        out = gen.answer(question, constrained=False).as_dict()
        payload = {key: out[key] for key in ("answer", "text", "facts", "timings", "truncated")}
        payload["timings"]["load_s"] = round(load_s, 3)
        payload["tokens"] = {"prompt": out["prompt_tokens"], "generated": out["tokens"]}
        if as_json:
            click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        else:
            _print_free(payload)
        return
    # lazy: agent.runtime pulls torch (CLI start stays fast)
    from ..runtime import open_agent

    with open_agent(settings, progress=not as_json) as agent:
        load_s = time.perf_counter() - t0
        reply: Mapping[str, Any]
        if as_json:
            reply = agent.answer(question, history=history).as_dict()
        else:
            reply = _print_stream(agent, question, history)
    trace = reply["trace"]
    trace["timings"]["load_s"] = round(load_s, 3)
    if as_json:
        payload = {"answer": reply["answer"], "text": reply["text"], "facts": reply["facts"],
                   "supported": trace["supported"], "truncated": trace["truncated"], "timings": trace["timings"],
                   "tokens": trace["tokens"],
                   "trace": trace}
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    _print_summary(reply)


def read_history(path: Path) -> list[dict[str, str]]:
    """The earlier turns in a ``--history`` file, every one (the agent bounds them by its own
    options, see :mod:`agent.pipeline.conversation`)."""
    try:
        turns = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(turns, list):
            raise ValueError("not a JSON list")
        return as_turns(turns)
    except (ValueError, FactweaveError) as exc:
        raise click.BadParameter(f"{path}: a JSON list of {{\"role\", \"content\"}} turns is expected ({exc})",
                                 param_hint="--history") from None


def _print_stream(agent: FactAgent, question: str, history: list[dict[str, str]] | None = None) -> AnswerEvent:
    """Run the agent, showing each step as it ends and the generated text as it streams (on a
    terminal with its constrained facts highlighted as they complete); returns the answer event."""
    from rich.live import Live
    from rich.text import Text

    con = _console()
    live: Live | None = None
    text: Text | None = None
    final: AnswerEvent | None = None

    def end_text() -> None:
        nonlocal live, text
        if live is not None:
            live.stop()
        elif text is not None:
            click.echo()
        live = text = None

    try:
        for event in agent.stream(question, history=history):
            if event["event"] == "token":
                if text is None:
                    text = Text()
                    if con.is_terminal:
                        live = Live(text, console=con, refresh_per_second=12, transient=False)
                        live.start()
                text.append(event["text"])
                if live is not None:
                    live.refresh()
                else:
                    click.echo(event["text"], nl=False)
            elif event["event"] == "fact":
                if text is not None:
                    text.stylize("bold green", event["fact"]["start"], event["fact"]["end"])
            elif event["event"] == "step":
                end_text()
                con.print(f"[dim]{_plain(describe_step(event['step']))}[/dim]")
            else:
                final = event
    finally:
        end_text()
    if final is None:  # the agent always ends with its answer; this guards a broken stream
        raise FactweaveError("the agent's stream ended without an answer")
    return final


def _print_summary(reply: Mapping[str, Any]) -> None:
    con = _console()
    trace = reply["trace"]
    con.print()
    con.print(f"[bold]Answer: {_plain(reply['answer'])}[/bold]", markup=True, highlight=False)
    if trace.get("withheld"):
        con.print(f"[yellow]The model answered {_plain(repr(trace['withheld']))} without a supporting fact: "
                  "withheld.[/yellow]")
    if reply["facts"]:
        con.print(f"[green]{len(reply['facts'])} fact(s) constrained to the knowledge:[/green]")
        for fact in reply["facts"]:
            con.print(f"  [green]{_plain(fact['fact_id'])}[/green] {_plain(fact['text'])}  "
                      f"[dim]({_plain(fact['source'])})[/dim]",
                      markup=True, highlight=False)
    else:
        con.print("[dim]No fact was stated.[/dim]")
    t, tokens = trace["timings"], trace["tokens"]
    rate = tokens["generated"] / t["generate_s"] if t.get("generate_s") else 0.0
    con.print(f"[dim]{tokens['generated']} tokens generated in {t['generate_s']:.1f} s ({rate:.1f} tok/s); "
              f"retrieval {t['retrieve_s']:.2f} s, re-ranking {t['rerank_s']:.1f} s, total {t['total_s']:.1f} s; "
              f"load {t['load_s']:.1f} s[/dim]")


def _print_free(payload: dict) -> None:
    con = _console()
    con.print(payload["text"], markup=False, highlight=False)
    con.print()
    if payload["truncated"]:
        con.print("[yellow]No Answer: line: generation stopped at --max-tokens.[/yellow]")
    con.print("[yellow]Free generation: the Fact: lines above were not checked.[/yellow]")
    t = payload["timings"]
    con.print(f"[dim]{payload['tokens']['generated']} tokens in {t.get('generate_s', 0):.1f} s; "
              f"load {t['load_s']:.1f} s[/dim]")


cli.add_command(eval_group)
cli.add_command(web_group)
cli.add_command(llm_group)
cli.add_command(serve_command)
cli.add_command(mcp_command)
cli.add_command(ui_command)


def main() -> None:
    """Entry point: run the CLI; expected failures print ``Error: ...`` on one line, exit 1."""
    supervisor.from_command_line = True  # `ui` and `serve` keep themselves up (agent.supervisor)
    faulthandler.enable()  # a native crash (an engine's) says where it happened instead of dying silently
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except FactweaveError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except OSError as e:
        click.echo(f"Error: {e.strerror or e}{f': {e.filename}' if e.filename else ''}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
