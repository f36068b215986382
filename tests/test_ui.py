"""The chat UI's parts without a browser: rendering answers and traces, checking uploads, the
shared runtime (uploads into the web and the fact index, nothing lost on a bad file)."""
from __future__ import annotations

import gzip
import json
import re
import zipfile
from html import unescape
from pathlib import Path

import pytest

from agent.errors import FactweaveError

TRIPLE_FACT = {"start": 6, "end": 42, "text": "<Zorblax Station> <located on> <Norvik> .", "tree": "question",
               "fact_id": "abc123", "source": "triples.tsv:1",
               "provenance": {"kind": "triple", "subject": "Zorblax Station", "predicate": "located on",
                              "object": "Norvik", "source": "triples.tsv:1"}}


def _spans(html: str) -> list[str]:
    return [unescape(m) for m in re.findall(r'<mark class="fw-fact"[^>]*>(.*?)</mark>', html)]


def test_attempt_html_highlights_exactly_the_fact_spans_and_escapes_everything():
    from ui.render import attempt_html

    fact = dict(TRIPLE_FACT)
    text = f"Fact: {fact['text']}\nAnswer: Norvik <script>alert(1)</script>"
    fact["start"], fact["end"] = 6, 6 + len(fact["text"])
    html = attempt_html(text, [fact], anchor="a0")
    assert _spans(html) == [fact["text"]]
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<Zorblax" not in html  # the fact's angle brackets are text, not tags
    assert 'href="#fw-fact-a0-0"' in html and 'data-fact-id="abc123"' in html
    title = unescape(re.search(r'title="([^"]*)"', html).group(1))
    assert title.splitlines() == [fact["text"], "triple (Zorblax Station, located on, Norvik) from triples.tsv:1",
                                  "fact id abc123 (per-question tree)"]
    assert "\n" not in html  # one line: Markdown leaves the block alone
    # Free text only: nothing highlighted; a span that does not fit the text is not shown.
    assert _spans(attempt_html("Answer: I don't know.", [])) == []
    assert _spans(attempt_html("short", [fact])) == []


def test_provenance_lines_for_triples_and_documents():
    from ui.render import provenance_line

    assert provenance_line(TRIPLE_FACT) == "triple (Zorblax Station, located on, Norvik) from triples.tsv:1"
    doc = {"text": "Zorblax Station was founded by Mira Quell.", "source": "notes.md [0:42]",
           "provenance": {"kind": "document", "title": "Zorblax Station", "source": "notes.md", "doc_id": "d1",
                          "chunk_id": "c1", "start": 0, "end": 42}}
    assert provenance_line(doc) == "document Zorblax Station, characters 0-42 (notes.md)"
    kb = {"text": "<A> <b> <C> .", "source": "kamel:P19/dev.jsonl:3",
          "provenance": {"kind": "triple", "source": "kamel:P19/dev.jsonl:3", "subject": "A", "predicate": "b",
                         "object": "C"}}
    assert provenance_line(kb) == "triple (A, b, C) from kamel:P19/dev.jsonl:3"


def _plain(html: str) -> str:
    return unescape(re.sub("<[^>]+>", "", html))


def test_answer_header_says_grounded_withheld_or_stopped():
    from ui.render import answer_header

    # The older trace (``supported`` only) and the grounding contract (``grounded``, ``grounding``).
    supported = {"answer": "Norvik", "facts": [TRIPLE_FACT], "trace": {"supported": True}}
    assert "Answer: Norvik" in answer_header(supported) and "grounded in 1 fact<" in answer_header(supported)
    grounded = {"answer": "guitar", "facts": [TRIPLE_FACT, TRIPLE_FACT],
                "trace": {"supported": True, "grounded": True,
                          "grounding": {"how": "the answer is the object of fact 2", "facts": [1]}}}
    html = answer_header(grounded)
    assert 'class="fw-badge fw-grounded-badge"' in html and "grounded in 1 fact<" in html
    assert 'title="the answer is the object of fact 2"' in html and "fw-withheld" not in html
    withheld = {"answer": "I don't know.", "facts": [],
                "trace": {"supported": False, "grounded": False, "withheld": "Oslo",
                          "withheld_because": "no fact was stated"}}
    html = answer_header(withheld)
    assert '<p class="fw-withheld">' in html and "grounded in" not in html
    text = _plain(html)
    assert "Answer: I don't know." in text and "withheld: “Oslo” — not proven by a stated fact" in text
    assert "no fact was stated" in text
    assert "Stopped" in answer_header({"answer": "", "facts": [], "trace": {"stopped": True}})


