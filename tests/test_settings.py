"""The one settings object: arguments > environment > TOML file > defaults, with clear errors."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

from agent.errors import FactweaveError
from agent.settings import DEFAULT_MODEL, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("FACTWEAVE_") or name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no ./factweave.toml from elsewhere
    monkeypatch.setenv("HOME", str(tmp_path))


def test_precedence_arguments_environment_file_defaults(tmp_path, monkeypatch):
    config = tmp_path / "fw.toml"
    config.write_text('tree = "question"\nk = 5\nbeams = 2\nmodel = "smollm2-135m"\n')
    monkeypatch.setenv("FACTWEAVE_K", "7")
    s = load_settings(config, beams=3)
    assert (s.tree, s.k, s.beams, s.model) == ("question", 7, 3, "smollm2-135m")
    assert load_settings().model == DEFAULT_MODEL and load_settings().tree == "both"
    # ./factweave.toml is found without --config, $FACTWEAVE_CONFIG wins over it
    monkeypatch.delenv("FACTWEAVE_K")
    (tmp_path / "factweave.toml").write_text("k = 11\n")
    assert load_settings().k == 11
    monkeypatch.setenv("FACTWEAVE_CONFIG", str(config))
    assert load_settings().k == 5 and load_settings().tree == "question"


def test_openai_and_secret_settings_keep_their_usual_names(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("FACTWEAVE_GRAPH_PASSWORD", "pw")
    s = load_settings()
    assert s.openai_base_url == "http://127.0.0.1:9/v1"
    assert s.openai_api_key.get_secret_value() == "sk-secret-value"
    shown = s.public()
    assert shown["openai_api_key"] == "***" and shown["graph_password"] == "***"
    assert "sk-secret-value" not in repr(s) and "sk-secret-value" not in str(shown)


def test_bad_values_and_unknown_keys_are_one_line_errors(tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text("treee = 'kb'\n")
    with pytest.raises(FactweaveError, match=r"^setting treee: Extra inputs are not permitted \(file .*bad.toml\)$"):
        load_settings(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("tree = \n")
    with pytest.raises(FactweaveError, match=r"^configuration file .*broken.toml: "):
        load_settings(broken)
    with pytest.raises(FactweaveError, match="configuration file .*missing.toml not found"):
        load_settings(tmp_path / "missing.toml")
    monkeypatch.setenv("FACTWEAVE_TREE", "forest")
    with pytest.raises(FactweaveError, match="setting tree: Input should be 'kb', 'question', 'both' or 'kb-first'"):
        load_settings()


def test_vllm_as_the_agents_engine_says_where_vllm_runs(tmp_path, monkeypatch):
    """vLLM serves the model under the rule (`serve --engine vllm`); the agent's engine setting
    and its commands' --engine name that, not a bare list of choices."""
    config = tmp_path / "vllm.toml"
    config.write_text('engine = "vllm"\n')
    with pytest.raises(FactweaveError, match=r"^setting engine: .*factweave serve --engine vllm.* the agent runs on "
                                             r"transformers, llama.cpp or remote \(--engine remote --engine-url URL: "
                                             r"that server\) \(file .*vllm.toml\)$"):
        load_settings(config)
    proc = subprocess.run([sys.executable, "-m", "agent.cli", "ask", "Where was Laurie Graff born?", "--engine",
                           "vllm"], capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and "factweave serve --engine vllm" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_remote_engine_without_an_address_or_with_none_answering_is_one_line_naming_how_to_start_it():
    """``--engine remote`` needs a server (`factweave serve --engine vllm`): without ``--engine-url``,
    and with one where nothing answers, the agent's commands stop in one line before loading a
    model (tests/test_remote_engine.py runs a real one where vLLM is installed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens there once the socket is closed
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTWEAVE_ENGINE")}
    said = {}
    for name, extra in (("none", []), ("closed", ["--engine-url", f"http://127.0.0.1:{closed}"])):
        proc = subprocess.run([sys.executable, "-m", "agent.cli", "ask", "Where was Laurie Graff born?", "--engine",
                               "remote", *extra], capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
                              env={**env, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        said[name] = proc.stderr.strip().splitlines()[-1]
    assert "--engine remote needs the server's address: --engine-url URL or FACTWEAVE_ENGINE_URL" in said["none"]
    assert f"the remote engine at http://127.0.0.1:{closed}/v1 does not answer" in said["closed"]
    assert "factweave serve --engine vllm" in said["closed"]


def test_own_kb_without_a_web_answers_from_the_kb(tmp_path):
    assert load_settings().effective_tree() == "both"
    assert load_settings(kb=tmp_path).effective_tree() == "kb"
    assert load_settings(kb=tmp_path, web=tmp_path).effective_tree() == "both"


def test_reranking_defaults_to_an_endpoint_only(monkeypatch):
    """Unset, the agent re-ranks only with a chat endpoint (the local model lost accuracy doing it)."""
    assert load_settings().effective_rerank() is False
    assert load_settings(rerank=True).effective_rerank() is True
    assert load_settings(openai_base_url="http://127.0.0.1:9/v1").effective_rerank() is True
    assert load_settings(openai_base_url="http://127.0.0.1:9/v1", rerank=False).effective_rerank() is False
    monkeypatch.setenv("FACTWEAVE_RERANK", "true")
    assert load_settings().effective_rerank() is True


def test_config_command_prints_a_settings_file_that_reads_back(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTWEAVE_")}
    env.update(PYTHONPATH=str(REPO), FACTWEAVE_TREE="question", FACTWEAVE_API_KEY="k3y", HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "agent.cli", "config"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120, check=True)
    assert 'tree = "question"' in proc.stdout and "k3y" not in proc.stdout
    saved = tmp_path / "saved.toml"
    saved.write_text(proc.stdout)
    s = load_settings(saved)
    assert s.tree == "question" and s.api_key is None  # the masked key is not read back as "***"


def test_the_agent_options_come_from_one_place(tmp_path, monkeypatch):
    """The settings fix the agent's options (file, environment, arguments); a UI session's tree and
    k override them; a bad value or an unknown option is refused where it is set."""
    from agent.pipeline import AgentOptions

    monkeypatch.chdir(tmp_path)
    (tmp_path / "factweave.toml").write_text("max_hops = 1\nk = 7\n")
    monkeypatch.setenv("FACTWEAVE_CHECKS", "false")
    settings = load_settings(tree="question")
    options = settings.agent_options()
    assert options == AgentOptions(tree="question", k=7, max_hops=1, checks=False)
    assert settings.agent_options(tree="kb", k=3) == AgentOptions(tree="kb", k=3, max_hops=1, checks=False)
    with pytest.raises(ValueError, match="tree must be one of"):
        settings.agent_options(tree="forest")
    with pytest.raises(TypeError):
        settings.agent_options(beam_width=3)
