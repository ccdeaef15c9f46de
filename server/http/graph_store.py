"""The SPARQL 1.1 Graph Store HTTP Protocol at ``/store``.

A graph is named indirectly (``/store?graph=IRI``, ``/store?default``) or directly: a graph whose
IRI is a URL under ``/store/`` is addressed by that URL (``PUT /store/person/1.ttl`` writes the
graph ``http://HOST/store/person/1.ttl``), for every method. GET/HEAD read a graph (404 if a named
graph does not exist; HEAD answers GET's headers with no body); PUT replaces, POST merges (201
when the graph is new, 204 otherwise); POST to ``/store`` itself creates a graph
``http://HOST/store/{uuid}`` and answers 201 with that IRI as its Location, which GET reads back;
DELETE drops (204, or 404). A body is one RDF document, or ``multipart/form-data`` whose parts
are RDF documents (merged). Writes need the bearer token. A body is parsed completely before
anything is written, and each write is one atomic update, so a bad body writes nothing.
"""
from __future__ import annotations

import re
import uuid
from urllib.parse import quote

from flask import Blueprint, Response, current_app, request
from pyoxigraph import DefaultGraph, NamedNode, RdfFormat, Triple, parse

from server.errors import BadRequest, LimitExceeded, NotFound, UnsupportedMediaType
from server.http.context import (
    current_config,
    current_store,
    notify_written,
    public_root,
    public_url,
    require_write_access,
)
from server.http.descriptions import kept_until_written
from server.http.linked_data import requested_accept
from server.http.multipart import Document, body_parts
from server.http.negotiation import GRAPH_MEDIA
from server.http.params import bounded_iri_text
from server.http.rdf_output import choose_format, rdf_content_type
from server.http.sparql_guard import MAX_NESTING

blueprint = Blueprint("graph_store", __name__)
STORE_PATH = "/store"


def _target() -> NamedNode | DefaultGraph:
    """The graph the request names: its own URL under ``/store/``, or exactly one of ``?graph=IRI``
    and ``?default``."""
    graphs = request.args.getlist("graph")
    default = "default" in request.args
    if request.view_args:
        if graphs or default:
            raise BadRequest(f"a request to a graph's own URL under {STORE_PATH}/ names no other graph "
                             "(?graph= and ?default are for /store itself)")
        try:
            return NamedNode(request_iri())
        except ValueError as error:  # characters no IRI may hold, sent unencoded ("/store/a\"b")
            raise BadRequest(f"the request URL is not an IRI, so it names no graph ({error})") from None
    if default == bool(graphs) or len(graphs) > 1:
        raise BadRequest("name exactly one graph: ?graph=<IRI> or ?default, or use the graph's own URL under "
                         f"{STORE_PATH}/")
    if default:
        return DefaultGraph()
    try:
        return NamedNode(bounded_iri_text("graph", graphs[0]))
    except ValueError as error:
        raise BadRequest(f"graph: not an absolute IRI ({error})") from None


def request_iri() -> str:
    """The URL this request was sent to, without its query: the path as the client wrote it
    (percent-encoding kept) when the server passes it on, else the decoded path encoded again."""
    raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI")
    path = raw.partition("?")[0] if raw else quote(request.script_root + request.path, safe="/:@!$&'()*+,;=~")
    return public_root() + path


def _read_body(graph: NamedNode | DefaultGraph) -> list[Triple]:
    """Every triple of the request body (each part of a multipart body), or 400/415 before anything
    is written."""
    base = graph.value if isinstance(graph, NamedNode) else public_url()
    triples = []
    for document in body_parts(request.content_type, request.get_data(cache=False)):
        triples += _parse_document(document, base)
    return triples


def _parse_document(document: Document, base: str) -> list[Triple]:
    """The triples of one RDF document; its blank nodes are its own (two parts' ``_:b0`` differ)."""
    media, label = document.media_type, document.label
    fmt = GRAPH_MEDIA.get(media) or (RdfFormat.from_media_type(media) if media else None)
    if fmt is None:
        raise UnsupportedMediaType(f"unsupported Content-Type {media or '(none)'}{label}: send Turtle, N-Triples, "
                                   "RDF/XML, JSON-LD, TriG or N-Quads (or multipart/form-data of those)")
    if _marker_depth(document.data) > MAX_NESTING:  # the parser recurses: 100,000 levels crashed the server
        raise BadRequest(f"the body{label} nests triple terms more than {MAX_NESTING} levels deep; nothing was "
                         "written")
    try:
        quads = list(parse(document.data, format=fmt, base_iri=base, rename_blank_nodes=True))
    except (SyntaxError, ValueError) as error:
        raise BadRequest(f"the body{label} is not valid {fmt.name}: {error}; nothing was written") from None
    if any(not isinstance(q.graph_name, DefaultGraph) for q in quads):
        raise BadRequest(f"a graph body{label} must hold triples only, not named graphs; nothing was written")
    if any(_triple_term_depth(q.object) > MAX_NESTING or _triple_term_depth(q.subject) > MAX_NESTING for q in quads):
        raise BadRequest(f"the body{label} nests triple terms more than {MAX_NESTING} levels deep; nothing was "
                         "written")
    return [q.triple for q in quads]


