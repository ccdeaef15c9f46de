"""Documents over HTTP: a real server on 127.0.0.1 ingesting in the background, with the real openai
client extracting facts from a scripted OpenAI-compatible server (tests/extraction_llm.py).

Every wait is a bounded poll of the document's status URL, never a sleep that hopes.
"""
from __future__ import annotations

import io
import json
import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import requests
from extraction_llm import graph_rag_reply  # noqa: F401  (test_ingest_cli imported it from here)
from live_server import LiveServer, serve
from pyoxigraph import NamedNode
from scripted_llm import Recorded, Reply, ScriptedLLM
from test_ingest import pdf_bytes

from server import vocab
from server.store import GraphStore

TOKEN = "ingest-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WAIT_S = 60.0  # the longest any document may take to be ingested here
NOTES = ("Lisbon is the capital of Portugal. Porto lies on the Douro.\n\n"
         "Braga is older than Lisbon. Coimbra has the oldest university of Portugal.\n")


def stalling(seconds: float, release: threading.Event | None = None) -> Callable[[Recorded], Reply]:
    """:func:`graph_rag_reply`, with every extraction call answered only after ``seconds`` (with ``release``:
    as soon as it is set, ``seconds`` at the most)."""
    def reply(request: Recorded) -> Reply:
        answer = graph_rag_reply(request)
        if "<text>\n" in request.prompt:
            if release is None:
                answer.delay_s = seconds
            else:
                release.wait(seconds)
        return answer
    return reply


def start(store: GraphStore, scripted: ScriptedLLM | None = None, **settings: object) -> LiveServer:
    """The app over ``store`` with the write token; extraction (and answers) by ``scripted`` if given."""
    llm = {"llm": "openai", "llm_base_url": scripted.base_url, "llm_model": "scripted-model", "llm_retries": 0} \
        if scripted is not None else {}
    return serve(store, token=TOKEN, **{**llm, **settings})


@pytest.fixture
def server(store: GraphStore, llm: ScriptedLLM) -> Iterator[LiveServer]:
    live = start(store, llm)
    yield live
    live.close()


def documents_url(server: LiveServer, collection: str = "notes") -> str:
    return f"{server.url}/api/collections/{collection}/documents"


def post_text(server: LiveServer, data: bytes, collection: str = "notes", content_type: str = "text/plain",
              headers: dict[str, str] | None = None, **params: str) -> requests.Response:
    return requests.post(documents_url(server, collection), data=data, params=params, timeout=30,
                         headers={"Content-Type": content_type, **AUTH, **(headers or {})})


def error_of(response: requests.Response, status: int) -> str:
    """The message of an error answer, after checking its status and JSON shape."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body["error"]) == {"type", "message"}, body
    return body["error"]["message"]


def wait_for(server: LiveServer, url: str, until: Callable[[dict], bool]) -> dict:
    """Poll ``url`` (a status URL, relative to the server) until ``until(status)``; every answer on
    the way must be the document's status (200), never a 404 between the queue and the store."""
    deadline = time.monotonic() + WAIT_S
    while True:
        response = requests.get(server.url + url, timeout=30)
        assert response.status_code == 200, (response.status_code, response.text)
        status = response.json()
        if until(status):
            return status
        assert status["status"] in ("queued", "running"), status
        assert time.monotonic() < deadline, f"still {status['status']} after {WAIT_S:g} s: {status}"
        time.sleep(0.05)


def ingested(server: LiveServer, url: str) -> dict:
    return wait_for(server, url, lambda status: status["status"] in ("ingested", "failed"))


def accepted(response: requests.Response) -> dict:
    """The 202 answer of a queued document: its id, status and status URL (also in Location)."""
    assert response.status_code == 202, (response.status_code, response.text)
    body = response.json()
    assert re.fullmatch(r"[0-9a-f]{20}-[0-9a-f]{8}", body["id"]) and body["status"] in ("queued", "running"), body
    assert body["url"].endswith(f"/documents/{body['id']}")
    assert response.headers["Location"].endswith(body["url"])
    return body


