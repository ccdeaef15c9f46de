"""Federation both ways with a real ``oxigraph serve`` (the ``oxigraph`` wheel from PyPI) and the
production command: each queries the other through SERVICE with RDF 1.2 triple terms intact. Then
federation out under its limits, against stand-in endpoints on 127.0.0.1: a per-call timeout that
holds for the whole call, a row cap, and a clear error when the remote fails (never a 500)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from live_server import LiveServer, serve
from loopback_listener import LoopbackListener
from oxigraph_server import OxigraphServer
from production_server import TOKEN, ProductionServer
from pyoxigraph import Literal, NamedNode, Quad, Triple

from server.store import GraphStore

EX = "http://example.org/"
A, SAYS, P = NamedNode(EX + "a"), NamedNode(EX + "says"), NamedNode(EX + "p")
OXIGRAPH_FACT = Triple(NamedNode(EX + "b"), P, Literal("from oxigraph"))
GLASSGRAPH_FACT = Triple(A, P, Literal("from glassgraph", language="en"))
JSON_RESULTS = "application/sparql-results+json"


@pytest.fixture(scope="module")
def oxigraph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``oxigraph serve`` over a store holding ``<a> <says> <<( b p "from oxigraph" )>>``; its query endpoint."""
    server = OxigraphServer(tmp_path_factory.mktemp("oxigraph") / "store")
    loaded = requests.post(server.url + "/store?default", data=f"{A} {SAYS} <<( {OXIGRAPH_FACT.subject} {P} "
                                                                f"{OXIGRAPH_FACT.object} )>> .",
                           headers={"Content-Type": "application/n-triples"})
    assert loaded.status_code in (201, 204), loaded.text
    yield server.url + "/query"
    server.close()


@pytest.fixture(scope="module")
def glassgraph(tmp_path_factory: pytest.TempPathFactory, oxigraph: str) -> Iterator[ProductionServer]:
    """The production command holding ``<a> <says> <<( a p "from glassgraph"@en )>>``, allowed to call oxigraph."""
    server = ProductionServer(tmp_path_factory.mktemp("glassgraph") / "store",
                              env={"GLASSGRAPH_SERVICE_ALLOW": oxigraph})
    put = requests.put(server.url + "/store", params={"graph": EX + "g"},
                       data=f'{A} {SAYS} <<( {A} {P} "from glassgraph"@en )>> .',
                       headers={"Content-Type": "application/n-triples", "Authorization": f"Bearer {TOKEN}"})
    assert put.status_code == 201, put.text
    yield server
    server.close()


