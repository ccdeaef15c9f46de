"""The GraphRAG / explain / linked-data API over a real server on 127.0.0.1 (and once under gunicorn)."""
from __future__ import annotations

import concurrent.futures
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
from live_server import LiveServer, Serving, serve
from production_server import TOKEN as PRODUCTION_TOKEN
from production_server import ProductionServer, free_port, production_command, production_environment
from pyoxigraph import Literal, NamedNode, Quad, RdfFormat, parse
from scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401  (the fixture)

from server import stages, vocab
from server.config import PROJECT_ROOT
from server.explain.trace import read_trace
from server.rag.retrieval import edge_id
from server.remote_store import RemoteStore
from server.store import GraphStore
from server.store_base import StoreBackend
from server.vocab import ENTITY

BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

QUESTION = "What is the capital of France?"
SELECTION = "\n".join(json.dumps({"id": edge_id("France", rel, obj), "reasoning": "it answers"})
                      for rel, obj in (("capital", "Paris"), ("currency", "Euro")))


def ask(server: LiveServer, accept: str = "application/json", **fields: object) -> requests.Response:
    body = {"query": QUESTION, **fields}
    return requests.post(server.url + "/api/graph-rag", json=body, headers={"Accept": accept},
                         stream=accept != "application/json")


def sse_messages(response: requests.Response) -> Iterator[dict]:
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            yield json.loads(line[len("data: "):])


# --- POST /api/graph-rag ------------------------------------------------------------------------

@pytest.mark.slow
def test_sse_delivers_the_first_explain_before_the_llm_answers(france_store: GraphStore,
                                                               scripted_llm: ScriptedLLM) -> None:  # noqa: F811
    selected = threading.Event()
    scripted_llm.reply(SELECTION, held=selected)  # the selection call answers once the first explain is read
    scripted_llm.reply("Paris is the capital.", pieces=["Paris ", "is the ", "capital."])
    live = serve(france_store, llm="openai", llm_base_url=scripted_llm.base_url, llm_api_key="test",
                 llm_model="scripted-model", llm_retries=0)
    try:
        response = ask(live, "text/event-stream")
        assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/event-stream")
        stream = sse_messages(response)
        first = next(stream)
        assert first["message_type"] == "explain" and first["explain_id"].startswith("urn:trustgraph:session:")
        trace_now = read_trace(france_store, first["explain_id"])
        assert trace_now is not None and trace_now["selection"] is None  # the LLM has not answered yet
        selected.set()
        rest = list(stream)
    finally:
        selected.set()
        live.close()
    messages = [first, *rest]
    assert [m["message_type"] for m in messages if m["message_type"] == "explain"] == ["explain"] * 4
    assert "".join(m["response"] for m in messages) == "Paris is the capital."
    assert messages[-1]["end_of_session"] is True and messages[-1]["error"] is None
    assert read_trace(france_store, first["explain_id"])["status"] == "answered"


def slow_selection_server(store: GraphStore, llm: ScriptedLLM, keepalive_s: float) -> LiveServer:
    """A server whose LLM takes a second to select, then answers "Paris is the capital."."""
    llm.reply(SELECTION, delay_s=1.0)
    llm.reply("Paris is the capital.")
    return serve(store, llm="openai", llm_base_url=llm.base_url, llm_api_key="test", llm_retries=0,
                 sse_keepalive_s=keepalive_s)


def test_sse_sends_keepalive_comments_while_the_llm_is_slow(france_store: GraphStore,
                                                             scripted_llm: ScriptedLLM) -> None:  # noqa: F811
    live = slow_selection_server(france_store, scripted_llm, keepalive_s=0.2)
    try:
        lines = [line for line in ask(live, "text/event-stream").iter_lines(decode_unicode=True) if line]
    finally:
        live.close()
    keepalives = [i for i, line in enumerate(lines) if line == ": keep-alive"]
    events = [json.loads(line[len("data: "):]) for line in lines if line.startswith("data: ")]
    assert len(keepalives) >= 2 and len(keepalives) + len(events) == len(lines)  # comments and events only
    selection = next(i for i, line in enumerate(lines) if "urn:trustgraph:prov:selection:" in line)
    assert keepalives[0] < selection  # sent while the selection call was pending
    assert "".join(m["response"] for m in events) == "Paris is the capital."
    assert events[-1]["end_of_session"] is True and events[-1]["error"] is None


