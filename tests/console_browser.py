"""Shared fixtures of the console's browser tests: the real app over the sample store (offline LLM) on a
loopback port, Debian's Chromium driven by Playwright, and screenshots at 1280x800 and 390x844 under
``test-output/screenshots/``.

conftest makes the fixtures available to every test module; a browser test module sets
``pytestmark = requires_chromium``. The ``page`` fixture fails its test on a script error, on anything the
Content-Security-Policy refused, on a failed request and on any request to another host than the app's.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from werkzeug.serving import make_server

from server.config import PROJECT_ROOT, Config
from server.http.app import create_app
from server.store import GraphStore

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
SCREENSHOTS = PROJECT_ROOT / "test-output" / "screenshots"
SIZES = ((1280, 800), (390, 844))
QUESTION = "What is the capital of France?"
WAIT_MS = 30_000  # upper bound for a page event; the tests wait for content, never measure time
CSP_REFUSAL = "Content Security Policy"  # in Chromium's console error for anything the policy blocked

requires_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"Debian chromium is not installed "
                                                                          f"at {CHROMIUM} (apt-get install chromium)")


@pytest.fixture(scope="module")
def console_url(sample_store: GraphStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app over the sample store, served by werkzeug on a free loopback port."""
    config = Config.from_env(environ={}, store_path=str(tmp_path_factory.mktemp("unused")), llm="offline")
    server = make_server("127.0.0.1", 0, create_app(config, store=sample_store), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def refusals(tab: object) -> list[str]:
    """The console errors of ``tab`` for whatever the Content-Security-Policy blocked, as they come."""
    found: list[str] = []
    tab.on("console", lambda message: found.append(message.text)
           if message.type == "error" and CSP_REFUSAL in message.text else None)
    return found


def _failure(request: object) -> str:
    return f"{request.method} {request.url}: {request.failure}"


@pytest.fixture
def page(browser: object, console_url: str) -> Iterator[object]:
    """A 1280x800 tab that fails the test on a script error, on anything the CSP refused, on a failed
    request and on a request to any host but the app's (the console must work offline).

    A request the test aborts on purpose (a Stop button) fails with ``net::ERR_ABORTED``: a test that
    expects one removes it from ``tab.failed_requests``.
    """
    context = browser.new_context(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    context.set_default_timeout(WAIT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.failed_requests = []
    outside: list[str] = []
    app = urlsplit(console_url).netloc
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("requestfailed", lambda request: tab.failed_requests.append(_failure(request)))
    tab.on("request", lambda request: outside.append(request.url)
           if urlsplit(request.url).scheme in ("http", "https", "ws", "wss")
           and urlsplit(request.url).netloc != app else None)
    refused = refusals(tab)
    yield tab
    context.close()
    assert not errors, f"JavaScript errors: {errors}"
    assert not refused, f"refused by the Content-Security-Policy: {refused}"
    assert not tab.failed_requests, f"failed requests: {tab.failed_requests}"
    assert not outside, f"requests outside the app: {outside}"


@pytest.fixture(scope="module")
def session_iri(console_url: str) -> str:
    """A GraphRAG session for the France question, asked through the HTTP API (not streamed)."""
    response = requests.post(f"{console_url}/api/graph-rag", json={"query": QUESTION, "streaming": False}, timeout=60)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["error"] is None and "Paris" in body["answer"]
    return body["session"]


def screenshot(page: object, name: str) -> None:
    """The page at both sizes: the viewport as ``{name}-{w}x{h}.png``, the whole length as ``...-full.png``.

    At each size the page must not scroll sideways (wide content scrolls inside its own box).
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}x{height}.png"))
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}x{height}-full.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {width}px wide"
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})


def set_query(page: object, query: str) -> None:
    """Replaces the SPARQL console editor's text with ``query``: select all, delete, then the text as one
    input (inserted over a selection of highlighted lines, Chromium's own editing would try to keep their
    style with an inline style attribute, which the Content-Security-Policy refuses)."""
    page.click("#editor .cm-content")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    if query:
        page.keyboard.insert_text(query)


def run_query(page: object, query: str) -> None:
    """Runs ``query`` in the SPARQL console (Ctrl+Enter), and waits until the editor's check of it is
    back (a check still under way when a test leaves the page would be an aborted request)."""
    set_query(page, query)
    page.keyboard.press("Control+Enter")
    page.locator('#editor[data-check="done"]').wait_for(state="attached")