def test_trace_panel_shows_how_a_follow_up_was_understood_its_hops_and_its_grounding():
    """The rewrite and hop steps and the grounding keys as the pipeline's contract describes them."""
    from ui.render import step_line, trace_html

    fact = {**TRIPLE_FACT, "text": "<Buck Owens> <instrument> <guitar> .", "start": 6, "end": 42, "tree": "kb",
            "fact_id": "kb:12"}
    rewrite = {"step": "rewrite", "question": "What instrument did he play?",
               "standalone": "What instrument did Buck Owens play?",
               "how": "pronoun 'he' -> 'Buck Owens' (from the previous question)", "seconds": 0.01}
    hop = {"step": "hop", "fact": "<Buck Owens> <place of death> <Bakersfield> .", "entity": "Bakersfield",
           "query": "What instrument did Bakersfield play?", "added": ["<Bakersfield> <country> <United States> .", "<Bakersfield> <located in> <Kern County> ."],
           "seconds": 0.2}
    generate = {"step": "generate", "attempt": 0, "tree": "kb", "answer": "guitar", "facts": [fact],
                "text": f"Fact: {fact['text']}\nAnswer: guitar", "tokens": 20, "prompt_tokens": 90, "seconds": 2.0,
                "truncated": False, "on_topic": True}
    trace = {"question": rewrite["question"], "standalone": rewrite["standalone"], "steps": [rewrite, hop, generate],
             "answer": "guitar", "supported": True, "grounded": True,
             "grounding": {"how": "the answer is in fact 1, about Buck Owens", "facts": [0]}, "facts": [fact],
             "timings": {}, "tokens": {}}
    html = trace_html(trace, anchor="a2", history_turns=2)
    text = _plain(html)
    assert 'data-history-turns="2"' in html
    assert "Understood as: What instrument did Buck Owens play? (asked: “What instrument did he play?”)" in text
    assert "pronoun 'he' -> 'Buck Owens' (from the previous question); 2 earlier turns of the conversation" in text
    assert "grounded in 1 fact the answer is in fact 1, about Buck Owens" in text
    assert html.count('<details class="fw-step ') == 3
    assert '<details class="fw-step fw-step-rewrite">' in html and '<details class="fw-step fw-step-hop">' in html
    assert "hop: 'Bakersfield' in a stated fact brought 2 more facts into the tree" in text
    assert "<Bakersfield> <located in> <Kern County> ." in text
    assert "searched Bakersfield in the question's context (“What instrument did Bakersfield play?”)" in text
    assert step_line(rewrite) == ("understood as 'What instrument did Buck Owens play?' "
                                  "(pronoun 'he' -> 'Buck Owens' (from the previous question))")
    assert step_line({"step": "rewrite", "question": "Q?", "standalone": "Q?", "how": "no earlier turn"}) == \
        "question taken as asked (no earlier turn)"
    assert step_line({"step": "later", "n": 1}) == "later: n=1"  # a step this UI does not know yet
    # Withheld: set apart, what was withheld and why; no grounded badge. While answering, the
    # panel already says how the question was understood.
    withheld = {**trace, "answer": "I don't know.", "supported": False, "grounded": False, "grounding": {},
                "withheld": "guitar", "withheld_because": "no stated fact is about the question"}
    html = trace_html(withheld)
    assert '<p class="fw-withheld">' in html and "fw-grounded-badge" not in html
    assert "withheld: “guitar” — not proven by a stated fact (no stated fact is about the question)" in _plain(html)
    partial = trace_html({"question": rewrite["question"], "steps": [rewrite], "partial": True}, history_turns=2)
    assert "Understood as: What instrument did Buck Owens play?" in _plain(partial)
    # A trace from a pipeline without the rewrite step: the question as asked.
    plain = _plain(trace_html({"question": "Who founded Zorblax Station?", "steps": [], "facts": [],
                               "answer": "I don't know.", "supported": False}))
    assert "Understood as: Who founded Zorblax Station?" in plain and "no earlier turn went with it" in plain


def test_an_assistant_turn_is_what_the_agent_said():
    from agent.pipeline.conversation import assistant_turn

    said = "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"
    assert assistant_turn({"answer": "Bakersfield", "text": said, "trace": {"supported": True}}) == said
    assert assistant_turn({"answer": "I don't know.", "text": said, "trace": {"withheld": "Bakersfield"}}) == \
        said + "\nAnswer: I don't know."
    assert assistant_turn({"answer": "I don't know.", "text": "", "trace": {}}) == "Answer: I don't know."


def test_trace_html_lists_facts_steps_timings_and_the_raw_trace(small_agent):
    from ui.render import trace_html

    reply = small_agent.answer("Who founded Zorblax Station?").as_dict()
    html = trace_html(reply["trace"], anchor="a2")
    raw = re.search(r'<pre class="fw-trace-json">(.*?)</pre>', html, re.S).group(1)
    assert json.loads(unescape(raw)) == json.loads(json.dumps(reply["trace"]))
    for n, fact in enumerate(sorted(reply["facts"], key=lambda f: f["start"])):
        assert f'id="fw-fact-a2-{n}"' in html  # the click target of the n-th span
    # The generated text's spans are the answer's facts, in order.
    generated = html.split("<h4>Generated text</h4>")[1].split("<h4>")[0]
    assert _spans(generated) == [f["text"] for f in sorted(reply["facts"], key=lambda f: f["start"])]
    retrieve = next(s for s in reply["trace"]["steps"] if s["step"] == "retrieve")
    for hit in retrieve["hits"]:
        assert f"<td>{hit['score']:.3f}</td>" in html
    assert html.count('<details class="fw-step ') == len(reply["trace"]["steps"])
    assert f"{reply['trace']['timings']['total_s']:.2f} s" in html
    assert "Ask a question" in trace_html(None)