def test_a_client_leaving_during_a_keepalive_wait_cancels_the_session(france_store: GraphStore,
                                                                      scripted_llm: ScriptedLLM) -> None:  # noqa: F811
    live = slow_selection_server(france_store, scripted_llm, keepalive_s=0.1)
    try:
        response = ask(live, "text/event-stream")
        session = next(sse_messages(response))["explain_id"]
        response.close()  # leave while the selection call is pending
        deadline = time.monotonic() + 10
        while (trace := read_trace(france_store, session))["status"] == "incomplete" and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        live.close()
    assert trace["status"] == "cancelled" and trace["error"]["type"] == "cancelled"
    assert trace["answer"] is None


def test_ndjson_stream(server: LiveServer) -> None:
    response = ask(server, "application/x-ndjson")
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    messages = [json.loads(line) for line in response.iter_lines() if line]
    assert messages[0]["message_type"] == "explain"
    assert messages[-1]["end_of_session"] is True and messages[-1]["error"] is None
    assert set(messages[0]) == {"message_type", "response", "error", "end_of_stream", "end_of_session",
                                "explain_id", "explain_collection", "explain_kind", "outcome", "explain_triples"}
    kinds = [m["explain_kind"] for m in messages if m["message_type"] == "explain"]
    assert kinds == ["session", "retrieval", "selection", "answer"]


def test_not_streaming_is_one_json_object(server: LiveServer) -> None:
    body = ask(server, streaming=False, entity_limit=10, max_path_length=1).json()
    assert set(body) == {"answer", "outcome", "session", "explain_ids", "explain_kinds", "explain_collection", "error"}
    assert body["outcome"] == "answered"
    assert body["explain_kinds"] == ["session", "retrieval", "selection", "answer"]
    assert body["error"] is None and "Paris" in body["answer"]
    assert body["session"].startswith("urn:trustgraph:session:") and body["session"] == body["explain_ids"][0]
    assert len(body["explain_ids"]) == 4 and body["explain_collection"] == "explainability"


