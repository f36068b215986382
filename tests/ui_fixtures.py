"""Fixtures for the chat UI: one UI runtime over a knowledge web of its own (uploads change it),
and the Gradio app served on a free loopback port for the browser tests."""
from __future__ import annotations

import os
import shutil
import socket

import pytest

CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ui_runtime(tmp_path_factory, smollm, cache_dir, embedder):
    """The runtime the UI shares: SmolLM2, the demo KB index, a fresh copy of the test web."""
    from agent.settings import load_settings
    from agent.web.web import KnowledgeWeb
    from agent_fixtures import build_small_web
    from ui.runtime import UIRuntime

    web = KnowledgeWeb.open(tmp_path_factory.mktemp("ui-web") / "web", embedder=embedder)
    build_small_web(web)
    settings = load_settings(model="smollm2-135m", cache=cache_dir, max_tokens=64, rerank=True)
    runtime = UIRuntime(settings, loaded=smollm, web=web, progress=False, max_upload_bytes=64 * 1024)
    # A short reply budget for the re-ranker: it only names fact numbers (keeps the tests quick).
    runtime.reranker.max_tokens = 12
    yield runtime
    runtime.close()
    web.close()


@pytest.fixture(scope="session")
def ui_url(ui_runtime):
    """The UI served on 127.0.0.1 (a free port) for the session."""
    from ui.app import build_ui, launch

    app = build_ui(ui_runtime, examples=["Who founded Zorblax Station?"])
    url = launch(app, port=free_port(), block=False, quiet=True, max_file_size=64 * 1024)
    yield url
    app.close()


def chromium_path() -> str | None:
    """Where Chromium is: ``$FACTWEAVE_CHROMIUM``, Debian's, one on PATH, else None (Playwright's own)."""
    return os.environ.get("FACTWEAVE_CHROMIUM") or (CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"))


def no_browser(message: str) -> None:
    """Skip, or fail where FACTWEAVE_REQUIRE_BROWSER is set (``.ci/run`` sets it)."""
    if os.environ.get("FACTWEAVE_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


def require_chromium() -> None:
    """Before anything is set up for a browser test: a Chromium named but not there ends it at once
    (the UI and its model are not loaded for a test that cannot run)."""
    path = chromium_path()
    if path is not None and not os.access(path, os.X_OK):
        no_browser(f"no Chromium at {path}: apt-get install chromium")


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium (else Playwright's own) driven by Playwright. Without either the browser
    tests skip, except where FACTWEAVE_REQUIRE_BROWSER is set (``.ci/run`` sets it): there they fail.
    One per module: Playwright's sync API keeps an event loop running in the main thread while it
    is open, and later modules (MCP's clients) run their own."""
    from playwright.sync_api import Error, sync_playwright

    path = chromium_path()
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])  # path None: Playwright's
        except Error as exc:
            no_browser(f"no Chromium ({str(exc).splitlines()[0]}): apt-get install chromium")
        yield browser
        browser.close()
