"""The protocol gaps issue 13 lists, each tried as a new user would, called in-process (a live server on
127.0.0.1 where the request line itself is the subject; the W3C suites in test_w3c_conformance.py cover them
over sockets too; these pin down the details): relative IRIs resolved against the endpoint or BASE, direct
graph identification, POST /store's Location, multipart/form-data bodies, HEAD."""
from __future__ import annotations

import pytest
import requests
from live_server import Serving, Verbs
from pyoxigraph import BlankNode, DefaultGraph, NamedNode, Quad, RdfFormat, parse

from server.store import GraphStore

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EX = "http://example.org/"
BOUNDARY = "b0undary"


SERVER_STORE, SERVER_SETTINGS, IN_PROCESS = "store", {"token": TOKEN}, True  # conftest's server


def update(server: Verbs, text: str) -> requests.Response:
    return server.post(server.url + "/sparql", data=text.encode(),
                         headers={"Content-Type": "application/sparql-update", **AUTH})


def construct(server: Verbs, text: str) -> set:
    response = server.post(server.url + "/sparql", data=text.encode(),
                             headers={"Content-Type": "application/sparql-query", "Accept": "application/n-triples"})
    assert response.status_code == 200, response.text
    return {q.triple for q in parse(response.content, format=RdfFormat.N_TRIPLES)}


