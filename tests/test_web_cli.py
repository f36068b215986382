"""``factweave web ...`` as a user runs it: embedded graph server, local vectors, real subprocesses."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import DATA, REPO

WEB = DATA / "web"


def run(*args: str, cache, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "FACTWEAVE_CACHE": str(cache), "PYTHONPATH": str(REPO), **(env_extra or {})}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FACTWEAVE_WEB"):
        if name not in (env_extra or {}):
            env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600, check=False)


def test_build_search_stats_with_the_embedded_server(tmp_path, cache_dir, openai_server, embedder):
    web = str(tmp_path / "web")
    built = run("web", "build", str(WEB / "corpus.json"), str(WEB / "notes.md"), "--triples",
                str(WEB / "triples.tsv"), "--web", web, "--json", cache=cache_dir)
    assert built.returncode == 0, built.stderr
    report = json.loads(built.stdout)
    assert report["documents"]["documents"] == 3 and report["documents"]["decomposer"] == "sentences-v3"
    assert report["stats"]["facts"] == report["documents"]["facts"] + 2

    again = run("web", "build", str(WEB / "corpus.json"), str(WEB / "notes.md"), "--web", web, "--json",
                cache=cache_dir)
    assert json.loads(again.stdout)["stats"] == report["stats"]

    table = run("web", "search", "Who founded Zorblax Station?", "--web", web, "-k", "3", cache=cache_dir)
    assert table.returncode == 0, table.stderr
    assert "score" in table.stdout and "founded" in table.stdout

    # Re-ranking through the real openai SDK against a real OpenAI-compatible server (local model).
    found = run("web", "search", "Who founded Zorblax Station?", "--web", web, "-k", "5", "--rerank", "--json",
                "--base-url", openai_server, cache=cache_dir)
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    ids = [h["id"] for h in data["hits"]]
    assert data["rerank"]["selected"] and set(data["rerank"]["selected"]) <= set(ids)
    assert data["rerank"]["question_type"] == "plain"
    hit = data["hits"][0]
    assert {"score", "cosine", "degree", "keywords", "provenance", "source_line"} <= set(hit)

    # The full pipeline from the command line: retrieve, per-question tree, constrained answer.
    asked = run("ask", "Who founded Zorblax Station?", "--web", web, "--tree", "question", "--model",
                "smollm2-135m", "--max-tokens", "48", "--json", cache=cache_dir)
    assert asked.returncode == 0, asked.stderr
    reply = json.loads(asked.stdout)
    steps = reply["trace"]["steps"]
    retrieved = {h["text"] for s in steps if s["step"] == "retrieve" for h in s["hits"]}
    assert retrieved and [s for s in steps if s["step"] == "generate"][0]["tree"] == "question"
    assert all(f["text"] in retrieved and reply["text"][f["start"]:f["end"]] == f["text"] for f in reply["facts"])
    assert {"answer", "text", "facts", "timings", "truncated", "trace"} <= set(reply)

    stats = run("web", "stats", "--web", web, "--json", cache=cache_dir)
    assert json.loads(stats.stdout)["facts"] == report["stats"]["facts"]

    # Removing a file given by its path as built: its document and facts go, the rest stays.
    removed = run("web", "remove", str(WEB / "notes.md"), "--web", web, "--json", cache=cache_dir)
    assert removed.returncode == 0, removed.stderr
    gone = json.loads(removed.stdout)
    assert gone["documents"] == 1 and gone["facts"] >= 1
    assert gone["stats"]["documents"] == 2 and gone["stats"]["facts"] == report["stats"]["facts"] - gone["facts"]
    assert gone["stats"]["fact_vectors"] == gone["stats"]["facts"]
    unknown = run("web", "remove", "notes.md", "--web", web, cache=cache_dir)
    assert one_error_line(unknown).startswith("Error: no source named notes.md") and "corpus.json" in unknown.stderr

    # A PDF, an HTML page and a DOCX file added to the web: a question about each finds its fact
    # with its page or heading path.
    from test_documents_formats import PAGE, make_docx, make_pdf

    pdf = make_pdf(tmp_path / "harbour-report.pdf", ["The harbour report covers the year 1903.",
                                                      "The Velmora breakwater was designed by Ilse Varga."])
    html = tmp_path / "guide.html"
    html.write_text(PAGE, encoding="utf-8")
    docx = make_docx(tmp_path / "harbour.docx")
    added = run("web", "build", str(pdf), str(html), str(docx), "--web", web, "--json", cache=cache_dir)
    assert added.returncode == 0, added.stderr
    # Searched in this process (the command's search is checked above; three more processes
    # would load the same embedder three times for nothing new).
    from agent.web.web import KnowledgeWeb

    with KnowledgeWeb.open(web, embedder=embedder) as opened:
        for question, words, where in (("Who designed the Velmora breakwater?", "Ilse Varga", "page 2"),
                                       ("What is the package called on Linux?", "factweave-cli", "Install > Linux"),
                                       ("What guards the northern entrance of the harbour?", "Quillon Vale",
                                        "Lighthouses")):
            hits = [h for h in opened.search(question).hits if words in h.text]
            assert hits and where in hits[0].source, (question, [h.text for h in opened.search(question).hits])
    assert hits[0].provenance["heading"] == "Harbour report > Lighthouses"


def test_add_and_remove_files_as_the_ui_uploads_them(tmp_path, cache_dir):
    """`web add` checks every file whole (a bad row names its file and line, and nothing is added),
    records the facts as uploaded (stated by every agent on the web, from the whole-KB tree too),
    and `web remove` takes them out of the web and of the uploaded facts."""
    from agent.knowledge.facts import verbalize
    from agent.web.workspace import stated_uploads

    web = tmp_path / "web"
    good = tmp_path / "lanterns.tsv"
    good.write_text("Varro Lantern\tbuilt by\tOren Task\nVarro Lantern\tlocated in\tVelmora\n")
    bad = tmp_path / "bells.tsv"
    bad.write_text("Vessa Bell\tcast by\tIda Holm\nVessa Bell\tlocated in\n")
    refused = run("web", "add", str(good), str(bad), "--web", str(web), cache=cache_dir)
    assert "bells.tsv:2" in one_error_line(refused)
    assert not stated_uploads(web)  # neither file: the good one waited for the bad one's check

    added = run("web", "add", str(good), "--web", str(web), "--json", cache=cache_dir)
    assert added.returncode == 0, added.stderr
    report = json.loads(added.stdout)
    assert report["new_facts"] == 2 and report["stats"]["facts"] == 2
    fact = verbalize("Varro Lantern", "built by", "Oren Task")
    assert fact in {f.text for f in stated_uploads(web)}

    removed = run("web", "remove", good.name, "--web", str(web), "--json", cache=cache_dir)
    assert removed.returncode == 0, removed.stderr
    gone = json.loads(removed.stdout)
    assert gone["uploaded_removed"] == 2 and gone["stats"]["facts"] == 0
    assert not stated_uploads(web)


def test_a_file_named_as_part_of_another_source_is_refused_and_that_source_stays(tmp_path, cache_dir):
    """The second security review's request: ``victim.tsv#x.md`` was stored as a source whose
    name reads back as ``victim.tsv`` (a "#" marks a corpus's item), so adding it replaced
    victim.tsv's facts and took its provenance. Refused, by ``web add`` and ``web build`` alike,
    in one line; victim.tsv's facts stay, from victim.tsv."""
    from agent.knowledge.facts import verbalize
    from agent.web.workspace import stated_uploads

    web = tmp_path / "web"
    victim = tmp_path / "victim.tsv"
    victim.write_text("Varro Lantern\tbuilt by\tOren Task\n")
    assert run("web", "add", str(victim), "--web", str(web), cache=cache_dir).returncode == 0
    before = {(f.text, f.source) for f in stated_uploads(web)}
    assert before == {(verbalize("Varro Lantern", "built by", "Oren Task"), "victim.tsv:1")}
    alias = tmp_path / "victim.tsv#x.md"
    alias.write_text("Varro Lantern was built by Ada Quint.\n")
    refused = run("web", "add", str(alias), "--web", str(web), cache=cache_dir)
    assert "victim.tsv#x.md" in one_error_line(refused) and "'victim.tsv'" in one_error_line(refused)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "victim.tsv#y.md").write_text("Varro Lantern was built by Ada Quint.\n")
    built = run("web", "build", str(folder), "--web", str(web), cache=cache_dir)
    assert "victim.tsv#y.md" in one_error_line(built)
    assert {(f.text, f.source) for f in stated_uploads(web)} == before
    listed = run("web", "stats", "--web", str(web), "--json", cache=cache_dir)
    assert listed.returncode == 0, listed.stderr
    stats = json.loads(listed.stdout)
    assert (stats["documents"], stats["facts"]) == (0, 1), stats  # no document came in, no fact went


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``Error: ...`` line of a failed command (progress bars may precede it)."""
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and proc.stderr.rstrip().endswith(errors[0]), proc.stderr
    return errors[0]


def test_errors_are_one_line(tmp_path, cache_dir):
    missing = run("web", "search", "anything", "--web", str(tmp_path / "none"), cache=cache_dir)
    assert "factweave web build" in one_error_line(missing)
    down = run("web", "build", str(WEB / "notes.md"), "--web", str(tmp_path / "w"), "--graph-uri",
               "bolt://127.0.0.1:9", cache=cache_dir)
    assert "bolt://127.0.0.1:9" in one_error_line(down)
    bad = run("web", "build", str(WEB / "rows-bad.jsonl"), "--web", str(tmp_path / "w2"), cache=cache_dir)
    assert "rows-bad.jsonl:2" in one_error_line(bad)
    # The default web is the demo web (built on first use); a web folder of one's own must exist.
    no_web = run("ask", "Who?", "--tree", "question", "--web", str(tmp_path / "none"), "--model", "smollm2-135m",
                 cache=cache_dir)
    assert "factweave web build --web" in one_error_line(no_web)
    mixed = run("ask", "Who?", "--free", "--tree", "question", cache=cache_dir)
    assert mixed.returncode == 2 and "--free" in mixed.stderr