def test_uploads_are_classified_and_checked_whole(tmp_path):
    from agent.web.uploads import MAX_FILES, kind_of, read_uploads

    good = tmp_path / "facts.tsv"
    good.write_text("Quillon Vale\tdesigned by\tAsha Merrow\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"subject": "Quillon Vale", "predicate": "located in", "object": "Brisk"}\n')
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"title": "Brisk", "text": "Brisk is a harbour town."}\n')
    packed = tmp_path / "more.tsv.gz"
    with gzip.open(packed, "wt") as f:
        f.write("Brisk\tcountry\tVelland\n")
    note = tmp_path / "note.md"
    note.write_text("# Velland\n\nVelland is a small country.\n")
    assert [kind_of(p) for p in (good, rows, docs, packed, note)] == ["triples", "triples", "documents", "triples",
                                                                      "documents"]
    batch = read_uploads([good, rows, docs, packed, note])
    assert batch.triple_count == 3 and [d.title for d in batch.documents] == ["Brisk", "Velland"]
    assert batch.describe() == "3 triple(s) from 3 file(s), 2 document(s)"

    bad = tmp_path / "bad.tsv"
    bad.write_text("A\tb\tC\nonly two\tfields\n")
    with pytest.raises(FactweaveError, match=r"^bad\.tsv:2: ") as err:
        read_uploads([good, bad])
    assert str(tmp_path) not in str(err.value)  # the upload's temporary folder is not shown
    (tmp_path / "x.pptx").write_bytes(b"PK")
    with pytest.raises(FactweaveError, match=r"x\.pptx: unsupported file type"):
        read_uploads([tmp_path / "x.pptx"])
    (tmp_path / "x.pdf").write_bytes(b"%PDF")  # a PDF is read now, and a broken one is one line
    with pytest.raises(FactweaveError, match=r"^x\.pdf: not a readable PDF file") as err:
        read_uploads([good, tmp_path / "x.pdf"])
    assert str(tmp_path) not in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(FactweaveError, match="empty.tsv: the file is empty"):
        read_uploads([tmp_path / "empty.tsv"])
    with pytest.raises(FactweaveError, match=r"facts\.tsv: .* over the upload limit of 10 bytes"):
        read_uploads([good], max_bytes=10)
    bomb = tmp_path / "bomb.tsv.gz"  # 2 MB of rows packed into a few kB: the limit is on what is read
    with gzip.open(bomb, "wt") as f:
        f.write("Brisk\tcountry\tVelland\n" * 100_000)
    assert bomb.stat().st_size < 64 * 1024
    with pytest.raises(FactweaveError, match=r"bomb\.tsv\.gz: unpacks to more than the upload limit"):
        read_uploads([bomb], max_bytes=64 * 1024)
    docx_bomb = tmp_path / "bomb.docx"  # 20 MB of XML packed into a few kB
    with zipfile.ZipFile(docx_bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", "<w:p/>" * 3_500_000)
    assert docx_bomb.stat().st_size < 64 * 1024
    with pytest.raises(FactweaveError, match=r"^bomb\.docx: unpacks to 21\.0 MB, more than the 16\.8 MB a DOCX"):
        read_uploads([docx_bomb], max_bytes=64 * 1024)
    (tmp_path / "broken.tsv.gz").write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(FactweaveError, match=r"broken\.tsv\.gz: "):
        read_uploads([tmp_path / "broken.tsv.gz"])
    many = [tmp_path / f"part{i}.tsv" for i in range(MAX_FILES + 1)]
    for path in many:
        path.write_text("Brisk\tcountry\tVelland\n")
    with pytest.raises(FactweaveError, match=f"{MAX_FILES + 1} files in one upload"):
        read_uploads(many)
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(FactweaveError, match="latin.txt"):
        read_uploads([tmp_path / "latin.txt"])


@pytest.mark.model
def test_runtime_adds_uploads_to_the_web_and_the_index_and_a_bad_file_changes_nothing(ui_runtime, tmp_path):
    from agent.knowledge.facts import verbalize
    from ui.runtime import AskOptions

    before = ui_runtime.counts()
    good = tmp_path / "harbours.tsv"
    good.write_text("Quillon Harbour\tbuilt by\tAsha Merrow\n")
    doc = tmp_path / "brisk.md"
    doc.write_text("# Brisk lighthouse\n\nThe Brisk lighthouse was lit for the first time in 1871.\n")
    bad = tmp_path / "broken.tsv"
    bad.write_text("Quillon Harbour\tlength\n")

    with pytest.raises(FactweaveError, match=r"broken\.tsv:1"):
        ui_runtime.add_files([good, bad])  # one bad file: nothing of the upload is added
    assert ui_runtime.counts() == before

    report = ui_runtime.add_files([good, doc])
    fact = verbalize("Quillon Harbour", "built by", "Asha Merrow")
    after = ui_runtime.counts()
    assert after["facts"] > before["facts"] and after["documents"] == before["documents"] + 1
    assert report["new_facts"] == after["uploaded_facts"] - before["uploaded_facts"] >= 2
    index_texts = {f.text for f in ui_runtime.generator.index.facts}
    assert fact in index_texts  # the constrained generation can state it
    assert "The Brisk lighthouse was lit for the first time in 1871." in index_texts
    assert after["index_facts"] == before["index_facts"] + report["new_facts"]
    assert fact in [h.text for h in ui_runtime.web.search("Who built Quillon Harbour?", 5).hits]
    # Whole-KB decoding (the `kb` tree: no retrieval) can state the uploaded fact, traced to its file.
    reply = list(ui_runtime.stream("Who built Quillon Harbour?", AskOptions(tree="kb", beams=1)))[-1]
    assert {(f["text"], f["source"]) for f in reply["facts"]} >= {(fact, "harbours.tsv:1")}, reply["answer"]
    # Adding the same files again adds nothing.
    again = ui_runtime.add_files([good, doc])
    assert ui_runtime.counts() == after, again
    assert again["documents"]["chunks_skipped"] == 1
    # A restarted UI over the same web still has the uploaded facts in its index.
    from ui.runtime import UIRuntime

    restarted = UIRuntime(ui_runtime.settings, loaded=ui_runtime.loaded, web=ui_runtime.web, progress=False)
    assert fact in {f.text for f in restarted.generator.index.facts}
    assert restarted.counts() == after


@pytest.mark.model
def test_runtime_streams_with_the_sessions_options(ui_runtime):
    from ui.runtime import AskOptions

    events = list(ui_runtime.stream("Who founded Zorblax Station?", AskOptions(tree="kb", beams=1)))
    reply = events[-1]
    assert reply["event"] == "answer" and reply["trace"]["tree"] == "kb"
    assert [s["step"] for s in reply["trace"]["steps"]] == ["generate"]  # kb: nothing retrieved
    kb = {f.text for f in ui_runtime.generator.index.facts}
    assert all(f["text"] in kb for f in reply["facts"])


@pytest.mark.model
def test_the_fact_search_takes_a_query_as_long_as_a_question_at_most(ui_url):
    """The second security review's request: the Knowledge tab's search took a query of any length
    (the box's 2,000 is the browser's alone) and searched it whole. Through the served app's API:
    a query over the question bound is one line, a short one is searched."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    client = Client(ui_url, verbose=False)
    with pytest.raises(AppError, match=r"the query is too long \(2,399 characters; 2,000 at most\)"):
        client.predict(("Zorblax " * 300).strip(), 5, api_name="/search")
    assert "Zorblax" in client.predict("Zorblax Station", 5, api_name="/search")


@pytest.mark.model
def test_an_upload_named_as_part_of_another_source_is_refused_and_that_source_stays(ui_url, ui_runtime, tmp_path):
    """The second security review's request: Gradio keeps "#" in an uploaded file's name, and
    ``lamps.md#x.md`` was stored as a source whose name reads back as ``lamps.md``: it replaced
    lamps.md's facts and took its provenance. Through the served app's upload: refused in one
    line, lamps.md's facts and sources as they were."""
    from gradio_client import Client, handle_file

    victim = tmp_path / "lamps.md"
    victim.write_text("The Orsk Lamp was made by Teodor Vash.\n")
    ui_runtime.add_files([victim])
    try:
        before = ({row["source"]: row for row in ui_runtime.sources()}["lamps.md"],
                  sorted((f.text, f.source) for f in ui_runtime.uploaded_facts()))
        assert any("Teodor Vash" in text for text, _ in before[1])
        alias = tmp_path / "lamps.md#x.md"
        alias.write_text("The Orsk Lamp was made by Ida Holm.\n")
        said = Client(ui_url, verbose=False).predict([handle_file(str(alias))], api_name="/upload")[0]
        assert "Not added" in said and "lamps.md#x.md" in said and "\n" not in said, said
        after = ({row["source"]: row for row in ui_runtime.sources()}["lamps.md"],
                 sorted((f.text, f.source) for f in ui_runtime.uploaded_facts()))
        assert after == before
    finally:
        ui_runtime.remove_sources(["lamps.md"])


@pytest.mark.model
def test_the_agent_alone_checks_the_question_and_bounds_the_history_by_its_settings(smollm, cache_dir, agent_web,
                                                                                     agent_calls):
    """The second security review's request: the UI cut a session's history at the default
    bound before the agent saw it, so raising ``max_history_turns`` did nothing through it, and
    checked the question on its own. With the bound raised, a long history reaches the agent
    whole and it reads all of it; a bad question is the agent's refusal, before any event."""
    from agent.pipeline.conversation import MAX_TURNS
    from agent.settings import load_settings
    from agent_fixtures import FOLLOW_UP
    from ui.runtime import AskOptions, UIRuntime

    settings = load_settings(model="smollm2-135m", cache=cache_dir, max_tokens=24, rerank=False,
                             max_history_turns=10)
    older = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"older turn {i}"} for i in range(8)]
    with UIRuntime(settings, loaded=smollm, web=agent_web, progress=False) as runtime:
        options = AskOptions(tree="kb")
        events = runtime.stream(FOLLOW_UP[1], options, history=older)
        try:
            first = next(events)  # the rewrite step: what the agent read the follow-up with
        finally:
            events.close()
        assert agent_calls[-1]["history"] == older
        assert first["step"]["step"] == "rewrite" and first["step"]["history_turns"] == 8 > MAX_TURNS
        # What a session keeps of its conversation for the next question: the agent's own bound.
        assert runtime.history(options, [*older, *older]) == [*older, *older][-10:]
        for bad, said in (("   ", "the question is empty"), ("Where? " * 400, "the question is too long")):
            with pytest.raises(FactweaveError, match=said):
                runtime.stream(bad, options)  # refused in the call, before any event


