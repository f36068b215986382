"""``factweave eval DATASET``: the methods compared on a dataset's questions, scored and judged
(mirrors :func:`agent.eval.evaluation.run_evaluation`)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..eval.compare import DEFAULT_METRICS, compare_markdown, expand_runs, load_run
from ..eval.datasets import DATASETS, data_path, load_questions
from ..eval.evaluation import KGDOptions, run_evaluation
from ..eval.methods import METHODS, default_methods
from ..eval.wordings import read_wordings, reword_questions, reworded, write_wordings
from ..extras import require
from ..files import write_text
from ..settings import load_settings
from .options import MODEL_HELP


@click.group("eval")
def eval_group() -> None:
    """Evaluate on benchmark questions: LLM-only, ReFactX, web-RAG, the agent, RCD and KGD, side by side.

    Questions are sampled stratified by relation or question type (seeded). With --out, every
    answer is saved as it finishes and the same command run again resumes; the report (JSON,
    Markdown, figures) is written there.

    \b
    Example:
      factweave eval kamel --limit 30 --model smollm2-135m --out runs/
      factweave eval popqa --method refactx --method agent --limit 10
      factweave eval compare runs/
    """


def _eval_options(f):
    options = [
        click.option("--data", type=click.Path(path_type=Path), default=None,
                     help="The dataset's file or folder (default: see the command's help)."),
        click.option("--limit", type=click.IntRange(1), default=20, show_default=True,
                     help="Questions: N, round-robin over relations / question types, seeded by --seed."),
        click.option("--method", "methods", multiple=True, type=click.Choice(list(METHODS)),
                     help="Methods to compare (repeat the option; default: every one that applies to the "
                          "dataset): " + "; ".join(f"{k}: {v}" for k, v in METHODS.items())),
        click.option("--config", "config", type=click.Path(path_type=Path), default=None,
                     help="Settings file (TOML) for the model, the agent and the web backends."),
        click.option("--model", default=None, help=MODEL_HELP),
        click.option("--beams", type=click.IntRange(1, 16), default=1, show_default=True),
        click.option("--max-tokens", type=click.IntRange(1, 8192), default=96, show_default=True,
                     help="Most tokens per generation."),
        click.option("--batch-size", type=click.IntRange(1, 256), default=4, show_default=True,
                     help="Questions per generate call (llm-only, refactx, web-rag)."),
        click.option("-k", "k", type=click.IntRange(1, 200), default=None,
                     help="Facts retrieved per query for web-rag and the agent (10)."),
        click.option("--max-rounds", type=click.IntRange(0, 5), default=None,
                     help="The agent's sub-query rounds (1)."),
        click.option("--judge/--no-judge", default=True, show_default=True,
                     help="Grade answered predictions with an LLM judge."),
        click.option("--judge-base-url", default=None,
                     help="OpenAI-compatible endpoint of the judge (key: OPENAI_API_KEY); default: the local model."),
        click.option("--judge-model", default=None,
                     help="The judge's model name at that endpoint (default: the first it serves); alone: an "
                          "OpenAI model (needs OPENAI_API_KEY)."),
        click.option("--half", type=click.Choice(["dev", "test"]), default=None,
                     help="Only the questions of this half (a frozen split by a hash of the question id): build "
                          "and debug on dev, report test beside it (default: every question)."),
        click.option("--wording", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Ask the questions in a model's words: a file `factweave eval reword` wrote for the "
                          "same --limit, --half and --seed."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seeds the question sample and every random draw."),
        click.option("--samples", type=click.IntRange(1, 16), default=1, show_default=True,
                     help="KGD methods: sample N answers per question and report best-of-N (beam ones stay single)."),
        click.option("--kgd-chunks", type=click.IntRange(1, 20), default=3, show_default=True,
                     help="KGD methods: top passage chunks per question."),
        click.option("--nli-model", default=None,
                     help="kgd-nli: a cross-encoder NLI model (Hugging Face id or folder); default: the local model judges."),
        click.option("--device", default=None, help="cpu, cuda, ... (default: cpu)."),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None,
                     help="Weights dtype (default float32 on CPU)."),
        click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Folder for <dataset>-<model>.json (every answer), .md (the tables) and .png (figures); "
                          "answers are saved there as they finish, so the same command resumes."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _run(dataset: str, *, split: str = "dev", data, limit, methods, config, model, beams, max_tokens, batch_size, k,
         max_rounds, judge, judge_base_url, judge_model, half, wording, seed, samples, kgd_chunks, nli_model, device, dtype,
         out, kind: str | None = None) -> None:
    require("eval", "factweave eval")
    from tqdm.auto import tqdm

    settings = load_settings(config, model=model, beams=beams, max_tokens=max_tokens, device=device, dtype=dtype,
                             k=k, max_rounds=max_rounds)
    path = data_path(dataset, data)
    methods = tuple(methods) or default_methods(dataset)
    # Loading the questions first checks the data before any model is loaded.
    questions = load_questions(dataset, path, limit=limit, split=split, seed=seed, kind=kind, half=half)
    if wording is not None:
        reworded(questions, read_wordings(wording), wording)  # every question has its wording
    total = len(questions) * len(set(methods))
    with tqdm(total=total, desc=f"{dataset}: answering", unit=" q", file=sys.stderr) as bar:
        report = run_evaluation(dataset, settings=settings, data=path, methods=methods, limit=limit, split=split,
                                batch_size=batch_size, judge=judge, judge_base_url=judge_base_url,
                                judge_model=judge_model, seed=seed, on_progress=bar.update,
                                kgd=KGDOptions(samples=samples, chunks=kgd_chunks, nli_model=nli_model),
                                out_dir=out, kind=kind, half=half, wording=wording)
    click.echo(report.markdown())
    if out is not None:
        json_path, md_path = report.paths(out)
        click.echo(f"results -> {json_path}, {md_path} and {len(report.figures)} figures")


@eval_group.command("kamel", short_help="KAMEL questions over the KAMEL facts.")
@click.option("--split", type=click.Choice(["train", "dev", "test"]), default="dev", show_default=True,
              help="The split asked (the web holds this split's triples; the KB tree every split).")
@_eval_options
def eval_kamel(split, **options) -> None:
    """KAMEL questions (default: the bundled demo KB's dev split); KB tree: the KAMEL facts; web:
    the split's triples (the demo web for the bundled KB).

    \b
    Example:
      factweave eval kamel --limit 30 --model smollm2-135m --out benchmarks/results/eval
      factweave eval kamel --data ../shared/data/kamel --method refactx --method llm-only
    """
    _run("kamel", split=split, **options)


@eval_group.command("popqa", short_help="PopQA questions over their paragraphs and gold triples.")
@_eval_options
def eval_popqa(**options) -> None:
    """PopQA questions (default: ../shared/data/popqa/popqa_500.json); web: every question's two
    paragraphs and its gold triple; KB tree: every fact of that web.

    \b
    Example:
      factweave eval popqa --limit 30 --model qwen2.5-coder-0.5b --out benchmarks/results/eval
    """
    _run("popqa", **options)


@eval_group.command("hotpotqa", short_help="HotpotQA multi-hop questions over their passages.")
@_eval_options
def eval_hotpotqa(**options) -> None:
    """HotpotQA questions (default: ../shared/data/hotpotqa/hotpotqa_train100_with_context.json,
    web of hotpotqa_train100_corpus.json beside it); KB tree: every fact of the web; questions
    stratified by type (bridge, comparison).

    \b
    Example:
      factweave eval hotpotqa --limit 20 --method kgd --method chunks-greedy --samples 4 --out runs/
    """
    _run("hotpotqa", **options)


@eval_group.command("compare", short_help="Runs side by side: one table per metric.")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--metric", "metrics", multiple=True,
              help="Metrics to tabulate (repeat; default: exact_accuracy, exact_precision, approximate_accuracy, "
                   "f1, grounded, follow_up_share, set_f1, seconds); also judge_accuracy, best_of_n.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the tables to this Markdown file.")
def eval_compare(runs, metrics, out) -> None:
    """Put the JSON reports of `factweave eval --out` side by side (a folder: every report in it).

    \b
    Example:
      factweave eval compare benchmarks/results/eval/kamel-*.json benchmarks/results/eval/popqa-*.json
      factweave eval compare runs/ --metric exact_accuracy --metric set_f1 --out runs/comparison.md
    """
    text = compare_markdown([load_run(p) for p in expand_runs(runs)], metrics or DEFAULT_METRICS)
    click.echo(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, text)


@eval_group.command("musique", short_help="MuSiQue multi-hop questions over their corpus.")
@_eval_options
def eval_musique(**options) -> None:
    """MuSiQue questions (default: ../shared/data/musique/musique_train100_with_paragraphs.json,
    web of musique_train100_corpus.json beside it); KB tree: every fact of the web.

    \b
    Example:
      factweave eval musique --limit 30 --judge-base-url http://127.0.0.1:8000/v1 --out runs/
    """
    _run("musique", **options)


@eval_group.command("2wiki", short_help="2WikiMultiHopQA two-hop questions over their corpus.")
@_eval_options
def eval_2wiki(**options) -> None:
    """2WikiMultiHopQA questions in HippoRAG's format (default:
    ../shared/data/2wikimultihopqa/2wiki_dev100_questions.json, web of 2wiki_corpus.json beside
    it, 6,119 passages); KB tree: every fact of the web; questions stratified by their number of
    supporting passages (4: bridge-comparison), the file having no type.

    \b
    Example:
      factweave eval 2wiki --limit 30 --model qwen2.5-coder-1.5b --no-judge --out runs/
    """
    _run("2wiki", **options)


@eval_group.command("kamel-chat", short_help="KAMEL conversations: follow-ups and two-hop chains.")
@click.option("--kind", type=click.Choice(["follow-up", "two-hop"]), default=None,
              help="Only follow-up items or only two-hop chains (default: both, alternated).")
@_eval_options
def eval_kamel_chat(kind, **options) -> None:
    """Conversations built (seeded) from a KAMEL folder (default: the bundled demo KB): follow-ups
    asked with a pronoun after a first turn that is given (question and gold reply), each beside
    the same question asked standalone, and two-hop questions along KB chains (a person's country
    -> its official language, ...). --limit counts items: a follow-up item is two questions.
    KB tree: every split of the folder; web: its dev triples (the demo web), as `eval kamel`.
    Methods: llm-only, refactx, web-rag, agent (the ones that take a conversation).

    \b
    Example:
      factweave eval kamel-chat --limit 30 --model qwen2.5-coder-1.5b --no-judge --out runs/
      factweave eval kamel-chat --kind two-hop --limit 30 --no-judge --out runs/
    """
    _run("kamel-chat", kind=kind, **options)


@eval_group.command("reword", short_help="A set's questions in a model's words, for --wording.")
@click.argument("dataset", type=click.Choice(list(DATASETS)))
@click.option("--data", type=click.Path(path_type=Path), default=None, help="The dataset's file or folder.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True,
              help="The questions `factweave eval DATASET` picks with the same --limit, --half and --seed.")
@click.option("--half", type=click.Choice(["dev", "test"]), default=None, help="Only this half's questions.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--split", type=click.Choice(["train", "dev", "test"]), default="dev", show_default=True,
              help="kamel: the split asked.")
@click.option("--kind", type=click.Choice(["follow-up", "two-hop"]), default=None, help="kamel-chat: one kind only.")
@click.option("--model", default=None, help="The local model that rewords (a preset, folder or Hub id; default: "
                                            "the settings' model) when no endpoint is given.")
@click.option("--base-url", default=None,
              help="An OpenAI-compatible endpoint that rewords instead (key: OPENAI_API_KEY).")
@click.option("--llm-model", default=None, help="The model name at that endpoint (default: the first it serves).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The JSON Lines file written (one rewording per question, kept as generated).")
def eval_reword(dataset, data, limit, half, seed, split, kind, model, base_url, llm_model, out) -> None:
    """Ask a model to reword each question the same `factweave eval DATASET` options pick, and keep
    its words as they came (prompts/eval/reword/): questions in a wording the project never wrote,
    for `factweave eval DATASET --wording FILE`. Answers, history and half stay the question's.

    \b
    Example:
      factweave eval reword 2wiki --limit 24 --half test --model qwen2.5-coder-1.5b --out runs/2wiki-reworded.jsonl
      factweave eval 2wiki --limit 24 --half test --wording runs/2wiki-reworded.jsonl --out runs/
    """
    from tqdm.auto import tqdm

    from ..llm.client import chat_client_from_env
    from ..runtime import load_settings_model

    questions = load_questions(dataset, data_path(dataset, data), limit=limit, split=split, seed=seed, kind=kind,
                               half=half)
    settings = load_settings(None, model=model)
    endpoint = base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")
    # The local model on the settings' engine (llama.cpp where installed), only when no endpoint rewords.
    chat = chat_client_from_env(model=llm_model, base_url=base_url,
                                local_model=None if endpoint else load_settings_model(settings))
    with tqdm(total=len(questions), desc=f"{dataset}: rewording", unit=" q", file=sys.stderr) as bar:
        rows = reword_questions(questions, chat, on_progress=bar.update)
    write_wordings(out, rows)
    same = sum(row["same"] for row in rows)
    click.echo(f"{len(rows)} questions reworded by {chat.name} -> {out}" + (f" ({same} came back unchanged)" if same else ""))
