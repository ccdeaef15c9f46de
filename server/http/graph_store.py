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
from pyoxigraph import BlankNode, DefaultGraph, NamedNode, RdfFormat, Triple, parse

from server import vocab
from server.http.context import current_config, current_store, notify_written, require_write_access
from server.http.errors import HttpError
from server.http.negotiation import GRAPH_MEDIA, negotiate
from server.http.sparql_eval import rdf_content_type
from server.sparql_templates import Term, render_term

blueprint = Blueprint("graph_store", __name__)


def _target() -> NamedNode | DefaultGraph:
    """The graph the request names: exactly one of ``?graph=IRI`` and ``?default``."""
    graphs = request.args.getlist("graph")
    default = "default" in request.args
    if default == bool(graphs) or len(graphs) > 1:
        raise HttpError(400, "name exactly one graph: ?graph=<IRI> or ?default")
    if default:
        return DefaultGraph()
    try:
        return NamedNode(graphs[0])
    except ValueError as error:
        raise HttpError(400, f"graph: not an absolute IRI ({error})") from None


def _exists(graph: NamedNode | DefaultGraph) -> bool:
    return isinstance(graph, DefaultGraph) or current_store().raw.contains_named_graph(graph)


def _render(term: Term | BlankNode) -> str:
    """A term of a request body, for INSERT DATA (blank nodes allowed)."""
    return render_term(term, blank_nodes=True)


def _graph_clause(graph: NamedNode | DefaultGraph) -> str:
    return "DEFAULT" if isinstance(graph, DefaultGraph) else f"GRAPH {_render(graph)}"


def _read_body(graph: NamedNode | DefaultGraph) -> list[Triple]:
    """Every triple of the request body, or 400/415 before anything is written."""
    fmt = GRAPH_MEDIA.get(request.mimetype) or (RdfFormat.from_media_type(request.mimetype)
                                                if request.mimetype else None)
    if fmt is None:
        raise HttpError(415, f"unsupported Content-Type {request.mimetype or '(none)'}: send Turtle, N-Triples, "
                             "RDF/XML, JSON-LD, TriG or N-Quads")
    base = graph.value if isinstance(graph, NamedNode) else request.base_url
    try:
        quads = list(parse(request.get_data(cache=False), format=fmt, base_iri=base))
    except (SyntaxError, ValueError) as error:
        raise HttpError(400, f"the body is not valid {fmt.name}: {error}; nothing was written") from None
    if any(not isinstance(q.graph_name, DefaultGraph) for q in quads):
        raise HttpError(400, "a graph body must hold triples only, not named graphs; nothing was written")
    return [q.triple for q in quads]


def _write(graph: NamedNode | DefaultGraph, triples: list[Triple], replace: bool) -> Response:
    """Replace or merge ``triples`` in one atomic update; 201 if the graph is new, else 204."""
    store = current_store()
    operations = []
    if replace:
        operations.append(f"CLEAR SILENT {_graph_clause(graph)}")
    if isinstance(graph, NamedNode):
        operations.append(f"CREATE SILENT GRAPH {_render(graph)}")
    if triples:
        body = "\n".join(f"{_render(t.subject)} {_render(t.predicate)} {_render(t.object)} ." for t in triples)
        operations.append(f"INSERT DATA {{ GRAPH {_render(graph)} {{\n{body}\n}} }}" if isinstance(graph, NamedNode)
                          else f"INSERT DATA {{\n{body}\n}}")
    with store.writing() as raw:
        created = not _exists(graph)
        raw.update(" ;\n".join(operations))
    notify_written(graph)
    return Response(status=201 if created else 204)


@blueprint.route("/store", methods=["GET"])
def get_graph() -> Response:
    """GET / HEAD: the graph as RDF by negotiation; 404 for a named graph that does not exist.

    Written by the store itself (no Python object per triple), after checking that the graph is
    within ``GLASSGRAPH_MAX_ROWS`` (counting stops at the limit, so a huge graph costs no more than
    a full one). JSON-LD steps aside when the graph holds triple terms, as in ``sparql_eval.graph_body``.
    """
    graph = _target()
    if not _exists(graph):
        raise HttpError(404, f"no graph <{graph.value}> in this store")
    _check_size(graph)
    accept = request.headers.get("Accept")
    offers = list(GRAPH_MEDIA)
    while True:
        chosen = negotiate(accept, offers)
        if chosen is None:
            raise HttpError(406, "no acceptable format for this graph; available: " + ", ".join(offers)
                            + (" (JSON-LD cannot carry its RDF 1.2 triple terms)" if len(offers) < len(GRAPH_MEDIA)
                               else ""))
        fmt = GRAPH_MEDIA[chosen]
        try:
            body = current_store().raw.dump(format=fmt, from_graph=graph, prefixes=vocab.PREFIXES if fmt in (
                RdfFormat.TURTLE, RdfFormat.TRIG) else None)
        except OSError:
            if fmt != RdfFormat.JSON_LD:
                raise
            offers = [m for m in offers if GRAPH_MEDIA[m] != RdfFormat.JSON_LD]
            continue
        return Response(body, content_type=rdf_content_type(fmt))


def _check_size(graph: NamedNode | DefaultGraph) -> None:
    limit = current_config().max_result_rows
    quads = current_store().raw.quads_for_pattern(None, None, None, graph)
    if sum(1 for _ in islice(quads, limit + 1)) > limit:
        raise HttpError(422, f"the graph has more than {limit} triples (GLASSGRAPH_MAX_ROWS): read it with "
                             "/sparql and LIMIT/OFFSET, or export it with 'glassgraph dump'")


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
    with current_store().writing() as raw:
        if not _exists(graph):
            raise HttpError(404, f"no graph <{graph.value}> in this store")
        raw.update("CLEAR DEFAULT" if isinstance(graph, DefaultGraph) else f"DROP GRAPH {_render(graph)}")
    notify_written(graph)
    return Response(status=204)