@pytest.mark.model
def test_a_visitor_can_only_switch_to_an_offered_model(ui_runtime, tmp_path):
    """A folder or Hub id typed into the model box is refused, and the loaded model stays."""
    model = ui_runtime.counts()["model"]
    assert model in ui_runtime.offered_models()
    for name in (str(tmp_path), "openai-community/gpt2"):
        with pytest.raises(FactweaveError, match="is not offered here"):
            ui_runtime.switch_model(name)
    assert ui_runtime.counts()["model"] == model


def _fail_once(target, method: str) -> None:
    """Make ``target.method`` fail once with a full disk (as a kill leaves the step), then work."""
    original = getattr(target, method)

    def fail_once(*args, **kwargs):
        setattr(target, method, original)
        raise OSError(28, "No space left on device")

    setattr(target, method, fail_once)


@pytest.mark.model
def test_an_upload_that_fails_at_any_stage_is_completed_by_the_next_start(ui_runtime, tmp_path):
    """All or nothing by completion: a failure (or a kill) between the web, facts.jsonl and the
    index leaves the upload kept; the next start adds what was missing, exactly once."""
    from agent.knowledge.facts import verbalize
    from ui.runtime import UIRuntime

    def start() -> UIRuntime:
        opened.append(UIRuntime(ui_runtime.settings, loaded=ui_runtime.loaded, web=ui_runtime.web, progress=False))
        return opened[-1]

    opened: list[UIRuntime] = []
    try:
        runtime = start()
        for stage in ("add_documents", "add_triples", "_save_uploaded", "_extend_index"):
            name = stage.strip("_").replace("_", "-")
            triples = tmp_path / f"{name}.tsv"
            triples.write_text(f"Quillon Dock {name}\tbuilt by\tAsha Merrow\n")
            doc = tmp_path / f"{name}.md"
            doc.write_text(f"# Quay {name}\n\nThe quay {name} was paved in 1903.\n")
            before = runtime.counts()
            target = runtime.web if stage.startswith("add_") else runtime.workspace
            _fail_once(target, stage)
            with pytest.raises(FactweaveError, match=r"the upload stopped \(.*No space left.*\); it is kept"):
                runtime.add_files([triples, doc])
            target.__dict__.pop(stage, None)  # (the instance attribute set above; the method is the class's)
            runtime = start()  # the next start completes the upload
            after = runtime.counts()
            fact = verbalize(f"Quillon Dock {name}", "built by", "Asha Merrow")
            assert after["documents"] == before["documents"] + 1, stage
            assert after["uploaded_facts"] == before["uploaded_facts"] + 2, stage  # the triple and the sentence
            assert after["index_facts"] == before["index_facts"] + 2, stage
            assert fact in {f.text for f in runtime.generator.index.facts}, stage
            assert fact in [h.text for h in runtime.web.search(f"Who built Quillon Dock {name}?", 5).hits], stage
        assert start().counts() == after  # applied once: another start adds nothing
    finally:
        for opened_runtime in opened:
            opened_runtime.close()


