"""``POST /api/triples``: the quads matching a pattern, for clients that ask by pattern instead of SPARQL
(TrustGraph's ``triples`` service, ``tg-query-graph``, reaches it through ``/api/v1/socket``).

The body is ``{"s", "p", "o"}`` (each optional, a term in the wire form of ``server.explain.wire``: an IRI,
a literal or a triple term), ``collection`` (its knowledge graph; default: the configured collection) or
``g`` (a graph's IRI; TrustGraph's names ``urn:graph:source`` and ``urn:graph:retrieval`` are the collection's
source graph and the explainability graph) and ``limit`` (1 to ``GLASSGRAPH_MAX_ROWS``, default 100). The answer is
``{"triples": [{"s", "p", "o", "g"}], "truncated"}``: ``truncated`` when more quads match than ``limit``.
"""
from __future__ import annotations

from flask import Blueprint, Response, jsonify
from pyoxigraph import NamedNode, Triple

from server import vocab
from server.errors import BadRequest
from server.explain.wire import quad_wire, wire_term
from server.http.api import json_body, require_collection
from server.http.context import current_config, current_store
from server.vocab import Term

blueprint = Blueprint("triples", __name__)
DEFAULT_LIMIT = 100
TRUSTGRAPH_SOURCE_GRAPH = "urn:graph:source"  # TrustGraph 2.x's names for a collection's provenance graph
TRUSTGRAPH_RETRIEVAL_GRAPH = "urn:graph:retrieval"  # and for the explain traces


@blueprint.route("/api/triples", methods=["POST"])
def triples() -> Response:
    body = json_body()
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object: {"s": term, "p": term, "o": term, "collection": ...}')
    unknown = sorted(set(body) - {"s", "p", "o", "g", "collection", "limit"})
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)}; known: collection, g, limit, o, p, s")
    subject, predicate, obj = (_term(body, name) for name in ("s", "p", "o"))
    if subject is not None and not isinstance(subject, (NamedNode, Triple)):
        raise BadRequest("'s' must be an IRI or a triple term")
    if predicate is not None and not isinstance(predicate, NamedNode):
        raise BadRequest("'p' must be an IRI")
    limit = body.get("limit", DEFAULT_LIMIT)
    high = current_config().max_result_rows
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= high:
        raise BadRequest(f"'limit' must be an integer between 1 and {high} (GLASSGRAPH_MAX_ROWS), got {limit!r}")
    store = current_store()
    found = list(store.quads(subject, predicate, obj, _graph(body), limit=limit + 1))
    return jsonify(triples=[quad_wire(quad) for quad in found[:limit]], truncated=len(found) > limit)


def _term(body: dict, name: str) -> Term | None:
    if body.get(name) is None:
        return None
    try:
        return wire_term(body[name])
    except (ValueError, TypeError) as error:  # pyoxigraph: a bad IRI (ValueError), a literal subject (TypeError)
        raise BadRequest(f"'{name}': {error}") from None


def _graph(body: dict) -> NamedNode:
    """``g`` when given (any graph the store holds, or one of TrustGraph's names), else the collection's
    knowledge graph."""
    graph = body.get("g")
    if graph == TRUSTGRAPH_RETRIEVAL_GRAPH:
        return vocab.explain_graph(current_config().explain_collection)
    if graph is not None and graph != TRUSTGRAPH_SOURCE_GRAPH:
        if not isinstance(graph, str):
            raise BadRequest("'g' must be a graph's IRI (a string)")
        try:
            return NamedNode(graph)
        except ValueError as error:
            raise BadRequest(f"'g' is not an IRI: {error}") from None
    collection = body.get("collection") or current_config().default_collection
    if not isinstance(collection, str):
        raise BadRequest("'collection' must be a string")
    require_collection(collection)
    return vocab.source_graph(collection) if graph == TRUSTGRAPH_SOURCE_GRAPH else vocab.collection_graph(collection)
