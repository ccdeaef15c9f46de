"""The dataset's VoID description at ``/.well-known/void`` (RFC 5785 well-known URI registered for
VoID): RDF for machines (Turtle without Accept), a page for a browser. The descriptions come from
``descriptions.current_descriptions`` (kept until the next write of data).
"""
from __future__ import annotations

from flask import Blueprint, Response, current_app, render_template, url_for

from server.http.context import current_config, public_root, public_url
from server.http.descriptions import current_descriptions
from server.http.linked_data import linked_data_response
from server.http.negotiation import GRAPH_MEDIA
from server.void import VOID_PATH, dataset_iri, void_triples

blueprint = Blueprint("dataset", __name__)
@blueprint.route(VOID_PATH, methods=["GET"])
def void() -> Response:
    root, endpoint = public_root(), public_url(url_for("sparql.sparql_endpoint"))
    descriptions = current_descriptions(current_app)
    triples = void_triples(descriptions, root, endpoint, current_config().max_result_rows)
    graphs = [(d, dataset_iri(root, d.role).value) for d in descriptions]
    return linked_data_response(
        triples, lambda: render_template("void.html", graphs=graphs, endpoint=endpoint,
                                         total=sum(d.triples for d in descriptions)),
        "no description", html_by_default=False, media=GRAPH_MEDIA)
