"""The SPARQL 1.1 Protocol at ``/sparql`` (https://www.w3.org/TR/sparql11-protocol/).

One function per protocol operation, modelled on Oxigraph's own server: the request is read into
an :class:`Operation` (query by GET, POST form or POST ``application/sparql-query``; update by POST
form or POST ``application/sparql-update``), then :func:`evaluate_query` or
:func:`evaluate_update` runs it; a GET without a query answers the service description.
Negotiation lives in ``negotiation.py``, status codes in ``errors.py``.

Dataset: without ``default-graph-uri``/``named-graph-uri`` and without ``FROM`` in the query, the
default graph is the union of all graphs. Updates work on the store's real default graph.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from flask import Blueprint, Response, request
from pyoxigraph import BlankNode, Literal, NamedNode, Quad, QueryBoolean, QuerySolutions, RdfFormat, Triple, serialize

from server.http.context import current_config, current_store, notify_written, require_write_access
from server.http.errors import HttpError
from server.http.negotiation import GRAPH_MEDIA, RESULTS_CONTENT_TYPE, RESULTS_MEDIA, negotiate
from server.http.results import write_boolean, write_solutions
from server.http.sparql_guard import add_using, check_remote_calls, has_dataset_clause
from server.vocab import RDF, Namespace

blueprint = Blueprint("sparql", __name__)

SD = Namespace("http://www.w3.org/ns/sparql-service-description#")
FORMATS = Namespace("http://www.w3.org/ns/formats/")
_DEADLINE_EVERY = 64  # rows between deadline checks


@dataclass
class Operation:
    kind: str  # "query" | "update"
    text: str
    default_graphs: list[NamedNode] = field(default_factory=list)  # default-graph-uri / using-graph-uri
    named_graphs: list[NamedNode] = field(default_factory=list)  # named-graph-uri / using-named-graph-uri

    @property
    def names_dataset(self) -> bool:
        return bool(self.default_graphs or self.named_graphs)


@blueprint.route("/sparql", methods=["GET", "POST"])
def sparql_endpoint() -> Response:
    operation = read_operation()
    if operation is None:
        return service_description()
    if operation.kind == "query":
        return evaluate_query(operation)
    return evaluate_update(operation)


# --- reading the request (protocol sections 2.1 and 2.2) ----------------------------------------

def _iris(values: list[str], parameter: str) -> list[NamedNode]:
    try:
        return [NamedNode(value) for value in values]
    except ValueError as error:
        raise HttpError(400, f"{parameter}: not an absolute IRI ({error})") from None


def _single(values: list[str], name: str) -> str | None:
    if len(values) > 1:
        raise HttpError(400, f"exactly one '{name}' parameter is allowed, got {len(values)}")
    return values[0] if values else None


def _body_text() -> str:
    try:
        return request.get_data(cache=False).decode("utf-8")
    except UnicodeDecodeError:
        raise HttpError(400, "the request body is not valid UTF-8") from None


def _operation(kind: str, text: str, params: dict[str, list[str]]) -> Operation:
    names = ("default-graph-uri", "named-graph-uri") if kind == "query" else ("using-graph-uri",
                                                                              "using-named-graph-uri")
    return Operation(kind, text, *(_iris(params.get(name, []), name) for name in names))


def read_operation() -> Operation | None:
    """The query or update of the request, or None for a GET with neither (service description)."""
    args = request.args.to_dict(flat=False)
    if request.method in ("GET", "HEAD"):
        if "update" in args:
            raise HttpError(400, "updates must be sent with POST (SPARQL 1.1 Protocol section 2.2)")
        query = _single(args.get("query", []), "query")
        return None if query is None else _operation("query", query, args)
    mimetype = request.mimetype
    if mimetype == "application/x-www-form-urlencoded":
        params = request.form.to_dict(flat=False)
        for key, values in args.items():
            params.setdefault(key, values)
        query, update = _single(params.get("query", []), "query"), _single(params.get("update", []), "update")
        if (query is None) == (update is None):
            raise HttpError(400, "a form POST needs exactly one of the 'query' or 'update' parameters")
        return _operation("query", query, params) if query is not None else _operation("update", update, params)
    if mimetype == "application/sparql-query":
        return _operation("query", _body_text(), args)
    if mimetype == "application/sparql-update":
        return _operation("update", _body_text(), args)
    raise HttpError(415, f"unsupported Content-Type {mimetype or '(none)'}: use application/sparql-query, "
                         "application/sparql-update or application/x-www-form-urlencoded")


# --- query (protocol section 2.1) ---------------------------------------------------------------

def _evaluation_error(error: OSError) -> HttpError:
    return HttpError(502 if "SERVICE" in str(error).upper() or "HTTP" in str(error).upper() else 500,
                     f"query evaluation failed: {error}")


def _pull(result: Iterator, as_tuples: bool) -> list:
    """Every item of ``result`` (solutions as tuples of terms, or triples), within the row and time limits."""
    config = current_config()
    deadline = time.monotonic() + config.query_deadline_s
    rows: list = []
    try:
        for item in result:
            if len(rows) >= config.max_result_rows:
                raise HttpError(422, f"the result has more than {config.max_result_rows} rows (GLASSGRAPH_MAX_ROWS): "
                                     "narrow the query or add LIMIT")
            if len(rows) % _DEADLINE_EVERY == 0 and time.monotonic() > deadline:
                raise HttpError(503, f"the query ran past its deadline of {config.query_deadline_s} s "
                                     "(GLASSGRAPH_DEADLINE)")
            rows.append(tuple(item) if as_tuples else item)
    except OSError as error:
        raise _evaluation_error(error) from None
    return rows


def _not_acceptable(offers: list[str]) -> HttpError:
    return HttpError(406, "none of the requested media types can be produced here; available: " + ", ".join(offers))


def evaluate_query(operation: Operation) -> Response:
    """Run a query over the request's dataset and answer in the negotiated format."""
    check_remote_calls(operation.text, current_config().service_allow, is_update=False)
    options: dict[str, object] = {}
    if operation.names_dataset:
        options = {"default_graph": operation.default_graphs, "named_graphs": operation.named_graphs}
    elif not has_dataset_clause(operation.text):
        options["use_default_graph_as_union"] = True
    accept = request.headers.get("Accept")
    try:
        result = current_store().raw.query(operation.text, **options)
    except SyntaxError as error:
        raise HttpError(400, f"malformed query: {error}") from None
    except OSError as error:
        raise _evaluation_error(error) from None
    if isinstance(result, (QueryBoolean, QuerySolutions)):
        media = negotiate(accept, list(RESULTS_MEDIA))
        if media is None:
            raise _not_acceptable(list(RESULTS_MEDIA))
        fmt = RESULTS_MEDIA[media]
        if isinstance(result, QueryBoolean):
            return Response(write_boolean(fmt, bool(result)), content_type=RESULTS_CONTENT_TYPE[fmt])
        variables = [v.value for v in result.variables]
        rows = _pull(result, as_tuples=True)
        return Response(write_solutions(fmt, variables, rows), content_type=RESULTS_CONTENT_TYPE[fmt])
    triples = _pull(result, as_tuples=False)
    return graph_response(triples, accept)


