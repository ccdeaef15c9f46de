"""An upload's text is extracted in a worker process that is killed at its budget: the attacker's hostile PDF
(one page drawing a form XObject of 100,000 operators 40 times: 48-57 s in the request thread before) is
refused at GLASSGRAPH_DOCUMENT_SECONDS with its worker killed and nothing stored, and the next upload is
read by a new worker."""
from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from live_server import LiveServer, serve
from test_ingest import pdf_bytes
from test_ingest_http import accepted, ingested

from server.errors import UnreadableDocument
from server.http.document_readers import DocumentReaders
from server.store import GraphStore

TOKEN = "readers-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BUDGET_S = 2.0


def hostile_pdf(operators: int = 100_000, drawings: int = 40) -> bytes:
    """A one-page PDF (flate-compressed: a few KB) whose content draws one form XObject of ``operators``
    text-showing operators ``drawings`` times; pypdf extracts 20,000 of them a second."""
    def stream(head: bytes, data: bytes) -> bytes:
        packed = zlib.compress(data)
        return (b"<< " + head + b" /Filter /FlateDecode /Length " + str(len(packed)).encode() + b" >>\nstream\n"
                + packed + b"\nendstream")

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Fm1 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        stream(b"", b"/Fm1 Do\n" * drawings),
        stream(b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 6 0 R >> >>",
               b"BT /F1 12 Tf " + b"(a) Tj " * operators + b"ET"),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += str(number).encode() + b" 0 obj\n" + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def worker_children() -> set[int]:
    """This process's living children that are worker processes (the server runs in this process)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if fields[1] == str(os.getpid()) and fields[0] != "Z" and b"server.http.query_workers" in command:
            found.add(int(entry.name))
    return found


@pytest.fixture
def server(store: GraphStore) -> Iterator[LiveServer]:
    live = serve(store, token=TOKEN, document_read_s=BUDGET_S)
    yield live
    live.close()


def upload(server: LiveServer, data: bytes) -> requests.Response:
    return requests.post(server.url + "/api/collections/notes/documents", data=data, timeout=120,
                         headers={"Content-Type": "application/pdf", **AUTH})


def test_a_hostile_pdf_is_stopped_at_its_budget_with_its_worker_killed(server: LiveServer,
                                                                       store: GraphStore) -> None:
    before = worker_children()
    reader: set[int] = set()
    answered = threading.Event()

    def watch() -> None:  # the reader that takes the upload: the first new worker (a spare replaces it once killed)
        while not answered.is_set() and not reader:
            reader.update(worker_children() - before)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        response = upload(server, hostile_pdf())
    finally:
        answered.set()
        watcher.join()
    assert response.status_code == 422, response.text
    assert f"more than {BUDGET_S:g} s (GLASSGRAPH_DOCUMENT_SECONDS)" in response.json()["error"]["message"]
    assert reader and not (reader & worker_children())  # the reader is gone
    assert len(store) == 0
    listed = requests.get(server.url + "/api/collections/notes/documents", timeout=30)
    assert listed.status_code == 404  # nothing stored, nothing queued

    fine = accepted(upload(server, pdf_bytes(["Lisbon is the capital of Portugal."])))  # a new reader
    assert ingested(server, fine["url"])["status"] == "ingested"


def test_a_document_past_the_memory_cap_stops_its_reader_and_the_next_is_read() -> None:
    """48 MB of UTF-16 text decoded (and copied) in a reader of 150 MB: refused, and a new reader reads the
    next document."""
    readers = DocumentReaders(budget_s=60, memory_mb=150)
    try:
        with pytest.raises(UnreadableDocument, match=r"more than 150 MB of memory \(GLASSGRAPH_DOCUMENT_MEMORY\)"):
            readers.read(b"\xff\xfe" + ("\U0001F600 a\r\n" * 4_000_000).encode("utf-16-le"), "text/plain", None)
        assert readers.read(b"Lisbon lies on the Tagus.", "text/plain", None).pages[0].text == \
            "Lisbon lies on the Tagus."
    finally:
        readers.close()
