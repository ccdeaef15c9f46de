"""Shared fixtures of the console's browser tests: the real app over the sample store (offline LLM) on a
loopback port, Debian's Chromium driven by Playwright, and screenshots at 1280x800 and 390x844 under
``test-output/screenshots/``.

conftest makes the fixtures available to every test module; a browser test module sets
``pytestmark = requires_chromium``. The ``page`` fixture fails its test on a script error, on anything the
Content-Security-Policy refused, on a failed request and on any request to another host than the app's.

Tests synchronize on the page, never on time: ``wait_idle`` waits for the page's own idle signal (no
request of its scripts in flight: ``static/idle.js``), and the helpers wait for it before they navigate
or return what a request shows. A request the test's own navigation aborted is not a failure.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from live_server import LiveServer

from server.config import PROJECT_ROOT, Config
from server.http.app import create_app
from server.store import GraphStore

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
SCREENSHOTS = PROJECT_ROOT / "test-output" / "screenshots"
SIZES = ((1280, 800), (390, 844))
QUESTION = "What is the capital of France?"
FIRST_NODES = 40  # the most nodes a graph view draws at first, but for the answer's path (docs/decisions.md, 23)
WAIT_MS = 30_000  # upper bound for a page event; the tests wait for content, never measure time
CSP_REFUSAL = "Content Security Policy"  # in Chromium's console error for anything the policy blocked
ABORTED = "net::ERR_ABORTED"
IDLE = 'html[data-requests="0"]'  # static/idle.js: no fetch of the page in flight
# Every graph view has seen its box's new size (cytoscape notices a resize a moment later, and its "resize"
# handler then fits the drawing to the box).
GRAPHS_RESIZED = """() => typeof GlassGraph === "undefined" || Object.values(GlassGraph.instances).every(cy =>
  cy.destroyed() || (cy.width() === cy.container().clientWidth && cy.height() === cy.container().clientHeight))"""

requires_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"Debian chromium is not installed "
                                                                          f"at {CHROMIUM} (apt-get install chromium)")


def serve_console(store: GraphStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app over ``store`` (offline LLM), served by werkzeug on a free loopback port, until closed."""
    config = Config.from_env(environ={}, store_path=str(tmp_path_factory.mktemp("unused")), llm="offline")
    live = LiveServer(create_app(config, store=store))
    yield live.url
    live.close()


@pytest.fixture(scope="module")
def console_url(sample_store: GraphStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app over the sample store."""
    yield from serve_console(sample_store, tmp_path_factory)


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


class Failures:
    """The tab's failed requests, but for those the test itself aborted by leaving the page: a request
    that fails with ``net::ERR_ABORTED`` after the tab began another document (a navigation request of
    its main frame) or after the test ended (the tab closing)."""

    def __init__(self, tab: object) -> None:
        self.failed: list[str] = []
        self.closing = False
        self._documents = 0  # navigation requests of the main frame so far
        self._started: dict[object, int] = {}  # request -> documents when it started
        tab.on("request", lambda request: self._started_request(tab, request))
        tab.on("requestfailed", self._failed_request)

    def _started_request(self, tab: object, request: object) -> None:
        if request.is_navigation_request() and request.frame == tab.main_frame:
            self._documents += 1
        else:
            self._started[request] = self._documents

    def _failed_request(self, request: object) -> None:
        started = self._started.pop(request, self._documents)
        if request.failure == ABORTED and (self.closing or started < self._documents):
            return
        self.failed.append(_failure(request))


def wait_idle(page: object) -> None:
    """Until no request of the page's scripts is in flight (the page's idle signal, ``static/idle.js``)."""
    page.locator(IDLE).wait_for(state="attached")


def follow(page: object, selector: str, url: object) -> None:
    """Clicks the link ``selector`` once the page is idle, and waits until the page it opens (its address
    matching ``url``, a string or pattern) is idle in turn."""
    wait_idle(page)
    page.click(selector)
    page.wait_for_url(url)
    wait_idle(page)


@pytest.fixture
def page(browser: object, console_url: str) -> Iterator[object]:
    """A 1280x800 tab that fails the test on a script error, on anything the CSP refused, on a failed
    request and on a request to any host but the app's (the console must work offline).

    A request the test aborts on purpose (a Stop button) fails with ``net::ERR_ABORTED``: a test that
    expects one removes it from ``tab.failed_requests``. One the test aborts by leaving the page (a
    navigation, the end of the test) is not a failure (``Failures``).
    """
    context = browser.new_context(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    context.set_default_timeout(WAIT_MS)
    tab = context.new_page()
    errors: list[str] = []
    failures = Failures(tab)
    tab.failed_requests = failures.failed
    outside: list[str] = []
    app = urlsplit(console_url).netloc
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("request", lambda request: outside.append(request.url)
           if urlsplit(request.url).scheme in ("http", "https", "ws", "wss")
           and urlsplit(request.url).netloc != app else None)
    refused = refusals(tab)
    yield tab
    failures.closing = True
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
        page.wait_for_function(GRAPHS_RESIZED)
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
    back and the page is idle (the query's response shown, no request of the editor in flight)."""
    set_query(page, query)
    page.keyboard.press("Control+Enter")
    page.locator('#editor[data-check="done"]').wait_for(state="attached")
    wait_idle(page)


def graph(page: object, graph_id: str, script: str) -> object:
    """``script`` (a function of the cytoscape instance) evaluated on the graph view ``graph_id``."""
    return page.evaluate(f"({script})(GlassGraph.instances[{graph_id!r}])")


# A graph view's drawing: its box, and per node its id, IRI, kind, x and box (labels included), as rendered.
LAYOUT = """cy => {
  const box = cy.container().getBoundingClientRect();
  const nodes = cy.nodes().map(n => ({id: n.id(), iri: n.data('iri'), seed: n.hasClass('seed'),
    context: n.hasClass('context'), path: n.hasClass('on-path'), x: n.renderedPosition('x'),
    box: n.renderedBoundingBox({includeLabels: true})}));
  return {width: box.width, height: box.height, nodes};
}"""


def overlaps(a: dict, b: dict) -> bool:
    return a["x1"] < b["x2"] and b["x1"] < a["x2"] and a["y1"] < b["y2"] and b["y1"] < a["y2"]


def assert_readable(drawn: dict) -> None:
    """No two nodes' boxes (labels included) overlap, and every one is inside the graph's box."""
    boxes = [n["box"] for n in drawn["nodes"]]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlaps(a, b)]
    assert all(-1 <= b["x1"] and b["x2"] <= drawn["width"] + 1 and -1 <= b["y1"] and b["y2"] <= drawn["height"] + 1
               for b in boxes)


def assert_context_opens(page: object, graph_id: str, drawn: dict, context: dict) -> None:
    """A click on the collapsed context node ``context`` of ``drawn`` (a LAYOUT) draws what it stood for: more
    nodes, no context node left, and the drawing still readable."""
    graph(page, graph_id, f"cy => void cy.getElementById({context['id']!r}).emit('tap')")
    opened = graph(page, graph_id, LAYOUT)
    assert len(opened["nodes"]) > len(drawn["nodes"]) and not [n for n in opened["nodes"] if n["context"]]
    assert_readable(opened)
