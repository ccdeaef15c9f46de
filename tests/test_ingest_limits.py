"""Ingest's limits are counted while a document is read and split, not after: each fault below was refused
only once everything was built (3 MB of text at chunk size 1: 8-11 s and +590 MB; 2.5 million Markdown
headings: 15 s and +1.2 GB). Each is refused now with memory within the documented bound: the document's
text a few times over plus ``BOUND_MB`` (``MAX_CHUNKS`` spans, ``MAX_PAGES`` sections)."""
from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator

import pytest
import requests
from live_server import LiveServer, serve

from server.errors import LimitExceeded
from server.ingest.documents import MAX_CHUNKS, IngestOptions, chunk_spans
from server.ingest.formats import MAX_PAGES, read_document
from server.store import GraphStore

BOUND_MB = 32  # besides the text: what ingest may hold of a document it refuses, in MB
TOKEN = "limits-token"


def peak_bytes(work: Callable[[], object]) -> int:
    """The most memory Python held at once while ``work`` ran (to be refused)."""
    tracemalloc.start()
    try:
        with pytest.raises(LimitExceeded):
            work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def within_bound(data: bytes) -> int:
    return 4 * len(data) + BOUND_MB * 1024 * 1024


@pytest.mark.parametrize("megabytes", [3, 9.5])
def test_chunk_size_one_over_a_large_text_is_refused_at_the_chunk_limit(megabytes: float) -> None:
    data = b"abc def. " * int(megabytes * 1024 * 1024 / 9)
    options = IngestOptions(chunk_size=1, chunk_overlap=0)
    peak = peak_bytes(lambda: chunk_spans(read_document(data, "text/plain"), options))
    assert peak <= within_bound(data), f"{peak / 2**20:.0f} MB"


def test_the_chunk_limit_counts_across_pages() -> None:
    data = "".join(f"# Section {n}\n\n{'word ' * 50}\n" for n in range(MAX_PAGES)).encode()
    document = read_document(data, "text/markdown")
    assert len(chunk_spans(document, IngestOptions(chunk_size=400, chunk_overlap=0))) == MAX_PAGES
    with pytest.raises(LimitExceeded, match=f"more than {MAX_CHUNKS} chunks"):
        chunk_spans(document, IngestOptions(chunk_size=100, chunk_overlap=0))


def test_millions_of_markdown_headings_are_refused_at_the_page_limit() -> None:
    data = b"# a\n" * 2_500_000
    peak = peak_bytes(lambda: read_document(data, "text/markdown"))
    assert peak <= within_bound(data), f"{peak / 2**20:.0f} MB"
    assert len(read_document(b"# a\n" * MAX_PAGES, "text/markdown").pages) == MAX_PAGES


def test_many_html_sections_are_refused_at_the_page_limit() -> None:
    data = b"<h1>a</h1><p>b</p>" * (MAX_PAGES + 1)
    peak = peak_bytes(lambda: read_document(data, "text/html"))
    assert peak <= within_bound(data), f"{peak / 2**20:.0f} MB"
    empty_headings = b"<h1></h1>" * 50_000 + b"<p>text</p>"  # blank sections are no pages
    assert len(read_document(empty_headings, "text/html").pages) == 1
    bare_headings = b"<h1>a</h1>" * 50_000 + b"<p>text</p>"  # nor are sections of a heading alone
    [page] = read_document(bare_headings, "text/html").pages
    assert page.text.count("a") == 50_000


@pytest.fixture
def server(store: GraphStore) -> Iterator[LiveServer]:
    live = serve(store, token=TOKEN)
    yield live
    live.close()


def test_an_upload_over_the_chunk_limit_is_422_and_stores_nothing(server: LiveServer, store: GraphStore) -> None:
    response = requests.post(server.url + "/api/collections/notes/documents", data=b"abc def. " * 350_000,
                             params={"chunk_size": "1", "chunk_overlap": "0"}, timeout=60,
                             headers={"Content-Type": "text/plain", "Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 422 and f"more than {MAX_CHUNKS} chunks" in response.text
    assert len(store) == 0
