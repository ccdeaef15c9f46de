"""The remote store's own behaviour: what it sends in each dialect, what it reads back, a down engine, a
runaway query through the endpoint, and several app workers on one engine.

The tests every backend shares (pipeline, explain, HTTP API, SPARQL protocol, GSP, CLI) run on the remote
store through ``BOTH_BACKENDS`` (conftest); these are the ones only a remote engine has.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, unquote_plus

import pytest
import requests
from conftest import add_france, remote_store, start_engine, virtuoso_store
from live_server import serve
from loopback_listener import LoopbackListener
from oxigraph_server import OxigraphServer
from production_server import TOKEN, ProductionServer, free_port
from pyoxigraph import BlankNode, Literal, NamedNode, Quad, QueryResultsFormat, RdfFormat, Triple, parse_query_results
from virtuoso_server import VirtuosoServer

from server import vocab
from server.answering import make_graph_rag
from server.bootstrap import connect_store
from server.config import Config, ConfigError
from server.dialects import ENGINE_GRAPHS, StandardStream, standard_results
from server.dialects.reification import statement_iri
from server.errors import RemoteFailed, StoreUnavailable
from server.explain.trace import read_trace
from server.provenance import source_chains
from server.remote_store import STATEMENTS_PER_QUERY, EngineEndpoints, RemoteStore
from server.sparql_templates import RDF12, RDF_STAR, REIFICATION
from server.store import GraphStore
from server.vocab import ENTITY, RELATION, TG

# pyoxigraph's objects may only be dropped on the thread that made them: one dropped elsewhere (a forwarded
# query's result, held by an error handed to the request thread) is leaked with this warning
pytestmark = [pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"), pytest.mark.remote]

CAPITAL = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
SPELLING = {RDF12: "<<( <https://trustgraph.ai/e/france> <https://trustgraph.ai/r/capital> "
                   "<https://trustgraph.ai/e/paris> )>>",
            RDF_STAR: "<< <https://trustgraph.ai/e/france> <https://trustgraph.ai/r/capital> "
                      "<https://trustgraph.ai/e/paris> >>"}


# --- dialects: what is sent, what is read back ------------------------------------------------------

@pytest.mark.parametrize("dialect", [RDF12, RDF_STAR])
def test_each_dialect_spells_triple_terms_in_writes_and_in_template_values(dialect: str) -> None:
    engine = LoopbackListener()
    try:
        store = RemoteStore(EngineEndpoints(engine.url, engine.url, engine.url, engine.url), dialect=dialect)
        store.extend([Quad(vocab.subgraph_iri("fr", 1, 1), TG.contains, CAPITAL, vocab.source_graph("default"))])
        store.query("prov_sources", {"edge": [CAPITAL]}, default_graph=vocab.source_graph("default"))
        store.write_graph(NamedNode("urn:test:g"), [Triple(NamedNode("urn:test:s"), TG.contains, CAPITAL)],
                          replace=True)
    finally:
        engine.close()
    sent = [unquote_plus(body.decode()) for body in engine.bodies]
    assert len(sent) == 4  # INSERT DATA, the query, has_graph, the replace
    other = SPELLING[RDF_STAR if dialect == RDF12 else RDF12]
    for index in (0, 1, 3):
        assert SPELLING[dialect] in sent[index] and other not in sent[index], sent[index]
    assert sent[0].startswith("update=INSERT DATA")
    assert "default-graph-uri=urn:trustgraph:graph:default:source" in sent[1]
    assert "named-graph-uri=urn:trustgraph:graph:librarian" in sent[1]  # the template's constant GRAPH


@pytest.mark.parametrize("dialect", [RDF12, RDF_STAR])
def test_provenance_written_in_either_dialect_traces_back(engine: OxigraphServer, dialect: str) -> None:
    """An RDF 1.2 engine reads RDF-star's ``<< s p o >>`` as a reifier, which tracing accepts as well."""
    writer = replace_dialect(remote_store(engine.url), dialect)
    writer.run_update("DROP SILENT ALL")
    add_france(writer)
    reader = remote_store(engine.url)  # rdf12: the dialect an Oxigraph engine is read in
    [chain] = source_chains(reader, CAPITAL, "default")
    assert [node["type"] for node in chain] == ["Chunk", "Page", "Document"]
    contained = bool(list(reader.quads(None, TG.contains, CAPITAL)))
    reified = bool(list(reader.quads(None, vocab.RDF.reifies, CAPITAL)))
    assert (contained, reified) == ((True, False) if dialect == RDF12 else (False, True))


