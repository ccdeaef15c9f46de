"""Running the W3C SPARQL 1.1 Protocol and Graph Store Protocol manifests (``w3c_manifest.py``) over
HTTP against a server: ``tests/test_w3c_conformance.py`` runs them against Glassgraph,
``bench/w3c_conformance.py`` against Glassgraph and ``oxigraph serve`` side by side.

- Request bodies are sent byte for byte with the manifest's character encoding, and request
  targets exactly as written (no client re-encodes them); ``$LOCATION$`` and the like are replaced
  by the ``Location`` a response named.
- Each test starts from an empty store (``DROP ALL``) holding only its ``ut:graphData``: the
  manifests' tests expect ``201 Created`` for graphs earlier tests created too.
- A response passes when its status is one the manifest allows, its headers match (for
  Content-Type: the media type, and the charset if the answer names one), a boolean, tabular or
  RDF result parses as such (and the boolean is the one expected), and an RDF body is isomorphic
  to the expected one (rdflib); a HEAD answer has no body.
"""
from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from urllib.parse import parse_qs, quote, urlsplit

import requests
from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, parse_query_results
from rdflib import Graph
from rdflib.compare import isomorphic
from w3c_manifest import Expected, ManifestTest, Request

EXAMPLE_STORE = "http://www.example/gsp"
RESULTS_MEDIA = {"boolean": ("application/sparql-results+json", "application/sparql-results+xml"),
                 "tabular": ("application/sparql-results+json", "application/sparql-results+xml", "text/csv",
                             "text/tab-separated-values")}
RDF_MEDIA = {"application/rdf+xml": "xml", "text/turtle": "turtle", "application/n-triples": "nt",
             "text/plain": "nt", "application/xhtml+xml": "rdfa", "text/html": "rdfa"}


@dataclass(frozen=True)
class Target:
    """A server under test and where the manifests' requests go on it: the authority ``www.example``
    is ``url``; ``/sparql/`` is ``query_path`` for queries and ``update_path`` for updates (the
    protocol manifest allows separate endpoints); ``/gsp`` is ``store_path``; ``headers`` go on
    every request (a bearer token)."""

    url: str
    query_path: str = "/sparql"
    update_path: str = "/sparql"
    store_path: str = "/store"
    headers: dict[str, str] = field(default_factory=dict)

    def request_target(self, request: Request, path: str) -> str:
        """The manifest's ``ht:absolutePath`` (for www.example) as a request target on this server.

        Graph IRIs under ``http://www.example/gsp`` (plain or percent-encoded) become the same IRIs
        under this server's store, so that a graph named directly and indirectly is one graph.
        """
        store = self.url + self.store_path
        path = path.replace(quote(EXAMPLE_STORE, safe=""), quote(store, safe="")).replace(EXAMPLE_STORE, store)
        if path.startswith("/sparql/"):
            return (self.update_path if _is_update(request) else self.query_path) + path[len("/sparql/"):]
        if path.startswith("/gsp"):
            return self.store_path + path[len("/gsp"):]
        raise AssertionError(f"a request path outside /sparql/ and /gsp: {path}")

    def fresh_store(self, test: ManifestTest) -> None:
        """An empty store, then each ``ut:graphData`` file in its named graph (over HTTP)."""
        dropped = requests.post(self.url + self.update_path, data="DROP ALL",
                                headers={"Content-Type": "application/sparql-update", **self.headers})
        assert dropped.status_code in (200, 204), dropped.text
        for data, graph in test.graph_data:
            loaded = requests.put(self.url + self.store_path, params={"graph": graph}, data=data.read_bytes(),
                                  headers={"Content-Type": "application/n-triples", **self.headers})
            assert loaded.status_code in (201, 204), loaded.text


def _is_update(request: Request) -> bool:
    """An update operation (or an attempt at one) rather than a query."""
    fields = parse_qs(urlsplit(request.path).query, keep_blank_values=True)
    if request.body is not None and "form-urlencoded" in request.headers.get("content-type", ""):
        fields.update(parse_qs(request.body.decode("utf-8", errors="replace"), keep_blank_values=True))
    return "update" in fields or "sparql-update" in request.headers.get("content-type", "") or any(
        name.startswith("using-") for name in fields)


def _substitute(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = text.replace(name, value)
    return text


def _send(target: Target, request: Request, variables: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """The request exactly as the manifest writes it (no client re-encodes the target or the body)."""
    parts = urlsplit(target.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    body = request.body
    if body is not None and variables:
        body = _substitute(body.decode("utf-8"), variables).encode("utf-8")
    try:
        connection.request(request.method, target.request_target(request, _substitute(request.path, variables)),
                           body=body, headers={**request.headers, **target.headers})
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
            # a parameter the answer gives must agree (text/turtle is UTF-8 with or without charset=)
            assert got_media == want_media and all(got_params.get(k, v) == v for k, v in want_params.items()), \
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


def run_manifest_test(target: Target, test: ManifestTest) -> None:
    """From an empty store, each request of ``test`` in order, each response checked against the
    manifest; an AssertionError says which request failed and how."""
    target.fresh_store(test)
    variables: dict[str, str] = {}
    for number, request in enumerate(test.requests, 1):
        status, headers, body = _send(target, request, variables)
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
