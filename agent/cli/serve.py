"""``factweave serve``: the agent, and the local model it runs on, as an OpenAI-compatible server."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from ..extras import require
from ..llm.client import LocalChat
from ..settings import load_settings
from ..supervisor import supervise
from .options import agent_options, serve_engine_option


@click.command("serve")
@agent_options(engine=serve_engine_option)
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1, loopback only).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (default 8000).")
@click.option("--max-concurrency", type=click.IntRange(1, 64), default=None,
              help="Generations at once (default 2).")
@click.option("--max-queue", type=click.IntRange(0, 1024), default=None,
              help="Requests waiting beyond those; more get HTTP 429 (default 8).")
@click.option("--max-request-bytes", type=click.IntRange(256), default=None,
              help="Largest request body; larger get HTTP 413 (default 65536).")
@click.option("--allow-host", "allowed_hosts", multiple=True,
              help="A host name requests may name beyond loopback and IP addresses (repeatable).")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="A web-page origin that may call the server, e.g. http://localhost:3000 (repeatable); "
                   "requests from other pages get HTTP 403.")
@click.option("--insecure", is_flag=True, help="Listen beyond loopback without FACTWEAVE_API_KEY (anyone who reaches "
              "the port can use the model).")
@click.option("--index", "index", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="--engine vllm: the fact tree (factweave index build --backend disk --model MODEL --out PATH).")
@click.option("--engine-arg", "engine_arg", multiple=True,
              help="--engine vllm: one more argument for vLLM's server, as is (e.g. --engine-arg=--tensor-parallel-size=2; "
                   "repeatable); one setting what factweave sets (--host, --port, --api-key, the model, ...) is refused.")
def serve_command(config, model, engine, engine_url, web_dir, tree, rerank, host, port, max_concurrency, max_queue,
                  max_request_bytes, allowed_hosts, cors_origins, insecure, index, engine_arg) -> None:
    """Serve the agent (model `factweave`) and the plain local model (model id: its name) at
    /v1/chat/completions and /v1/models; any OpenAI client works. Clients must send the bearer
    key in FACTWEAVE_API_KEY when it is set.

    The agent answers the last user message; its reply carries the extra field `factweave`
    ({answer, supported, facts, trace}; in a stream, in the last chunk).

    \b
    Example:
      factweave serve --model qwen2.5-coder-0.5b --port 8000
      curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
        -d '{"model": "factweave", "messages": [{"role": "user", "content": "Who founded Zorblax Station?"}]}'
    """
    require("serve", "factweave serve")
    if engine == "vllm":
        if engine_url:
            raise click.UsageError("--engine-url is for --engine remote (a worker of the vLLM server --engine vllm starts)")
        _serve_vllm(config, model, web_dir, tree, rerank, host, port, max_concurrency, max_request_bytes,
                    allowed_hosts, cors_origins, insecure, index, engine_arg, max_queue)
        return
    if index is not None or engine_arg:
        raise click.UsageError("--index and --engine-arg are for --engine vllm")
    # lazy: the [serve] extra (required above); agent.runtime and agent.serve pull torch and FastAPI
    from ..runtime import load_settings_model, open_agent
    from ..http.origins import OriginPolicy, refuse_if_exposed
    from ..serve import ServerLimits, bind_socket, run

    settings = load_settings(config, model=model, engine=engine, engine_url=engine_url, web=web_dir, tree=tree,
                             rerank=rerank, host=host, port=port,
                             max_concurrency=max_concurrency, max_queue=max_queue,
                             max_request_bytes=max_request_bytes, allowed_hosts=list(allowed_hosts) or None,
                             cors_origins=list(cors_origins) or None)
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    # Refuse an exposed bind and bind first: both fail in one line before the model loads.
    refuse_if_exposed(settings.host, api_key, insecure)
    supervise("serve")  # from here on in a child process, restarted should it crash (agent/supervisor.py)
    sock = bind_socket(settings.host, settings.port)
    try:
        loaded = load_settings_model(settings)
        with open_agent(settings, loaded=loaded) as fact_agent:
            run([fact_agent, LocalChat(loaded)], settings.host, settings.port, api_key,
                limits=ServerLimits.from_settings(settings), sock=sock,
                origins=OriginPolicy.of(settings.allowed_hosts, settings.cors_origins), insecure=insecure)
    finally:
        sock.close()


def _serve_vllm(config, model, web_dir, tree, rerank, host, port, max_concurrency, max_request_bytes, allowed_hosts,
                cors_origins, insecure, index, engine_arg, max_queue) -> None:
    """``--engine vllm``: vLLM's server with the rule inside (:mod:`agent.serve.vllm_server`)."""
    from ..models import hf_source
    from ..serve.vllm_server import VllmServe, check_vllm_serve, engine_args, exec_vllm_serve

    if web_dir is not None or tree is not None or rerank is not None or max_queue is not None:
        raise click.UsageError("--web, --tree, --rerank and --max-queue are not for --engine vllm: it serves the model "
                               "under the rule over --index (the agent's retrieval runs on transformers and llama.cpp)")
    if index is None:
        raise click.UsageError("--engine vllm needs --index: a fact tree built for the model's tokenizer "
                               "(factweave index build --backend disk --model MODEL --out kb.fidx)")
    settings = load_settings(config, host=host, port=port, max_concurrency=max_concurrency,
                             max_request_bytes=max_request_bytes, allowed_hosts=list(allowed_hosts) or None,
                             cors_origins=list(cors_origins) or None)
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    name = model or settings.model
    serve = VllmServe(name, index, host=settings.host, port=settings.port,
                      max_concurrency=settings.max_concurrency, max_request_bytes=settings.max_request_bytes,
                      allowed_hosts=tuple(settings.allowed_hosts or ()), cors_origins=tuple(settings.cors_origins or ()),
                      engine_args=engine_args(engine_arg), name=name)
    check_vllm_serve(serve, api_key, insecure)  # before a preset is converted for it
    exec_vllm_serve(replace(serve, model=hf_source(name, settings.cache_dir())), api_key, insecure)