@pytest.mark.model
def test_an_upload_recovery_that_cannot_be_applied_never_blocks_later_changes(ui_runtime, tmp_path, caplog):
    """A pending upload emptied by a kill inside its removal, one over a lowered size limit, one
    with a stray entry: each start and the next upload go on (the unreadable one is moved to
    uploads/quarantine/ with a line saying so), and the next upload is added."""
    import shutil

    from ui.runtime import UIRuntime

    caplog.set_level("WARNING", logger="agent.web.workspace")
    pending = ui_runtime.uploads_dir / "pending"
    quarantine = ui_runtime.uploads_dir / "quarantine"
    big = tmp_path / "big.tsv"
    big.write_text("Quillon Dock\tbuilt by\tAsha Merrow\n" * 4000)  # ~150 kB
    cases = {"emptied": lambda: pending.mkdir(parents=True),
             "over the limit": lambda: (pending / "0").mkdir(parents=True) or shutil.copy(big, pending / "0"),
             "a stray entry": lambda: (pending / "notes").mkdir(parents=True)}
    for i, (case, make) in enumerate(cases.items()):
        shutil.rmtree(pending, ignore_errors=True)
        make()
        seen_before = set(quarantine.iterdir()) if quarantine.exists() else set()
        with UIRuntime(ui_runtime.settings, loaded=ui_runtime.loaded, web=ui_runtime.web, progress=False,
                       max_upload_bytes=64 * 1024) as runtime:
            assert not pending.exists(), case  # the start made progress
            moved = set(quarantine.iterdir()) - seen_before if quarantine.exists() else set()
            assert len(moved) == (0 if case == "emptied" else 1), case
            assert ("cannot be read again" in caplog.text) == (case != "emptied"), case
            caplog.clear()
            (pending / "x").mkdir(parents=True)  # and again, now before an upload
            triples = tmp_path / f"later-{i}.tsv"
            triples.write_text(f"Quillon Dock {i}\tbuilt by\tAsha Merrow\n")
            report = runtime.add_files([triples])
            assert report["new_facts"] == 1 and not pending.exists(), case
            runtime.remove_sources([triples.name])


