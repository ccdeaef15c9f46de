"""Every test of the W3C SPARQL 1.1 Protocol and Graph Store Protocol manifests (``tests/w3c/``), run
over HTTP against the real server: the production command (gunicorn, ``ProductionServer``) and the
development server (werkzeug, as ``glassgraph serve`` runs it), each over an on-disk store.

How the manifests' requests are mapped onto this server:
- The authority ``www.example`` is the server; ``/sparql/`` is ``/sparql`` and ``/gsp`` is ``/store``.
  Graph IRIs under ``http://www.example/gsp`` (plain or percent-encoded in a query string) become
  the same IRIs under the server's ``/store``, so that a graph named indirectly
  (``/store?graph=IRI``) and directly (``/store/person/1.ttl``) is the same graph, as the manifests
  intend. Request bodies are sent byte for byte, with the manifest's character encoding.
- Writes need the bearer token on this server, so every request carries it.
- Each test starts from an empty store (``DROP ALL``) holding only its ``ut:graphData``: the
  manifests' tests expect ``201 Created`` for graphs earlier tests created too.
- A response passes when its status is one the manifest allows, its headers match (media type and
  charset for Content-Type), a boolean or tabular or RDF result parses as such (and the boolean is
  the one expected), and an RDF body is isomorphic to the expected one (rdflib); a HEAD answer has
  no body. A ``Location`` is remembered as ``$LOCATION$`` for the requests after it.
"""
from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import requests
from live_server import LiveServer, serve
from production_server import TOKEN, ProductionServer
from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, parse_query_results
from rdflib import Graph
from rdflib.compare import isomorphic
from w3c_manifest import GRAPH_STORE_MANIFEST, PROTOCOL_MANIFEST, Expected, ManifestTest, Request, read_manifest

from server.store import GraphStore

PROTOCOL = read_manifest(PROTOCOL_MANIFEST, "ProtocolTest")
GRAPH_STORE = read_manifest(GRAPH_STORE_MANIFEST, "GraphStoreProtocolTest")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLE_STORE = "http://www.example/gsp"
RESULTS_MEDIA = {"boolean": ("application/sparql-results+json", "application/sparql-results+xml"),
                 "tabular": ("application/sparql-results+json", "application/sparql-results+xml", "text/csv",
                             "text/tab-separated-values")}
RDF_MEDIA = {"application/rdf+xml": "xml", "text/turtle": "turtle", "application/n-triples": "nt",
             "text/plain": "nt", "application/xhtml+xml": "rdfa", "text/html": "rdfa"}


@pytest.fixture(scope="module", params=["production", "development"])
def server_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The production command or the development server, over an empty on-disk store."""
    directory = tmp_path_factory.mktemp(f"w3c-{request.param}")
    if request.param == "production":
        production = ProductionServer(directory / "store")
        yield production.url
        production.close()
    else:
        live: LiveServer = serve(GraphStore(directory / "store"), token=TOKEN)
        yield live.url
        live.close()


def _fresh_store(url: str, test: ManifestTest) -> None:
    """An empty store, then each ``ut:graphData`` file in its named graph (over HTTP)."""
    dropped = requests.post(url + "/sparql", data="DROP ALL", headers={"Content-Type": "application/sparql-update",
                                                                       **AUTH})
    assert dropped.status_code == 204, dropped.text
    for data, graph in test.graph_data:
        loaded = requests.put(url + "/store", params={"graph": graph}, data=data.read_bytes(),
                              headers={"Content-Type": "application/n-triples", **AUTH})
        assert loaded.status_code == 201, loaded.text


def server_target(path: str, url: str) -> str:
    """The manifest's ``ht:absolutePath`` (for www.example) as a request target on the server at ``url``."""
    store = url + "/store"
    path = path.replace(quote(EXAMPLE_STORE, safe=""), quote(store, safe="")).replace(EXAMPLE_STORE, store)
    if path.startswith("/sparql/"):
        return "/sparql" + path[len("/sparql/"):]
    if path.startswith("/gsp"):
        return "/store" + path[len("/gsp"):]
    raise AssertionError(f"a request path outside /sparql/ and /gsp: {path}")