_MARKERS = re.compile(rb"<<|>>")


def _marker_depth(data: bytes) -> int:
    """The deepest nesting of ``<<`` ... ``>>`` in the text, read before any parse (a marker inside a string
    counts too: over-cautious, never fooled)."""
    depth = deepest = 0
    for marker in _MARKERS.finditer(data):
        depth = depth + 1 if marker.group() == b"<<" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def _triple_term_depth(term: object) -> int:
    """How many triple terms are nested in ``term`` (0 for an IRI, literal or blank node)."""
    deepest, pending = 0, [(term, 0)]
    while pending:
        inner, depth = pending.pop()
        if isinstance(inner, Triple):
            deepest = max(deepest, depth + 1)
            pending += [(inner.subject, depth + 1), (inner.object, depth + 1)]
    return deepest


def _write(graph: NamedNode | DefaultGraph, triples: list[Triple], replace: bool) -> Response:
    """Replace or merge ``triples`` in one transaction; 201 if the graph is new, else 204."""
    created = current_store().write_graph(graph, triples, replace)
    notify_written([graph])
    return Response(status=201 if created else 204)


@blueprint.route(STORE_PATH, methods=["GET"])
@blueprint.route(STORE_PATH + "/<path:name>", methods=["GET"])
def get_graph(name: str | None = None) -> Response:
    """GET / HEAD: the graph as RDF by negotiation (or ``?format=``); 404 for a named graph that does not exist.

    Written by the store itself (no Python object per triple), after a count by the store that stops
    past ``GLASSGRAPH_MAX_ROWS`` (422) and, when JSON-LD is the format asked for, a look for triple terms
    (which JSON-LD cannot carry: another format then).
    """
    graph, store = _target(), current_store()
    if not store.has_graph(graph):
        raise NotFound(f"no graph <{graph.value}> in this store")
    _check_size(graph)
    fmt = choose_format(requested_accept(), has_triple_terms=False)
    if fmt == RdfFormat.JSON_LD and store.query("store_graph_has_triple_term", default_graph=graph):
        fmt = choose_format(requested_accept(), has_triple_terms=True)
    return Response(store.dump(None, fmt, graph), content_type=rdf_content_type(fmt))


def _check_size(graph: NamedNode | DefaultGraph) -> None:
    """422 for a graph over ``GLASSGRAPH_MAX_ROWS``, counted by the store up to one triple more (walking the
    librarian's 100,001 quads in Python took 1.3-7 s a request) and kept until the next write of data (the
    count still took 33 ms of the server's CPU, so 40 anonymous clients asking for the librarian graph took
    half a core from everyone); explanations, which add answers to the librarian graph, renew it at most
    every 30 s (``descriptions.kept_until_written``)."""
    limit = current_config().max_result_rows

    def count() -> int:
        rows = current_store().query("store_graph_size", limit=limit + 1, default_graph=graph)
        return int(next(iter(rows))["n"].value)

    if kept_until_written(current_app, f"glassgraph.graph-size {graph}", count, traces_matter=True) > limit:
        raise LimitExceeded(f"the graph has more than {limit} triples (GLASSGRAPH_MAX_ROWS): read it with "
                            "/sparql and LIMIT/OFFSET, or export it with 'glassgraph dump'")


@blueprint.route(STORE_PATH, methods=["PUT"])
@blueprint.route(STORE_PATH + "/<path:name>", methods=["PUT"])
def put_graph(name: str | None = None) -> Response:
    """PUT: replace the graph's content with the body."""
    require_write_access()
    graph = _target()
    return _write(graph, _read_body(graph), replace=True)


@blueprint.route(STORE_PATH, methods=["POST"])
@blueprint.route(STORE_PATH + "/<path:name>", methods=["POST"])
def post_graph(name: str | None = None) -> Response:
    """POST: merge the body into the graph; to ``/store`` itself, a new graph under ``/store/`` (201,
    and its IRI as the Location)."""
    require_write_access()
    if not request.args and not request.view_args:
        graph = NamedNode(f"{request_iri()}/{uuid.uuid4()}")
        response = _write(graph, _read_body(graph), replace=False)
        response.headers["Location"] = graph.value
        return response
    graph = _target()
    return _write(graph, _read_body(graph), replace=False)


@blueprint.route(STORE_PATH, methods=["DELETE"])
@blueprint.route(STORE_PATH + "/<path:name>", methods=["DELETE"])
def delete_graph(name: str | None = None) -> Response:
    """DELETE: drop a named graph, or empty the default graph; 404 if the named graph does not exist."""
    require_write_access()
    graph = _target()
    if not current_store().drop_graph(graph):
        raise NotFound(f"no graph <{graph.value}> in this store")
    notify_written([graph])
    return Response(status=204)