@pytest.mark.model
def test_a_removal_cut_short_at_any_step_stays_removed_after_the_next_start(ui_runtime, tmp_path):
    """A failure (as a kill leaves it) at each step of a removal: the uploaded facts, the web's
    vectors, the web's graph. The next start finishes it: the facts are in no store (the fact
    index overlay, facts.jsonl, the web's search) and the source is listed no more."""
    from agent.knowledge.facts import verbalize
    from ui.runtime import UIRuntime

    opened: list[UIRuntime] = []

    def start() -> UIRuntime:
        opened.append(UIRuntime(ui_runtime.settings, loaded=ui_runtime.loaded, web=ui_runtime.web, progress=False))
        return opened[-1]

    try:
        for stage in ("_store_uploaded", "fact_vectors", "graph"):
            runtime = start()
            name = stage.strip("_").replace("_", "-")
            triples = tmp_path / f"gone-{name}.tsv"
            triples.write_text(f"Quillon Dock {name}\tbuilt by\tAsha Merrow\n")
            runtime.add_files([triples])
            fact = verbalize(f"Quillon Dock {name}", "built by", "Asha Merrow")
            assert fact in {f.text for f in runtime.generator.index.facts}
            target = {"_store_uploaded": runtime.workspace, "fact_vectors": runtime.web.fact_vectors,
                      "graph": runtime.web.graph}[stage]
            method = "delete" if stage != "_store_uploaded" else stage
            _fail_once(target, method)
            with pytest.raises(FactweaveError, match=r"the removal stopped"):
                runtime.remove_sources([triples.name])
            target.__dict__.pop(method, None)
            again = start()  # the next start finishes the removal
            assert fact not in {f.text for f in again.generator.index.facts}, stage
            assert fact not in {f.text for f in again.uploaded_facts()}, stage
            assert fact not in [h.text for h in again.web.search(f"Who built Quillon Dock {name}?", 5).hits], stage
            assert triples.name not in {row["source"] for row in again.sources()}, stage
            assert not (again.uploads_dir / "removing.json").exists(), stage
    finally:
        for runtime in opened:
            runtime.close()


@pytest.mark.model
def test_a_row_that_names_another_source_is_still_the_uploaded_files_and_goes_with_it(ui_runtime, tmp_path):
    """A JSONL row's own ``source`` cannot forge provenance or escape Remove: the upload's facts
    are the file's, listed and removed under its name."""
    import json

    rows = tmp_path / "claims.jsonl"
    rows.write_text(json.dumps({"subject": "Quillon Forge", "predicate": "founded by", "object": "Asha Merrow",
                                "source": "encyclopaedia-britannica"}) + "\n")
    ui_runtime.add_files([rows])
    sources = {row["source"] for row in ui_runtime.sources()}
    assert "claims.jsonl" in sources and "encyclopaedia-britannica" not in sources
    hit = next(h for h in ui_runtime.web.search("Who founded Quillon Forge?", 5).hits if "Quillon Forge" in h.text)
    assert hit.source == "claims.jsonl:1"
    ui_runtime.remove_sources(["claims.jsonl"])
    assert not any("Quillon Forge" in h.text for h in ui_runtime.web.search("Who founded Quillon Forge?", 5).hits)
    assert not any("Quillon Forge" in f.text for f in ui_runtime.uploaded_facts())


@pytest.mark.model
def test_questions_are_answered_during_a_long_upload_and_a_second_change_says_it_waits(ui_runtime, tmp_path):
    """An upload held mid-way (its progress callback waits, as a long LLM decomposition does):
    a question is answered meanwhile, on the knowledge before the upload; a removal asked then
    gives up after ``write_wait_s`` with one line; the upload then completes."""
    import threading

    from ui.runtime import AskOptions

    triples = tmp_path / "slow.tsv"
    triples.write_text("Quillon Mill\tbuilt by\tAsha Merrow\n")
    inside, release, done = threading.Event(), threading.Event(), {}

    def progress(fraction, what):
        if fraction >= 0.4 and not inside.is_set():
            inside.set()
            release.wait(300)

    def upload():
        done["report"] = ui_runtime.add_files([triples], progress)

    writer = threading.Thread(target=upload)
    writer.start()
    try:
        assert inside.wait(120), "the upload did not start"
        events = list(ui_runtime.stream("Who founded Zorblax Station?", AskOptions(tree="kb")))
        assert events[-1]["event"] == "answer" and writer.is_alive()  # answered while the upload waits
        ui_runtime.write_wait_s = 1.0
        with pytest.raises(FactweaveError, match=r"another change .* is still running after 1 s; the removal did "
                                                 r"not start"):
            ui_runtime.remove_sources(["slow.tsv"])
    finally:
        ui_runtime.write_wait_s = 30.0
        release.set()
        writer.join(300)
    assert done["report"]["new_facts"] == 1
    ui_runtime.remove_sources(["slow.tsv"])


@pytest.mark.model
def test_two_answers_run_at_once(ui_runtime):
    """With --concurrency 2 two sessions' answers progress together: the second one's events come
    while the first answer is still open (one lock spanning a whole answer made it wait)."""
    import threading

    from ui.runtime import AskOptions

    first = ui_runtime.stream("Who founded Zorblax Station?", AskOptions(tree="kb", beams=1))
    assert next(first)["event"]  # the first answer is under way, and stays open
    second_events: list[dict] = []

    def ask_second():
        second_events.extend(ui_runtime.stream("Where was Mira Quell born?", AskOptions(tree="kb", beams=1)))

    thread = threading.Thread(target=ask_second, daemon=True)
    thread.start()
    thread.join(timeout=120)
    try:
        assert not thread.is_alive(), "the second answer waited for the first to end"
        assert second_events and second_events[-1]["event"] == "answer"
    finally:
        first.close()


