"""The chat UI (Gradio Blocks): ask, watch the answer stream with its constrained fact spans
highlighted, see its proof drawn as a graph (:mod:`ui.proof_graph`), read the trace; upload
knowledge, list its sources and remove one; choose the tree mode, beams and model.

One :class:`~ui.runtime.UIRuntime` (one loaded model) serves every browser session. Answering,
uploading and switching models share one queue (``concurrency`` at a time, default 2: two
generations on one model overlap correctly and finished two questions 1.39x faster than one
after the other on 2 cores, ``benchmarks/concurrency.py``); more wait their turn. Each session keeps its own
chat history and settings; its earlier questions and the agent's replies (``Fact:`` lines and
all) go with each new question as the conversation's history (the last few the agent reads, see
:mod:`agent.pipeline.conversation`), so a follow-up such as "What instrument did he play?" is
understood; "New conversation" starts over.

Example (not run: needs a model; starts the UI)::

    from ui.app import build_ui, launch
    from ui.runtime import UIRuntime

    with UIRuntime(load_settings(model="smollm2-135m")) as runtime:
        launch(build_ui(runtime), port=7860)
"""
from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from html import escape as gr_escape
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from agent.errors import FactweaveError
from agent.events import AnswerEvent
from agent.knowledge.kamel import demo_kamel_root, kamel_questions
from agent.pipeline.conversation import assistant_turn
from agent.web.retrieval import MAX_QUESTION_CHARS
from agent.web.uploads import ACCEPTED, size_text

from .proof_graph import proof_graph_html
from .render import chat_message, search_html, sources_html, step_line, trace_html
from .runtime import AskOptions, UIRuntime
from .uploads import forget_uploads

CSS_PATH = Path(__file__).with_name("style.css")
QUEUE = "factweave-model"  # one queue for everything that uses the model
TREES = [("per-question tree, then the whole KB", "both"), ("per-question tree only", "question"),
         ("whole knowledge base only", "kb")]
INTRO = ("**factweave** answers from facts that exist in its knowledge base. Every `Fact:` line is "
         "constrained, token for token, to a stored fact and <mark class='fw-fact'>highlighted</mark>; "
         "hover a fact for its source, click it to find it in the trace.")


def demo_examples(limit: int = 5) -> list[str]:
    """Questions the demo knowledge answers: demo KB dev questions, whose triples are in the demo
    web. (Questions about the demo corpus's paragraphs are often answered from the wrong fact by
    the small local models: the re-ranker picks a fact about the right subject but not the one
    that answers.)"""
    return [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=limit)]


def _status(runtime: UIRuntime) -> str:
    c, _ = runtime.knowledge()
    return (f"**Knowledge** ({c['web']}): {c['documents']:,} documents, {c['facts']:,} facts in the web, "
            f"{c['keywords']:,} keywords; the fact index holds {c['index_facts']:,} facts "
            f"({c['uploaded_facts']:,} uploaded). Model: `{c['model']}` on {c.get('engine', 'transformers')}.")


