"""A knowledge web's uploads changed through one door and seen through every other: a removal cut
short is out of the web's search, every door finishes what was cut short when it opens the web, a
running agent follows uploads and removals made elsewhere, and a removal is possible while an
upload cannot be completed. Real embedded ArcadeDB, real embeddings, SmolLM2 where an agent answers."""
from __future__ import annotations

import threading

import pytest

from agent.errors import FactweaveError
from agent.knowledge.facts import verbalize
from agent.web.web import KnowledgeWeb
from agent.web.workspace import Workspace


@pytest.fixture()
def space(tmp_path, graph, graph_server, embedder):
    """A workspace on a fresh web on the (emptied) test graph server; ``space.reopen()``: another
    handle on that web (closed after the test)."""
    opened = []

    def reopen() -> KnowledgeWeb:
        opened.append(KnowledgeWeb.open(tmp_path / "web", embedder=embedder, graph_uri=graph_server.uri,
                                        graph_user=graph_server.user, graph_password=graph_server.password,
                                        graph_database=graph_server.database))
        return opened[-1]

    workspace = Workspace(reopen())
    workspace.reopen = reopen
    yield workspace
    for web in opened:
        web.close()


def _fail_once(target, method: str) -> None:
    """Make ``target.method`` fail once with a full disk (as a kill leaves the step), then work."""
    original = getattr(target, method)

    def fail_once(*args, **kwargs):
        setattr(target, method, original)
        raise OSError(28, "No space left on device")

    setattr(target, method, fail_once)


def _found(web, question: str) -> list[str]:
    return [hit.text for method in ("graph", "keywords") for hit in web.search(question, 10, method=method).hits]


def test_a_removal_cut_short_offers_none_of_its_facts_to_a_search(space, tmp_path):
    """A removal cut short before the web's part (only the uploads' journal names the source) and
    one cut short inside it (the web's journal names its facts): until it is finished the web's
    search (both methods, any handle) finds nothing of the source, and still finds the others."""
    docks = tmp_path / "docks.tsv"
    docks.write_text("Quillon Dock\tbuilt by\tAsha Merrow\n")
    quay = tmp_path / "quay.md"
    quay.write_text("# Velmora Quay\n\nVelmora Quay was paved by Ilse Varga in 1903.\n")
    bells = tmp_path / "bells.tsv"
    bells.write_text("Vessa Bell\tcast by\tIda Holm\n")
    space.add_files([docks, quay, bells])
    dock_fact = verbalize("Quillon Dock", "built by", "Asha Merrow")
    assert dock_fact in _found(space.web, "Who built Quillon Dock?")  # (so the checks below can fail)
    assert any("Ilse Varga" in text for text in _found(space.web, "Who paved Velmora Quay?"))

    # Cut short before anything was deleted: the uploads' journal names the sources.
    _fail_once(space, "_store_uploaded")
    with pytest.raises(FactweaveError, match="the removal stopped"):
        space.remove_sources([docks.name, quay.name])
    del space._store_uploaded
    for web in (space.web, space.reopen()):  # this handle, and another (another process's, as `serve`'s)
        assert dock_fact not in _found(web, "Who built Quillon Dock?")
        assert not any("Ilse Varga" in text for text in _found(web, "Who paved Velmora Quay?"))
        assert verbalize("Vessa Bell", "cast by", "Ida Holm") in _found(web, "Who cast Vessa Bell?")

    # Cut short inside the web's removal (its journal names the facts, the vectors still hold them).
    space.recover()  # (finishes the one above)
    space.add_files([docks])
    assert dock_fact in _found(space.web, "Who built Quillon Dock?")
    _fail_once(space.web.fact_vectors, "delete")
    with pytest.raises(FactweaveError, match="the removal stopped"):
        space.remove_sources([docks.name])
    del space.web.fact_vectors.delete
    (space.folder / "removing.json").unlink()  # only the web's own journal left
    assert (space.web.folder / "removing.json").exists()
    assert dock_fact not in _found(space.web, "Who built Quillon Dock?")
    assert verbalize("Vessa Bell", "cast by", "Ida Holm") in _found(space.web, "Who cast Vessa Bell?")


