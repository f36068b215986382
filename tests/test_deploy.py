"""deploy/ (docs/deploy.md): the Docker Compose deployment, checked without Docker (none here) for
what a user relies on when running it:

- every ``factweave`` command in it parses with the real command line (each option exists, each
  value is one its type takes), and the two ``serve`` commands go through ``serve``'s own checks
  with the environment compose gives them (up to where the server would start);
- the two workers are one service under two names, and each reaches the vLLM server by the name
  and port it serves on, with the key it asks for, on the tree it holds;
- the init jobs build what the servers read: the tree file they mount, the web in the stores and
  the folder the workers use;
- every ``${VAR}`` has its line in deploy/.env.example (and no line there is unused), which holds
  no secret;
- nginx's upstream is exactly the two workers, streaming unbuffered;
- nothing but the balancer listens beyond the host.

The values come from deploy/.env.example, substituted as compose does.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import click
import pytest
import yaml  # PyYAML, a test dependency (pyproject.toml)

from agent.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
ENV_EXAMPLE = DEPLOY / ".env.example"
NGINX = DEPLOY / "nginx.conf"
WORKERS = ("worker-1", "worker-2")
BALANCER = "balancer"
#: Variables compose reads itself rather than through ``${...}`` in the file.
COMPOSE_OWN = {"COMPOSE_PROFILES"}
#: What may differ between the two workers.
NAMES = {"hostname", "container_name"}

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
                  r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)")
_ESCAPED = "\x00"  # what ``$$`` (a literal dollar for the container's shell) stands for meanwhile


# -- reading the files as compose and nginx do -------------------------------------------------------

def env_example() -> dict[str, str]:
    """``KEY=VALUE`` lines of deploy/.env.example (comments and blank lines skipped)."""
    values = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f"{ENV_EXAMPLE.name}: {line!r} is not NAME=VALUE"
            values[name.strip()] = value.strip()
    return values


def used_variables(text: str) -> set[str]:
    """The variables a compose file substitutes (``$$`` is a literal dollar, not one)."""
    text = text.replace("$$", _ESCAPED)
    return {m["name"] or m["bare"] for m in _VAR.finditer(text)}


def interpolate(value, env: dict[str, str]):
    """``value`` (a string, list or mapping from the YAML) with compose's substitution applied."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        name = m["name"] or m["bare"]
        op, arg = m["op"], m["arg"]
        got = env.get(name)
        if op in (":-", "-"):
            return got if got or (op == "-" and got is not None) else arg
        if op in (":?", "?"):
            assert got or (op == "?" and got is not None), f"${{{name}}} is required: {arg}"
            return got
        assert got is not None, f"${{{name}}} has no value in {ENV_EXAMPLE.name}"
        return got

    return _VAR.sub(one, value.replace("$$", _ESCAPED)).replace(_ESCAPED, "$")


def compose(env: dict[str, str] | None = None) -> dict:
    """deploy/compose.yaml as compose reads it with ``env`` (YAML anchors and ``<<`` merged)."""
    return interpolate(yaml.safe_load(COMPOSE.read_text(encoding="utf-8")), env_example() if env is None else env)


def services() -> dict[str, dict]:
    return compose()["services"]


def factweave_commands() -> dict[str, list[str]]:
    """Each service's ``factweave ...`` command, its arguments as a list (the file's form)."""
    commands = {}
    for name, service in services().items():
        command = service.get("command")
        if isinstance(command, str):
            assert "factweave" not in command, f"{name}: give its factweave command as a list of arguments"
            continue
        if command and command[0] == "factweave":
            commands[name] = [str(a) for a in command[1:]]
    return commands


def option(args: list[str], name: str, *, all_of: bool = False):
    """The value(s) of ``name`` in ``args`` (``--name value`` or ``--name=value``)."""
    values = []
    for i, arg in enumerate(args):
        if arg == name:
            values.append(args[i + 1])
        elif arg.startswith(name + "="):
            values.append(arg.split("=", 1)[1])
    if all_of:
        return values
    assert len(values) == 1, f"{name} given {len(values)} times in {args}"
    return values[0]


def mounts(service: dict) -> dict[str, str]:
    """Where each volume of ``service`` is mounted: {target: source}."""
    out = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            out[volume["target"]] = volume.get("source", "")
        else:
            source, _, rest = volume.partition(":")
            out[rest.split(":")[0]] = source
    return out


def mounted_from(service: dict, path: str) -> str:
    """The volume (or host folder) ``path`` in ``service`` lies on."""
    best = max((t for t in mounts(service) if path == t or path.startswith(t.rstrip("/") + "/")), key=len,
               default=None)
    assert best is not None, f"{path} is on no volume of the service (it would not outlive the container)"
    return mounts(service)[best]


def nginx_conf() -> str:
    """deploy/nginx.conf without its comments."""
    return "\n".join(line.split("#", 1)[0] for line in NGINX.read_text(encoding="utf-8").splitlines())