def build_ui(runtime: UIRuntime, *, examples: list[str] | None = None, concurrency: int = 2,
             title: str = "factweave", admins: Collection[str] = ()) -> gr.Blocks:
    """The Blocks app over ``runtime`` (not launched: see :func:`launch`). ``admins``: the logins
    that may change what every session shares (upload, remove, switch the model); none named:
    every visitor may. The others ask and search; their buttons for changes are off, and a change
    they send anyway (the API, a script) is refused."""
    admins = frozenset(admins)

    def may_change(request: gr.Request | None) -> bool:
        return not admins or (request is not None and getattr(request, "username", None) in admins)

    def refused(request: gr.Request | None, what: str) -> str:
        who = getattr(request, "username", None) if request is not None else None
        return (f"only an admin login may {what} (this session is signed in as {who or 'nobody'}; "
                f"the admins are named with `factweave ui --admin USER`)")

    def ask(question: str, history: list[dict[str, Any]], tree: str, beams: int, k: int, rerank: bool,
            session: dict[str, Any] | None):
        session = session if session is not None else {}
        options = AskOptions(tree=tree, beams=int(beams), k=int(k), rerank=bool(rerank))
        stop = threading.Event()
        # The conversation so far, as the agent said it (the chat shows it as HTML); the agent
        # checks the question (empty, too long) in this call: its error is the UI's.
        turns = list(session.get("turns") or [])
        try:
            events = runtime.stream(question or "", options, stop, history=turns)
        except FactweaveError as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        session["stop"] = stop
        question = question.strip()  # shown in the chat as typed; no second check: the agent's passed above
        told = len(turns)
        anchor = f"a{len(history)}"
        history = [*history, {"role": "user", "content": gr_escape(question)},
                   {"role": "assistant", "content": chat_message([])}]
        attempts: list[dict[str, Any]] = []
        steps: list[str] = []
        records: list[dict[str, Any]] = []
        reply: AnswerEvent | None = None
        last = 0.0
        try:
            yield history, "", session, trace_html({"question": question, "steps": [], "partial": True},
                                                   history_turns=told), proof_graph_html({"partial": True})
            for event in events:
                kind = event["event"]
                if event["event"] == "token" or event["event"] == "fact":
                    n = event["attempt"]
                    while len(attempts) <= n:
                        attempts.append({"tree": "", "text": "", "facts": []})
                    if event["event"] == "token":
                        attempts[n]["text"] += event["text"]
                    else:
                        attempts[n]["facts"].append(event["fact"])
                elif event["event"] == "step":
                    step = event["step"]
                    records.append(step)
                    steps.append(step_line(step))
                    if step["step"] == "generate":
                        n = step["attempt"]
                        while len(attempts) <= n:
                            attempts.append({"tree": "", "text": "", "facts": []})
                        attempts[n] = {"tree": step["tree"], "text": step.get("text", ""),
                                       "facts": step.get("facts", []), "hop": step.get("hop")}
                elif event["event"] == "answer":
                    reply = event
                now = time.monotonic()
                if kind in ("step", "fact") or now - last > 0.08:
                    last = now
                    history[-1] = {"role": "assistant",
                                   "content": chat_message(attempts, reply, anchor=anchor, steps=steps)}
                    panel = (trace_html(reply["trace"], anchor=anchor, history_turns=told) if reply is not None
                             else trace_html({"question": question, "steps": records, "partial": True},
                                             history_turns=told))
                    yield history, "", session, panel, proof_graph_html(reply["trace"] if reply else {"partial": True})
        except FactweaveError as exc:
            history[-1] = {"role": "assistant", "content": f'<p class="fw-error">Error: {gr_escape(str(exc))}</p>'}
            yield history, "", session, trace_html(None), proof_graph_html(None)
            return
        finally:
            events.close()
        # The answer (a stopped one says so), and its whole trace. A finished answer joins the
        # conversation the next question is asked in; a stopped one is no part of it.
        if reply is not None and not reply["trace"].get("stopped"):
            asked = {"role": "user", "content": reply["trace"]["question"]}
            session["turns"] = runtime.history(options, [*turns, asked, {"role": "assistant",
                                                                         "content": assistant_turn(reply)}])
        history[-1] = {"role": "assistant", "content": chat_message(attempts, reply, anchor=anchor, steps=steps)}
        final = reply["trace"] if reply else None
        yield history, "", session, trace_html(final, anchor=anchor, history_turns=told), proof_graph_html(final)

    def new_conversation(session: dict[str, Any] | None):
        if session is not None:
            session["turns"] = []
        return [], trace_html(None), proof_graph_html(None), session

    def stop_answer(session: dict[str, Any] | None) -> None:
        if session and session.get("stop") is not None:
            session["stop"].set()

    def knowledge() -> tuple[str, str, Any]:
        """The status line, the sources table and the sources to pick from, as they are now."""
        _, sources = runtime.knowledge()
        names = [row["source"] for row in sources]
        return _status(runtime), sources_html(sources), gr.update(choices=names, value=None)

    def page(request: gr.Request) -> tuple[Any, ...]:
        """A page load: the knowledge as it is now, and the controls for changes on for admins only."""
        allowed = gr.update(interactive=may_change(request))
        return (*knowledge(), allowed, allowed, allowed, allowed)

    def upload(files: list[Any] | None, request: gr.Request,
               progress: gr.Progress = gr.Progress()) -> tuple[str, str, str, Any]:
        if not files:
            raise gr.Error("choose one or more files first", print_exception=False)
        paths = [Path(getattr(f, "name", f)) for f in files]
        if not may_change(request):
            forget_uploads(paths, Path(get_upload_folder()))
            return f'<p class="fw-error">Not added: {gr_escape(refused(request, "add knowledge"))}</p>', *knowledge()
        try:
            report = runtime.add_files(paths, lambda fraction, message: progress(fraction, desc=message))
        except FactweaveError as exc:
            return f'<p class="fw-error">Not added: {gr_escape(str(exc))}</p>', *knowledge()
        finally:  # the upload keeps its own copy (uploads/pending/) until it is complete
            forget_uploads(paths, Path(get_upload_folder()))
        return (f'<p class="fw-ok">Added {gr_escape(report["files"])}: {report["new_facts"]} facts in '
                f'{report["seconds"]:.1f} s.</p>', *knowledge())

    def remove(source: str | None, request: gr.Request,
               progress: gr.Progress = gr.Progress()) -> tuple[str, str, str, Any]:
        if not may_change(request):
            return f'<p class="fw-error">Not removed: {gr_escape(refused(request, "remove knowledge"))}</p>', *knowledge()
        try:
            report = runtime.remove_sources([source] if source else [],
                                            lambda fraction, message: progress(fraction, desc=message))
        except FactweaveError as exc:
            return f'<p class="fw-error">Not removed: {gr_escape(str(exc))}</p>', *knowledge()
        said = (f'Removed {gr_escape(source or "")}: {report.get("documents", 0)} document(s), '
                f'{report.get("facts", 0)} fact(s) from the web, {report["uploaded_removed"]} from the uploaded '
                "facts of the fact index.")
        if report.get("pending_dropped"):
            said += f' Dropped from the upload cut short: {gr_escape(", ".join(report["pending_dropped"]))}.'
        if report.get("pending"):  # an earlier upload still cannot be completed: say which, and how to clear it
            said += f' {gr_escape(report["pending"])}.'
        return f'<p class="fw-ok">{said}</p>', *knowledge()

    def search(query: str, k: int) -> str:
        query = " ".join((query or "").split())
        if not query:
            raise gr.Error("type something to search for", print_exception=False)
        try:
            return search_html(runtime.web.search(query, int(k)).hits)
        except FactweaveError as exc:  # the web's own bounds (a query over MAX_QUESTION_CHARS)
            raise gr.Error(str(exc), print_exception=False) from None

    def switch_model(name: str, request: gr.Request, progress: gr.Progress = gr.Progress()) -> str:
        if not may_change(request):
            raise gr.Error(refused(request, "switch the model"), print_exception=False)
        try:
            runtime.switch_model(name, lambda fraction, message: progress(fraction, desc=message))
        except FactweaveError as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        return _status(runtime)

    # Gradio's cache of uploads and generated files: what forget_uploads missed (a closed tab
    # mid-upload) goes after an hour.
    with gr.Blocks(title=title, fill_width=True, delete_cache=(3600, 3600)) as app:
        session = gr.State(None)
        gr.Markdown(INTRO, elem_id="fw-intro")
        with gr.Tab("Chat"):
            with gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=420):
                    chat = gr.Chatbot(elem_id="fw-chat", height=560, show_label=False, feedback_options=None, buttons=["copy"],
                                      placeholder="Ask about the knowledge base.")
                    with gr.Row():
                        # max_length: the browser stops typing at the agent's bound, a convenience (the
                        # agent is the guard: a question sent past the page is refused by it, above)
                        question = gr.Textbox(placeholder="Ask a question, e.g. Where was Laurie Graff born?",
                                              show_label=False, scale=5, elem_id="fw-question",
                                              max_length=MAX_QUESTION_CHARS,
                                              submit_btn=False)
                        ask_btn = gr.Button("Ask", variant="primary", scale=1, elem_id="fw-ask", min_width=80)
                        stop_btn = gr.Button("Stop", variant="stop", scale=1, elem_id="fw-stop", min_width=80)
                    if examples:
                        gr.Examples(examples=[[q] for q in examples], inputs=[question], label="Example questions",
                                    elem_id="fw-examples")
                    clear_btn = gr.Button("New conversation", size="sm", elem_id="fw-clear")
                with gr.Column(scale=2, min_width=360):
                    with gr.Accordion("Settings", open=False, elem_id="fw-settings"):
                        tree = gr.Radio(TREES, value=_default_tree(runtime), label="Fact tree while generating",
                                        elem_id="fw-tree")
                        beams = gr.Slider(1, 8, value=max(1, runtime.settings.beams), step=1, label="Beams",
                                          elem_id="fw-beams")
                        k = gr.Slider(1, 30, value=runtime.settings.k, step=1, label="Facts retrieved per query (k)",
                                      elem_id="fw-k")
                        rerank = gr.Checkbox(value=runtime.settings.effective_rerank(), label="Re-rank the retrieved facts",
                                             elem_id="fw-rerank")
                        with gr.Row():
                            model = gr.Dropdown(runtime.offered_models(), value=runtime.model_name,
                                                label="Model (shared by every session)", elem_id="fw-model",
                                                scale=3)
                            model_btn = gr.Button("Load", size="sm", scale=1, elem_id="fw-load-model")
                    with gr.Accordion("Proof", open=True, elem_id="fw-proof-box"):
                        proof = gr.HTML(proof_graph_html(None), elem_id="fw-proof")
                    with gr.Accordion("Trace", open=True, elem_id="fw-trace-box"):
                        trace = gr.HTML(trace_html(None), elem_id="fw-trace")
        with gr.Tab("Knowledge"):
            status = gr.Markdown(_status(runtime), elem_id="fw-status")
            files = gr.File(file_count="multiple", file_types=list(ACCEPTED), label=(
                "Triples (.tsv, .nt, .jsonl: subject, predicate, object) or documents (.txt, .md, .json, .jsonl: "
                "title, text; .pdf, .html, .docx"
                f"); at most {size_text(runtime.max_upload_bytes)} a file"), elem_id="fw-files")
            build_btn = gr.Button("Add to the knowledge", variant="primary", elem_id="fw-build")
            build_result = gr.HTML(elem_id="fw-build-result")
            listed = runtime.sources()
            sources = gr.HTML(sources_html(listed), elem_id="fw-sources")
            with gr.Row():
                picked = gr.Dropdown([row["source"] for row in listed], value=None, label="Source to remove",
                                     scale=4, elem_id="fw-remove-source")
                remove_btn = gr.Button("Remove", variant="stop", scale=1, elem_id="fw-remove")
            remove_result = gr.HTML(elem_id="fw-remove-result")
            with gr.Row():
                query = gr.Textbox(label="Search the facts", scale=4, elem_id="fw-search-query",
                                   max_length=MAX_QUESTION_CHARS)
                search_k = gr.Slider(1, 50, value=10, step=1, label="k", scale=1)
                search_btn = gr.Button("Search", scale=1, elem_id="fw-search")
            found = gr.HTML(elem_id="fw-search-results")

        inputs = [question, chat, tree, beams, k, rerank, session]
        outputs = [chat, question, session, trace, proof]
        common: dict[str, Any] = {"concurrency_id": QUEUE, "concurrency_limit": concurrency, "show_progress": "hidden"}
        ask_btn.click(ask, inputs, outputs, **common)
        question.submit(ask, inputs, outputs, **common)
        # Stop sets the session's flag: generation ends at the next token and the answer's event
        # finishes normally (cancelling the event instead would leave the model mid-generation).
        stop_btn.click(stop_answer, [session], None, queue=False)
        clear_btn.click(new_conversation, [session], [chat, trace, proof, session], queue=False)
        build_btn.click(upload, [files], [build_result, status, sources, picked], concurrency_id=QUEUE,
                        concurrency_limit=concurrency)
        remove_btn.click(remove, [picked], [remove_result, status, sources, picked], concurrency_id=QUEUE,
                         concurrency_limit=concurrency)
        search_btn.click(search, [query, search_k], [found], concurrency_id="factweave-search")
        query.submit(search, [query, search_k], [found], concurrency_id="factweave-search")
        model_btn.click(switch_model, [model], [status], concurrency_id=QUEUE, concurrency_limit=concurrency)
        # Another session's changes too; and which controls this login may use.
        app.load(page, None, [status, sources, picked, build_btn, remove_btn, model_btn, files], queue=False)
    app.queue(default_concurrency_limit=concurrency, max_size=64)
    return app


