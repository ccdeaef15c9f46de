"""The SPARQL 1.1 Graph Store HTTP Protocol at ``/store`` (``?graph=IRI`` or ``?default``).

GET/HEAD read a graph (404 if a named graph does not exist); PUT replaces, POST merges (201 when
the graph is new, 204 otherwise; POST to ``/store`` itself creates a graph ``urn:uuid:...`` and
answers 201 with its Location); DELETE drops (204, or 404). Writes need the bearer token. A
body is parsed completely before anything is written, and each write is one atomic update, so a
bad body writes nothing.
"""
from __future__ import annotations

import uuid
from itertools import islice

from flask import Blueprint, Response, request, url_for
from pyoxigraph import DefaultGraph, NamedNode, RdfFormat, Triple, parse

from server.errors import BadRequest, LimitExceeded, NotFound, UnsupportedMediaType
from server.http.context import current_config, current_store, notify_written, require_write_access
from server.http.negotiation import GRAPH_MEDIA
from server.http.rdf_output import choose_format, has_triple_term, rdf_content_type
from server.http.sparql_guard import MAX_NESTING

blueprint = Blueprint("graph_store", __name__)


def _target() -> NamedNode | DefaultGraph:
    """The graph the request names: exactly one of ``?graph=IRI`` and ``?default``."""
    graphs = request.args.getlist("graph")
    default = "default" in request.args
    if default == bool(graphs) or len(graphs) > 1:
        raise BadRequest("name exactly one graph: ?graph=<IRI> or ?default")
    if default:
        return DefaultGraph()
    try:
        return NamedNode(graphs[0])
    except ValueError as error:
        raise BadRequest(f"graph: not an absolute IRI ({error})") from None


def _read_body(graph: NamedNode | DefaultGraph) -> list[Triple]:
    """Every triple of the request body, or 400/415 before anything is written."""
    fmt = GRAPH_MEDIA.get(request.mimetype) or (RdfFormat.from_media_type(request.mimetype)
                                                if request.mimetype else None)
    if fmt is None:
        raise UnsupportedMediaType(f"unsupported Content-Type {request.mimetype or '(none)'}: send Turtle, N-Triples, "
                             "RDF/XML, JSON-LD, TriG or N-Quads")
    base = graph.value if isinstance(graph, NamedNode) else request.base_url
    try:
        quads = list(parse(request.get_data(cache=False), format=fmt, base_iri=base))
    except (SyntaxError, ValueError) as error:
        raise BadRequest(f"the body is not valid {fmt.name}: {error}; nothing was written") from None
    if any(not isinstance(q.graph_name, DefaultGraph) for q in quads):
        raise BadRequest("a graph body must hold triples only, not named graphs; nothing was written")
    if any(_triple_term_depth(q.object) > MAX_NESTING or _triple_term_depth(q.subject) > MAX_NESTING for q in quads):
        raise BadRequest(f"the body nests triple terms more than {MAX_NESTING} levels deep; nothing was written")
    return [q.triple for q in quads]


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


@blueprint.route("/store", methods=["GET"])
def get_graph() -> Response:
    """GET / HEAD: the graph as RDF by negotiation; 404 for a named graph that does not exist.

    Written by the store itself (no Python object per triple), after a look at the graph that stops
    past ``GLASSGRAPH_MAX_ROWS`` (422) and sees whether it holds triple terms (no JSON-LD then).
    """
    graph = _target()
    if not current_store().has_graph(graph):
        raise NotFound(f"no graph <{graph.value}> in this store")
    fmt = choose_format(request.headers.get("Accept"), _has_triple_terms_within_limit(graph))
    return Response(current_store().dump(None, fmt, graph), content_type=rdf_content_type(fmt))


def _has_triple_terms_within_limit(graph: NamedNode | DefaultGraph) -> bool:
    limit = current_config().max_result_rows
    count, nested = 0, False
    for quad in islice(current_store().quads(graph=graph), limit + 1):
        count, nested = count + 1, nested or has_triple_term(quad)
    if count > limit:
        raise LimitExceeded(f"the graph has more than {limit} triples (GLASSGRAPH_MAX_ROWS): read it with "
                            "/sparql and LIMIT/OFFSET, or export it with 'glassgraph dump'")
    return nested


@blueprint.route("/store", methods=["PUT"])
def put_graph() -> Response:
    """PUT: replace the graph's content with the body."""
    require_write_access()
    graph = _target()
    return _write(graph, _read_body(graph), replace=True)


@blueprint.route("/store", methods=["POST"])
def post_graph() -> Response:
    """POST: merge the body into the graph; to ``/store`` itself, a new graph (201 and its Location)."""
    require_write_access()
    if not request.args:
        graph = NamedNode(f"urn:uuid:{uuid.uuid4()}")
        response = _write(graph, _read_body(graph), replace=False)
        response.headers["Location"] = url_for("graph_store.get_graph", graph=graph.value)
        return response
    graph = _target()
    return _write(graph, _read_body(graph), replace=False)


@blueprint.route("/store", methods=["DELETE"])
def delete_graph() -> Response:
    """DELETE: drop a named graph, or empty the default graph; 404 if the named graph does not exist."""
    require_write_access()
    graph = _target()
    if not current_store().drop_graph(graph):
        raise NotFound(f"no graph <{graph.value}> in this store")
    notify_written([graph])
    return Response(status=204)