def replace_dialect(store: RemoteStore, dialect: str) -> RemoteStore:
    store.dialect = dialect
    return store


# --- the reification dialect: engines without triple terms (Virtuoso 7) -------------------------------------

def test_reification_sends_a_statement_node_and_describes_it_beside_each_quad() -> None:
    engine = LoopbackListener()
    try:
        store = RemoteStore(EngineEndpoints(engine.url, engine.url, engine.url, engine.url), dialect=REIFICATION)
        store.extend([Quad(vocab.subgraph_iri("fr", 1, 1), TG.contains, CAPITAL, vocab.source_graph("default"))])
        store.query("prov_sources", {"edge": [CAPITAL]}, default_graph=vocab.source_graph("default"))
        store.rewrite([Quad(ENTITY.x, TG.contains, CAPITAL, vocab.source_graph("default"))], [])
    finally:
        engine.close()
    insert, query, delete = (unquote_plus(body.decode()) for body in engine.bodies)
    node = str(statement_iri(CAPITAL))
    digest = hashlib.sha256(b"<https://trustgraph.ai/e/france> <https://trustgraph.ai/r/capital> "
                            b"<https://trustgraph.ai/e/paris>").hexdigest()
    assert node == f"<urn:glassgraph:statement:{digest[:32]}>"  # the triple's N-Triples: the same in every run
    for sent in (insert, query, delete):
        code = "\n".join(line for line in sent.splitlines() if not line.startswith("#"))
        assert node in code and "<<" not in code and "LATERAL" not in code
    for line in (f"{node} <{vocab.RDF.type.value}> <{vocab.RDF.Statement.value}> .",
                 f"{node} <{vocab.RDF.subject.value}> <{ENTITY.france.value}> .",
                 f"{node} <{vocab.RDF.object.value}> <{ENTITY.paris.value}> ."):
        assert line in insert and line not in delete  # a DELETE DATA leaves the description: others share it
    assert "union-default-graph" not in query


def test_statement_nodes_are_one_per_triple_in_every_graph_and_read_back_as_triple_terms(
        virtuoso: VirtuosoServer) -> None:
    virtuoso.empty()
    store = virtuoso_store(virtuoso)
    nested = Triple(ENTITY.alice, RELATION.says, CAPITAL)
    graphs = [vocab.source_graph("a"), vocab.source_graph("b")]
    for _run in range(2):
        store.extend([Quad(vocab.subgraph_iri("fr", 1, 1), TG.contains, term, graph)
                      for graph in graphs for term in (CAPITAL, nested)])
    for graph in graphs:
        assert {q.object for q in store.quads(None, TG.contains, None, graph)} == {CAPITAL, nested}
    assert list(store.quads(None, RELATION.says, None)) == []  # nested: inside a statement, not asserted
    assert list(store.quads(statement_iri(CAPITAL))) == []  # a description is no data of the store's
    # on the engine: 2 subgraph quads, and 4 quads for each of 2 statements, per graph
    counts = store.run_query("SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g")
    assert {(row["g"].value, int(row["n"].value)) for row in counts
            if row["g"].value not in ENGINE_GRAPHS} == {(g.value, 2 + 2 * 4) for g in graphs}
    counted = {(row["g"].value, int(row["n"].value)) for row in store.select("graph_counts")
               if row["g"].value not in ENGINE_GRAPHS}
    assert counted == {(g.value, 2) for g in graphs}  # what the collections count leaves the descriptions out
    assert len(store) == 2 * 2  # the collections' counts, as on an engine with triple terms
    assert store.has_graph(graphs[0]) and not store.has_graph(NamedNode("urn:test:none"))  # Virtuoso's ASK, read
    assert store.run_query("ASK { GRAPH ?g { ?s ?p ?o } }") and not store.run_query("ASK { FILTER(false) }")
    assert set(store.named_graphs()) == set(graphs)  # Virtuoso's own graphs are not listed


