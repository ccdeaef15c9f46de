"""The dataset's VoID description at ``/.well-known/void`` (RFC 5785 well-known URI registered for
VoID): RDF for machines (Turtle without Accept), a page for a browser.

Describing counts every graph, so the descriptions are kept until the store's next write.
"""
from __future__ import annotations

import threading

from flask import Blueprint, Flask, Response, current_app, render_template, request, url_for

from server.http.context import current_config
from server.http.linked_data import linked_data_response
from server.http.negotiation import GRAPH_MEDIA
from server.void import VOID_PATH, GraphDescription, dataset_iri, describe_store, void_triples

blueprint = Blueprint("dataset", __name__)
_describing = threading.Lock()


def current_descriptions(app: Flask) -> list[GraphDescription]:
    """The store's graphs described, as of its latest write (described again after one)."""
    store = app.extensions["glassgraph.store"]
    with _describing:
        generation, descriptions = app.extensions.get("glassgraph.void", (None, None))
        if generation != store.generation or descriptions is None:
            generation = store.generation
            descriptions = describe_store(store)
            app.extensions["glassgraph.void"] = (generation, descriptions)
        return descriptions


@blueprint.route(VOID_PATH, methods=["GET"])
def void() -> Response:
    root, endpoint = request.host_url.rstrip("/"), url_for("sparql.sparql_endpoint", _external=True)
    descriptions = current_descriptions(current_app)
    triples = void_triples(descriptions, root, endpoint, current_config().max_result_rows)
    graphs = [(d, dataset_iri(root, d.role).value) for d in descriptions]
    return linked_data_response(
        triples, lambda: render_template("void.html", graphs=graphs, endpoint=endpoint,
                                         total=sum(d.triples for d in descriptions)),
        "no description", html_by_default=False, media=GRAPH_MEDIA)