def test_a_removal_goes_on_while_an_upload_cannot_be_completed_and_removing_it_drops_it(
        space, tmp_path, closed_port_url, caplog):
    """An upload whose documents cannot be decomposed (the decomposer's endpoint is down) stays
    pending: a later upload stops with one line naming it and how to clear it, and adds nothing; a
    removal of another source goes on (saying the upload is still pending); removing the pending
    upload's file drops it, and the next upload is added."""
    from agent.llm.client import OpenAIChat
    from agent.web.decompose import LLMDecomposer

    space.decomposer = lambda: LLMDecomposer(OpenAIChat("decomposer", base_url=closed_port_url, max_retries=0,
                                                        timeout=2))
    docks = tmp_path / "docks.tsv"
    docks.write_text("Quillon Dock\tbuilt by\tAsha Merrow\n")
    space.add_files([docks])
    report_md = tmp_path / "report.md"
    report_md.write_text("# Velmora Quay\n\nVelmora Quay was paved by Ilse Varga in 1903.\n")
    with pytest.raises(FactweaveError, match=r"the upload stopped"):
        space.add_files([report_md])

    bells = tmp_path / "bells.tsv"
    bells.write_text("Vessa Bell\tcast by\tIda Holm\n")
    with pytest.raises(FactweaveError) as blocked:
        space.add_files([bells])
    line = str(blocked.value)
    assert "\n" not in line
    assert "an earlier upload (report.md) was cut short and cannot be completed yet" in line
    assert "nothing of this upload was added" in line and "remove report.md" in line
    assert not any("Vessa Bell" in fact.text for fact in space.uploaded_facts())

    report = space.remove_sources([docks.name])  # a removal is always possible
    assert report["uploaded_removed"] == 1 and "report.md" in report["pending"]
    assert not any("Quillon Dock" in fact.text for fact in space.uploaded_facts())
    assert "report.md" in {row["source"] for row in space.sources() if row["pending"]}

    report = space.remove_sources([report_md.name])  # gives the pending upload up
    assert report["pending_dropped"] == ["report.md"] and "pending" not in report
    assert not space.pending_files() and "report.md" not in {row["source"] for row in space.sources()}
    assert space.add_files([bells])["new_facts"] == 1


@pytest.fixture()
def own_web(tmp_path, embedder):
    """A web folder of its own (its embedded graph server started by whoever opens it), holding
    one triple, and the settings of an agent answering on it from the whole-KB tree."""
    from agent.settings import load_settings

    folder = tmp_path / "web"
    seed = tmp_path / "seed.tsv"
    seed.write_text("Velmora\tmayor\tOdile Fenn\n")
    with KnowledgeWeb.open(folder, embedder=embedder) as web:
        Workspace(web).add_files([seed])

    def settings(cache_dir, **changes):
        return load_settings(**{"model": "smollm2-135m", "cache": cache_dir, "max_tokens": 64, "web": folder,
                                "tree": "kb", "rerank": False, **changes})

    return folder, settings


