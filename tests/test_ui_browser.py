"""The chat UI in a real browser: Playwright driving Debian's Chromium against the Gradio app
served on a loopback port, with SmolLM2 and a real knowledge web behind it.

Screenshots go to ``$FACTWEAVE_SCREENSHOTS`` (default: the test's temporary folder)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_fixtures import FOLLOW_UP
from playwright.sync_api import expect
from ui_fixtures import require_chromium

pytestmark = [pytest.mark.model, pytest.mark.browser]


@pytest.fixture(scope="session", autouse=True)
def _chromium_first():
    """Checked before the session's UI (and its model) is set up."""
    require_chromium()

ANSWER_TIMEOUT_MS = 300_000  # a CPU under load; one answer takes ~10 s on an idle 2-core machine


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("FACTWEAVE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _ask(page, question: str) -> None:
    page.fill("#fw-question textarea", question)
    page.click("#fw-ask")


def _wait_answer(page, question: str) -> dict:
    """Wait until the trace panel shows the finished trace of ``question``; return that trace."""
    page.wait_for_function(
        """q => { const pre = document.querySelector('#fw-trace pre.fw-trace-json');
                  return pre && JSON.parse(pre.textContent).question === q; }""",
        arg=question, timeout=ANSWER_TIMEOUT_MS)
    return json.loads(page.text_content("#fw-trace pre.fw-trace-json"))


def _upload(page, url: str, path: Path | list[Path], content: str | None, outcome: str) -> None:
    """Open the Knowledge tab, upload ``path`` (written with ``content`` unless None; a list: the
    files chosen together), press the build button and wait for its ``ok`` or ``error`` message."""
    page.goto(url)
    page.click("button[role=tab]:has-text('Knowledge')")
    paths = path if isinstance(path, list) else [path]
    if content is not None:
        path.write_text(content)
    page.set_input_files("#fw-files input[type=file]", [str(p) for p in paths])
    for p in paths:  # a busy machine is slow
        expect(page.locator("#fw-files").get_by_role("cell", name=p.name, exact=True)).to_be_visible(
            timeout=ANSWER_TIMEOUT_MS)
    page.click("#fw-build")
    page.wait_for_selector(f"#fw-build-result .fw-{outcome}", timeout=ANSWER_TIMEOUT_MS)


def _marks(page, where: str) -> list[dict]:
    return page.eval_on_selector_all(
        f"{where} mark.fw-fact",
        "els => els.map(e => ({text: e.textContent, id: e.dataset.factId, tree: e.dataset.tree, title: e.title}))")


def test_ask_a_demo_question_and_see_its_facts_highlighted(browser, ui_url, ui_runtime, tmp_path):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(ui_url)
    question = "Who founded Zorblax Station?"
    page.click("#fw-examples button:has-text('Zorblax')")  # the example fills the box
    expect(page.locator("#fw-question textarea")).to_have_value(question)
    page.click("#fw-ask")
    # The answer streams: the chat shows the steps before the answer is done.
    page.wait_for_selector("#fw-chat .fw-steps", timeout=ANSWER_TIMEOUT_MS)
    trace = _wait_answer(page, question)

    facts = sorted(trace["facts"], key=lambda f: f["start"])
    assert facts, "the model stated no fact for the Zorblax question"
    in_chat = _marks(page, "#fw-chat .fw-final")  # the answer's attempt (earlier ones are shown above it)
    in_trace = _marks(page, "#fw-trace .fw-generated")
    for marks in (in_chat, in_trace):
        assert [m["text"] for m in marks] == [f["text"] for f in facts]
    assert [m["id"] for m in in_trace] == [str(f["fact_id"]) for f in facts]  # (the chat's sanitizer drops data-*)
    # Each span is a fact of the knowledge: the web's (per-question tree) or the KB index's.
    web_facts = {f.text for f in ui_runtime.web.facts()}
    kb = ui_runtime.generator.index.facts
    for fact, mark in zip(facts, in_chat):
        if fact["tree"] == "question":
            assert fact["text"] in web_facts
        else:
            assert kb[int(fact["fact_id"][3:])].text == fact["text"]
        assert mark["title"].splitlines()[0] == fact["text"]  # hover: the fact and its provenance
        assert fact["source"].split(":")[0].split(" [")[0] in mark["title"]
    text = page.text_content("#fw-chat .message-wrap")
    assert f"Answer: {trace['answer']}" in text
    # Clicking a span shows its row, with provenance, in the trace.
    page.click("#fw-chat mark.fw-fact >> nth=0")
    row = page.locator("#fw-trace li.fw-fact-row").first
    assert row.get_attribute("data-fact-id") == str(facts[0]["fact_id"])
    assert facts[0]["text"] in row.text_content()
    # Retrieved facts with their scores and the re-ranker's decision are in the trace.
    retrieve = next(s for s in trace["steps"] if s["step"] == "retrieve")
    page.click("#fw-trace details.fw-step-retrieve summary >> nth=0")
    first = page.locator("#fw-trace details.fw-step-retrieve").first
    cells = first.locator("td.fw-fact-text").all_text_contents()
    assert cells == [h["text"] for h in retrieve["hits"]]
    reranks = [s for s in trace["steps"] if s["step"] == "rerank"]  # one per retrieval round
    assert reranks and page.locator("#fw-trace details.fw-step-rerank summary").count() == len(reranks)
    page.screenshot(path=str(_shots(tmp_path) / "ui-answer.png"), full_page=True)
    page.close()


def _gradio_copies(name: str) -> set[Path]:
    """Gradio's cached copies of uploaded files called ``name`` (one folder per upload)."""
    from gradio.utils import get_upload_folder

    return set(Path(get_upload_folder()).rglob(name))


def test_upload_a_triple_file_then_find_and_use_its_fact(browser, ui_url, ui_runtime, tmp_path):
    cached = _gradio_copies("lighthouses.tsv")  # left by earlier runs, if any
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    _upload(page, ui_url, tmp_path / "lighthouses.tsv", "Velmora Lighthouse\tdesigned by\tOsric Tandel\n", "ok")
    assert "1 triple(s) from 1 file(s)" in page.text_content("#fw-build-result")
    assert f"{ui_runtime.counts()['uploaded_facts']:,} uploaded" in page.text_content("#fw-status")
    # Gradio's copy of the upload is gone once it is added (the cache would grow with each).
    assert _gradio_copies("lighthouses.tsv") <= cached

    fact = "<Velmora Lighthouse> <designed by> <Osric Tandel> ."
    page.fill("#fw-search-query textarea", "Who designed Velmora Lighthouse?")
    page.click("#fw-search")
    page.wait_for_selector("#fw-search-results td.fw-fact-text", timeout=ANSWER_TIMEOUT_MS)
    found = page.locator("#fw-search-results td.fw-fact-text").all_text_contents()
    assert fact in found
    assert "lighthouses.tsv" in page.text_content("#fw-search-results")

    # Asked in the chat, the agent retrieves the uploaded fact.
    page.click("button[role=tab]:has-text('Chat')")
    question = "Who designed Velmora Lighthouse?"
    _ask(page, question)
    trace = _wait_answer(page, question)
    retrieved = [h["text"] for s in trace["steps"] if s["step"] == "retrieve" for h in s["hits"]]
    assert fact in retrieved
    page.screenshot(path=str(_shots(tmp_path) / "ui-upload.png"), full_page=True)
    page.close()


def test_upload_a_pdf_an_html_page_and_a_docx_then_find_each_fact_with_its_place_then_remove_one(
        browser, ui_url, tmp_path):
    from test_documents_formats import PAGE, make_docx, make_pdf

    pdf = make_pdf(tmp_path / "harbour-report.pdf", ["The harbour report covers the year 1903.",
                                                      "The Velmora breakwater was designed by Ilse Varga."])
    html = tmp_path / "guide.html"
    html.write_text(PAGE, encoding="utf-8")
    docx = make_docx(tmp_path / "harbour.docx")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    _upload(page, ui_url, [pdf, html, docx], None, "ok")
    for question, words, where in (("Who designed the Velmora breakwater?", "Ilse Varga", "page 2"),
                                   ("What is the package called on Linux?", "factweave-cli", "Install > Linux"),
                                   ("What guards the northern entrance of the harbour?", "Quillon Vale",
                                    "Harbour report > Lighthouses")):
        page.fill("#fw-search-query textarea", question)
        page.click("#fw-search")
        expect(page.locator("#fw-search-results")).to_contain_text(words, timeout=ANSWER_TIMEOUT_MS)
        rows = page.eval_on_selector_all(
            "#fw-search-results tbody tr",
            "rows => rows.map(r => [r.querySelector('.fw-fact-text').textContent, r.querySelector('.fw-source').textContent])")
        source = [at for fact, at in rows if words in fact]
        assert source and where in source[0], (question, rows)

    # The documents table lists each file; the PDF, picked and removed, is gone from the table and
    # the search, the others stay.
    for name in ("guide.html", "harbour.docx"):
        expect(page.locator(f'#fw-sources tr[data-source="{name}"]')).to_have_count(1)
    row = page.locator('#fw-sources tr[data-source="harbour-report.pdf"] td')
    assert row.all_text_contents()[1:3] == ["1", "2"]  # one document, two facts
    page.click("#fw-remove-source input")
    page.fill("#fw-remove-source input", "harbour-report.pdf")
    page.click("li[role=option]:has-text('harbour-report.pdf')")
    page.click("#fw-remove")
    page.wait_for_selector("#fw-remove-result .fw-ok", timeout=ANSWER_TIMEOUT_MS)
    assert "Removed harbour-report.pdf: 1 document(s), 2 fact(s)" in page.text_content("#fw-remove-result")
    expect(page.locator('#fw-sources tr[data-source="harbour-report.pdf"]')).to_have_count(0)
    expect(page.locator('#fw-sources tr[data-source="harbour.docx"]')).to_have_count(1)
    page.fill("#fw-search-query textarea", "Who designed the Velmora breakwater?")
    page.click("#fw-search")
    expect(page.locator("#fw-search-results")).not_to_contain_text("Ilse Varga", timeout=ANSWER_TIMEOUT_MS)
    page.close()


def test_a_bad_file_gets_a_clear_message_and_changes_nothing(browser, ui_url, ui_runtime, tmp_path):
    before = ui_runtime.counts()
    cached = _gradio_copies("broken.tsv")
    page = browser.new_page()
    _upload(page, ui_url, tmp_path / "broken.tsv",
            "Velmora Lighthouse\theight\t60 m\nVelmora Lighthouse\tonly two fields\n", "error")
    message = page.text_content("#fw-build-result").strip()
    assert message.startswith("Not added: broken.tsv:2: ") and "3 tab-separated fields" in message
    assert ui_runtime.counts() == before
    assert _gradio_copies("broken.tsv") <= cached  # a refused upload leaves no copy either
    page.close()


def test_four_sessions_asking_at_once_each_get_their_own_right_answer(browser, ui_url):
    """Four browser sessions ask at once (two answer together, two wait their turn in the queue):
    each gets the right answer to its own question, from a stated fact, and sees only its chat."""
    asked = {"Where did Dorothy Ann Thrupp die?": "London",  # golden questions (tests/test_golden.py)
             "What is the native language of Devina Hermawan?": "Indonesian",
             "What is the occupation of Amal Ayouch?": "pharmacist",
             "What is the genre of Cellulite Soul?": "alternative rock"}
    contexts = [browser.new_context() for _ in asked]  # four sessions: separate cookies and state
    pages = [c.new_page() for c in contexts]
    for page in pages:
        page.goto(ui_url)
    for page, question in zip(pages, asked):
        _ask(page, question)
    traces = [_wait_answer(page, question) for page, question in zip(pages, asked)]
    for page, (question, expected), trace in zip(pages, asked.items(), traces):
        assert trace["question"] == question
        assert expected.casefold() in trace["answer"].casefold(), (question, trace["answer"])
        assert trace["grounded"] and any(expected.casefold() in f["text"].casefold() for f in trace["facts"]), (question, trace["facts"])
        chat = page.text_content("#fw-chat .message-wrap")
        assert question in chat and f"Answer: {trace['answer']}" in chat
        assert not [q for q in asked if q != question and q in chat]  # no session sees another's chat
    for c in contexts:
        c.close()


def test_stop_ends_the_answer_and_the_next_question_is_answered(browser, ui_url):
    page = browser.new_page()
    page.goto(ui_url)
    _ask(page, "Where was Mira Quell born?")
    page.wait_for_selector("#fw-chat .fw-steps", timeout=ANSWER_TIMEOUT_MS)  # the first step: retrieval
    page.click("#fw-stop")  # re-ranking and generation take seconds more: Stop must cut them short
    trace = _wait_answer(page, "Where was Mira Quell born?")
    assert trace.get("stopped"), trace.get("answer")
    assert "Stopped." in page.text_content("#fw-chat .message-wrap")
    generated = [s for s in trace["steps"] if s["step"] == "generate"]
    assert all(s.get("tokens", 0) < 64 for s in generated)  # no attempt ran to its token budget
    question = "Who founded Zorblax Station?"
    _ask(page, question)
    assert _wait_answer(page, question)["question"] == question
    page.close()


def test_ui_binds_loopback_and_rejects_an_empty_question(browser, ui_url):
    assert ui_url.startswith("http://127.0.0.1:")
    page = browser.new_page()
    page.goto(ui_url)
    page.click("#fw-ask")
    page.wait_for_selector("text=the question is empty", timeout=60_000)  # the agent's own check
    page.close()


def test_a_page_of_another_site_cannot_drive_the_ui(browser, ui_url):
    """DNS rebinding (the page's own name resolving to 127.0.0.1) and a foreign page's requests
    are refused before Gradio reads them; the UI's own page goes on working."""
    import httpx

    port = ui_url.rstrip("/").rsplit(":", 1)[1]
    config = f"{ui_url.rstrip('/')}/config"
    assert httpx.get(config, headers={"Host": f"evil.example:{port}"}).status_code == 403
    r = httpx.post(f"{ui_url.rstrip('/')}/gradio_api/queue/join", json={"data": ["Who founded Zorblax Station?"]},
                   headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "evil.example" in r.json()["error"]["message"]
    assert httpx.get(config, headers={"Origin": f"http://127.0.0.1:{port}"}).status_code == 200
    assert httpx.get(config, headers={"Host": f"localhost:{port}"}).status_code == 200
    page = browser.new_page()  # the browser, on the UI's own origin: served as before
    page.goto(ui_url)
    page.wait_for_selector("#fw-ask", timeout=60_000)
    page.close()


def _ask_and_wait(page, question: str) -> dict:
    _ask(page, question)
    return _wait_answer(page, question)


def test_a_session_sends_its_conversation_to_the_agent_and_new_conversation_starts_over(browser, ui_url,
                                                                                         agent_calls, tmp_path):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(ui_url)
    first = _ask_and_wait(page, FOLLOW_UP[0])
    assert agent_calls[-1]["question"] == FOLLOW_UP[0] and agent_calls[-1]["history"] == []
    assert page.get_attribute("#fw-trace .fw-understood", "data-history-turns") == "0"
    second = _ask_and_wait(page, FOLLOW_UP[1])
    # The agent got the session's first exchange: the question, and what the agent said (its
    # generated text, Fact: lines and all; a withheld answer ends with "Answer: I don't know.").
    history = agent_calls[-1]["history"]
    assert agent_calls[-1]["question"] == FOLLOW_UP[1]
    assert [t["role"] for t in history] == ["user", "assistant"] and history[0]["content"] == FOLLOW_UP[0]
    attempts = [s for s in first["steps"] if s["step"] == "generate"]
    assert history[1]["content"].startswith(attempts[-1]["text"].strip())
    assert history[1]["content"].endswith(f"Answer: {first['answer']}")
    # The trace panel says how the question was understood and with how many earlier turns.
    understood = page.locator("#fw-trace .fw-understood")
    assert understood.get_attribute("data-history-turns") == "2"
    standalone = second.get("standalone") or second["question"]
    assert standalone in understood.text_content()
    # The answer is shown grounded (a badge) or withheld (set apart), as the trace says.
    final = page.locator("#fw-chat .message-wrap").text_content()
    if second.get("grounded", second["supported"]):
        assert page.locator("#fw-chat .fw-grounded-badge").count() >= 1
    elif second.get("withheld"):
        assert f"withheld: “{second['withheld']}” — not proven by a stated fact" in final
    page.screenshot(path=str(_shots(tmp_path) / "ui-conversation.png"), full_page=True)
    # Another session has its own conversation; "New conversation" starts this one over.
    other = browser.new_context().new_page()
    other.goto(ui_url)
    _ask_and_wait(other, FOLLOW_UP[1])
    assert agent_calls[-1]["history"] == []
    other.context.close()
    page.click("#fw-clear")
    expect(page.locator("#fw-trace")).to_contain_text("Ask a question")
    _ask_and_wait(page, FOLLOW_UP[1])
    assert agent_calls[-1]["history"] == []
    page.close()


def test_a_follow_up_in_the_ui_is_answered_from_the_first_turn_with_its_fact_highlighted(browser, ui_url, ui_runtime,
                                                                                        tmp_path):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(ui_url)
    _ask_and_wait(page, FOLLOW_UP[0])
    trace = _ask_and_wait(page, FOLLOW_UP[1])
    assert "Buck Owens" in trace["standalone"]
    assert "Buck Owens" in page.text_content("#fw-trace .fw-understood .fw-standalone")
    assert "guitar" in trace["answer"].lower() and trace["grounded"]
    fact = next(f for f in trace["facts"] if "Buck Owens" in f["text"] and "guitar" in f["text"])
    # Highlighted in the answer, with its provenance on hover and in the trace's fact list.
    marks = [m for m in _marks(page, "#fw-chat .fw-final") if m["text"] == fact["text"]]
    assert marks and fact["source"].split(":")[0] in marks[0]["title"]
    assert page.locator("#fw-chat .fw-grounded-badge").last.is_visible()
    row = page.locator(f"#fw-trace li.fw-fact-row[data-fact-id='{fact['fact_id']}']")
    assert fact["text"] in row.text_content() and fact["source"].split(":")[0] in row.text_content()
    page.screenshot(path=str(_shots(tmp_path) / "ui-follow-up.png"), full_page=True)
    page.close()


def test_the_proof_is_drawn_as_a_graph_that_agrees_with_the_trace(browser, ui_url, tmp_path):
    """The Proof panel draws the answer's stated facts: their entities as nodes, one edge per fact
    (its text on hover), the chain and the answer marked as the trace says (the small model's
    answer may vary: the picture is checked against the trace the page shows)."""
    from agent.knowledge.normalize import normalize_answer

    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(ui_url)
    expect(page.locator("#fw-proof")).to_contain_text("the proof of its answer is drawn here")
    question = "Where did Dorothy Ann Thrupp die?"  # a golden question: London, from a stated triple
    trace = _ask_and_wait(page, question)
    facts = trace["facts"]
    assert facts, "the model stated no fact"
    proof = page.locator("#fw-proof .fw-proof")
    expect(proof).to_have_attribute("data-facts", str(len(facts)))
    drawn = int(proof.get_attribute("data-drawn"))
    assert 0 < drawn <= len(facts)
    nodes = page.eval_on_selector_all(
        "#fw-proof svg g.fw-node:not(.fw-node-statement)",
        "els => els.map(e => ({entity: e.dataset.entity, cls: e.getAttribute('class').split(' ')}))")
    edges = page.eval_on_selector_all(
        "#fw-proof svg g.fw-edge",
        "els => els.map(e => ({i: Number(e.dataset.factIndex), from: e.dataset.from, to: e.dataset.to,"
        " cls: e.getAttribute('class').split(' '), title: e.querySelector('title').textContent}))")
    entities = {n["entity"] for n in nodes}
    assert len(edges) == drawn and len({e["i"] for e in edges}) == drawn  # an edge per drawn fact
    if drawn == len(facts):
        assert sorted(e["i"] for e in edges) == list(range(len(facts)))
    chain = set((trace.get("grounding") or {}).get("facts") or [])
    for edge in edges:
        fact = facts[edge["i"]]
        assert fact["text"] in edge["title"]  # the whole fact on hover
        p = fact["provenance"]
        if p.get("subject"):  # a triple: from its subject to its object, both drawn as nodes
            assert (edge["from"], edge["to"]) == (p["subject"], p["object"])
            assert {p["subject"], p["object"]} <= entities
        assert ("fw-edge-chain" in edge["cls"]) == (trace["grounded"] and edge["i"] in chain)
    answers = [n["entity"] for n in nodes if "fw-node-answer" in n["cls"]]
    if trace["grounded"]:
        assert len(answers) == 1
        shown = normalize_answer((trace.get("grounding") or {}).get("short") or trace["answer"])
        assert normalize_answer(answers[0]) == shown or normalize_answer(answers[0]) in shown
        expect(page.locator("#fw-proof .fw-proof-ok")).to_contain_text("grounded")
    else:
        assert not answers
        if trace.get("withheld"):
            expect(page.locator("#fw-proof .fw-proof-broken")).to_contain_text(f"withheld “{trace['withheld']}”")
    # Hovering an edge shows its fact (an SVG <title>), the picture is on screen and readable.
    svg = page.locator("#fw-proof svg.fw-proof-svg")
    assert svg.is_visible() and svg.bounding_box()["width"] > 200
    page.locator("#fw-proof-box").scroll_into_view_if_needed()
    page.screenshot(path=str(_shots(tmp_path) / "ui-proof.png"), full_page=True)
    page.close()


def test_with_an_admin_named_only_that_login_changes_the_knowledge(browser, ui_runtime, tmp_path):
    """`factweave ui --auth-file logins --admin ann`: bob signs in and may ask and search, but his
    controls for changes are off, and a change he sends anyway (the API, a script) is refused
    and changes nothing; ann adds and removes."""
    from gradio_client import Client, handle_file
    from ui_fixtures import free_port

    from ui.app import build_ui, launch

    lamps, bells = tmp_path / "lamps.tsv", tmp_path / "bells.tsv"
    lamps.write_text("Orsk Lamp\tmade by\tTeodor Vash\n")
    bells.write_text("Orsk Bell\tcast by\tIda Holm\n")
    ui_runtime.add_files([lamps])  # before the app is built: a source its Remove list offers
    app = build_ui(ui_runtime, admins=["ann"])
    url = launch(app, port=free_port(), block=False, quiet=True, max_file_size=64 * 1024,
                 auth=[("ann", "pw-ann"), ("bob", "pw-bob")])
    try:
        ann, bob = Client(url, auth=("ann", "pw-ann"), verbose=False), Client(url, auth=("bob", "pw-bob"), verbose=False)
        said = bob.predict([handle_file(str(bells))], api_name="/upload")[0]
        assert "Not added: only an admin login may add knowledge" in said and "signed in as bob" in said
        said = bob.predict("lamps.tsv", api_name="/remove")[0]
        assert "Not removed: only an admin login may remove knowledge" in said
        sources = {row["source"] for row in ui_runtime.sources()}
        assert "lamps.tsv" in sources and "bells.tsv" not in sources

        page = browser.new_page()
        assert page.request.post(f"{url.rstrip('/')}/login", form={"username": "bob", "password": "pw-bob"}).ok
        page.goto(url)
        page.click("button[role=tab]:has-text('Knowledge')")
        for control in ("#fw-build", "#fw-remove"):
            expect(page.locator(control)).to_be_disabled(timeout=ANSWER_TIMEOUT_MS)
        page.fill("#fw-search-query textarea", "Who made Orsk Lamp?")  # reading stays open to him
        page.click("#fw-search")
        expect(page.locator("#fw-search-results")).to_contain_text("Teodor Vash", timeout=ANSWER_TIMEOUT_MS)

        assert "Removed lamps.tsv" in ann.predict("lamps.tsv", api_name="/remove")[0]
        assert "Added" in ann.predict([handle_file(str(bells))], api_name="/upload")[0]
        sources = {row["source"] for row in ui_runtime.sources()}
        assert "lamps.tsv" not in sources and "bells.tsv" in sources
    finally:
        app.close()
        if "bells.tsv" in {row["source"] for row in ui_runtime.sources()}:
            ui_runtime.remove_sources(["bells.tsv"])
