"""The console's document RAG: the trace page of a document RAG session (its passages, and the cited sentences
under the answer linked to the source viewer), called in-process; and in Chromium, the Ask page switched to
Documents, asking, the trace page, and a cited sentence followed to the source viewer, highlighted in view."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from console_browser import follow, requires_chromium, screenshot, wait_idle
from in_process import InProcess
from live_server import LiveServer, Verbs

from server.config import Config
from server.http.app import create_app

TOKEN = "secret"
CANAL = ("Egypt's history is long. The Suez Canal was completed in 1869. It made Egypt a hub of trade. "
         "Britain seized control of the government in 1882.")
ALPS = "Switzerland is mostly mountains. The Alps cover the south of the country and the Jura the northwest."
ANNALS = "".join(f"In year {n} the Nile flooded the delta.\n" for n in range(1, 61)) + CANAL  # a page taller than
# the window, the canal in its last chunk
QUESTION = "When was the Suez Canal completed?"
SENTENCE = "The Suez Canal was completed in 1869."


def documents_app(store_path: Path) -> object:
    """The real app (offline: wordllama vectors, extractive answers) over a new store, writes behind ``TOKEN``."""
    return create_app(Config(store_path=str(store_path), load_sample=False, query_workers=0, token=TOKEN))


def ingest(server: Verbs, url: str, text: str, name: str) -> None:
    """``text`` ingested into the collection ``docs`` as the document ``name``, waited for."""
    response = server.post(f"{url}/api/collections/docs/documents", params={"name": name}, data=text.encode(),
                           headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
    assert response.status_code == 202, response.text
    job = url + response.json()["url"] if response.json()["url"].startswith("/") else response.json()["url"]
    deadline = time.monotonic() + 60
    while (status := server.get(job).json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert status["status"] == "ingested", status


@pytest.fixture
def client(tmp_path: Path) -> Iterator[InProcess]:
    """The app in-process with the canal and the Alps ingested."""
    app = InProcess(documents_app(tmp_path / "store"))
    ingest(app, app.url, CANAL, "egypt.txt")
    ingest(app, app.url, ALPS, "alps.txt")
    yield app
    app.close()


def test_the_trace_page_of_a_document_rag_session_lists_its_passages_and_cited_sentences(client: InProcess) -> None:
    asked = client.post(client.url + "/api/document-rag", json={"query": QUESTION, "collection": "docs",
                                                                "streaming": False})
    assert asked.status_code == 200, asked.text
    page = client.get(client.url + "/console/trace", params={"id": asked.json()["session"]},
                      headers={"Accept": "text/html"})
    assert page.status_code == 200, page.text
    html = page.text
    assert "Retrieved passages" in html and "Selected edges" not in html
    passages = re.findall(r'<li class="passage( selected)?" data-rank="(\d)">(.*?)</li>', html, re.DOTALL)
    assert [(bool(used), rank) for used, rank, _ in passages] == [(True, "1"), (False, "2")]
    assert "egypt.txt" in passages[0][2] and "alps.txt" in passages[1][2]
    assert re.search(r"fused [\d.]+ · bm25 [\d.]+ · cosine [\d.]+", passages[0][2])
    [(href, text)] = re.findall(r'<a class="cited-quote" href="([^"]+)"[^>]*>(.*?)</a>', html, re.DOTALL)
    assert unescape(text) == f'[1] "{SENTENCE}"'
    link = urlsplit(unescape(href))
    query = {key: value for key, [value] in parse_qs(link.query).items()}
    assert (link.path, link.fragment) == ("/console/source", "span")
    assert (int(query["offset"]), int(query["length"])) == (CANAL.index(SENTENCE), len(SENTENCE))
    source = client.get(client.url + link.path, params=query)
    assert source.status_code == 200
    assert unescape(re.search(r'<mark id="span"[^>]*>(.*?)</mark>', source.text).group(1)) == SENTENCE


@pytest.fixture(scope="module")
def console_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Instead of console_browser's (the sample store): the app with the canal and the Alps ingested, on loopback."""
    live = LiveServer(documents_app(tmp_path_factory.mktemp("documents") / "store"))
    ingest(live, live.url, ANNALS, "egypt.txt")
    ingest(live, live.url, ALPS, "alps.txt")
    yield live.url
    live.close()