def _default_tree(runtime: UIRuntime) -> str:
    tree = runtime.settings.tree
    return tree if tree in ("both", "question", "kb") else "both"


def launch(app: gr.Blocks, *, host: str = "127.0.0.1", port: int = 7860, share: bool = False,
           auth: tuple[str, str] | list[tuple[str, str]] | None = None, max_file_size: int = 20 * 1024 * 1024, block: bool = True,
           quiet: bool = False, allowed_hosts: Sequence[str] = ()) -> str:
    """Serve ``app`` on ``host:port`` (loopback by default); return its local URL. ``block=False``
    returns at once (tests, notebooks). Requests naming another ``Host`` than loopback, an IP
    address or one of ``allowed_hosts``, or sent from another site's page, are refused
    (:mod:`agent.http.origins`: no web page the user visits can drive the UI)."""
    from starlette.middleware import Middleware

    from agent.http.origins import OriginGuard, OriginPolicy

    policy = OriginPolicy.of([*allowed_hosts, *([".gradio.live"] if share else [])])
    guard = Middleware(OriginGuard, policy=policy, json_posts=False)
    _, url, _ = app.launch(server_name=host, server_port=port, share=share, auth=auth, max_file_size=max_file_size,
                           prevent_thread_lock=not block, inbrowser=False, quiet=quiet, show_error=True,
                           css=CSS_PATH.read_text(encoding="utf-8"), footer_links=[], ssr_mode=False,
                           app_kwargs={"middleware": [guard]})
    return url