def listed(server: LiveServer, collection: str = "notes") -> list[dict]:
    response = requests.get(documents_url(server, collection), timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["documents"]


# --- the round trip ------------------------------------------------------------------------------

def test_a_text_body_is_queued_ingested_listed_read_and_deleted(server: LiveServer, store: GraphStore) -> None:
    body = accepted(post_text(server, NOTES.encode(), title="Portuguese notes", chunk_size="80",
                              chunk_overlap="10"))
    status = ingested(server, body["url"])
    assert status["status"] == "ingested" and status["error"] is None, status
    [document] = listed(server)
    assert {key: document[key] for key in ("id", "title", "media_type", "pages", "status")} == {
        "id": body["id"], "title": "Portuguese notes", "media_type": "text/plain", "pages": 1, "status": "ingested"}
    assert document["chunks"] > 1 and document["facts"] > 0, document
    assert status.pop("warning_messages") and status == document  # GET one is the listed entry, with warnings
    knowledge = vocab.collection_graph("notes")
    lisbon = vocab.entity_iri("Lisbon")
    assert next(store.quads(lisbon, None, None, knowledge), None) is not None

    deleted = requests.delete(server.url + body["url"], headers=AUTH, timeout=30)
    assert deleted.status_code == 200 and deleted.json() == {"deleted": body["id"], "collection": "notes"}
    assert "no document" in error_of(requests.get(server.url + body["url"], timeout=30), 404)
    assert next(store.quads(NamedNode(document["iri"]), None, None, None), None) is None
    assert next(store.quads(lisbon, None, None, knowledge), None) is None
    assert "no document" in error_of(requests.delete(server.url + body["url"], headers=AUTH, timeout=30), 404)


def test_a_multipart_upload_takes_its_title_and_chunking_from_the_form(server: LiveServer) -> None:
    markdown = b"# Iberia\n\n## Portugal\n\nLisbon and Porto.\n\n## Spain\n\nMadrid and Seville.\n"
    response = requests.post(documents_url(server), headers=AUTH, timeout=30,
                             files={"file": ("iberia.md", markdown, "text/markdown")},
                             data={"title": "Two countries", "chunk_size": "500", "chunk_overlap": "0"})
    body = accepted(response)
    status = ingested(server, body["url"])
    assert (status["status"], status["title"], status["media_type"], status["pages"]) == (
        "ingested", "Two countries", "text/markdown", 3)
    assert status["facts"] > 0


def test_a_multipart_upload_needs_a_file_part(server: LiveServer, store: GraphStore) -> None:
    response = requests.post(documents_url(server), headers=AUTH, timeout=30, files={"notes": ("a.txt", b"Lisbon.")},
                             data={"title": "No file part"})
    assert "a part named 'file'" in error_of(response, 400)
    assert len(store) == 0


@pytest.mark.parametrize("repeated", ["file", "title"])
def test_a_multipart_upload_with_a_part_twice_is_refused(server: LiveServer, store: GraphStore, repeated: str) -> None:
    """Two documents (or two titles) in one upload would keep one and drop the other without a word."""
    parts = [("file", ("a.txt", b"Lisbon is the capital of Portugal.", "text/plain")), ("title", (None, "Notes"))]
    parts.append(("file", ("b.txt", b"Madrid is the capital of Spain.", "text/plain")) if repeated == "file"
                 else ("title", (None, "Other notes")))
    response = requests.post(documents_url(server), headers=AUTH, timeout=30, files=parts)
    assert f"more than one part named '{repeated}'" in error_of(response, 400)
    assert len(store) == 0
    assert requests.get(documents_url(server), timeout=30).status_code == 404  # nothing queued: no collection


def test_the_same_bytes_again_are_unchanged(server: LiveServer, store: GraphStore) -> None:
    first = accepted(post_text(server, NOTES.encode()))
    ingested(server, first["url"])
    size = len(store)
    again = post_text(server, NOTES.encode(), title="Another title")
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "unchanged" and again.json()["id"] == first["id"]
    assert "already" in again.json()["message"]
    assert len(store) == size and len(listed(server)) == 1
    mislabelled = error_of(post_text(server, NOTES.encode(), content_type="application/pdf"), 415)
    assert "not a PDF" in mislabelled  # known bytes that contradict their type are refused as new ones are
    refused = error_of(post_text(server, NOTES.encode(), replace="yes"), 400)
    assert refused == "'replace' must be true or false, got 'yes'"
    redone = accepted(post_text(server, NOTES.encode(), title="Another title", replace="true"))
    assert redone["id"] == first["id"]
    deadline = time.monotonic() + WAIT_S  # the old version answers until the new one replaces it
    while (status := requests.get(server.url + redone["url"], timeout=30).json())["title"] != "Another title":
        assert status["status"] in ("ingested", "queued", "running") and time.monotonic() < deadline, status
        time.sleep(0.05)
    assert status["status"] == "ingested"
    assert len(listed(server)) == 1


def test_a_pdf_upload_has_its_pages(server: LiveServer) -> None:
    pdf = pdf_bytes(["Lisbon is in Portugal.", "Madrid is in Spain.", "Andorra is between them."])
    body = accepted(post_text(server, pdf, content_type="application/pdf", title="Three pages"))
    status = ingested(server, body["url"])
    assert (status["status"], status["media_type"], status["pages"], status["chunks"]) == (
        "ingested", "application/pdf", 3, 3)


# --- refusals: nothing queued, nothing written --------------------------------------------------

def encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(pdf_bytes(["A secret page."]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pageless_pdf() -> bytes:
    from pypdf import PdfWriter

    out = io.BytesIO()
    PdfWriter().write(out)
    return out.getvalue()


BAD_DOCUMENTS = [  # (body, declared type, status, the point of the message)
    (bytes(range(256)) * 4, "text/plain", 415, "binary, not text"),
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "text/plain", 415, "PNG image"),
    (pdf_bytes(["Not text."]), "text/plain", 415, "is a PDF, but it is declared text/plain"),
    (b"Plain words.", "image/png", 415, "'image/png' are not read"),
    (pdf_bytes(["Lisbon is in Portugal."])[:600], "application/pdf", 422, "truncated"),
    (encrypted_pdf(), "application/pdf", 422, "encrypted"),
    (pageless_pdf(), "application/pdf", 422, "no pages"),
    (b"", "text/plain", 422, "empty"),
    (b" \n\t\n", "text/plain", 422, "empty"),
]


def test_bad_documents_are_refused_at_once_and_leave_nothing(server: LiveServer, store: GraphStore,
                                                             llm: ScriptedLLM) -> None:
    good = accepted(post_text(server, b"Lisbon and Porto are cities.", title="Good"))
    ingested(server, good["url"])
    before, calls = sorted(map(str, store.quads())), len(llm.requests)
    for data, declared, status, point in BAD_DOCUMENTS:
        message = error_of(post_text(server, data, content_type=declared), status)
        assert point in message, (declared, message)
    assert [d["title"] for d in listed(server)] == ["Good"]
    assert sorted(map(str, store.quads())) == before
    assert len(llm.requests) == calls  # no extraction was started


def test_writes_need_the_token_and_nothing_is_queued_without_it(server: LiveServer, llm: ScriptedLLM) -> None:
    missing = requests.post(documents_url(server), data=NOTES.encode(), headers={"Content-Type": "text/plain"},
                            timeout=30)
    assert "Authorization: Bearer" in error_of(missing, 401)
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    wrong = post_text(server, NOTES.encode(), headers={"Authorization": "Bearer not-the-token"})
    assert "wrong bearer token" in error_of(wrong, 403)
    assert "no collection 'notes'" in error_of(requests.get(documents_url(server), timeout=30), 404)
    assert llm.requests == []
    good = accepted(post_text(server, NOTES.encode()))
    ingested(server, good["url"])
    refused = requests.delete(server.url + good["url"], timeout=30)
    assert "Authorization: Bearer" in error_of(refused, 401)
    assert len(listed(server)) == 1


def test_a_read_only_server_refuses_to_ingest(store: GraphStore) -> None:
    live = start(store, read_only=True)
    try:
        assert "read-only" in error_of(post_text(live, NOTES.encode()), 403)
        assert len(store) == 0
    finally:
        live.close()


def test_an_llm_that_cannot_be_set_up_refuses_uploads_but_not_reading(store: GraphStore) -> None:
    from server.ingest.documents import Ingester
    from server.rag.label_index import LabelIndex

    report = Ingester(store, LabelIndex(store), None).ingest(b"Lisbon and Porto.", "notes", name="notes.txt")
    live = start(store, llm="openai")  # neither an API key nor a base URL
    try:
        message = error_of(post_text(live, NOTES.encode()), 502)
        assert message.startswith("cannot set up the LLM: GLASSGRAPH_LLM=openai needs"), message
        assert [d["id"] for d in listed(live)] == [report.id]
        assert requests.get(f"{documents_url(live)}/{report.id}", timeout=30).json()["status"] == "ingested"
        assert requests.delete(f"{documents_url(live)}/{report.id}", headers=AUTH, timeout=30).status_code == 200
        asked = requests.post(f"{live.url}/api/graph-rag", json={"query": "Lisbon?", "collection": "notes"}, timeout=30)
        assert asked.status_code == 502 and asked.json()["error"]["message"].startswith("cannot set up the LLM")
    finally:
        live.close()


def test_a_body_over_the_limits_is_413(store: GraphStore) -> None:
    live = start(store, max_body_bytes=1000, max_document_bytes=500)
    try:
        message = error_of(post_text(live, b"word " * 400), 413)
        assert "limit of 1000 bytes (GLASSGRAPH_MAX_BODY)" in message
        message = error_of(post_text(live, b"word " * 150), 413)
        assert "750 bytes, over the limit of 500 (GLASSGRAPH_MAX_DOCUMENT)" in message
        assert len(store) == 0
    finally:
        live.close()


@pytest.mark.parametrize("params, point", [
    ({"chunk_size": "big"}, "'chunk_size' must be an integer, got 'big'"),
    ({"chunk_size": "0"}, "'chunk_size' must be between 1 and"),
    ({"chunk_overlap": "-1"}, "'chunk_overlap' must be between 0 and"),
    ({"chunk_size": "100", "chunk_overlap": "100"}, "less than the chunk size 100"),
])
def test_bad_chunking_is_400(server: LiveServer, store: GraphStore, params: dict[str, str], point: str) -> None:
    assert point in error_of(post_text(server, NOTES.encode(), **params), 400)
    assert len(store) == 0


def test_collections_that_are_unknown_or_not_names(server: LiveServer) -> None:
    assert "no collection 'nowhere'" in error_of(requests.get(documents_url(server, "nowhere"), timeout=30), 404)
    assert "no collection 'nowhere'" in error_of(
        requests.get(documents_url(server, "nowhere") + "/0123456789abcdef0123", timeout=30), 404)
    for name, point in (("two%20words", "white space"), ("librarian", "librarian graph"),
                        ("explainability", "explainability graph"), ("x:source", "provenance graphs")):
        assert point in error_of(requests.get(documents_url(server, name), timeout=30), 400)
        assert point in error_of(post_text(server, NOTES.encode(), collection=name), 400)


def test_junk_and_timed_out_replies_give_a_document_with_no_facts_and_counted_warnings(
        store: GraphStore, llm: ScriptedLLM) -> None:
    def reply(request: Recorded) -> Reply:
        if "define the entities" in request.prompt:
            return Reply('not json at all\n{"entity": "Lisbon"}')  # two unusable lines
        return Reply("too late", delay_s=5.0)  # relationships: past the client's timeout

    llm.responder = reply
    live = start(store, llm, llm_timeout_s=0.3)
    try:
        body = accepted(post_text(live, NOTES.encode(), collection="slow", chunk_size="80", chunk_overlap="0"))
        status = ingested(live, body["url"])
    finally:
        live.close()
    assert status["status"] == "ingested" and status["facts"] == 0, status
    assert status["chunks"] == 2 and status["warnings"] == 2 + 1, status  # a timeout a chunk, and the junk lines
    assert next(store.quads(None, None, None, vocab.collection_graph("slow")), None) is None


def test_an_llm_that_fails_every_call_fails_the_job_and_writes_nothing(store: GraphStore, llm: ScriptedLLM) -> None:
    llm.responder = stalling(5.0)
    live = start(store, llm, llm_timeout_s=0.3)
    try:
        body = accepted(post_text(live, NOTES.encode(), collection="slow", chunk_size="80", chunk_overlap="0"))
        status = ingested(live, body["url"])
        assert status["status"] == "failed", status
        assert status["error"].startswith("every extraction call failed, so nothing was ingested; the first: ")
        assert "timed out after 0.3 s" in status["error"]
        assert listed(live, "slow") == [status]
        assert len(store) == 0
        llm.responder = graph_rag_reply  # the LLM is back: the same document again is accepted
        retried = ingested(live, accepted(post_text(live, NOTES.encode(), collection="slow"))["url"])
    finally:
        live.close()
    assert retried["status"] == "ingested" and retried["facts"] > 0, retried


@pytest.mark.slow  # waits out deadlines by design (seconds)
def test_a_full_queue_is_429_and_every_accepted_document_is_ingested(store: GraphStore, llm: ScriptedLLM) -> None:
    from server.ingest.jobs import MAX_QUEUED

    def reply(request: Recorded) -> Reply:  # the first document holds the worker for a while
        answer = graph_rag_reply(request)
        answer.delay_s = 1.0 if "Note 0 " in request.prompt else 0.0
        return answer

    llm.responder = reply
    live = start(store, llm)
    try:
        bodies = [accepted(post_text(live, f"Note {n} about Lisbon.".encode())) for n in range(MAX_QUEUED + 1)]
        wait_for(live, bodies[0]["url"], lambda status: status["status"] == "running")
        full = post_text(live, b"One note too many about Porto.")
        assert f"{MAX_QUEUED} documents are already waiting" in error_of(full, 429)
        assert full.headers["Retry-After"] == "10"
        statuses = [ingested(live, body["url"]) for body in bodies]
        documents = listed(live)
    finally:
        live.close()
    assert [status["status"] for status in statuses] == ["ingested"] * (MAX_QUEUED + 1)
    assert sorted(d["id"] for d in documents) == sorted(body["id"] for body in bodies)


# --- ingest alongside answering -------------------------------------------------------------------

@pytest.fixture
def sample(sample_copy: GraphStore) -> GraphStore:
    return sample_copy


def ask(server: LiveServer, question: str, collection: str = "default") -> dict:
    response = requests.post(server.url + "/api/graph-rag", timeout=60, json={
        "query": question, "collection": collection, "streaming": False, "explainable": True})
    assert response.status_code == 200, response.text
    return response.json()


def explained(server: LiveServer, session: str) -> dict:
    response = requests.get(server.url + "/api/explain", params={"id": session}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow
def test_ingest_never_blocks_answering(sample: GraphStore, llm: ScriptedLLM) -> None:
    release = threading.Event()  # once the question is answered, the rest of the ingest is not waited out
    llm.responder = stalling(3.0, release)
    live = start(sample, llm)
    try:
        long_text = "\n\n".join(f"Paragraph {n} names Lisbon and Porto once more." for n in range(4))
        body = accepted(post_text(live, long_text.encode(), collection="slow", chunk_size="60",
                                  chunk_overlap="0"))
        wait_for(live, body["url"], lambda status: status["status"] == "running")
        answer = ask(live, "What is the capital of France?")
        during = requests.get(live.url + body["url"], timeout=30).json()
        [running] = listed(live, "slow")
        release.set()
        status = ingested(live, body["url"])
    finally:
        release.set()
        live.close()
    assert answer["error"] is None and answer["answer"].startswith("A scripted answer from the selected edges."), answer
    assert during["status"] == "running" and during["chunks"] == 4, during  # the answer came first
    assert during["chunks_done"] < 4 and running == during
    assert {"id", "title", "media_type", "pages", "chunks", "facts", "status", "error"} <= set(running)
    assert status["status"] == "ingested" and status["facts"] > 0, status


@pytest.mark.slow
def test_a_question_after_an_ingest_finds_the_new_entity(sample: GraphStore, llm: ScriptedLLM) -> None:
    live = start(sample, llm)
    try:
        before = ask(live, "What is Zorblat mentioned with?")  # builds the label index of 'default'
        assert "Zorblat" not in json.dumps(explained(live, before["session"])["edges"])
        body = accepted(post_text(live, b"Zorblat visited Paris. Zorblat met Quentaro in Lyon.",
                                  collection="default", title="Travels"))
        assert ingested(live, body["url"])["status"] == "ingested"
        after = ask(live, "What is Zorblat mentioned with?")
        trace = explained(live, after["session"])
    finally:
        live.close()
    assert after["error"] is None, after
    edges = {tuple(edge["labels"]): edge for edge in trace["edges"]}
    assert ("Zorblat", "mentioned with", "Quentaro") in edges, list(edges)
    titles = {chain[2]["title"] for edge in edges.values() for chain in edge["sources"]}
    assert titles == {"Travels"}


def test_polls_racing_the_commit_find_each_document_once(server: LiveServer, store: GraphStore) -> None:
    """Status and list reads race the worker's commit: a document is always found, in the store or in
    the queue, and listed once. A slow listener of the store (run after each commit, before the job
    leaves the queue) holds every document in both places for a while."""
    store.add_load_listener(lambda *written: time.sleep(0.2))
    ids: list[str] = []
    problems: list[tuple] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            expected = list(ids)  # each accepted before these reads
            for document_id in expected:
                response = requests.get(f"{documents_url(server)}/{document_id}", timeout=30)
                if response.status_code != 200:
                    problems.append((document_id, response.status_code))
            seen = [entry["id"] for entry in requests.get(documents_url(server), timeout=30).json()["documents"]]
            if sorted(seen) != sorted(set(seen)) or not set(expected) <= set(seen):
                problems.append(("listed", expected, seen))

    first = accepted(post_text(server, b"Note zero about Lisbon."))
    ids.append(first["id"])
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        for n in range(1, 8):
            ids.append(accepted(post_text(server, f"Note {n} about Lisbon and Porto.".encode()))["id"])
        for document_id in ids:
            ingested(server, f"/api/collections/notes/documents/{document_id}")
    finally:
        stop.set()
        poller.join(timeout=30)
    assert problems == []
    assert sorted(d["id"] for d in listed(server)) == sorted(ids)


def test_a_document_over_the_page_limit_is_refused_before_it_is_queued(server: LiveServer) -> None:
    from server.ingest.documents import MAX_PAGES

    headings = "".join(f"<h1>s{n}</h1><p>text</p>" for n in range(MAX_PAGES + 1)).encode()
    response = requests.post(f"{server.url}/api/collections/amp/documents", data=headings, timeout=60,
                             headers={"Content-Type": "text/html", **AUTH})
    assert response.status_code == 422, response.text
    assert f"more than the {MAX_PAGES}" in response.json()["error"]["message"]
    assert requests.get(f"{server.url}/api/collections/amp/documents", timeout=30).status_code == 404


def test_the_status_lists_the_warnings_and_the_upload_sets_its_workers(store: GraphStore,
                                                                       scripted_llm: ScriptedLLM) -> None:
    from test_extraction_grounding import echo_examples

    scripted_llm.responder = echo_examples  # the prompts' examples: dropped, and the status says so
    live = start(store, scripted_llm)
    try:
        assert "'workers' must be between 1 and 16" in error_of(post_text(live, b"Lisbon.", workers="0"), 400)
        body = accepted(post_text(live, NOTES.encode(), workers="1", chunk_size="80", chunk_overlap="0"))
        status = ingested(live, body["url"])
        assert status["status"] == "ingested" and status["warnings"] == len(status["warning_messages"]) >= 1
        assert any("extracted fact(s) were dropped" in warning for warning in status["warning_messages"])
    finally:
        live.close()
