"""The ``factweave`` command line. Each command mirrors a Python function; errors print one line."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from .errors import FactweaveError
from .llm.cli import llm_group
from .web.cli import web_group

MODEL_HELP = "Model: a preset (see `factweave models`), a local Hugging Face folder, or a Hub id."


def _console():
    from rich.console import Console

    return Console(stderr=False, highlight=False)


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
    from .models import PRESETS, preset_installed, preset_requirements
    from .runtime import DEFAULT_MODEL

    for name, preset in PRESETS.items():
        mark = " (default)" if name == DEFAULT_MODEL else ""
        state = "installed" if preset_installed(preset) else "not installed"
        click.echo(f"{name}{mark}\t{preset.description}\t{state}: {preset_requirements(preset)}")


@cli.group("index")
def index_group() -> None:
    """Build and inspect fact indexes (prefix trees of tokenized facts)."""


@index_group.command("build")
@click.option("--kb", type=click.Path(exists=True, path_type=Path), default=None,
              help="Knowledge source: .tsv/.jsonl/.nt file (optionally .gz) or a KAMEL folder. Default: the bundled demo KB.")
@click.option("--model", default=None, help=MODEL_HELP + " Its tokenizer is used.")
@click.option("--inverse/--no-inverse", default=False, help="Also index <object> <inverse predicate> <subject> facts.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Index file to write (default: the cache).")
def index_build(kb: Path | None, model: str | None, inverse: bool, out: Path | None) -> None:
    """Build the fact index of a knowledge source for a model's tokenizer.

    \b
    Example:
      factweave index build --kb facts.tsv --model smollm2-135m --out facts.fwi
    """
    from .index.files import build_index_file, default_index_path
    from .index.tokens import tokenizer_fingerprint
    from .knowledge.kamel import demo_kamel_root
    from .models import default_cache_dir, load_tokenizer
    from .runtime import DEFAULT_MODEL

    model = model or DEFAULT_MODEL
    kb = kb or demo_kamel_root()
    tokenizer = load_tokenizer(model)
    out = out or default_index_path(kb, tokenizer_fingerprint(tokenizer), inverse, default_cache_dir())
    _, report = build_index_file(kb, tokenizer, out, inverse=inverse, model_name=model)
    click.echo(f"{report.facts:,} facts, {report.nodes:,} nodes, {report.bytes / 1e6:.1f} MB, "
               f"{report.seconds:.1f} s -> {report.path}")


@index_group.command("info")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def index_info(path: Path) -> None:
    """Show an index file's header.

    \b
    Example:
      factweave index info facts.fwi
    """
    from .index.storage import read_header

    header, _ = read_header(path)
    header.pop("arrays", None)
    click.echo(json.dumps(header, indent=2, ensure_ascii=False))


def _generation_options(f):
    options = [
        click.option("--model", default=None, help=MODEL_HELP),
        click.option("--kb", type=click.Path(exists=True, path_type=Path), default=None,
                     help="Knowledge source (default: the bundled demo KB)."),
        click.option("--index", "index_path", type=click.Path(exists=True, path_type=Path), default=None,
                     help="A prebuilt index file (must match the model's tokenizer)."),
        click.option("--inverse/--no-inverse", default=False, help="Include inverse facts in the index."),
        click.option("--beams", type=click.IntRange(1, 16), default=1, show_default=True, help="Beam search width."),
        click.option("--max-tokens", type=click.IntRange(1, 8192), default=160, show_default=True,
                     help="Most tokens to generate."),
        click.option("--device", default=None, help="cpu, cuda, cuda:1, mps ... (default: cpu)."),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None,
                     help="Weights dtype (default float32 on CPU)."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _open(model, kb, index_path, inverse, beams, max_tokens, device, dtype):
    from .runtime import DEFAULT_MODEL, open_generator

    return open_generator(model or DEFAULT_MODEL, kb, index=index_path, inverse=inverse, beams=beams,
                          max_new_tokens=max_tokens, device=device, dtype=dtype)


@cli.command("ask")
@click.argument("question")
@_generation_options
@click.option("--free", is_flag=True, help="Generate without the fact constraint (LLM-only), for comparison.")
@click.option("--web", "web_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also use this knowledge web (see `factweave web build`): retrieve facts, build a "
                   "per-question fact tree, answer from it.")
@click.option("--tree", type=click.Choice(["kb", "question", "both"]), default=None,
              help="Fact tree while generating: the KB, a per-question tree of retrieved facts, or both "
                   "(per-question first). Default: both with --web, else kb.")
@click.option("--rerank/--no-rerank", default=False, show_default=True,
              help="With --web: let the chat model pick the retrieved facts (see `factweave web search`).")
@click.option("--json", "as_json", is_flag=True, help="Print {answer, text, facts, timings} as JSON (+ trace with --web).")
def ask(question, model, kb, index_path, inverse, beams, max_tokens, device, dtype, free, web_dir, tree, rerank,
        as_json) -> None:
    """Answer QUESTION; every `Fact:` line is constrained to the knowledge base.

    \b
    Example:
      factweave ask "What is the original language of Kalakalappu 2?" --json
      factweave ask "Who founded Zorblax Station?" --web my-web --tree both
    """
    if free and (web_dir or tree):
        raise click.UsageError("--free generates without facts; it does not combine with --web/--tree")
    if tree in ("question", "both") and web_dir is None:
        raise click.UsageError(f"--tree {tree} builds a tree from retrieved facts: give --web")
    t0 = time.perf_counter()
    gen = _open(model, kb, index_path, inverse, beams, max_tokens, device, dtype)
    load_s = time.perf_counter() - t0
    if web_dir is not None:
        payload = _ask_with_web(gen, question, web_dir, tree or "both", rerank)
    else:
        out = gen.answer(question, constrained=not free).as_dict()
        payload = {k: out[k] for k in ("answer", "text", "facts", "timings", "truncated", "tokens")}
    payload["timings"]["load_s"] = round(load_s, 3)
    if as_json:
        payload.pop("tokens", None)
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    _print_answer(payload, free)


def _ask_with_web(gen, question: str, web_dir: Path, tree: str, rerank: bool) -> dict:
    from .agent import FactAgent
    from .web.web import KnowledgeWeb

    if not (web_dir / "web.json").exists():
        raise FactweaveError(f"no knowledge web in {web_dir}; build one with `factweave web build --web {web_dir}`")
    with KnowledgeWeb.open(web_dir) as web:
        reranker = None
        if rerank:
            from .llm import chat_client_from_env
            from .rerank import Reranker

            reranker = Reranker(chat_client_from_env())
        reply = FactAgent(gen, web, reranker, tree=tree).answer(question)
    last = reply.trace["steps"]["attempts"][-1]
    return {"answer": reply.answer, "text": reply.text, "facts": reply.facts,
            "timings": dict(reply.trace["timings"]), "truncated": bool(last.get("truncated")),
            "tokens": reply.trace["tokens"], "trace": reply.trace}


def _print_answer(payload: dict, free: bool) -> None:
    from rich.text import Text

    con = _console()
    text = Text(payload["text"])
    for fact in payload["facts"]:
        text.stylize("bold green", fact["start"], fact["end"])
    con.print(text)
    con.print()
    if payload["truncated"]:
        con.print("[yellow]No Answer: line: generation stopped at --max-tokens.[/yellow]")
    if payload["facts"]:
        con.print(f"[green]{len(payload['facts'])} fact(s) constrained to the knowledge base:[/green]")
        for fact in payload["facts"]:
            where = fact["source"]
            label = f"#{fact['id']}" if "web_fact_id" not in fact else "web"
            con.print(f"  [green]{label}[/green] {fact['text']}  [dim]({where})[/dim]", markup=True)
    elif not free:
        con.print("[dim]No fact was stated.[/dim]")
    else:
        con.print("[yellow]Free generation: the Fact: lines above were not checked.[/yellow]")
    t = payload["timings"]
    rate = payload["tokens"] / t["generate_s"] if t.get("generate_s") else 0.0
    con.print(f"[dim]{payload['tokens']} tokens in {t.get('generate_s', 0):.1f} s ({rate:.1f} tok/s); "
              f"load {t['load_s']:.1f} s[/dim]")


@cli.group("eval", invoke_without_command=False)
def eval_group() -> None:
    """Evaluate on benchmark questions."""


@eval_group.command("kamel")
@click.option("--data", type=click.Path(exists=True, path_type=Path), default=None,
              help="KAMEL folder for questions and knowledge (default: the bundled demo KB).")
@click.option("--split", type=click.Choice(["train", "dev", "test"]), default="dev", show_default=True)
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True,
              help="Questions, taken round-robin over relations.")
@click.option("--mode", "modes", multiple=True, type=click.Choice(["refactx", "llm-only"]),
              default=("refactx", "llm-only"), show_default=True)
@click.option("--model", default=None, help=MODEL_HELP)
@click.option("--beams", type=click.IntRange(1, 16), default=1, show_default=True)
@click.option("--max-tokens", type=click.IntRange(1, 8192), default=96, show_default=True)
@click.option("--batch-size", type=click.IntRange(1, 256), default=4, show_default=True)
@click.option("--device", default=None, help="cpu, cuda, ... (default: cpu).")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None,
              help="Weights dtype (default float32 on CPU).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write per-question results as JSON.")
def eval_kamel(data, split, limit, modes, model, beams, max_tokens, batch_size, device, dtype, out) -> None:
    """Accuracy and precision (exact and approximate match) of ReFactX vs the same model free.

    \b
    Example:
      factweave eval kamel --split dev --limit 50 --model smollm2-135m
    """
    from rich.console import Console
    from rich.table import Table
    from tqdm.auto import tqdm

    from .eval.kamel import evaluate
    from .knowledge.kamel import demo_kamel_root, kamel_questions
    from .runtime import DEFAULT_MODEL, open_generator

    root = data or demo_kamel_root()
    model = model or DEFAULT_MODEL
    questions = kamel_questions(root, split=split, limit=limit)
    gen = open_generator(model, root, beams=beams, max_new_tokens=max_tokens, device=device, dtype=dtype)
    with tqdm(total=len(questions) * len(modes), desc="answering", unit=" q") as bar:
        results = evaluate(gen, questions, modes, batch_size=batch_size, on_batch=bar.update)
    table = Table(title=f"KAMEL {split}, {len(questions)} questions, {model} ({dtype or 'default dtype'}), beams={beams}")
    for col in ("mode", "answered", "EM acc", "EM prec", "approx acc", "approx prec", "s/question"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    for r in results:
        s = r.score
        table.add_row(r.mode, f"{s.answered}/{s.total}", pct(s.exact_accuracy), pct(s.exact_precision),
                      pct(s.approximate_accuracy), pct(s.approximate_precision), f"{r.seconds / s.total:.2f}")
    Console(width=max(100, Console().width)).print(table)
    if out:
        payload = {"dataset": "kamel", "data": str(root), "split": split, "model": model, "dtype": dtype, "beams": beams,
                   "max_tokens": max_tokens, "results": [r.as_dict() for r in results]}
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=1))
        tmp.replace(out)
        click.echo(f"per-question results -> {out}")


cli.add_command(web_group)
cli.add_command(llm_group)


def main() -> None:
    """Entry point: run the CLI; expected failures print ``Error: ...`` on one line, exit 1."""
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