@pytest.mark.model
def test_every_door_finishes_what_was_cut_short_when_it_opens(own_web, smollm, cache_dir, embedder, tmp_path):
    """A removal and an upload cut short (a failure, as a kill leaves them) are finished by the
    next agent opened on the web (`ask`, `serve`, MCP, LangChain open it so; from the whole-KB
    tree, which searches no web, and from both trees), not only by the UI."""
    from agent.runtime import open_agent

    folder, settings = own_web
    uploads = folder / "uploads"
    lantern = tmp_path / "lanterns.tsv"
    lantern.write_text("Varro Lantern\tbuilt by\tOren Task\n")

    def sources() -> set[str]:
        with KnowledgeWeb.open(folder, embedder=embedder) as web:
            return {row["source"] for row in Workspace(web).sources()}

    with KnowledgeWeb.open(folder, embedder=embedder) as web:
        space = Workspace(web)
        _fail_once(space, "_store_uploaded")
        with pytest.raises(FactweaveError, match="the removal stopped"):
            space.remove_sources(["seed.tsv"])
    assert (uploads / "removing.json").exists()
    with open_agent(settings(cache_dir), loaded=smollm, progress=False):
        assert not (uploads / "removing.json").exists()
    assert "seed.tsv" not in sources()

    with KnowledgeWeb.open(folder, embedder=embedder) as web:
        space = Workspace(web)
        _fail_once(space, "_save_uploaded")
        with pytest.raises(FactweaveError, match="the upload stopped"):
            space.add_files([lantern])
    assert (uploads / "pending").exists() and "lanterns.tsv" not in (uploads / "facts.jsonl").read_text()
    with open_agent(settings(cache_dir, tree="both"), loaded=smollm, progress=False):
        assert not (uploads / "pending").exists()
    assert "lanterns.tsv" in sources()
    assert "lanterns.tsv" in (uploads / "facts.jsonl").read_text()


@pytest.mark.model
def test_a_running_agent_stops_stating_what_another_door_removes_and_states_what_it_uploads(
        own_web, smollm, cache_dir, embedder, tmp_path):
    """One agent opened as `serve` and MCP open it, kept running; another handle on its web (the
    UI, `factweave web remove` / `web add`) removes an uploaded file: the next answers, two at once
    (serve answers several together), no longer state its fact; uploads it again: the next does."""
    from agent.runtime import open_agent

    folder, settings = own_web
    question = "Who built Varro Lantern?"
    fact = verbalize("Varro Lantern", "built by", "Oren Task")
    lantern = tmp_path / "lanterns.tsv"
    lantern.write_text("Varro Lantern\tbuilt by\tOren Task\n")
    with KnowledgeWeb.open(folder, embedder=embedder) as web:
        Workspace(web).add_files([lantern])

    def stated(agent) -> set[str]:
        return {f["text"] for f in agent.answer(question).facts}

    with open_agent(settings(cache_dir), loaded=smollm, progress=False) as agent:
        assert fact in stated(agent)  # (so the checks below can fail)
        with KnowledgeWeb.open(folder, embedder=embedder) as web:
            space = Workspace(web)
            space.remove_sources([lantern.name])
            replies: list[set[str]] = []
            threads = [threading.Thread(target=lambda: replies.append(stated(agent))) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            assert len(replies) == 2 and not any(fact in reply for reply in replies), replies
            space.add_files([lantern])
            assert fact in stated(agent)


@pytest.mark.model
def test_the_ui_follows_what_another_door_uploads_and_removes(ui_runtime, embedder, tmp_path):
    """The UI's runtime, kept running, while `factweave web add` / `web remove` (another handle on
    its web) upload a file and remove it: its next answers state the fact, then no more."""
    from ui.runtime import AskOptions

    def stated(question: str) -> str:
        reply = list(ui_runtime.stream(question, AskOptions(tree="kb", beams=1)))[-1]
        return "\n".join(f["text"] for f in reply["facts"])

    fact = verbalize("Tarrow Lantern", "built by", "Oren Task")
    lantern = tmp_path / "tarrow.tsv"
    lantern.write_text("Tarrow Lantern\tbuilt by\tOren Task\n")
    assert fact not in stated("Who built Tarrow Lantern?")
    with KnowledgeWeb.open(ui_runtime.web.folder, embedder=embedder) as web:
        space = Workspace(web)
        space.add_files([lantern])
        assert fact in stated("Who built Tarrow Lantern?")
        space.remove_sources([lantern.name])
    assert fact not in stated("Who built Tarrow Lantern?")
    assert lantern.name not in {row["source"] for row in ui_runtime.sources()}
