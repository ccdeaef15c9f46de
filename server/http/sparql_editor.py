"""What the console's SPARQL editor asks the server while one types: whether the query parses (and
where and why not, as a plain sentence), and which predicates the store uses, for completion.

The check runs the server's own parser (decision 14), in a query worker on an on-disk store: the
same guard and parser as ``/sparql``, so the editor marks exactly what a run would refuse, RDF 1.2
triple terms included.
"""
from __future__ import annotations

from collections import Counter

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from server.errors import BadRequest, UnsupportedMediaType
from server.http.context import client_left, current_client, current_config, current_queries
from server.http.descriptions import current_descriptions
from server.http.sparql_eval import CheckTask, check_syntax

blueprint = Blueprint("sparql_editor", __name__)
MAX_PREDICATES = 2000  # the most used; completion filters them as one types


@blueprint.post("/api/sparql/check")
def check() -> Response:
    """``{"valid": true}`` or ``{"valid": false, "problem": {message, line, column, sentence}}`` for the
    query in the body (``application/sparql-query``); never runs it."""
    if request.mimetype != "application/sparql-query":
        raise UnsupportedMediaType("send the query as the body, with Content-Type: application/sparql-query")
    try:
        text = request.get_data(cache=False).decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the request body is not valid UTF-8") from None
    config = current_config()
    task = CheckTask(text, config.service_allow, base_iri=url_for("sparql.sparql_endpoint", _external=True))
    workers = current_queries()
    problem = (check_syntax(task) if workers is None
               else workers.check_syntax(task, current_client(), config.query_deadline_s, client_left()))
    return jsonify(valid=problem is None, problem=None if problem is None else problem.as_json())


@blueprint.get("/api/sparql/predicates")
def predicates() -> Response:
    """The predicates of every graph, most used first (from the VoID description, kept until the next write)."""
    counts: Counter[str] = Counter()
    for description in current_descriptions(current_app):
        for predicate, triples in description.properties:
            counts[predicate.value] += triples
    return jsonify(predicates=[{"iri": iri, "triples": n} for iri, n in counts.most_common(MAX_PREDICATES)])
