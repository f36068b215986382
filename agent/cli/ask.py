"""``factweave ask QUESTION``: one answer through the agent (or free generation), streamed with its
steps, or as JSON (mirrors :meth:`agent.pipeline.FactAgent.stream` and ``answer``)."""
from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import FactweaveError
from ..pipeline.conversation import as_turns
from ..pipeline.trace import describe_step
from ..settings import load_settings
from .options import (
    config_option,
    engine_option,
    engine_url_option,
    model_option,
    rerank_option,
    tree_option,
    web_option,
)

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


def _generation_options(f):
    options = [
        config_option,
        model_option,
        engine_option,
        engine_url_option,
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


@click.command("ask")
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
def ask(question, config, model, engine, engine_url, kb, index_path, inverse, beams, max_tokens, device, dtype, web_dir, tree, rerank,
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
    settings = load_settings(config, model=model, engine=engine, engine_url=engine_url, kb=kb, index=index_path, inverse=inverse, beams=beams,
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
