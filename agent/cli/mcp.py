"""``factweave mcp``: the agent as MCP tools over stdio (the server: :mod:`agent.serve.mcp`)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import FactweaveError
from ..extras import require
from ..settings import load_settings
from .options import agent_options

if TYPE_CHECKING:
    from ..pipeline import FactAgent

@click.command("mcp")
@agent_options
def mcp_command(config: Path | None, model: str | None, engine: str | None, engine_url: str | None,
                web_dir: Path | None, tree: str | None, rerank: bool | None) -> None:
    """Serve the agent as Model Context Protocol tools over stdio, for MCP clients to embed:
    `ask` (an answer with the facts behind it) and `search_facts` (the knowledge web's nearest
    facts). stdout carries the protocol only; progress and errors go to stderr. Other settings
    (beams, max_tokens, k, device, endpoints) come from the settings file or FACTWEAVE_*.

    \b
    Example:
      factweave mcp --web my-web --model qwen2.5-coder-0.5b

    \b
    In an MCP client's configuration (Claude Desktop: claude_desktop_config.json):
      {"mcpServers": {"factweave": {
          "command": "/path/to/factweave/.venv/bin/factweave",
          "args": ["mcp", "--web", "/path/to/my-web"]}}}
    """
    require("mcp", "factweave mcp")
    # lazy: the agent's runtime and the server package import torch and FastAPI, which
    # `factweave --help` must not pay for.
    from ..runtime import open_agent
    from ..serve.mcp import build_mcp_server

    # Settings errors end here, before serving, as one line; opening the agent happens while serving.
    settings = load_settings(config, model=model, engine=engine, engine_url=engine_url, web=web_dir, tree=tree,
                             rerank=rerank)
    failed: list[FactweaveError] = []

    def open_or_report() -> "FactAgent":
        try:
            return open_agent(settings, progress=True)
        except FactweaveError as exc:  # the tools report it too; the exit status says so at the end
            failed.append(exc)
            click.echo(f"Error: {exc}", err=True)
            raise

    server = build_mcp_server(open_or_report, max_concurrency=settings.max_concurrency)
    click.echo(f"factweave MCP server on stdio ({settings.model}, tree {settings.effective_tree()}); "
               "opening the agent...", err=True)
    server.run("stdio")
    if failed:
        sys.exit(1)
