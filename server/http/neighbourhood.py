"""The neighbourhood of a resource as explain-shaped triples (``server/explain/wire.py``), for the resource page's
graph view (``static/neighbourhood.js``), which asks again for each node a visitor expands."""
from __future__ import annotations

from flask import Blueprint, Response, jsonify
from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.explain.wire import quad_wire
from server.http.context import current_store
from server.http.params import iri_parameter
from server.labels import store_labels
from server.sparql_templates import template_limit
from server.store import graph_options

blueprint = Blueprint("neighbourhood", __name__)
STEP = template_limit("console_neighbourhood")  # edges per expansion


@blueprint.get("/console/neighbourhood")
def neighbourhood() -> Response:
    """``{"iri", "triples", "complete"}``: up to ``STEP`` edges between ``iri`` and other IRIs, the labels of
    their ends and which of them are documents, pages or chunks (``rdf:type``); ``complete`` is false when
    there are more."""
    store = current_store()
    iri = iri_parameter("iri")
    rows = store.select("console_neighbourhood", values={"iri": [iri]}, **graph_options(None))
    edges = [Quad(row["s"], row["p"], row["o"]) for row in rows]
    terms = list(dict.fromkeys(t for q in edges for t in (q.subject, q.predicate, q.object)))
    labels = store_labels(store, [iri, *terms])
    quads = edges + [Quad(term, vocab.RDFS.label, Literal(label)) for term, label in labels.items()]
    quads += [Quad(term, vocab.RDF.type, kind) for term in [iri, *terms] if isinstance(term, NamedNode)
              for kind in vocab.SOURCE_KINDS if next(store.quads(term, vocab.RDF.type, kind), None) is not None]
    return jsonify(iri=iri.value, triples=[quad_wire(q) for q in quads], complete=len(rows) < STEP)