@requires_chromium
def test_ask_the_documents_and_follow_a_cited_sentence_to_its_source(page: object, console_url: str) -> None:
    page.goto(f"{console_url}/console/ask")
    page.click("details.options summary")
    assert page.is_visible("#entity_limit") and not page.is_visible("#passage_limit")
    page.focus('input[name="mode"][value="graph"]')
    page.keyboard.press("ArrowRight")  # the mode is a radio group: the arrow keys choose
    assert page.is_checked('input[name="mode"][value="documents"]')
    assert parse_qs(urlsplit(page.url).query)["mode"] == ["documents"]  # a link reproduces it
    assert page.is_visible("#passage_limit") and not page.is_visible("#entity_limit")
    assert page.input_value("#passage_limit") == "5" and page.inner_text("#ask-title") == "Ask the documents"
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    page.locator("#live[data-done]").wait_for()
    wait_idle(page)
    assert page.inner_text("#answer") == "The Suez Canal was completed in 1869 [1]."
    assert page.get_attribute("#answer a.mark", "href") == "#cited-1"
    assert page.inner_text(".event-retrieval .count") == "3"
    passages = page.locator(".event-retrieval #passages li.passage")
    assert passages.count() == 3
    assert re.fullmatch(r"#1 Chunk 2 \(chars \d+-\d+\) → Page 1 → egypt\.txt used",
                        passages.nth(0).locator(".passage-head").inner_text())
    assert passages.nth(2).locator(".passage-head").inner_text() == f"#3 Chunk 1 (chars 0-{len(ALPS)}) → Page 1 → " \
                                                                  "alps.txt not used"
    assert re.search(r"fused [\d.]+ · bm25 [\d.]+ · cosine [\d.]+", passages.nth(0).inner_text())
    assert page.inner_text("#cited-1") == f'[1] "{SENTENCE}" in egypt.txt › Page 1'
    screenshot(page, "ask-documents")
    follow(page, "#trace-link a", re.compile(r"/console/trace\?id="))  # the trace page shows them the same way
    assert page.get_attribute("#trace-answer a.mark", "href") == "#cited-1"
    assert page.locator("#passages li.passage").count() == 3
    assert page.inner_text("#cited-1") == f'[1] "{SENTENCE}" in egypt.txt › Page 1'
    follow(page, "#cited-1 a.cited-quote", re.compile(r"/console/source\?.*#span$"))
    span = page.locator("mark#span")
    assert span.inner_text() == SENTENCE and span.get_attribute("title") == "the cited sentence"
    assert page.evaluate("""() => { const box = document.getElementById("span").getBoundingClientRect();
                                    return scrollY > 0 && box.top >= 0 && box.bottom <= innerHeight; }""")
    screenshot(page, "source-cited-sentence")


def test_a_shared_ask_link_keeps_its_collection_and_documents_mode_hides_the_graph_examples(tmp_path: Path) -> None:
    app = create_app(Config(store_path=str(tmp_path / "store"), load_sample=False, query_workers=0, token="t"))
    client = app.test_client()
    response = client.post("/api/collections/notes/documents", data=b"The canal opened in 1869.",
                           query_string={"name": "a.txt"}, headers={"Authorization": "Bearer t",
                                                                    "Content-Type": "text/plain"})
    assert response.status_code == 202
    deadline = time.monotonic() + 30
    while client.get(response.get_json()["url"]).get_json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    page = client.get("/console/ask", query_string={"mode": "documents", "collection": "notes"}).get_data(as_text=True)
    assert "<option selected>notes</option>" in page
    assert '<p class="examples" data-mode="graph" hidden>' in page
    other = client.get("/console/ask", query_string={"collection": "<nosuch>"}).get_data(as_text=True)
    assert "nosuch" not in other  # only a collection the store holds is chosen