# Run in a child process: the UI's runtime on a web folder, an upload, and kill -9 of itself just
# after the upload's web writes (graph and vectors), before facts.jsonl and the fact index.
_KILLED_UPLOAD = """
import os, signal, sys
from pathlib import Path
from agent.settings import load_settings
from ui.runtime import UIRuntime

runtime = UIRuntime(load_settings(model="smollm2-135m", web=sys.argv[1], max_tokens=64), progress=False)
runtime.workspace._save_uploaded = lambda facts: os.kill(os.getpid(), signal.SIGKILL)
runtime.add_files([Path(p) for p in sys.argv[2:]])
print("the upload was not killed")
"""


@pytest.mark.model
def test_an_upload_killed_mid_way_is_completed_by_the_next_start_to_the_counts_of_an_uninterrupted_one(
        smollm, cache_dir, embedder, tmp_path):
    """kill -9 of the UI process between an upload's web writes and its fact index: the next start
    adds what was missing, and the web, facts and index count what an uninterrupted upload gives."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    from agent.knowledge.facts import Fact
    from agent.settings import load_settings
    from agent.web.web import KnowledgeWeb
    from ui.runtime import UIRuntime

    triples = tmp_path / "docks.tsv"
    triples.write_text("Quillon Dock\tbuilt by\tAsha Merrow\nQuillon Dock\tlocated in\tVelmora\n")
    doc = tmp_path / "quay.md"
    doc.write_text("# Velmora Quay\n\nVelmora Quay was paved in 1903. Its harbour master was Ilse Varga.\n")

    def new_web(name: str) -> str:
        with KnowledgeWeb.open(tmp_path / name, embedder=embedder) as web:
            web.add_triples([Fact("Velmora", "mayor", "Odile Fenn")], source="velmora.tsv", progress=False)
        return str(tmp_path / name)

    def counts(folder: str) -> dict:
        settings = load_settings(model="smollm2-135m", web=folder, cache=cache_dir, max_tokens=64)
        with UIRuntime(settings, loaded=smollm, progress=False) as runtime:
            if not (runtime.uploads_dir / "pending").exists() and not runtime.uploaded_facts():
                runtime.add_files([triples, doc])  # the uninterrupted upload
            found = [h.text for h in runtime.web.search("Who was the harbour master of Velmora Quay?", 5).hits]
            return {**runtime.counts(), "web": None, "found": any("Ilse Varga" in text for text in found),
                    "pending": (runtime.uploads_dir / "pending").exists()}

    killed = new_web("killed")
    env = {**os.environ, "FACTWEAVE_CACHE": str(cache_dir)}
    child = subprocess.run([sys.executable, "-c", _KILLED_UPLOAD, killed, str(triples), str(doc)], env=env,
                           cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert child.returncode == -9, (child.returncode, child.stdout, child.stderr[-2000:])
    pending = Path(killed) / "uploads" / "pending"
    assert pending.is_dir() and not (Path(killed) / "uploads" / "facts.jsonl").exists()  # killed mid-way

    resumed = counts(killed)  # the next start completes the upload
    assert not resumed["pending"] and resumed["found"]
    uninterrupted = counts(new_web("whole"))
    assert resumed == uninterrupted
    assert resumed["uploaded_facts"] == 4 and resumed["documents"] == 1, resumed
    # (That another start adds nothing is the stage-failure test's last check.)


@pytest.mark.model
def test_a_removed_upload_can_no_longer_be_stated_and_a_changed_one_replaces_its_facts(ui_runtime, tmp_path):
    """Whole-KB decoding states an uploaded fact; once its file is removed in the UI (the web,
    facts.jsonl and the fact index overlay) the same question's answer no longer states it. A file
    uploaded again with a changed line replaces its old facts. A removal cut short after the web is
    done is completed by the next start."""
    from agent.knowledge.facts import verbalize
    from ui.runtime import AskOptions, UIRuntime

    def stated(runtime, question: str) -> str:
        reply = list(runtime.stream(question, AskOptions(tree="kb", beams=1)))[-1]
        return "\n".join(f["text"] for f in reply["facts"]) + "\n" + reply["answer"]

    lantern = tmp_path / "lanterns.tsv"
    lantern.write_text("Vessa Lantern\tbuilt by\tOren Task\n")
    bells = tmp_path / "bells.tsv"
    bells.write_text("Vessa Bell\tcast by\tIda Holm\nVessa Bell\tlocated in\tVelmora\n")
    ui_runtime.add_files([lantern, bells])
    fact = verbalize("Vessa Lantern", "built by", "Oren Task")
    assert fact in stated(ui_runtime, "Who built Vessa Lantern?")  # (so the check below can fail)
    listed = {row["source"]: row for row in ui_runtime.sources()}
    assert listed["lanterns.tsv"]["facts"] == 1 and listed["lanterns.tsv"]["uploaded"]

    before = ui_runtime.counts()
    with pytest.raises(FactweaveError, match="no source named nowhere.tsv; the sources are"):
        ui_runtime.remove_sources(["nowhere.tsv"])
    report = ui_runtime.remove_sources(["lanterns.tsv"])
    assert report["facts"] == 1 and report["uploaded_removed"] == 1
    assert fact not in stated(ui_runtime, "Who built Vessa Lantern?")
    assert "lanterns.tsv" not in {row["source"] for row in ui_runtime.sources()}
    after = ui_runtime.counts()
    assert after["uploaded_facts"] == before["uploaded_facts"] - 1 == after["index_facts"] - (
        before["index_facts"] - before["uploaded_facts"])

    # A changed file replaces its facts: the web's and the overlay's.
    bells.write_text("Vessa Bell\tcast by\tIda Holm\nVessa Bell\tlocated in\tBrisk\n")
    ui_runtime.add_files([bells])
    old, new = verbalize("Vessa Bell", "located in", "Velmora"), verbalize("Vessa Bell", "located in", "Brisk")
    held = {f.text for f in ui_runtime.generator.index.facts}
    assert new in held and old not in held and ui_runtime.counts()["uploaded_facts"] == after["uploaded_facts"]
    assert {row["source"]: row["facts"] for row in ui_runtime.sources()}["bells.tsv"] == 2

    # Cut short after the web's part (a failure, a kill): the next start completes the removal.
    space = ui_runtime.workspace
    _fail_once(space, "_store_uploaded")
    with pytest.raises(FactweaveError, match=r"the removal stopped \(.*No space left"):
        ui_runtime.remove_sources(["bells.tsv"])
    space.__dict__.pop("_store_uploaded", None)
    with UIRuntime(ui_runtime.settings, loaded=ui_runtime.loaded, web=ui_runtime.web, progress=False) as restarted:
        assert not {new, old} & {f.text for f in restarted.generator.index.facts}
        assert "bells.tsv" not in {row["source"] for row in restarted.sources()}
        assert not (restarted.uploads_dir / "removing.json").exists()


@pytest.mark.model
def test_what_the_ui_uploads_every_agent_on_the_web_states_until_it_is_removed(ui_runtime, smollm, tmp_path):
    """An agent opened on the UI's web (as `ask`, `serve`, MCP and LangChain open it) states an
    uploaded fact from the whole-KB tree; a removal cut short before its first step keeps the
    fact out of it all the same (the journal names the source), and a finished one too."""
    from agent.knowledge.facts import verbalize
    from agent.runtime import open_agent

    settings = ui_runtime.settings.model_copy(update={"web": ui_runtime.web.folder, "tree": "kb", "rerank": False})

    def stated() -> set[str]:
        with open_agent(settings, loaded=smollm, progress=False) as agent:
            return {f["text"] for f in agent.answer("Who built Varro Lantern?").facts}

    fact = verbalize("Varro Lantern", "built by", "Oren Task")
    assert fact not in stated()  # (so the checks below can fail)
    lantern = tmp_path / "varro.tsv"
    lantern.write_text("Varro Lantern\tbuilt by\tOren Task\n")
    ui_runtime.add_files([lantern])
    assert fact in stated()

    space = ui_runtime.workspace
    _fail_once(space, "_store_uploaded")
    with pytest.raises(FactweaveError, match=r"the removal stopped"):
        ui_runtime.remove_sources([lantern.name])
    space.__dict__.pop("_store_uploaded", None)
    assert fact in {f.text for f in space.uploaded_facts()}  # still listed: only the journal names it
    assert fact not in stated()
    with pytest.raises(FactweaveError, match="no source named varro.tsv"):  # the next change completed it first
        ui_runtime.remove_sources([lantern.name])
    assert fact not in stated() and fact not in {f.text for f in space.uploaded_facts()}


def test_page_loads_share_one_count_of_the_knowledge_until_it_changes(ui_runtime, tmp_path):
    """Every page load shows the knowledge panel; counting the whole graph for each (outside the
    queue) let any visitor keep the database busy. Counted once per change, or per TTL."""
    counted = []
    real = ui_runtime.web.stats
    ui_runtime.web.stats = lambda: (counted.append(1), real())[1]
    try:
        views = [ui_runtime.knowledge() for _ in range(50)]
        assert len(counted) <= 1 and all(v == views[0] for v in views)
        counted.clear()
        doc = tmp_path / "pennant.md"
        doc.write_text("# Pennant Reach\n\nPennant Reach is a shoal charted by Ilse Varn in 1788.\n")
        ui_runtime.add_files([doc])
        counts, sources = ui_runtime.knowledge()
        assert len(counted) == 1  # the change is shown at once, counted once
        assert counts["documents"] == views[0][0]["documents"] + 1
        assert "pennant.md" in {row["source"] for row in sources}
        ui_runtime.knowledge_ttl_s = 0.0  # a change made by another process shows after the TTL
        ui_runtime.knowledge()
        assert len(counted) == 2
    finally:
        del ui_runtime.web.stats
        ui_runtime.knowledge_ttl_s = type(ui_runtime).knowledge_ttl_s
        ui_runtime.remove_sources(["pennant.md"])


def test_gradios_copies_of_an_upload_are_deleted_and_nothing_outside_its_cache(tmp_path):
    from ui.uploads import forget_uploads

    cache = tmp_path / "gradio"
    kept = tmp_path / "mine.tsv"
    kept.write_text("a\tb\tc\n")
    copies = []
    for n, name in enumerate(["facts.tsv", "notes.md"]):
        (cache / f"h{n}").mkdir(parents=True)
        copies.append(cache / f"h{n}" / name)
        copies[-1].write_text("x")
    assert forget_uploads([*copies, kept, cache / "gone.tsv"], cache) == 2
    assert kept.exists() and not list(cache.iterdir())
