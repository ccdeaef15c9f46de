"""The SPARQL 1.1 Protocol at ``/sparql`` (https://www.w3.org/TR/sparql11-protocol/).

One function per protocol operation, modelled on Oxigraph's own server: the request is read into
an :class:`Operation` (query by GET, POST form or POST ``application/sparql-query``; update by POST
form or POST ``application/sparql-update``), then :func:`evaluate_query` or
:func:`evaluate_update` runs it; a GET without a query answers the service description (RDF, or a
page for a browser). Negotiation lives in ``negotiation.py`` (``?format=`` overrides Accept, see
``linked_data.py``); error types and their status codes in ``server/errors.py``.

Dataset: without ``default-graph-uri``/``named-graph-uri`` and without ``FROM`` in the query, the
default graph is the union of all graphs. Updates work on the store's real default graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

from flask import Blueprint, Response, render_template, request
from pyoxigraph import BlankNode, Literal, NamedNode, Triple

from server.config import Config
from server.errors import BadRequest, UnsupportedMediaType
from server.http.body import form_fields
from server.http.context import (
    client_left,
    current_client,
    current_config,
    current_queries,
    current_runtime,
    current_store,
    notify_written,
    public_root,
    public_url,
    require_write_access,
)
from server.http.federation import ServiceLimits, relayed
from server.http.linked_data import linked_data_response, requested_accept
from server.http.negotiation import GRAPH_MEDIA
from server.http.responses import answer_response
from server.http.sparql_eval import QueryTask, UpdateTask, answer_query, evaluation_error, prepare_update
from server.http.sparql_forward import forward_query, update_for_engine
from server.remote_store import RemoteStore
from server.vocab import RDF, RDFS, Namespace
from server.void import SD, VOID_PATH, GraphRole, dataset_iri, graph_role

blueprint = Blueprint("sparql", __name__)

FORMATS = Namespace("http://www.w3.org/ns/formats/")


@dataclass
class Operation:
    kind: str  # "query" | "update"
    text: str
    default_graphs: list[NamedNode] = field(default_factory=list)  # default-graph-uri / using-graph-uri
    named_graphs: list[NamedNode] = field(default_factory=list)  # named-graph-uri / using-named-graph-uri
    rows: int | None = None  # a query's ``rows``: its first that many rows (or triples) are the answer



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
        raise BadRequest(f"{parameter}: not an absolute IRI ({error})") from None


def _single(values: list[str], name: str) -> str | None:
    if len(values) > 1:
        raise BadRequest(f"exactly one '{name}' parameter is allowed, got {len(values)}")
    return values[0] if values else None


def _body_text() -> str:
    try:
        return request.get_data(cache=False).decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the request body is not valid UTF-8") from None


def _operation(kind: str, text: str, params: dict[str, list[str]]) -> Operation:
    names = ("default-graph-uri", "named-graph-uri") if kind == "query" else ("using-graph-uri",
                                                                              "using-named-graph-uri")
    rows = _rows(_single(params.get("rows", []), "rows")) if kind == "query" else None
    return Operation(kind, text, *(_iris(params.get(name, []), name) for name in names), rows)


MAX_ROWS_DIGITS = 18  # a longer number of rows is past any row limit (and would be slow to read as a number)


def _rows(value: str | None) -> int | None:
    """The ``rows`` parameter (Glassgraph's own): a positive whole number, or None when it is not given."""
    if value is None:
        return None
    digits = value.lstrip("0")
    if not value.isascii() or not value.isdigit() or not digits:
        raise BadRequest(f"'rows' must be a positive whole number of rows, not {value[:40]!r}")
    return int(digits) if len(digits) <= MAX_ROWS_DIGITS else 10 ** MAX_ROWS_DIGITS  # past any limit


def read_operation() -> Operation | None:
    """The query or update of the request, or None for a GET with neither (service description)."""
    args = form_fields(request.query_string)
    if request.method in ("GET", "HEAD"):
        if "update" in args:
            raise BadRequest("updates must be sent with POST (SPARQL 1.1 Protocol section 2.2)")
        query = _single(args.get("query", []), "query")
        return None if query is None else _operation("query", query, args)
    mimetype = request.mimetype
    if mimetype == "application/x-www-form-urlencoded":
        params = form_fields(request.get_data())
        for key, values in args.items():
            params.setdefault(key, values)
        query, update = _single(params.get("query", []), "query"), _single(params.get("update", []), "update")
        if (query is None) == (update is None):
            raise BadRequest("a form POST needs exactly one of the 'query' or 'update' parameters")
        return _operation("query", query, params) if query is not None else _operation("update", update, params)
    if mimetype == "application/sparql-query":
        return _operation("query", _body_text(), args)
    if mimetype == "application/sparql-update":
        return _operation("update", _body_text(), args)
    raise UnsupportedMediaType(f"unsupported Content-Type {mimetype or '(none)'}: use application/sparql-query, "
                         "application/sparql-update or application/x-www-form-urlencoded")


# --- query (protocol section 2.1) ---------------------------------------------------------------

def evaluate_query(operation: Operation) -> Response:
    """Check and run a query over the request's dataset, and answer in the negotiated format.

    On an on-disk store both happen in a worker process that is killed at the deadline
    (``query_workers``); an in-memory store can only be read here, where the deadline is checked
    between rows; a remote engine's query is checked in a query worker, then forwarded
    (``sparql_forward``).
    """
    config = current_config()
    task = QueryTask(operation.text, requested_accept(), config.max_result_rows, config.max_result_bytes,
                     config.service_allow, tuple(g.value for g in operation.default_graphs),
                     tuple(g.value for g in operation.named_graphs), base_iri=public_url(),
                     service_limits=service_limits(config), first_rows=operation.rows)
    runtime = current_runtime()
    store, workers = runtime.store, runtime.queries
    if runtime.remote:
        task = replace(task, deadline_s=config.query_deadline_s)
        answer = workers.check_and_forward(task, current_client(), config.query_deadline_s,
                                           partial(forward_query, store, task))
    elif workers is not None:
        answer = workers.run(task, current_client(), config.query_deadline_s, client_left())
    else:
        answer = answer_query(store.raw, replace(task, deadline_s=config.query_deadline_s))
    return answer_response(answer)


# --- update (protocol section 2.2) --------------------------------------------------------------

def evaluate_update(operation: Operation) -> Response:
    """Prepare an update in the parse worker (``sparql_eval.prepare_update``), then run it atomically
    under the writers' lock; 204 on success."""
    require_write_access()
    config = current_config()
    task = UpdateTask(operation.text, config.service_allow, tuple(g.value for g in operation.default_graphs),
                      tuple(g.value for g in operation.named_graphs), base_iri=public_url())
    workers = current_queries()
    prepared = (workers.prepare_update(task, config.query_deadline_s) if workers is not None
                else prepare_update(task))
    runtime = current_runtime()
    store = runtime.store
    spans = () if runtime.remote else prepared.service_spans  # an engine calls out itself
    to_run = update_for_engine(store, prepared.text, prepared.sweeps) if isinstance(store, RemoteStore) \
        else prepared.text
    with relayed(to_run, spans, service_limits(config)) as text:
        try:
            store.run_update(text.text, task.base_iri, default_graph=not prepared.names_dataset)
        except SyntaxError as error:
            raise BadRequest(f"malformed update: {error}") from None
        except (OSError, RuntimeError) as error:
            if prepared.calls_remote:
                raise text.failure or evaluation_error(error, calls_remote=True) from None
            raise BadRequest(f"the update failed and wrote nothing: {error}") from None
    notify_written(_named(prepared.written_graphs))
    return Response(status=204)


def service_limits(config: Config) -> ServiceLimits:
    return ServiceLimits(config.service_timeout_s, config.service_max_rows, config.max_result_bytes)


def _named(graphs: tuple[str, ...] | None) -> list[NamedNode] | None:
    """The graphs an update may have written as IRIs; None (every graph) when that cannot be told."""
    try:
        return None if graphs is None else [NamedNode(iri) for iri in graphs]
    except ValueError:  # an IRI the guard's reading could not resolve as the parser did: assume any graph
        return None


# --- service description (protocol section 2.1.5 / SPARQL 1.1 Service Description) ---------------

RESULT_FORMATS = ("SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV", "Turtle",
                  "N-Triples", "N-Quads", "TriG", "RDF_XML", "JSON-LD")


def service_description() -> Response:
    """The endpoint described with the ``sd:`` vocabulary: RDF for machines (Turtle without Accept),
    a page for a browser (the same facts, with the console a click away)."""
    config = current_config()
    store = current_store()
    root, endpoint = public_root(), public_url()
    languages = [SD.SPARQL11Query] + ([SD.SPARQL11Update] if config.token and not config.read_only else [])
    features = [SD.UnionDefaultGraph] + ([SD.BasicFederatedQuery] if config.service_allow else [])
    graphs = [(graph, graph_role(store, graph)) for graph in sorted(store.named_graphs(), key=lambda g: g.value)]
    triples = _description_triples(NamedNode(endpoint), root, languages, features, graphs)
    page = {"endpoint": endpoint, "void": root + VOID_PATH, "languages": languages, "features": features,
            "formats": RESULT_FORMATS, "graphs": graphs, "service_allow": config.service_allow,
            "updates": SD.SPARQL11Update in languages}
    return linked_data_response(triples, lambda: render_template("service.html", **page), "no description",
                                html_by_default=False, media=GRAPH_MEDIA)


def _description_triples(endpoint: NamedNode, root: str, languages: list[NamedNode], features: list[NamedNode],
                         graphs: list[tuple[NamedNode, GraphRole]]) -> list[Triple]:
    service, dataset, graph = BlankNode(), BlankNode(), BlankNode()
    triples = [Triple(service, RDF.type, SD.Service),
               Triple(service, SD.endpoint, endpoint),
               Triple(service, SD.defaultDataset, dataset),
               Triple(dataset, RDF.type, SD.Dataset),
               Triple(dataset, SD.defaultGraph, graph),
               Triple(graph, RDF.type, SD.Graph),
               Triple(service, RDFS.comment,
                      Literal("Glassgraph SPARQL endpoint. The default graph is the union of all graphs unless the "
                              "request names a dataset. Relative IRIs resolve against the endpoint's URL.")),
               Triple(service, RDFS.seeAlso, NamedNode(root + VOID_PATH))]
    triples += [Triple(service, SD.supportedLanguage, language) for language in languages]
    triples += [Triple(service, SD.feature, feature) for feature in features]
    triples += [Triple(service, SD.resultFormat, FORMATS[name]) for name in RESULT_FORMATS]
    for named, role in graphs:
        node = BlankNode()
        triples += [Triple(dataset, SD.namedGraph, node), Triple(node, RDF.type, SD.NamedGraph),
                    Triple(node, SD.name, named), Triple(node, SD.graph, dataset_iri(root, role))]
    return triples