@pytest.mark.parametrize("payload", [
    "not json", [QUESTION], {"query": ""}, {"query": "   "}, {"query": 5}, {},
    {"query": QUESTION, "entity_limit": "5"}, {"query": QUESTION, "entity_limit": 0},
    {"query": QUESTION, "triple_limit": True}, {"query": QUESTION, "max_path_length": 9},
    {"query": QUESTION, "triple_limit": 101},  # past the hop template's LIMIT 100, the one cap
    {"query": QUESTION, "max_subgraph_size": 1.5}, {"query": QUESTION, "explainable": "yes"},
    {"query": QUESTION, "streaming": 1}, {"query": QUESTION, "collection": 7},
    {"query": QUESTION, "colection": "default"}, {"query": QUESTION, "collection": "bad name"},
])
def test_bad_fields_are_400_json(server: LiveServer, payload: object) -> None:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    response = requests.post(server.url + "/api/graph-rag", data=data, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "bad-request"


def test_unknown_collection_is_404_and_no_session_is_recorded(server: LiveServer, france_store: GraphStore) -> None:
    response = ask(server, collection="nowhere", streaming=False)
    assert response.status_code == 404 and response.json()["error"]["type"] == "not-found"
    assert not list(france_store.quads(graph=france_store.explain_graph))


def test_streaming_that_cannot_be_delivered_is_406(server: LiveServer) -> None:
    assert ask(server, streaming=True).status_code == 406


def test_data_written_over_http_reaches_graph_rag(france_store: GraphStore) -> None:
    """A SPARQL update and a Graph Store PUT invalidate the label index of the collection they touch."""
    live = serve(france_store, token="tok")
    auth = {"Authorization": "Bearer tok"}
    question = {"query": "What is the capital of Japan?", "streaming": False}
    try:
        before = requests.post(live.url + "/api/graph-rag", json=question).json()
        assert before["outcome"] == "no-answer" and "Tokyo" not in before["answer"]
        graph = vocab.collection_graph("default").value
        insert = (f"PREFIX e: <{ENTITY.base}> PREFIX r: <{vocab.RELATION.base}> "
                  f"PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> INSERT DATA {{ GRAPH <{graph}> {{ "
                  'e:japan r:capital e:tokyo ; rdfs:label "Japan" . e:tokyo rdfs:label "Tokyo" } }')
        updated = requests.post(live.url + "/sparql", data=insert,
                                headers={"Content-Type": "application/sparql-update", **auth})
        assert updated.status_code == 204
        after = requests.post(live.url + "/api/graph-rag", json=question).json()
        assert after["error"] is None and "Tokyo" in after["answer"]
        italy = (f"<{ENTITY.italy.value}> <{vocab.RELATION.capital.value}> <{ENTITY.rome.value}> .\n"
                 f'<{ENTITY.italy.value}> <http://www.w3.org/2000/01/rdf-schema#label> "Italy" .\n'
                 f'<{ENTITY.rome.value}> <http://www.w3.org/2000/01/rdf-schema#label> "Rome" .\n')
        posted = requests.post(live.url + "/store", params={"graph": graph}, data=italy,
                               headers={"Content-Type": "application/n-triples", **auth})
        assert posted.status_code == 204
        rome = requests.post(live.url + "/api/graph-rag", json={"query": "What is the capital of Italy?",
                                                                "streaming": False}).json()
        assert rome["error"] is None and "Rome" in rome["answer"]
    finally:
        live.close()


# --- explain, sessions, documents, collections ---------------------------------------------------

def test_explain_as_json_and_rdf(server: LiveServer) -> None:
    session = ask(server, streaming=False).json()["session"]
    trace = requests.get(server.url + "/api/explain", params={"id": session}).json()
    assert trace["session"] == session and trace["question"] == QUESTION and trace["status"] == "answered"
    assert trace["edges"] and trace["edges"][0]["sources"]
    for media, fmt in (("text/turtle", RdfFormat.TURTLE), ("application/trig", RdfFormat.TRIG),
                       ("application/n-triples", RdfFormat.N_TRIPLES)):
        response = requests.get(server.url + "/api/explain", params={"id": session}, headers={"Accept": media})
        assert response.headers["Content-Type"].startswith(media)
        quads = list(parse(response.content, format=fmt))
        assert any(q.subject == NamedNode(session) and q.object == Literal(QUESTION) for q in quads)
        assert any(q.predicate == vocab.TG.edge for q in quads)  # the selected edges, as triple terms
    trig = parse(requests.get(server.url + "/api/explain", params={"id": session},
                              headers={"Accept": "application/trig"}).content, format=RdfFormat.TRIG)
    assert {q.graph_name for q in trig} == {NamedNode("urn:trustgraph:graph:explainability"), vocab.LIBRARIAN_GRAPH}
    by_name = requests.get(server.url + "/api/explain", params={"id": session, "format": "ttl"})  # a download link
    assert by_name.headers["Content-Type"].startswith("text/turtle"), by_name.headers
    assert "@prefix prov: <http://www.w3.org/ns/prov#>" in by_name.text and "prov:wasDerivedFrom" in by_name.text
    statements = [line for line in by_name.text.splitlines() if not line.startswith("@prefix")]
    assert not any("<http://www.w3.org/ns/prov#" in line for line in statements)  # written with its prefix
    as_triples = requests.get(server.url + "/api/explain", params={"id": session, "format": "nt"})
    assert set(parse(by_name.content, format=RdfFormat.TURTLE)) == set(parse(as_triples.content,
                                                                             format=RdfFormat.N_TRIPLES))
    assert requests.get(server.url + "/api/explain", params={"id": session, "format": "json"},
                        headers={"Accept": "text/turtle"}).json()["session"] == session
    assert requests.get(server.url + "/api/explain", params={"id": session, "format": "nope"}).status_code == 400


def test_explain_errors(server: LiveServer) -> None:
    assert requests.get(server.url + "/api/explain").status_code == 400
    unknown = requests.get(server.url + "/api/explain", params={"id": "urn:trustgraph:session:nope"})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not-found"
    assert requests.get(server.url + "/api/explain", params={"id": "http://example.org/x"}).status_code == 404


def test_sessions_newest_first_and_paged(server: LiveServer) -> None:
    first = ask(server, streaming=False).json()["session"]
    second = requests.post(server.url + "/api/graph-rag", json={"query": "What currency does France use?",
                                                                "streaming": False}).json()["session"]
    listed = requests.get(server.url + "/api/sessions").json()
    assert [s["session"] for s in listed["sessions"]] == [second, first]
    page = requests.get(server.url + "/api/sessions", params={"limit": 1, "offset": 1}).json()
    assert [s["session"] for s in page["sessions"]] == [first]
    for bad in ({"limit": "x"}, {"limit": 0}, {"offset": -1}):
        assert requests.get(server.url + "/api/sessions", params=bad).status_code == 400


def test_documents_and_collections(server: LiveServer) -> None:
    chunk = requests.get(server.url + "/api/documents", params={"id": vocab.chunk_iri("fr", 4, 2).value})
    assert chunk.status_code == 200 and chunk.headers["Content-Type"].startswith("text/plain")
    assert chunk.text == "The capital of France is Paris."
    session = ask(server, streaming=False).json()
    answer = stages.answer_document_iri(stages.session_id_of(session["session"])).value
    assert requests.get(server.url + "/api/documents", params={"id": answer}).text == session["answer"]
    assert requests.get(server.url + "/api/documents", params={"id": "urn:nothing"}).status_code == 404
    assert requests.get(server.url + "/api/documents").status_code == 400
    collections = requests.get(server.url + "/api/collections").json()["collections"]
    assert [c["collection"] for c in collections] == ["default"]


def write_unseen(store: StoreBackend, quad: Quad) -> None:
    """A write the server does not count: into the embedded store's pyoxigraph store directly, or into the
    engine through a client of its own (another app worker's write, as far as the server can tell)."""
    if isinstance(store, GraphStore):
        store.raw.add(quad)
        return
    other = RemoteStore(store.endpoints)
    try:
        other.extend([quad])
    finally:
        other.close()


@pytest.mark.parametrize("path", ["/api/collections", "/", "/console/ask"])
def test_collection_counts_are_kept_until_the_next_write(france_store: GraphStore, path: str) -> None:
    """Anonymous pages counted every graph of the store on every request (0.5-1.8 s each on the sample)."""
    server = serve(france_store, token="tok")
    graph = vocab.collection_graph("default")

    def triples() -> int:
        collections = requests.get(server.url + "/api/collections", timeout=30).json()["collections"]
        return next(c["triples"] for c in collections if c["collection"] == "default")

    try:
        before = triples()
        assert requests.get(server.url + path, timeout=30).status_code == 200
        write_unseen(france_store, Quad(ENTITY.france, vocab.RELATION.capital, NamedNode("urn:unseen"), graph))
        write_unseen(france_store, Quad(ENTITY.france, vocab.RELATION.capital, NamedNode("urn:x"),
                                        vocab.collection_graph("unseen")))
        assert requests.get(server.url + path, timeout=30).status_code == 200
        assert triples() == before  # kept: not counted again for this request
        assert "unseen" not in requests.get(server.url + path, timeout=30).text
        put = requests.post(server.url + "/store", params={"graph": graph.value},
                            data=f"<{ENTITY.france.value}> <{vocab.RELATION.capital.value}> <urn:seen> .",
                            headers={"Content-Type": "text/turtle", "Authorization": "Bearer tok"}, timeout=30)
        assert put.status_code == 204, put.text
        assert triples() == before + 2  # counted again after the write: its triple and the unseen one
        assert "unseen" in requests.get(server.url + path, timeout=30).text
    finally:
        server.close()



@pytest.mark.parametrize("lagging", [True, False])
def test_while_one_request_renews_kept_counts_the_others_answer_with_the_last_ones(
        tmp_path: Path, lagging: bool) -> None:
    """Under a stream of writes each request waiting for the counts found them stale again and counted the
    store in turn (the soak's 40 page clients waited 16-60 s, some past their 60 s timeout). A page's counts
    (``lagging``) are the last ones while another request renews them; a size check waits for the new ones."""
    from flask import Flask

    from server.http.descriptions import kept_until_written

    store = GraphStore(tmp_path / "store")
    app = Flask(__name__)
    app.extensions["glassgraph.runtime"] = SimpleNamespace(store=store)
    counting, release = threading.Event(), threading.Event()

    def count() -> int:
        counting.set()
        assert release.wait(30)
        return len(store)

    assert kept_until_written(app, "test.counts", lambda: len(store), lagging=lagging) == 0
    store.extend([Quad(NamedNode("urn:s"), NamedNode("urn:p"), Literal("1"))])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        renewing = pool.submit(kept_until_written, app, "test.counts", count, lagging=lagging)
        assert counting.wait(30)
        other = pool.submit(kept_until_written, app, "test.counts", count, lagging=lagging)
        if lagging:
            assert other.result(timeout=30) == 0  # at once, the last counts
        else:
            with pytest.raises(concurrent.futures.TimeoutError):
                other.result(timeout=0.5)  # it waits for the renewal
        release.set()
        assert renewing.result(timeout=30) == 1 and other.result(timeout=30) == (0 if lagging else 1)
    assert kept_until_written(app, "test.counts", count, lagging=lagging) == 1  # kept: no write since


def test_a_graph_store_size_check_is_kept_until_the_next_write(france_store: GraphStore) -> None:
    """GET of a graph counted it up to GLASSGRAPH_MAX_ROWS + 1 triples on every request (33 ms of the server's
    CPU for the librarian graph, asked by anonymous clients): the count is kept until the next write of data."""
    server = serve(france_store, token="tok", max_result_rows=2)
    graph = NamedNode("urn:glassgraph:test:sizes")
    write = {"Content-Type": "text/turtle", "Authorization": "Bearer tok"}

    def get() -> int:
        return requests.get(server.url + "/store", params={"graph": graph.value}, timeout=30).status_code

    try:
        put = requests.put(server.url + "/store", params={"graph": graph.value}, headers=write, timeout=30,
                           data="<urn:s> <urn:p> 1, 2 .")
        assert put.status_code in (201, 204), put.text
        assert get() == 200
        write_unseen(france_store, Quad(NamedNode("urn:s"), NamedNode("urn:p"), Literal("3"), graph))
        assert get() == 200  # kept: not counted again for this request
        post = requests.post(server.url + "/store", params={"graph": graph.value}, headers=write, timeout=30,
                             data="<urn:s> <urn:p> 4 .")
        assert post.status_code == 204, post.text
        assert get() == 422  # counted again after the write: four triples, more than 2
    finally:
        server.close()

# --- /resource ----------------------------------------------------------------------------------

def test_resource_as_rdf_in_every_graph(server: LiveServer) -> None:
    france = ENTITY.france.value
    trig = requests.get(server.url + "/resource", params={"iri": france}, headers={"Accept": "application/trig"})
    assert trig.status_code == 200 and trig.headers["Content-Type"].startswith("application/trig")
    quads = list(parse(trig.content, format=RdfFormat.TRIG))
    assert {q.graph_name for q in quads} == {vocab.collection_graph("default")}
    assert all(ENTITY.france in (q.subject, q.object) for q in quads)
    paris = list(parse(requests.get(server.url + "/resource", params={"iri": ENTITY.paris.value},
                                    headers={"Accept": "application/n-quads"}).content, format=RdfFormat.N_QUADS))
    assert Quad(ENTITY.france, vocab.RELATION.capital, ENTITY.paris, vocab.collection_graph("default")) in paris
    turtle = requests.get(server.url + "/resource", params={"iri": france}, headers={"Accept": "text/turtle"})
    assert turtle.headers["Content-Type"].startswith("text/turtle")


def test_resource_html_is_the_consoles_and_errors(server: LiveServer) -> None:
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    html = requests.get(server.url + "/resource", params={"iri": ENTITY.france.value}, headers={"Accept": browser})
    assert html.status_code == 200 and html.headers["Content-Type"].startswith("text/html")
    assert "France" in html.text
    assert requests.get(server.url + "/resource", params={"iri": "urn:nothing"}).status_code == 404
    assert requests.get(server.url + "/resource", params={"iri": "not an iri"}).status_code == 400
    assert requests.get(server.url + "/resource").status_code == 400


def test_resource_over_the_row_limit_is_422(france_store: GraphStore, serving: Serving) -> None:
    live = serving(france_store, max_result_rows=2)
    response = requests.get(live.url + "/resource", params={"iri": ENTITY.france.value, "format": "trig"})
    assert response.status_code == 422 and "GLASSGRAPH_MAX_ROWS" in response.text


# --- the production command ----------------------------------------------------------------------

def test_under_the_production_command(tmp_path: Path) -> None:
    """The README's gunicorn command: load a graph over the Graph Store Protocol, ask it, query it."""
    server = ProductionServer(tmp_path / "store")
    base, token = server.url, PRODUCTION_TOKEN
    try:
        assert requests.get(base + "/healthz").json()["collections"] == 0
        graph = vocab.collection_graph("default").value
        data = ('<https://trustgraph.ai/e/japan> <https://trustgraph.ai/r/capital> <https://trustgraph.ai/e/tokyo> .\n'
                '<https://trustgraph.ai/e/japan> <http://www.w3.org/2000/01/rdf-schema#label> "Japan" .\n'
                '<https://trustgraph.ai/e/tokyo> <http://www.w3.org/2000/01/rdf-schema#label> "Tokyo" .\n'
                '<https://trustgraph.ai/r/capital> <http://www.w3.org/2000/01/rdf-schema#label> "capital" .\n')
        put = requests.put(base + "/store", params={"graph": graph}, data=data,
                           headers={"Content-Type": "application/n-triples", "Authorization": f"Bearer {token}"})
        assert put.status_code == 201
        answer = requests.post(base + "/api/graph-rag", json={"query": "What is the capital of Japan?",
                                                              "streaming": False}).json()
        assert answer["error"] is None and "Tokyo" in answer["answer"]
        rows = requests.get(base + "/sparql", params={"query": "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }"},
                            headers={"Accept": "text/csv"})
        assert rows.status_code == 200 and int(rows.text.split()[1]) > 4
    finally:
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize(("setting", "value", "said"), [
    ("GLASSGRAPH_MAX_BODY", "abc", "GLASSGRAPH_MAX_BODY must be an integer, got 'abc'"),
    ("GLASSGRAPH_THREADS", "0", "GLASSGRAPH_THREADS must be at least 1, got 0"),
    ("GLASSGRAPH_STORE", "/proc/version", "cannot open the store at /proc/version: "),  # a file
])
def test_a_bad_setting_stops_the_production_command_with_one_line(tmp_path: Path, setting: str, value: str,
                                                                  said: str) -> None:
    """Not the 40-line import traceback gunicorn printed before the error's own line."""
    env = {**production_environment(tmp_path / "store", tmp_path, {}), setting: value}
    ended = subprocess.run(production_command(free_port()), cwd=PROJECT_ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
    assert ended.returncode != 0
    [line] = [line for line in ended.stderr.splitlines() if line.startswith("glassgraph: error: ")]
    assert said in line, ended.stderr
    assert "Traceback" not in ended.stderr


def test_a_collection_of_documents_without_facts_is_counted_listed_and_described(store: StoreBackend,
                                                                                   serving: Serving) -> None:
    """Documents ingested without an LLM leave a source graph only: /healthz counted no collection, and the home
    page linked to a VoID dataset (#collection-notes) that the document does not have (#source-notes)."""
    src, doc = vocab.source_graph("notes"), vocab.document_iri("memo")
    store.extend(vocab.document_quads(src, doc, "Memo"))
    live = serving(store)
    assert requests.get(live.url + "/healthz", timeout=30).json()["collections"] == 1
    assert [c["collection"] for c in requests.get(live.url + "/api/collections", timeout=30).json()["collections"]
            ] == ["notes"]
    home = requests.get(live.url + "/", timeout=30).text
    assert '/.well-known/void#source-notes" class="collection-link">notes' in home, home
    void = requests.get(live.url + "/.well-known/void", headers={"Accept": "text/html"}, timeout=30).text
    assert 'id="source-notes"' in void
