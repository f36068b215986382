"""``factweave llm ...``: the chat model other parts of factweave use, served over HTTP."""
from __future__ import annotations

import os

import click

from ..extras import require
from ..llm.client import LocalChat


@click.group("llm")
def llm_group() -> None:
    """Chat models: serve the local model as an OpenAI-compatible endpoint.

    \b
    Example:
      factweave llm serve --model qwen2.5-coder-0.5b --port 8000
    """


@llm_group.command("serve")
@click.option("--model", default=None, help="Local model: a preset, a Hugging Face folder or id (default: the demo model).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--api-key-env", default="FACTWEAVE_API_KEY", show_default=True,
              help="Environment variable holding the bearer key clients must send (unset: no key).")
@click.option("--allow-host", "allowed_hosts", multiple=True,
              help="A host name requests may name beyond loopback and IP addresses (repeatable).")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="A web-page origin that may call the server (repeatable); other pages get HTTP 403.")
@click.option("--insecure", is_flag=True, help="Listen beyond loopback without a key (anyone who reaches the port "
              "can use the model).")
def llm_serve(model, host, port, api_key_env, allowed_hosts, cors_origins, insecure) -> None:
    """Serve the local model at /v1/chat/completions and /v1/models (any OpenAI client works).

    \b
    Example:
      factweave llm serve --port 8000 &
      factweave web search "Who founded Zorblax Station?" --rerank --base-url http://127.0.0.1:8000/v1
    """
    require("serve", "factweave llm serve")
    # lazy: the [serve] extra (required above); agent.serve pulls FastAPI and torch
    from ..http.origins import OriginPolicy, refuse_if_exposed
    from ..serve import run

    api_key = os.environ.get(api_key_env) or None
    refuse_if_exposed(host, api_key, insecure)  # before the model loads
    run(LocalChat(model), host=host, port=port, api_key=api_key, origins=OriginPolicy.of(allowed_hosts, cors_origins),
        insecure=insecure)