def bindings(response: requests.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    return response.json()["results"]["bindings"]


def triple_json(triple: Triple) -> dict:
    """A triple term as SPARQL JSON results write it (RDF 1.2)."""
    def term(t: object) -> dict:
        if isinstance(t, NamedNode):
            return {"type": "uri", "value": t.value}
        return {"type": "literal", "value": t.value, **({"xml:lang": t.language} if t.language else {})}
    return {"type": "triple", "value": {"subject": term(triple.subject), "predicate": term(triple.predicate),
                                        "object": term(triple.object)}}


# --- both ways, with the real servers -----------------------------------------------------------

def test_glassgraph_federates_out_to_oxigraph_serve(glassgraph: ProductionServer, oxigraph: str) -> None:
    query = f"SELECT ?fact WHERE {{ SERVICE <{oxigraph}> {{ {A} {SAYS} ?fact }} }}"
    rows = bindings(requests.get(glassgraph.url + "/sparql", params={"query": query}, headers={"Accept": JSON_RESULTS}))
    assert rows == [{"fact": triple_json(OXIGRAPH_FACT)}]


def test_oxigraph_serve_federates_into_glassgraph(glassgraph: ProductionServer, oxigraph: str) -> None:
    query = f"SELECT ?fact WHERE {{ SERVICE <{glassgraph.url}/sparql> {{ {A} {SAYS} ?fact }} }}"
    rows = bindings(requests.get(oxigraph, params={"query": query}, headers={"Accept": JSON_RESULTS}))
    assert rows == [{"fact": triple_json(GLASSGRAPH_FACT)}]


def test_a_join_across_both_stores_in_one_query(glassgraph: ProductionServer, oxigraph: str) -> None:
    """Glassgraph's own triple and oxigraph's, joined on the subject, the remote one inside SERVICE."""
    query = (f"SELECT ?here ?there WHERE {{ {A} {SAYS} ?here . "
             f"SERVICE <{oxigraph}> {{ {A} {SAYS} ?there }} }}")
    rows = bindings(requests.post(glassgraph.url + "/sparql", data={"query": query}, headers={"Accept": JSON_RESULTS}))
    assert rows == [{"here": triple_json(GLASSGRAPH_FACT), "there": triple_json(OXIGRAPH_FACT)}]


def test_an_update_reads_from_oxigraph_through_service(glassgraph: ProductionServer, oxigraph: str) -> None:
    update = (f"INSERT {{ GRAPH <{EX}copied> {{ {A} {SAYS} ?fact }} }} "
              f"WHERE {{ SERVICE <{oxigraph}> {{ {A} {SAYS} ?fact }} }}")
    done = requests.post(glassgraph.url + "/sparql", data=update,
                         headers={"Content-Type": "application/sparql-update", "Authorization": f"Bearer {TOKEN}"})
    assert done.status_code == 204, done.text
    copied = requests.get(glassgraph.url + "/store", params={"graph": EX + "copied"},
                          headers={"Accept": "application/n-triples"})
    assert copied.text.strip() == f"{A} {SAYS} <<( {OXIGRAPH_FACT.subject} {P} {OXIGRAPH_FACT.object} )>> ."


# --- federation out, under its limits ------------------------------------------------------------

@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    return GraphStore(tmp_path / "store")


def ask_through(store: GraphStore, endpoint: LoopbackListener, text: str, **settings: object) -> requests.Response:
    """``text`` sent to a server allowed to call ``endpoint`` (its URL is ``ENDPOINT`` in the text)."""
    live: LiveServer = serve(store, service_allow=(endpoint.url,), token=TOKEN, **settings)
    try:
        return requests.post(live.url + "/sparql", data={"query": text.replace("ENDPOINT", endpoint.url)},
                             headers={"Accept": JSON_RESULTS})
    finally:
        live.close()


ROWS = 5
FIVE_ROWS = json.dumps({"head": {"vars": ["n"]}, "results": {"bindings": [
    {"n": {"type": "literal", "value": str(i)}} for i in range(ROWS)]}}).encode()
SELECT_REMOTE = "SELECT ?n WHERE { SERVICE <ENDPOINT> { ?s ?p ?n } }"


@pytest.mark.parametrize("delays", [{"delay_s": 30.0}, {"drip_s": 0.5}], ids=["silent", "dripping"])
def test_a_call_past_its_timeout_is_a_clear_502(store: GraphStore, delays: dict) -> None:
    """The timeout is for the whole call: an endpoint that sends one byte every half second (each read
    quick, the whole answer 30 s late) is cut off too. The query's own deadline is far off."""
    endpoint = LoopbackListener(reply=FIVE_ROWS, **delays)
    try:
        response = ask_through(store, endpoint, SELECT_REMOTE, service_timeout_s=1.0, query_deadline_s=120.0)
    finally:
        endpoint.close()
    assert response.status_code == 502, response.text
    message = response.text
    assert f"SERVICE <{endpoint.url}> did not answer within 1 s" in message and "GLASSGRAPH_SERVICE_TIMEOUT" in message


def test_the_row_cap(store: GraphStore) -> None:
    endpoint = LoopbackListener(reply=FIVE_ROWS)
    try:
        within = ask_through(store, endpoint, SELECT_REMOTE, service_max_rows=ROWS)
        over = ask_through(store, endpoint, SELECT_REMOTE, service_max_rows=ROWS - 1)
    finally:
        endpoint.close()
    assert sorted(int(row["n"]["value"]) for row in bindings(within)) == list(range(ROWS))
    assert over.status_code == 422 and "GLASSGRAPH_SERVICE_MAX_ROWS" in over.text


@pytest.mark.parametrize(("listener", "expected"), [
    ({"status": 500, "reply": b"the remote broke", "content_type": "text/plain"}, "answered 500 Internal Server Error: "
                                                                                 "the remote broke"),
    ({"status": 302, "headers": {"Location": "http://127.0.0.1:1/elsewhere"}, "reply": b""}, "answered 302"),
    ({"reply": b"<html>a login page</html>", "content_type": "text/html"}, "is not SPARQL results (text/html)"),
], ids=["server-error", "redirect-not-followed", "not-results"])
def test_a_failing_remote_is_a_502_that_says_what_went_wrong(store: GraphStore, listener: dict, expected: str) -> None:
    endpoint = LoopbackListener(**listener)
    try:
        response = ask_through(store, endpoint, SELECT_REMOTE)
    finally:
        endpoint.close()
    assert response.status_code == 502 and expected in response.text
    assert len(endpoint.calls) == 1  # the redirect was not followed


def test_an_endpoint_that_is_down_is_a_502(store: GraphStore) -> None:
    endpoint = LoopbackListener()
    endpoint.close()  # nothing listens on its port any more
    response = ask_through(store, endpoint, SELECT_REMOTE)
    assert response.status_code == 502 and "cannot be reached" in response.text


def test_service_silent_ignores_a_failing_remote(store: GraphStore) -> None:
    store.extend([Quad(A, P, Literal("local"))])
    endpoint = LoopbackListener(status=500, reply=b"down", content_type="text/plain")
    try:
        response = ask_through(store, endpoint, f"SELECT ?o WHERE {{ {A} {P} ?o OPTIONAL {{ SERVICE SILENT <ENDPOINT> "
                                                f"{{ ?o ?x ?y }} }} }}")
    finally:
        endpoint.close()
    assert bindings(response) == [{"o": {"type": "literal", "value": "local"}}]


def test_an_update_calling_a_silent_remote_writes_nothing(store: GraphStore) -> None:
    endpoint = LoopbackListener(reply=FIVE_ROWS, delay_s=30.0)
    live = serve(store, service_allow=(endpoint.url,), token=TOKEN, service_timeout_s=1.0)
    try:
        update = f"INSERT {{ {A} {P} ?n }} WHERE {{ SERVICE <{endpoint.url}> {{ ?s ?p ?n }} }}"
        response = requests.post(live.url + "/sparql", data=update, headers={
            "Content-Type": "application/sparql-update", "Authorization": f"Bearer {TOKEN}"})
    finally:
        live.close()
        endpoint.close()
    assert response.status_code == 502 and "GLASSGRAPH_SERVICE_TIMEOUT" in response.text
    assert len(store) == 0


# --- updates: SERVICE checked in the parse worker, LOAD through the relay ----------------------------

def update_through(store: GraphStore, endpoint: LoopbackListener, text: str, **settings: object) -> requests.Response:
    live: LiveServer = serve(store, service_allow=(endpoint.url,), token=TOKEN, **settings)
    try:
        return requests.post(live.url + "/sparql", data=text.replace("ENDPOINT", endpoint.url), headers={
            "Content-Type": "application/sparql-update", "Authorization": f"Bearer {TOKEN}"})
    finally:
        live.close()


def test_an_update_calling_an_allowed_service_is_parsed_in_the_worker_first(store: GraphStore) -> None:
    """A flat chain the server's threads could parse but the parse worker's stack cannot: refused by the
    worker (the same check as any update) before the server parses it or calls anybody."""
    endpoint = LoopbackListener(reply=FIVE_ROWS)
    chain = "+".join(["1"] * 8_000)  # parses on 16 MB of stack (a request thread), not on 4 MB (the worker)
    try:
        response = update_through(store, endpoint, f"INSERT {{ {A} {P} ?n }} WHERE {{ SERVICE <ENDPOINT> "
                                                    f"{{ ?s ?p ?n }} FILTER(?n != {chain}) }}")
        plain = update_through(store, endpoint, f"INSERT {{ {A} {P} ?n }} WHERE {{ SERVICE <ENDPOINT> "
                                                 "{ ?s ?p ?n } }")
    finally:
        endpoint.close()
    assert response.status_code in (400, 422), response.text
    assert plain.status_code == 204, plain.text
    assert len(endpoint.calls) == 1  # the plain update's call only
    assert len(store) == ROWS


def test_load_has_the_service_timeout(store: GraphStore) -> None:
    endpoint = LoopbackListener(reply=b"<urn:x:s> <urn:x:p> 1 .", content_type="application/n-triples", delay_s=30.0)
    try:
        response = update_through(store, endpoint, "LOAD <ENDPOINT> INTO GRAPH <urn:x:g>", service_timeout_s=1.0)
    finally:
        endpoint.close()
    assert response.status_code == 502, response.text
    assert f"LOAD <{endpoint.url}> did not answer within 1 s" in response.text
    assert len(store) == 0


def test_load_resolves_relative_iris_against_the_documents_url(store: GraphStore) -> None:
    endpoint = LoopbackListener(reply=b"<a> <b> <c> .", content_type="text/turtle")
    try:
        response = update_through(store, endpoint, "LOAD <ENDPOINT> INTO GRAPH <urn:x:g>")
    finally:
        endpoint.close()
    assert response.status_code == 204, response.text
    loaded = [str(q.subject) for q in store.quads(None, None, None, NamedNode("urn:x:g"))]
    assert loaded == [f"<{endpoint.url.rsplit('/', 1)[0]}/a>"]