def test_a_graphrag_trace_on_virtuoso_is_the_same_as_on_oxigraph(engine: OxigraphServer,
                                                                virtuoso: VirtuosoServer) -> None:
    """The same question on the same data: the trace reads back identically, selection -> edge -> chunk ->
    page -> document, though Virtuoso holds no triple term."""
    oxigraph = remote_store(engine.url)
    oxigraph.run_update("DROP SILENT ALL")
    virtuoso.empty()
    traces = []
    for store in (oxigraph, virtuoso_store(virtuoso)):
        add_france(store)
        messages = list(make_graph_rag(store, Config(llm="offline", store_path=None)).run(
            "What is the capital of France?"))
        session = messages[0].explain_id
        trace = read_trace(store, session)
        text = json.dumps(trace, sort_keys=True).replace(session.rsplit(":", 1)[-1], "SESSION")
        traces.append(json.loads(re.sub(r'"time": "[^"]*"', '"time": "T"', text)))
    assert traces[0] == traces[1]
    [capital] = [edge for edge in traces[1]["edges"] if edge["p"] == RELATION.capital.value]
    assert [node["type"] for node in capital["sources"][0]] == ["Chunk", "Page", "Document"]
    assert traces[1]["status"] == "answered" and "Paris" in traces[1]["answer_text"]


# --- a down engine ---------------------------------------------------------------------------------

