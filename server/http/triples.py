"""``POST /api/triples``: the quads matching a pattern, for clients that ask by pattern instead of SPARQL
(TrustGraph's ``triples`` service, ``tg-query-graph``, reaches it through ``/api/v1/socket``).

The body is ``{"s", "p", "o"}`` (each optional, a term in the wire form of ``server.explain.wire``: an IRI,
a literal or a triple term), ``collection`` (its knowledge graph; default: the configured collection) or
``g`` (a graph's IRI; TrustGraph's names ``urn:graph:source`` and ``urn:graph:retrieval`` are the collection's
source graph and the explainability graph; in the former a ``dc:title`` is answered as ``dcterms:title`` too, the
title TrustGraph's ``tg-show-extraction-provenance`` reads) and ``limit`` (from 1, default 100; past
``GLASSGRAPH_MAX_ROWS`` the answer stops there). The answer is
``{"triples": [{"s", "p", "o", "g"}], "truncated"}``: ``truncated`` when more quads match than ``limit``.
"""
from __future__ import annotations

from collections import Counter

from flask import Blueprint, Response, jsonify
from pyoxigraph import NamedNode, Quad, Triple

from server import vocab
from server.errors import BadRequest
from server.explain.wire import quad_wire, wire_term
from server.http.api import json_body, require_collection
from server.http.context import current_config, current_store
from server.vocab import Term

blueprint = Blueprint("triples", __name__)
DEFAULT_LIMIT = 100
DESCRIPTION_READ = 10  # a subject's quads read for an answer cut at ``limit``: this many times it, to order them
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
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BadRequest(f"'limit' must be a positive integer (at most {high} are answered: GLASSGRAPH_MAX_ROWS), "
                         f"got {limit!r}")
    limit = min(limit, high)  # past the row limit the answer is cut there (truncated), as TrustGraph's tools expect
    store = current_store()
    trustgraph_source = body.get("g") == TRUSTGRAPH_SOURCE_GRAPH
    stored = vocab.DC.title if trustgraph_source and predicate == vocab.DCTERMS.title else predicate
    described = subject is not None and stored is None and obj is None  # a subject's description
    read = min(limit * DESCRIPTION_READ, high) + 1 if described else limit + 1
    found = list(store.quads(subject, stored, obj, _graph(body), limit=read))
    if described and len(found) > limit:
        found = _fewest_values_first(found)
    answered = _with_dcterms_titles(found[:limit], predicate) if trustgraph_source else found[:limit]
    return jsonify(triples=[quad_wire(quad) for quad in answered], truncated=len(found) > limit)


def _fewest_values_first(quads: list[Quad]) -> list[Quad]:
    """A subject's quads, its types first, then each predicate's by how few values it has (in the store's order
    within one predicate): an answer cut at its limit keeps what says what the subject is. TrustGraph's trace
    reader asks for 100 quads of an entity and knows it by its ``rdf:type``; a retrieval step has more edges."""
    values = Counter(quad.predicate for quad in quads)
    return sorted(quads, key=lambda quad: (quad.predicate != vocab.RDF.type, values[quad.predicate]))


def _with_dcterms_titles(quads: list[Quad], asked: NamedNode | None) -> list[Quad]:
    """``quads`` with each ``dc:title`` (DC elements 1.1, which Glassgraph and TrustGraph's own provenance write)
    as ``dcterms:title`` (which TrustGraph's CLI reads) too, or instead when that was the predicate ``asked``."""
    answered = []
    for quad in quads:
        if quad.predicate == vocab.DC.title and asked != vocab.DC.title:
            if asked is None:
                answered.append(quad)
            answered.append(Quad(quad.subject, vocab.DCTERMS.title, quad.object, quad.graph_name))
        else:
            answered.append(quad)
    return answered


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