def resolve(args: list[str]) -> tuple[click.Command, list[str]]:
    """The (sub)command ``factweave ARGS`` runs and the arguments left for it."""
    command, rest = cli, list(args)
    while isinstance(command, click.Group):
        assert rest, f"factweave {' '.join(args)}: no subcommand"
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, f"factweave {' '.join(args)}: no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    return command, rest


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No factweave setting, config file or key from this machine: the service's environment alone."""
    for name in list(os.environ):
        if name.startswith(("FACTWEAVE_", "OPENAI_", "PINECONE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)

    def apply(service: dict) -> None:
        environment = service.get("environment", {})
        if isinstance(environment, list):
            environment = dict(e.split("=", 1) for e in environment)
        for name, value in environment.items():
            monkeypatch.setenv(name, "" if value is None else str(value))
    return apply


# -- the commands ------------------------------------------------------------------------------------

def test_the_deployment_has_its_services():
    assert {"vllm", "neo4j", "pinecone", *WORKERS, BALANCER, "init-index", "init-web"} <= set(services())
    assert set(factweave_commands()) == {"vllm", *WORKERS, "init-index", "init-web"}


@pytest.mark.parametrize("service", ["vllm", *WORKERS, "init-index", "init-web"])
def test_a_factweave_command_parses_with_the_real_cli(service, monkeypatch):
    """Each option exists and each value is one the option takes (choices, numbers in range);
    only whether a path exists is not asked: the paths are the containers'."""
    command, rest = resolve(factweave_commands()[service])
    for param in command.params:
        if isinstance(param.type, click.Path):
            monkeypatch.setattr(param.type, "exists", False)
    ctx = command.make_context(command.name, rest)  # raises on an unknown option, a bad value, extra arguments
    assert not ctx.args


class _Stop(Exception):
    """Raised where ``factweave serve`` would start serving."""


def test_the_vllm_server_passes_serves_checks_and_takes_the_workers_requests(clean_env, monkeypatch):
    """``factweave serve --engine vllm`` as compose runs it, up to the exec into vLLM: its usage
    rules and engine args pass, and the server it would start lets the workers in (their Host, key
    and request size)."""
    import agent.serve.vllm_server as vllm_server
    from agent.decoding.rule_args import MAX_FACTS_CHARS
    from agent.http.origins import refuse_if_exposed

    started = {}

    def check(serve, api_key, insecure):  # all of check_vllm_serve but vLLM and the index file (the container's)
        vllm_server.refuse_own_options(serve.engine_args)
        refuse_if_exposed(serve.host, api_key, insecure)

    def start(serve, api_key, insecure=False):
        started.update(serve=serve, api_key=api_key, insecure=insecure)
        raise _Stop

    monkeypatch.setattr(vllm_server, "check_vllm_serve", check)
    monkeypatch.setattr(vllm_server, "exec_vllm_serve", start)
    everything = services()
    clean_env(everything["vllm"])
    with pytest.raises(_Stop):
        cli.main(["serve", *factweave_commands()["vllm"][1:]], standalone_mode=False)
    serve = started["serve"]
    assert serve.host == "0.0.0.0" and not started["insecure"]
    for worker in WORKERS:
        url = urlsplit(option(factweave_commands()[worker], "--engine-url"))
        assert url.hostname in serve.allowed_hosts, f"{worker} calls it {url.hostname}: its Host check would refuse"
        assert started["api_key"] == everything[worker]["environment"]["FACTWEAVE_ENGINE_KEY"], \
            f"{worker}'s FACTWEAVE_ENGINE_KEY is not the server's FACTWEAVE_API_KEY"
    # A worker's request: the prompt as token ids (up to 7 digits and ", " each), up to
    # MAX_FACTS_CHARS of facts (\\uXXXX-escaped: up to 12 bytes a character), and the rest.
    model_len = int(option(list(serve.engine_args), "--max-model-len"))
    assert serve.max_request_bytes >= 12 * MAX_FACTS_CHARS + 8 * model_len + 65536, \
        "--max-request-bytes: a worker's request for a long prompt or a full per-question tree would get 413"


@pytest.mark.parametrize("worker", WORKERS)
def test_a_worker_passes_serves_checks_with_its_environment(worker, clean_env, monkeypatch):
    """``factweave serve --engine remote`` as compose runs it, up to where it would start serving:
    its options, usage rules and environment make valid settings, which name the vLLM server,
    the stores and the files the rest of the deployment provides."""
    import agent.cli.serve as serve_cli

    got, load_settings = {}, serve_cli.load_settings

    def settings_of(*args, **kwargs):
        got["settings"] = load_settings(*args, **kwargs)
        return got["settings"]

    def supervise(name):  # where the server would start: a child process, the model, the socket
        raise _Stop

    monkeypatch.setattr(serve_cli, "load_settings", settings_of)
    monkeypatch.setattr(serve_cli, "supervise", supervise)
    everything = services()
    clean_env(everything[worker])
    with pytest.raises(_Stop):
        cli.main(factweave_commands()[worker], standalone_mode=False)
    settings = got["settings"]
    vllm_args = factweave_commands()["vllm"]
    assert settings.engine == "remote"
    url = urlsplit(settings.engine_url)
    assert url.hostname == "vllm" and url.port == int(option(vllm_args, "--port")), \
        f"--engine-url {settings.engine_url}: the vllm service serves on vllm:{option(vllm_args, '--port')}"
    assert settings.model == option(vllm_args, "--model"), "the worker and the server must run one model (tokenizer)"
    # the whole-KB tree: the server's own file, on the same volume
    assert str(settings.index) == option(vllm_args, "--index")
    index = str(settings.index)
    assert mounted_from(everything[worker], index) == mounted_from(everything["vllm"], index)
    # the stores: the neo4j service with its password, Pinecone
    graph = urlsplit(settings.graph_uri)
    assert graph.hostname == "neo4j" and graph.port == 7687
    assert everything["neo4j"]["environment"]["NEO4J_AUTH"] == f"neo4j/{settings.graph_password.get_secret_value()}"
    assert settings.vectors == "pinecone" and settings.pinecone_index and settings.pinecone_host
    assert settings.api_key is not None and settings.host == "0.0.0.0"


def test_the_two_workers_are_one_service_under_two_names():
    everything = services()
    one, two = ({k: v for k, v in everything[w].items() if k not in NAMES} for w in WORKERS)
    assert one == two, "worker-1 and worker-2 differ beyond their names"
    assert [everything[w].get("hostname", w) for w in WORKERS] == list(WORKERS)


def test_the_init_jobs_build_what_the_servers_read():
    everything = services()
    commands = factweave_commands()
    # the fact tree: written where the vLLM server reads it, for its model, on the volume it mounts
    index_args, vllm_args = commands["init-index"], commands["vllm"]
    assert commands["init-index"][:2] == ["index", "build"] and option(index_args, "--backend") == "disk"
    assert option(index_args, "--out") == option(vllm_args, "--index")
    assert option(index_args, "--model") == option(vllm_args, "--model")
    assert mounted_from(everything["init-index"], option(index_args, "--out")) == \
        mounted_from(everything["vllm"], option(vllm_args, "--index"))
    # the web: in the folder the workers open, in the stores they read
    web_args = commands["init-web"]
    assert web_args[:2] == ["web", "build"]
    for worker in WORKERS:
        assert option(web_args, "--web") == option(commands[worker], "--web")
        assert mounted_from(everything["init-web"], option(web_args, "--web")) == \
            mounted_from(everything[worker], option(commands[worker], "--web"))
        stores = {k: v for k, v in everything[worker]["environment"].items()
                  if k.startswith(("FACTWEAVE_GRAPH_", "FACTWEAVE_VECTORS", "FACTWEAVE_PINECONE_", "PINECONE_"))}
        assert len(stores) >= 6 and stores.items() <= everything["init-web"]["environment"].items(), \
            f"init-web builds the web into other stores than {worker} reads"


# -- the keys ----------------------------------------------------------------------------------------

def test_every_variable_has_its_line_in_the_env_example():
    used, listed = used_variables(COMPOSE.read_text(encoding="utf-8")), set(env_example())
    assert not used - listed, f"used in compose.yaml, missing from .env.example: {sorted(used - listed)}"
    unused = listed - used - COMPOSE_OWN
    assert not unused, f"in .env.example, used nowhere: {sorted(unused)}"


def test_the_env_example_holds_no_secret():
    for name, value in env_example().items():
        if re.search(r"KEY|PASSWORD|TOKEN|SECRET", name):
            assert value in ("", "pclocal") or value.startswith("change-me"), f"{name} looks like a real secret"


# -- the balancer ------------------------------------------------------------------------------------

def test_the_balancer_sends_to_exactly_the_two_workers_unbuffered():
    conf = nginx_conf()
    upstreams = dict(re.findall(r"upstream\s+(\S+)\s*\{(.*?)\}", conf, re.S))
    assert len(upstreams) == 1, "nginx.conf: one upstream, the workers"
    (name, body), = upstreams.items()
    servers = re.findall(r"^\s*server\s+([^\s;]+)", body, re.M)
    commands = factweave_commands()
    assert sorted(servers) == sorted(f"{w}:{option(commands[w], '--port')}" for w in WORKERS)
    assert not re.search(r"^\s*(ip_hash|hash|least_conn|random)\b", body, re.M), "round robin: no other method"
    assert re.search(rf"proxy_pass\s+http://{re.escape(name)}\s*;", conf)
    assert re.search(r"proxy_buffering\s+off\s*;", conf), "streamed replies would wait in nginx's buffers"
    assert not re.search(r"proxy_buffering\s+on\s*;", conf)


def test_nothing_but_the_balancer_listens_beyond_the_host():
    beyond = set()
    for name, service in services().items():
        assert service.get("network_mode") != "host", f"{name} shares the host's network"
        for port in service.get("ports", []):
            if isinstance(port, dict):
                host_ip = port.get("host_ip", "")
            else:
                parts = str(port).rsplit(":", 2)
                host_ip = parts[0] if len(parts) == 3 else ""
            if host_ip.strip("[]") not in ("127.0.0.1", "::1"):
                beyond.add(name)
    assert beyond == {BALANCER}