def multipart(*parts: tuple[str | None, str]) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body of (Content-Type or None, text) parts."""
    chunks = []
    for number, (media, text) in enumerate(parts):
        head = f'Content-Disposition: form-data; name="part{number}"; filename="part{number}.ttl"\r\n'
        if media is not None:
            head += f"Content-Type: {media}\r\n"
        chunks.append(f"--{BOUNDARY}\r\n{head}\r\n{text}\r\n")
    body = "".join(chunks) + f"--{BOUNDARY}--\r\n"
    return body.encode(), {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}", **AUTH}


# --- relative IRIs -------------------------------------------------------------------------------

def test_relative_iris_in_a_query_resolve_against_the_endpoint(server: Verbs) -> None:
    (triple,) = construct(server, "CONSTRUCT { <s> <p> 1 } WHERE {}")
    assert triple.subject == NamedNode(server.url + "/s") and triple.predicate == NamedNode(server.url + "/p")


def test_base_in_the_text_wins_over_the_endpoint(server: Verbs) -> None:
    (triple,) = construct(server, f"BASE <{EX}base/> CONSTRUCT {{ <s> <p> 1 }} WHERE {{}}")
    assert triple.subject == NamedNode(EX + "base/s")


def test_relative_iris_in_an_update_resolve_and_name_the_graph_written(server: Verbs, store: GraphStore) -> None:
    assert update(server, "INSERT DATA { GRAPH <g> { <s> <p> <o> } }").status_code == 204
    assert set(store.raw) == {Quad(NamedNode(server.url + "/s"), NamedNode(server.url + "/p"),
                                   NamedNode(server.url + "/o"), NamedNode(server.url + "/g"))}
    assert update(server, f"BASE <{EX}> INSERT DATA {{ <s> <p> <o> }}").status_code == 204
    assert Quad(NamedNode(EX + "s"), NamedNode(EX + "p"), NamedNode(EX + "o"), DefaultGraph()) in set(store.raw)


def test_a_relative_service_endpoint_is_checked_as_resolved(server: Verbs) -> None:
    response = server.get(server.url + "/sparql", params={"query": "SELECT * { SERVICE <elsewhere> { ?s ?p ?o } }"})
    assert response.status_code == 403 and f"<{server.url}/elsewhere>" in response.text


# --- direct graph identification and POST /store ------------------------------------------------

def test_a_graph_under_store_is_addressed_by_its_own_url(server: Verbs, store: GraphStore) -> None:
    graph_url = server.url + "/store/person/1.ttl"
    created = server.put(graph_url, data=f"<{EX}a> <{EX}p> <rel> .", headers={"Content-Type": "text/turtle", **AUTH})
    assert created.status_code == 201
    (quad,) = store.raw
    assert quad.graph_name == NamedNode(graph_url) and quad.object == NamedNode(server.url + "/store/person/rel")
    by_parameter = server.get(server.url + "/store", params={"graph": graph_url})
    direct = server.get(graph_url)
    assert direct.status_code == by_parameter.status_code == 200 and direct.content == by_parameter.content
    assert server.post(graph_url, data=f"<{EX}b> <{EX}p> 2 .",
                         headers={"Content-Type": "text/turtle", **AUTH}).status_code == 204
    assert len(store) == 2
    assert server.delete(graph_url, headers=AUTH).status_code == 204
    assert server.get(graph_url).status_code == 404 and server.head(graph_url).status_code == 404
    assert server.delete(graph_url, headers=AUTH).status_code == 404


def test_a_graph_url_keeps_its_percent_encoding(server: Verbs, store: GraphStore) -> None:
    """The graph is named by the URL as the client sent it: ``a%20b`` (decoded, ``a b`` is no IRI)."""
    graph_url = server.url + "/store/people/a%20b.ttl"
    response = server.put(graph_url, data=f"<{EX}a> <{EX}p> 1 .", headers={"Content-Type": "text/turtle", **AUTH})
    assert response.status_code == 201
    assert store.named_graphs() == [NamedNode(graph_url)]
    assert server.get(server.url + "/store", params={"graph": graph_url}).status_code == 200


def test_a_graph_url_with_a_graph_parameter_is_refused(server: Verbs) -> None:
    response = server.get(server.url + "/store/x", params={"graph": EX + "g"})
    assert response.status_code == 400 and "?graph=" in response.text


def test_post_to_the_store_answers_a_location_that_reads_back(server: Verbs) -> None:
    created = server.post(server.url + "/store", data=f"<{EX}a> <{EX}p> 1 .",
                            headers={"Content-Type": "text/turtle", **AUTH})
    location = created.headers["Location"]
    assert created.status_code == 201 and location.startswith(server.url + "/store/")
    for read in (server.get(location), server.get(server.url + "/store", params={"graph": location})):
        assert read.status_code == 200 and f"<{EX}a>" in read.text


# --- multipart/form-data ------------------------------------------------------------------------

def test_multipart_parts_are_merged_with_their_own_formats_and_blank_nodes(server: Verbs,
                                                                           store: GraphStore) -> None:
    body, headers = multipart(("text/turtle; charset=utf-8", f"_:b0 <{EX}name> \"Doe\" ."),
                              ("application/n-triples", f"_:b0 <{EX}name> \"Jane\" ."))
    posted = server.post(server.url + "/store", params={"graph": EX + "g"}, data=body, headers=headers)
    assert posted.status_code == 201
    subjects = {q.subject for q in store.raw}
    assert len(store) == 2 and len(subjects) == 2 and all(isinstance(s, BlankNode) for s in subjects)


def test_a_bad_multipart_body_writes_nothing(server: Verbs, store: GraphStore) -> None:
    untyped, headers = multipart(("text/turtle", f"<{EX}a> <{EX}p> 1 ."), (None, f"<{EX}a> <{EX}p> 2 ."))
    response = server.post(server.url + "/store", params={"graph": EX + "g"}, data=untyped, headers=headers)
    assert response.status_code == 415 and "part 2: part1.ttl" in response.text
    broken, headers = multipart(("text/turtle", f"<{EX}a> <{EX}p> 1 ."), ("text/turtle", "<unterminated"))
    response = server.post(server.url + "/store", params={"graph": EX + "g"}, data=broken, headers=headers)
    assert response.status_code == 400 and "part 2" in response.text and "nothing was written" in response.text
    no_parts = server.post(server.url + "/store", params={"graph": EX + "g"}, data=b"no boundary here",
                             headers={"Content-Type": "multipart/form-data", **AUTH})
    assert no_parts.status_code == 400
    assert len(store) == 0


# --- HEAD ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("accept", [None, "text/turtle", "application/n-triples"])
def test_head_answers_gets_headers_without_a_body(server: Verbs, accept: str | None) -> None:
    server.put(server.url + "/store/h", data=f"<{EX}a> <{EX}p> 1 .", headers={"Content-Type": "text/turtle", **AUTH})
    headers = {"Accept": accept} if accept else {}
    for url in (server.url + "/store/h", server.url + f"/store?graph={server.url}/store/h"):
        got, head = server.get(url, headers=headers), server.head(url, headers=headers)
        assert head.status_code == got.status_code == 200 and head.content == b""
        assert {k: v for k, v in head.headers.items() if k != "Date"} == \
               {k: v for k, v in got.headers.items() if k != "Date"}


@pytest.mark.parametrize("path", ['/store/a"b', "/store/a{b}", "/store/a%ZZ", "/store/a<b>", "/store/a`b"])
@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_a_store_url_that_is_no_iri_is_a_400_not_a_500(serving: Serving, store: GraphStore, path: str,
                                                        method: str) -> None:
    """The path as sent, with characters no IRI may hold (http.client sends it unencoded, as curl -g does), to
    a live server: the request line is the subject."""
    import http.client

    server = serving(store, **SERVER_SETTINGS)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.putheader("Authorization", AUTH["Authorization"])
        connection.endheaders()
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    assert response.status in (400, 404), (response.status, body)  # a bad request line may stop in werkzeug
    assert b"Traceback" not in body


def test_deeply_nested_triple_terms_in_a_graph_body_are_a_400_before_the_parser(server: Verbs,
                                                                                 store: GraphStore) -> None:
    """100,000 nested triple terms (2.4 MB) crashed the server inside the parser; now the bytes are read first."""
    depth = 100_000
    body = "<urn:a> <urn:p> " + "<<( <urn:a> <urn:p> " * depth + '"x"' + " )>>" * depth + " .\n"
    response = server.put(f"{server.url}/store?graph=urn:deep", data=body.encode(), timeout=60,
                            headers={"Content-Type": "text/turtle", **AUTH})
    assert response.status_code == 400 and "levels deep" in response.text
    assert server.get(f"{server.url}/healthz", timeout=30).status_code == 200
    assert not store.has_graph(NamedNode("urn:deep"))