def _substitute(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = text.replace(name, value)
    return text


def _send(url: str, request: Request, variables: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """The request exactly as the manifest writes it (no client re-encodes the target or the body)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    body = request.body
    if body is not None and variables:
        body = _substitute(body.decode("utf-8"), variables).encode("utf-8")
    try:
        connection.request(request.method, server_target(_substitute(request.path, variables), url), body=body,
                           headers={**request.headers, **AUTH})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _statuses(expected: Expected) -> str:
    """``{200, ..., 399}`` -> ``"200-399"``; ``{200, 204}`` -> ``"200, 204"``."""
    codes, runs = sorted(expected.statuses), []
    for code in codes:
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _media(content_type: str) -> tuple[str, dict[str, str]]:
    """``text/turtle; charset=UTF-8`` -> ``("text/turtle", {"charset": "utf-8"})``."""
    media, *params = (part.strip() for part in content_type.split(";"))
    return media.lower(), {k.strip().lower(): v.strip().strip('"').lower()
                           for k, _, v in (p.partition("=") for p in params if p)}


def _check_headers(expected: Expected, headers: dict[str, str]) -> None:
    for name, value in expected.headers.items():
        actual = headers.get(name.lower())
        assert actual is not None, f"no {name} header"
        if name.lower() == "content-type":
            want_media, want_params = _media(value)
            got_media, got_params = _media(actual)
            assert got_media == want_media and all(got_params.get(k) == v for k, v in want_params.items()), \
                f"Content-Type {actual!r}, expected {value!r}"
        else:
            assert actual == value, f"{name}: {actual!r}, expected {value!r}"


def _check_result(expected: Expected, headers: dict[str, str], body: bytes) -> None:
    media, _ = _media(headers.get("content-type", ""))
    if expected.result_format in RESULTS_MEDIA:
        assert media in RESULTS_MEDIA[expected.result_format], f"a {expected.result_format} result as {media}"
        result = parse_query_results(body, format=QueryResultsFormat.from_media_type(media))
        assert isinstance(result, QueryBoolean if expected.result_format == "boolean" else QuerySolutions)
        if expected.boolean is not None:
            assert bool(result) is expected.boolean
    elif expected.result_format == "RDF":
        assert media in RDF_MEDIA, f"an RDF result as {media}"
        Graph().parse(data=body, format=RDF_MEDIA[media])


def _check_body(expected: Expected, method: str, headers: dict[str, str], body: bytes) -> None:
    if method == "HEAD":
        assert body == b"", "a HEAD answer with a body"
    elif expected.body is not None:
        media, _ = _media(headers["content-type"])
        answered = Graph().parse(data=body, format=RDF_MEDIA[media])
        wanted = Graph().parse(data=expected.body, format="turtle")
        assert isomorphic(answered, wanted), f"the graph answered:\n{body.decode()}"


def run_manifest_test(url: str, test: ManifestTest) -> None:
    """Each request of ``test`` in order, each response checked against the manifest."""
    _fresh_store(url, test)
    variables: dict[str, str] = {}
    for number, request in enumerate(test.requests, 1):
        status, headers, body = _send(url, request, variables)
        where = f"request {number} ({request.method} {request.path})"
        expected = request.expected
        assert status in expected.statuses, f"{where}: status {status}, expected {_statuses(expected)}: " \
                                            f"{body[:500]!r}"
        try:
            _check_headers(expected, headers)
            _check_result(expected, headers, body)
            _check_body(expected, request.method, headers, body)
        except AssertionError as failure:
            raise AssertionError(f"{where}: {failure}") from None
        if expected.location_variable is not None:
            assert "location" in headers, f"{where}: no Location header"
            variables[expected.location_variable] = headers["location"]


def test_the_manifests_list_34_protocol_and_13_graph_store_tests() -> None:
    """The counts the README states; a manifest-reading mistake must not drop tests silently."""
    assert sum(t.listed for t in PROTOCOL) == len(PROTOCOL) == 34
    assert sum(t.listed for t in GRAPH_STORE) == 13
    assert [t.name for t in GRAPH_STORE if not t.listed] == ["head_non_existing_direct"]
    assert all(t.requests for t in PROTOCOL + GRAPH_STORE)


@pytest.mark.parametrize("test", PROTOCOL, ids=[t.name for t in PROTOCOL])
def test_sparql_protocol(server_url: str, test: ManifestTest) -> None:
    run_manifest_test(server_url, test)


@pytest.mark.parametrize("test", GRAPH_STORE, ids=[t.name + ("" if t.listed else " (unlisted)") for t in GRAPH_STORE])
def test_graph_store_protocol(server_url: str, test: ManifestTest) -> None:
    run_manifest_test(server_url, test)


def test_the_data_files_are_the_ones_the_manifest_names() -> None:
    used = {path for test in PROTOCOL for path, _ in test.graph_data}
    assert used == {Path(PROTOCOL_MANIFEST.parent, f"data{n}.nt") for n in (1, 2, 3)}
    assert all(path.is_file() for path in used)