def graph_response(items: list, accept: str | None, media: dict[str, RdfFormat] = GRAPH_MEDIA) -> Response:
    """Triples or quads in the negotiated RDF format (quads lose their graph in a triples format).

    JSON-LD cannot carry RDF 1.2 triple terms: when ``items`` hold one, JSON-LD is taken out of the
    offers, so the client gets its next acceptable format, or 406 if JSON-LD was the only one.
    """
    offers = list(media)
    if any(_has_triple_term(item) for item in items):
        offers = [m for m in offers if media[m] != RdfFormat.JSON_LD]
    chosen = negotiate(accept, offers)
    if chosen is None:
        if negotiate(accept, list(media)) is not None:  # acceptable only as the JSON-LD taken out
            raise HttpError(406, "JSON-LD cannot carry the RDF 1.2 triple terms in this result; accept Turtle, "
                                 "TriG, N-Triples, N-Quads or RDF/XML")
        raise _not_acceptable(offers)
    fmt = media[chosen]
    if not fmt.supports_datasets:
        items = [item.triple if isinstance(item, Quad) else item for item in items]
    try:
        body = serialize(items, format=fmt)
    except (OSError, ValueError) as error:
        raise HttpError(406, f"this result cannot be written as {fmt.name}: {error}") from None
    return Response(body, content_type=rdf_content_type(fmt))


def rdf_content_type(fmt: RdfFormat) -> str:
    media = fmt.media_type
    return media + "; charset=utf-8" if media.startswith("text/") or media in (
        "application/n-triples", "application/n-quads", "application/trig") else media


def _has_triple_term(item: object) -> bool:
    return any(isinstance(term, Triple) for term in (item.subject, item.object))  # type: ignore[attr-defined]


# --- update (protocol section 2.2) --------------------------------------------------------------

def evaluate_update(operation: Operation) -> Response:
    """Run an update atomically under the writers' lock; 204 on success."""
    require_write_access()
    check_remote_calls(operation.text, current_config().service_allow, is_update=True)
    text = operation.text
    if operation.names_dataset:
        text = add_using(text, operation.default_graphs, operation.named_graphs)
    try:
        with current_store().writing() as store:
            store.update(text)
    except SyntaxError as error:
        raise HttpError(400, f"malformed update: {error}") from None
    except OSError as error:
        raise HttpError(400, f"the update failed and wrote nothing: {error}") from None
    notify_written()
    return Response(status=204)


# --- service description (protocol section 2.1.5 / SPARQL 1.1 Service Description) ---------------

def service_description() -> Response:
    """The endpoint described with the ``sd:`` vocabulary, as RDF by negotiation."""
    config = current_config()
    service, dataset, graph = BlankNode(), BlankNode(), BlankNode()
    triples = [Triple(service, RDF.type, SD.Service),
               Triple(service, SD.endpoint, NamedNode(request.base_url)),
               Triple(service, SD.supportedLanguage, SD.SPARQL11Query),
               Triple(service, SD.feature, SD.UnionDefaultGraph),
               Triple(service, SD.defaultDataset, dataset),
               Triple(dataset, RDF.type, SD.Dataset),
               Triple(dataset, SD.defaultGraph, graph),
               Triple(graph, RDF.type, SD.Graph),
               Triple(service, NamedNode("http://www.w3.org/2000/01/rdf-schema#comment"),
                      Literal("Glassgraph SPARQL endpoint. The default graph is the union of all graphs "
                              "unless the request names a dataset."))]
    if not config.read_only and config.token:
        triples.append(Triple(service, SD.supportedLanguage, SD.SPARQL11Update))
    if config.service_allow:
        triples.append(Triple(service, SD.feature, SD.BasicFederatedQuery))
    for name in ("SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV",
                 "Turtle", "N-Triples", "N-Quads", "TriG", "RDF_XML", "JSON-LD"):
        triples.append(Triple(service, SD.resultFormat, FORMATS[name]))
    for named in current_store().raw.named_graphs():
        if isinstance(named, NamedNode):
            node = BlankNode()
            triples += [Triple(dataset, SD.namedGraph, node), Triple(node, SD.name, named)]
    return graph_response(triples, request.headers.get("Accept"))
