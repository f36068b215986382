"""Command-line options every agent-facing command shares (``ask``, ``serve``, ``mcp``, ``ui``):
one definition each, so their names, types and help read the same everywhere."""
from __future__ import annotations

from pathlib import Path

import click

from ..settings import VLLM_IS_FOR_SERVE

MODEL_HELP = "Model: a preset (see `factweave models`), a local Hugging Face folder, or a Hub id."

config_option = click.option(
    "--config", "config", type=click.Path(path_type=Path), default=None,
    help="Settings file (TOML; default $FACTWEAVE_CONFIG, ./factweave.toml, ~/.config/factweave/config.toml).")
model_option = click.option("--model", default=None, help=MODEL_HELP)
web_option = click.option(
    "--web", "web_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Knowledge web to retrieve from (see `factweave web build`); default the demo web, built on first use.")
tree_option = click.option(
    "--tree", type=click.Choice(["kb", "question", "both", "kb-first"]), default=None,
    help="Fact tree while generating: the KB (no retrieval), a per-question tree of the re-ranked facts, "
         "both (per-question first; the default) or kb-first (the KB, then retrieval when not grounded).")
rerank_option = click.option("--rerank/--no-rerank", default=None,
                             help="Let the chat model pick the retrieved facts (default: on).")
ENGINE_HELP = ("What computes the model's logits: transformers, llama.cpp (a preset's GGUF file; pip install "
               "'factweave[llama]'), remote (a shared server started with `factweave serve --engine vllm` writes the "
               "replies: --engine-url) or auto (the default: llama.cpp for a preset on the CPU where installed, else "
               "transformers).")


class _AgentEngine(click.Choice):
    """The agent's engines; ``vllm`` is refused with where it does run (``serve --engine vllm``)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "vllm":
            self.fail(VLLM_IS_FOR_SERVE, param, ctx)
        return super().convert(value, param, ctx)


engine_option = click.option("--engine", type=_AgentEngine(["auto", "transformers", "llama.cpp", "remote"]),
                             default=None, help=ENGINE_HELP)
engine_url_option = click.option(
    "--engine-url", default=None, help="--engine remote: the server's address, e.g. http://gpu-1:8001 (default "
                                       "$FACTWEAVE_ENGINE_URL; its key: FACTWEAVE_ENGINE_KEY).")
# `factweave serve` also runs on vLLM (agent.serve.vllm_server): its server, the rule inside it.
serve_engine_option = click.option(
    "--engine", type=click.Choice(["auto", "transformers", "llama.cpp", "remote", "vllm"]), default=None,
    help=ENGINE_HELP[:-1] + "; vllm: vLLM's own server for GPU machines, ReFactX's rule inside it over --index "
                            "(vLLM installed in this environment; the agent's retrieval is not in it).")


def agent_options(f=None, *, engine=engine_option):
    """``--config``, ``--model``, ``--engine``, ``--engine-url``, ``--web``, ``--tree`` and ``--rerank``,
    in that order (``engine``: another ``--engine`` option, e.g. ``serve``'s)."""
    def apply(f):
        for option in reversed((config_option, model_option, engine, engine_url_option, web_option, tree_option,
                                rerank_option)):
            f = option(f)
        return f
    return apply if f is None else apply(f)