def test_a_down_engine_is_503_naming_it_and_reads_are_retried_but_writes_are_not(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = remote_store(url)
    with pytest.raises(StoreUnavailable, match=f"{url} cannot be reached .*GLASSGRAPH_STORE"):
        store.named_graphs()
    assert store.requests_sent == 3  # a read is tried three times
    with pytest.raises(StoreUnavailable, match=url):
        store.extend([Quad(ENTITY.a, RELATION.b, Literal("c"), vocab.collection_graph("default"))])
    assert store.requests_sent == 4  # a write once: it may have arrived
    live = serve(store)
    try:
        for path in ("/healthz", "/api/collections", "/sparql?query=ASK%7B%7D"):
            response = requests.get(live.url + path, headers={"Accept": "application/json"})
            assert response.status_code == 503, (path, response.text)
            assert url in response.text and "Traceback" not in response.text
        asked = requests.post(live.url + "/api/graph-rag", json={"query": "What is the capital of France?"})
        assert url in asked.text and asked.status_code in (200, 503)  # a stream that started ends with the error
    finally:
        live.close()


def test_an_engine_that_answers_html_times_out_or_refuses_updates_is_one_error_naming_the_setting(
        virtuoso: VirtuosoServer) -> None:
    """Virtuoso at Oxigraph's endpoint names (its HTML 404), a page that is no SPARQL answer, an engine slower
    than the deadline, and Virtuoso without the update grant: each one error naming the engine and what to set,
    and nothing written."""
    virtuoso.empty()
    quad = Quad(ENTITY.a, RELATION.b, Literal("c"), vocab.collection_graph("default"))
    wrong_paths = remote_store(virtuoso.url)  # /query, /update, /store: Oxigraph's
    with pytest.raises(RemoteFailed, match=rf"{virtuoso.url} has no SPARQL endpoint at {virtuoso.url}/query .*"
                                           r"404 text/html.*GLASSGRAPH_STORE_QUERY_URL.*/sparql"):
        wrong_paths.named_graphs()
    html = LoopbackListener(b"<html><body>Welcome</body></html>", content_type="text/html")
    slow = LoopbackListener(delay_s=3.0)
    try:
        with pytest.raises(RemoteFailed, match=r"answered text/html, not SPARQL results: set GLASSGRAPH_STORE "
                                               r"\(GLASSGRAPH_STORE_QUERY_URL"):
            RemoteStore(EngineEndpoints(html.url, html.url, html.url, html.url)).named_graphs()
        with pytest.raises(StoreUnavailable, match=r"did not answer in time \(1 s, GLASSGRAPH_DEADLINE\)"):
            RemoteStore(EngineEndpoints(slow.url, slow.url, slow.url, slow.url), timeout_s=1.0).named_graphs()
    finally:
        html.close()
        slow.close()
    virtuoso.isql('REVOKE SPARQL_UPDATE FROM "SPARQL";')
    try:
        store = virtuoso_store(virtuoso)
        with pytest.raises(RemoteFailed, match=r"no permission.*GLASSGRAPH_STORE_USER.*GRANT SPARQL_UPDATE"):
            store.extend([quad, Quad(vocab.subgraph_iri("fr", 1, 1), TG.contains, CAPITAL, quad.graph_name)])
    finally:
        virtuoso.isql('GRANT SPARQL_UPDATE TO "SPARQL";')
    assert store.is_empty()


# --- a runaway query is stopped, and the engine with it ------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


@pytest.mark.slow
def test_a_runaway_query_is_stopped_at_the_deadline_and_the_engine_is_idle_again(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    deadline_s = 2
    engine = start_engine(tmp_path_factory, "runaway", timeout_s=deadline_s)
    store = remote_store(engine.url)
    try:
        facts = [Quad(NamedNode(f"urn:test:s{i}"), RELATION.p, Literal(str(i)), vocab.collection_graph("default"))
                 for i in range(300)]
        store.extend(facts)
        live = serve(store, query_deadline_s=deadline_s)
        try:
            started = time.monotonic()
            runaway = requests.get(live.url + "/sparql", params={
                "query": "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"})
            took = time.monotonic() - started
            assert runaway.status_code == 422 and "GLASSGRAPH_DEADLINE" in runaway.text, runaway.text
            assert deadline_s <= took < deadline_s + 3
            time.sleep(0.5)  # the engine's own cancellation lands
            before = _cpu_seconds(engine.process.pid)
            time.sleep(1.0)
            assert _cpu_seconds(engine.process.pid) - before < 0.1  # nothing runs on in the engine
            assert requests.get(live.url + "/sparql", params={"query": "ASK { ?s ?p ?o }"},
                                headers={"Accept": "application/json"}).json()["boolean"] is True
        finally:
            live.close()
    finally:
        store.close()
        engine.close()


@contextmanager
def one_worker_app(tmp_path_factory: pytest.TempPathFactory, name: str, timeout_s: int, subjects: int,
                   deadline_s: float, long_queries: int = 4) -> Iterator[tuple[OxigraphServer, object]]:
    """An engine of its own (``--timeout-s timeout_s``) holding ``subjects`` triples in the default collection,
    and the app serving it with one query worker and the deadline ``deadline_s``: (engine, live server)."""
    engine = start_engine(tmp_path_factory, name, timeout_s=timeout_s)
    store = remote_store(engine.url)
    try:
        store.extend([Quad(NamedNode(f"urn:test:s{i}"), RELATION.p, Literal(str(i)), vocab.collection_graph("default"))
                      for i in range(subjects)])
        live = serve(store, query_deadline_s=deadline_s, query_workers=1, long_queries=long_queries)
        try:
            yield engine, live
        finally:
            live.close()
    finally:
        store.close()
        engine.close()


@pytest.mark.slow
def test_runaway_queries_forwarded_at_once_are_bounded_by_the_long_lane(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The engine evaluates no more of this process's long queries at once than GLASSGRAPH_LONG_QUERIES: a
    query holds its place until the engine has answered, in the long lane after a second, so runaway queries
    past the lane are refused (429) instead of piling up on the engine, while a short query is answered."""
    # 300^4 rows: a cube (300^3) was once counted within the 4 s deadline (a 200 where the test expects 422)
    runaway = {"query": "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"}
    with one_worker_app(tmp_path_factory, "flood", 4, 300, 3.0, long_queries=1) as (_, live):
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(requests.get, live.url + "/sparql", params=runaway)
            time.sleep(1.5)  # it has run past LONG_AFTER_S: in the long lane
            short = requests.get(live.url + "/sparql", params={"query": "ASK { ?s ?p ?o }"})
            assert short.status_code == 200, short.text
            second = requests.get(live.url + "/sparql", params=runaway)
            assert second.status_code == 429 and "GLASSGRAPH_LONG_QUERIES" in second.text, second.text
            assert first.result().status_code == 422


@pytest.mark.slow
def test_a_query_the_engine_runs_on_past_its_timeout_keeps_its_place_until_the_engine_has_answered(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Oxigraph's timeout does not stop a sort: the client has its 422 at the deadline, but the query keeps its
    place in the long lane while the engine sorts, so the next long query is refused (429) instead of running
    beside it; without that, one client could keep any number of sorts running on the engine. Short queries
    are answered meanwhile."""
    sort = {"query": f"SELECT * WHERE {{ ?a <{RELATION.p.value}> ?b . ?c <{RELATION.p.value}> ?d }} "
                     "ORDER BY ?b ?d LIMIT 1"}
    with one_worker_app(tmp_path_factory, "sort", 1, 2000, 1.5, long_queries=1) as (engine, live):
        started = time.monotonic()
        first = requests.get(live.url + "/sparql", params=sort)
        assert first.status_code == 422 and "GLASSGRAPH_DEADLINE" in first.text, first.text
        assert time.monotonic() - started < 1.5 + 3
        assert requests.get(live.url + "/sparql", params={"query": "ASK { ?s ?p ?o }"}).status_code == 200
        second = requests.get(live.url + "/sparql", params=sort)  # the first one's place is still held:
        assert second.status_code == 429 and "GLASSGRAPH_LONG_QUERIES" in second.text, second.text


# --- several app workers on one engine ------------------------------------------------------------------

@pytest.mark.slow
def test_gunicorn_workers_share_one_engine(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Two gunicorn workers: a collection written through one is answered from by both (their label indexes
    follow the store's data version), and every session id is unique."""
    engine = start_engine(tmp_path_factory, "workers")
    try:
        store = remote_store(engine.url)
        add_france(store)
        server = ProductionServer(tmp_path / "app", workers=2, env={"GLASSGRAPH_STORE": engine.url})
        try:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            atlantis, poseidonia = f"<{ENTITY.atlantis.value}>", f"<{ENTITY.poseidonia.value}>"
            label = f"<{vocab.RDFS.label.value}>"
            new = (f"{atlantis} <{RELATION.capital.value}> {poseidonia} .\n{atlantis} {label} \"Atlantis\" .\n"
                   f"{poseidonia} {label} \"Poseidonia\" .")
            questions = [ask(server.url, "What is the capital of France?") for _ in range(6)]  # both workers index
            posted = requests.post(server.url + "/store", params={"graph": vocab.collection_graph("default").value},
                                   data=new, headers={"Content-Type": "text/turtle", **auth})
            assert posted.status_code == 204, posted.text
            time.sleep(1.2)  # label_index.VERSION_CHECK_S: how long a worker trusts its index unasked
            questions += [ask(server.url, "What is the capital of Atlantis?") for _ in range(6)]
            assert all("Poseidonia" in answer for _, answer in questions[6:]), questions[6:]
            assert all("Paris" in answer for _, answer in questions[:6])
            sessions = [session for session, _ in questions]
            assert len(set(sessions)) == len(sessions)
            pids = {line for line in server.log_path.read_text().splitlines() if "Booting worker" in line}
            assert len(pids) == 2
        finally:
            server.close()
    finally:
        engine.close()


def ask(url: str, question: str) -> tuple[str, str]:
    """(session IRI, answer) of one GraphRAG question answered as JSON."""
    response = requests.post(url + "/api/graph-rag", json={"query": question, "streaming": False}, timeout=60)
    assert response.status_code == 200, response.text
    body = response.json()
    return body["session"], body["answer"] or json.dumps(body)


# --- the single-machine production set-up ----------------------------------------------------------------

@pytest.mark.slow
def test_serve_with_engine_runs_oxigraph_and_workers_and_stops_both(tmp_path: Path) -> None:
    data = tmp_path / "one.nt"
    data.write_text(f"<{ENTITY.atlantis.value}> <{vocab.RDFS.label.value}> \"Atlantis\" .\n")
    store = str(tmp_path / "store")
    env = {**_cli_env(), "GLASSGRAPH_STORE": store, "GLASSGRAPH_LOAD_SAMPLE": "false"}
    assert subprocess.run([*GLASSGRAPH, "load", str(data)], env=env, capture_output=True).returncode == 0
    port = free_port()
    server = subprocess.Popen([*GLASSGRAPH, "serve", "--engine", "oxigraph", "--workers", "2", "--port", str(port)],
                              env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = server.stdout.readline()
        assert first.startswith(f"Glassgraph console: http://127.0.0.1:{port}/") and "2 workers" in first, first
        engine_url = first.split("oxigraph serve at ")[1].split(";")[0]
        health = requests.get(f"http://127.0.0.1:{port}/healthz").json()
        assert health["store"] == engine_url and health["collections"] == 1
        answer = requests.get(f"http://127.0.0.1:{port}/sparql", headers={"Accept": "application/json"},
                              params={"query": "SELECT ?l WHERE { ?s ?p ?l }"}).json()
        assert [row["l"]["value"] for row in answer["results"]["bindings"]] == ["Atlantis"]
    finally:
        server.terminate()
        server.wait(60)
        server.stdout.close()
    assert server.returncode == 0
    with pytest.raises(requests.ConnectionError):  # the engine stopped with it
        requests.get(engine_url + "/query", params={"query": "ASK {}"}, timeout=5)


GLASSGRAPH = [str(Path(sys.executable).with_name("glassgraph"))]


def _cli_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GLASSGRAPH_", "OPENAI_"))}


# --- what a client's request can make Glassgraph send ------------------------------------------------------

def test_a_client_chooses_the_dataset_but_no_other_parameter_of_the_engine_request() -> None:
    engine = LoopbackListener()
    store = RemoteStore(EngineEndpoints.of(engine.url.removesuffix("/sparql"), query=engine.url))
    live = serve(store)
    query = "SELECT * WHERE { ?s ?p ?o }"
    try:
        both = requests.post(live.url + "/sparql", data={"query": query, "update": "DROP ALL"})
        assert both.status_code == 400
        for send in (requests.get, lambda url, params: requests.post(url, data=params)):
            answered = send(live.url + "/sparql", params={
                "query": query, "default-graph-uri": "urn:test:g", "union-default-graph": "", "timeout": "0"})
            assert answered.status_code == 200, answered.text
        assert requests.get(live.url + "/sparql", params={"query": query, "timeout": "0"}).status_code == 200
    finally:
        live.close()
        engine.close()
    sent = [sorted(parse_qsl(body.decode(), keep_blank_values=True)) for body in engine.bodies]
    text = f"BASE <{live.url}/sparql>\n{query}"
    chosen = [("default-graph-uri", "urn:test:g"), ("query", text)]
    assert sent == [chosen, chosen, [("query", text), ("union-default-graph", "")]]


def test_a_resource_as_rdf_asks_the_engine_for_no_more_edges_than_the_row_limit() -> None:
    """``/resource`` of an IRI with millions of edges must not make the engine send (and this worker hold)
    all of them before the row limit refuses the page: each direction is asked for one more than the limit."""
    no_rows = b'{"head":{"vars":["s","p","o","g"]},"results":{"bindings":[]}}'
    engine = LoopbackListener(reply=no_rows)
    store = RemoteStore(EngineEndpoints.of(engine.url.removesuffix("/sparql"), query=engine.url))
    live = serve(store, max_result_rows=10)
    try:
        page = requests.get(live.url + "/resource", params={"iri": "urn:test:hub"}, headers={"Accept": "text/turtle"})
        assert page.status_code == 404, page.text
    finally:
        live.close()
        engine.close()
    sent = [dict(parse_qsl(body.decode()))["query"] for body in engine.bodies]
    edges = [text for text in sent if "urn:test:hub" in text]
    assert len(edges) == 2 and all(text.rstrip().endswith("LIMIT 11") for text in edges), edges


@pytest.mark.slow
def test_the_page_of_a_hub_lists_some_of_its_edges_without_sorting_them_all(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The resource page of an IRI with 300,000 incoming edges: sorting them all to show 500 took the engine
    minutes on disk (past the store's read timeout: 503) for each anonymous GET; the page takes any 500 and sorts
    those."""
    engine = OxigraphServer(tmp_path_factory.mktemp("hub") / "engine", "--timeout-s", "10")  # on disk: sorts slowly
    store = RemoteStore(EngineEndpoints.of(engine.url), timeout_s=10.0)  # minutes for a sort of all; load-proof
    hub = "urn:test:hub"
    try:
        edges = "".join(f"<urn:test:s{i}> <urn:test:p> <{hub}> <urn:test:g> .\n" for i in range(300_000))
        loaded = requests.post(engine.url + "/store", data=edges.encode(),
                               headers={"Content-Type": "application/n-quads"})
        assert loaded.status_code == 204, loaded.text
        live = serve(store, query_deadline_s=10.0)
        try:
            page = requests.get(live.url + "/resource", params={"iri": hub}, headers={"Accept": "text/html"})
        finally:
            live.close()
    finally:
        store.close()
        engine.close()
    assert page.status_code == 200, page.text[:300]
    listed = sorted(int(n) for n in re.findall(r"urn:test:s(\d+)", page.text))
    assert len(set(listed)) == 500


# --- configuration: the engine's URLs, credentials and dialect -----------------------------------------------

def test_the_environment_names_each_endpoint_and_the_credentials() -> None:
    engine = LoopbackListener()
    root = engine.url.removesuffix("/sparql")
    try:
        fuseki_like = connect_store(Config.from_env({
            "GLASSGRAPH_STORE": root + "/ds", "GLASSGRAPH_STORE_QUERY_URL": engine.url + "?op=query",
            "GLASSGRAPH_STORE_UPDATE_URL": engine.url + "?op=update",
            "GLASSGRAPH_STORE_DATA_URL": engine.url + "?op=data",
            "GLASSGRAPH_STORE_TOKEN": "engine-secret\n", "GLASSGRAPH_STORE_DIALECT": "rdf-star"}))
        assert isinstance(fuseki_like, RemoteStore) and fuseki_like.dialect == RDF_STAR
        fuseki_like.named_graphs()
        fuseki_like.extend([Quad(ENTITY.a, RELATION.b, Literal("c"), vocab.collection_graph("default"))])
        fuseki_like.dump(None, graph=vocab.collection_graph("default"))
        basic = connect_store(Config.from_env({"GLASSGRAPH_STORE": root, "GLASSGRAPH_STORE_USER": "glass",
                                               "GLASSGRAPH_STORE_PASSWORD": "graph"}))
        basic.named_graphs()
    finally:
        engine.close()
    assert [call.split()[:2] for call in engine.calls] == [
        ["POST", "/sparql?op=query"], ["POST", "/sparql?op=update"],
        ["GET", "/sparql?op=data&graph=urn%3Atrustgraph%3Agraph%3Adefault"], ["POST", "/query"]]
    assert engine.authorizations == ["Bearer engine-secret"] * 3 + ["Basic Z2xhc3M6Z3JhcGg="]


def test_a_dialect_that_does_not_exist_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="GLASSGRAPH_STORE_DIALECT"):
        connect_store(Config.from_env({"GLASSGRAPH_STORE": "http://127.0.0.1:9", "GLASSGRAPH_STORE_DIALECT": "rdf13"}))
    assert isinstance(connect_store(Config.from_env({"GLASSGRAPH_STORE": ":memory:"})), GraphStore)


def test_a_clients_ask_forwarded_to_virtuoso_is_a_boolean(virtuoso: VirtuosoServer) -> None:
    """Virtuoso answers ASK with a binding of ``__ASK_RETVAL``; the client has the standard boolean."""
    virtuoso.empty()
    store = virtuoso_store(virtuoso)
    store.extend([Quad(ENTITY.a, RELATION.b, Literal("c"), vocab.collection_graph("default"))])
    live = serve(store)
    try:
        for query, expected in (("ASK { ?s ?p 'c' }", True), ("ASK { ?s ?p 'd' }", False)):
            answer = requests.get(live.url + "/sparql", params={"query": query},
                                  headers={"Accept": "application/sparql-results+json"})
            assert answer.status_code == 200 and answer.json()["boolean"] is expected, answer.text
    finally:
        live.close()


class _Arrivals:
    """A body that arrives in the given pieces, whatever size is asked for (as a socket's reads do)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = [piece for piece in pieces if piece]  # an empty read is the end

    def read(self, size: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


def test_virtuosos_blank_node_labels_are_read_in_a_stream_cut_anywhere() -> None:
    """A client's forwarded answer is read as it arrives: a ``nodeID://`` label cut by a read is still read
    (as the whole answer is read by ``standard_results``), wherever the cut falls."""
    body = (b'{ "head": { "vars": [ "s", "o" ] }, "results": { "bindings": [\n'
            b'{ "s": { "type": "bnode", "value": "nodeID://b10000" }, '
            b'"o": { "type": "bnode", "value": "nodeID://b10001" } } ] } }')
    whole = standard_results(body)
    assert b"nodeID" not in whole
    for cut in range(len(body) + 1):
        for pieces in ([body[:cut], body[cut:]], [body[i:i + 1] for i in range(cut)] + [body[cut:]]):
            assert StandardStream(_Arrivals(list(pieces))).read() == whole, cut
    rows = list(parse_query_results(StandardStream(_Arrivals([body[:70], body[70:]])), format=QueryResultsFormat.JSON))
    assert [(row["s"], row["o"]) for row in rows] == [(BlankNode("b10000"), BlankNode("b10001"))]


def test_a_clients_select_of_blank_nodes_forwarded_to_virtuoso_answers_them(virtuoso: VirtuosoServer) -> None:
    """Virtuoso labels blank nodes ``nodeID://b10000`` in SPARQL JSON; the client has them, with Virtuoso's
    labels (``b10000``), in every format."""
    virtuoso.empty()
    store = virtuoso_store(virtuoso)
    graph = vocab.collection_graph("default")
    store.extend([Quad(BlankNode(), RELATION.b, BlankNode(), graph), Quad(ENTITY.a, RELATION.b, BlankNode(), graph)])
    live = serve(store)
    try:
        query = f"SELECT ?s ?o WHERE {{ ?s <{RELATION.b.value}> ?o }}"
        answer = requests.get(live.url + "/sparql", params={"query": query},
                              headers={"Accept": "application/sparql-results+json"})
        assert answer.status_code == 200, answer.text
        rows = answer.json()["results"]["bindings"]
        objects = {row["o"]["value"] for row in rows}
        assert len(rows) == 2 and len(objects) == 2 and all(row["o"]["type"] == "bnode" for row in rows)
        assert all(re.fullmatch(r"b\d+", label) for label in objects), objects
        subjects = sorted(row["s"]["type"] for row in rows)
        assert subjects == ["bnode", "uri"]
        tsv = requests.get(live.url + "/sparql", params={"query": query},
                           headers={"Accept": "text/tab-separated-values"})
        assert tsv.status_code == 200 and {f"_:{label}" for label in objects} <= set(tsv.text.split()), tsv.text
    finally:
        live.close()


def test_an_answer_naming_thousands_of_statement_nodes_is_read_back_on_virtuoso(virtuoso: VirtuosoServer) -> None:
    """Each statement node of an answer is described by one more query: Virtuoso 7 refused one of 4,095 nodes
    (SP030), so they are asked for ``STATEMENTS_PER_QUERY`` at a time (a backup of the sample data named 4,940)."""
    virtuoso.empty()
    store = virtuoso_store(virtuoso)
    graph = vocab.collection_graph("default")
    unknown = [NamedNode(f"urn:glassgraph:statement:{n:032x}") for n in range(4 * STATEMENTS_PER_QUERY + 100)]
    store.extend([Quad(ENTITY.a, RELATION.b, CAPITAL, graph), *(Quad(ENTITY.a, RELATION.c, iri, graph)
                                                                for iri in unknown)])
    rows = store.run_query(f"SELECT ?o WHERE {{ ?s ?p ?o FILTER(?p IN ({RELATION.b}, {RELATION.c})) }}")
    assert sorted(str(row["o"]) for row in rows) == sorted(str(term) for term in [*unknown, CAPITAL])


def test_a_whole_store_dump_on_virtuoso_waits_past_the_deadline(virtuoso: VirtuosoServer, tmp_path: Path) -> None:
    """In the reification dialect a backup is one SPARQL answer (45 s for the sample data on Virtuoso): the CLI's
    whole-store dump and backup wait for it past GLASSGRAPH_DEADLINE, a graph's (the Graph Store's) does not."""
    virtuoso.empty()
    store = RemoteStore(virtuoso.endpoints, dialect=REIFICATION, timeout_s=0.000_001)
    quad = Quad(ENTITY.a, RELATION.b, CAPITAL, vocab.collection_graph("default"))
    virtuoso_store(virtuoso).extend([quad])
    with pytest.raises(StoreUnavailable, match="did not answer in time"):
        store.dump(None, RdfFormat.N_TRIPLES, quad.graph_name)
    store.backup(tmp_path / "backup")
    assert (tmp_path / "backup" / "dataset.nq").read_text() == f"{quad} .\n"
