"""The web console: server-rendered pages over the store and the explain traces, and
``/resource`` (linked data: the HTML page, or RDF when the client asks for it; traces likewise).

Pages show data without JavaScript; ``static/*.js`` adds the live parts (running SPARQL
queries, streaming GraphRAG answers).
"""
from __future__ import annotations

from decimal import Decimal
from itertools import chain, islice

from flask import Blueprint, Response, current_app, render_template, request
from pyoxigraph import BlankNode, Literal, NamedNode, RdfFormat, Triple, parse

from server import vocab
from server.errors import BadRequest, NotFound
from server.explain.trace import MAX_SESSION_OFFSET, list_sessions, read_trace, trace_quads
from server.explain.wire import quad_wire, trace_graph_quads
from server.http.context import current_config, current_store
from server.http.descriptions import current_collections, kept_until_written
from server.http.linked_data import linked_data_response
from server.http.params import bounded_iri_text, iri_parameter
from server.labels import store_labels
from server.provenance import chunk_span, node_name, source_chains_many
from server.rag.document_rag import PassageLimits
from server.rag.retrieval import RetrievalLimits
from server.sparql_templates import template_limit
from server.stages import RETRIEVAL, SESSION, console_steps, parse_explain_iri
from server.store_base import StoreBackend
from server.void import VOID_PATH, GraphRole

blueprint = Blueprint("console", __name__)

EXAMPLE_QUESTIONS = (
    "What is the capital of France?",
    "What is the capital of Japan?",
    "Which countries border Germany?",
    "What currency does Brazil use?",
)
SESSIONS_PER_PAGE = 20
MAX_PAGE = MAX_SESSION_OFFSET // SESSIONS_PER_PAGE
EDGE_LIMIT = template_limit("console_resource_out")  # the edges of each direction a resource page lists
SAMPLE_TITLE = "CIA World Factbook 2015 (the sample dataset)"
SAMPLE_QUERY = """SELECT ?country ?capital WHERE {
  GRAPH ?g { ?country r:capital ?capital ; rdfs:label ?name }
  FILTER(STRSTARTS(?name, "N"))
}
ORDER BY ?name"""
PREDICATE_OPEN_MAX = 3  # a resource page's predicate group starts open when it holds at most this many edges
DEFAULT_QUERY = """SELECT ?country ?capital WHERE {
  GRAPH ?g { ?country r:capital ?capital }
}
LIMIT 25"""


@blueprint.app_template_filter("curie")
def curie(iri: str) -> str:
    """``https://trustgraph.ai/e/france`` -> ``e:france`` for the prefixes in use."""
    for prefix, base in vocab.PREFIXES.items():
        if iri.startswith(base) and len(iri) > len(base):
            return f"{prefix}:{iri[len(base):]}"
    return iri


@blueprint.app_template_filter("when")
def when(stamp: str | None) -> str:
    """``2026-12-02T16:40:05.123Z`` -> ``2026-12-02 16:40:05 UTC``."""
    if not stamp:
        return "unknown time"
    date, _, clock = stamp.partition("T")
    return f"{date} {clock[:8]} UTC" if clock.endswith("Z") else stamp.replace("T", " ")


@blueprint.app_template_filter("chain_name")
def chain_name(node: dict) -> str:
    """A chain node's name, with a chunk's span in its page: ``Chunk 3 (chars 120-388)``."""
    return node_name(node) + chunk_span(node)


@blueprint.app_template_filter("score")
def score(value: float) -> str:
    """A passage's score to three significant digits, never in exponent form: ``3e-06`` -> ``0.000003``."""
    return format(Decimal(f"{value:.3g}"), "f")


def term_view(term: NamedNode | Literal | BlankNode | Triple, labels: dict[NamedNode, str] | None = None) -> dict:
    """A term as the ``term`` macro of ``templates/partials/terms.html`` shows it."""
    labels = labels or {}
    if isinstance(term, NamedNode):
        label = labels.get(term)
        return {"kind": "iri", "iri": term.value, "text": label or curie(term.value), "labeled": bool(label)}
    if isinstance(term, Literal):
        datatype = term.datatype.value
        shown = None if term.language or datatype == vocab.XSD.string.value else curie(datatype)
        return {"kind": "literal", "text": term.value, "lang": term.language, "datatype": shown}
    if isinstance(term, BlankNode):
        return {"kind": "bnode", "text": f"_:{term.value}"}
    return {"kind": "triple", "parts": [term_view(t, labels) for t in (term.subject, term.predicate, term.object)]}


def _edge_triple(edge: dict) -> Triple:
    """The edge of a trace as terms again, from its N-Triples rendering ``<<( s p o )>>``."""
    inner = edge["triple"].removeprefix("<<(").removesuffix(")>>").strip()
    quad = next(iter(parse(input=(inner + " .").encode(), format=RdfFormat.N_TRIPLES)))
    return quad.triple


def _trace_view(trace: dict, store: StoreBackend) -> dict:
    """A trace from ``read_trace`` with each edge's subject, predicate and object as term views, labelled as
    the resource pages label them (a label that is its IRI's local name, such as "borders", is a label)."""
    triples = [_edge_triple(edge) for edge in trace["edges"]]
    graph = vocab.collection_graph(trace["collection"]) if trace.get("collection") else None
    labels = store_labels(store, (t for triple in triples for t in (triple.subject, triple.predicate, triple.object)),
                          graph)
    edges = [{**edge, "terms": [term_view(t, labels) for t in (triple.subject, triple.predicate, triple.object)],
              "mentioned": _mentioned_only(edge)}
             for edge, triple in zip(trace["edges"], triples, strict=True)]
    return {**trace, "edges": edges, "documents": _asked_documents(store, trace)}


def _asked_documents(store: StoreBackend, trace: dict) -> bool:
    """Whether the session asked the documents (its retrieval counts passages, not edges) rather than the graph
    (with or without passages beside its edges)."""
    return trace.get(RETRIEVAL.kind) is not None and trace.get("edge_count") is None and next(store.quads(
        NamedNode(trace[RETRIEVAL.kind]), vocab.TG.passageCount, graph=store.explain_graph), None) is not None


def _mentioned_only(edge: dict) -> list[list[dict]]:
    """The chains of the chunks that mention the edge's terms, less those already its sources (as the CLI
    shows them)."""
    sourced = {chain[0]["iri"] for chain in edge.get("sources") or [] if chain}
    return [chain for chain in edge.get("mentions") or [] if chain and chain[0]["iri"] not in sourced]


def _trace_or_404(iri: str | None) -> dict:
    if not iri:
        raise BadRequest("missing parameter id (a session IRI)")
    bounded_iri_text("id", iri)
    store = current_store()
    trace = read_trace(store, iri)
    if trace is None:
        raise NotFound(f"no GraphRAG session {iri}")
    return _trace_view(trace, store)


@blueprint.get("/")
def home() -> str:
    """The dataset named (each collection with its documents, the sample's title when it was loaded),
    a question box, one sample query, and the recent sessions."""
    collections = kept_until_written(current_app._get_current_object(), "glassgraph.home", _home_collections,
                                     lagging=True)
    prefixes = {p: vocab.PREFIXES[p] for p in ("r", "rdfs")}
    return render_template("home.html", collections=collections, questions=EXAMPLE_QUESTIONS,
                           sessions=list_sessions(current_store(), limit=5), sample_query=SAMPLE_QUERY,
                           sample_query_text="".join(f"PREFIX {p}: <{base}>\n" for p, base in prefixes.items())
                           + SAMPLE_QUERY)


def _home_collections() -> list[dict]:
    """Each collection with its counts, documents and VoID link (kept until the next write of data)."""
    store, config = current_store(), current_config()
    collections = []
    for collection in current_collections(current_app._get_current_object(), lagging=False):
        rows = store.select("console_document_count", default_graph=vocab.source_graph(collection["collection"]))
        documents = int(rows[0]["n"].value) if rows else 0
        is_sample = config.load_sample and collection["collection"] == config.default_collection and documents > 0
        described = "collection" if collection["triples"] else "source"  # documents ingested without facts
        collections.append({**collection, "documents": documents, "title": SAMPLE_TITLE if is_sample else None,
                            "void": f"{VOID_PATH}#{GraphRole(described, collection['collection']).fragment}"})
    return collections


@blueprint.get("/console/sparql")
def sparql_console() -> str:
    prefixes = "".join(f"PREFIX {p}: <{base}>\n" for p, base in vocab.PREFIXES.items())
    query = request.args.get("query")
    return render_template("sparql.html", query=query if query is not None else prefixes + "\n" + DEFAULT_QUERY,
                           shared=query is not None, prefixes=vocab.PREFIXES)


@blueprint.get("/console/ask")
def ask() -> str:
    config = current_config()
    collections = ([c["collection"] for c in current_collections(current_app._get_current_object())]
                   or [config.default_collection])
    asked = request.args.get("collection")
    return render_template("ask.html", question=request.args.get("q", ""), questions=EXAMPLE_QUESTIONS,
                           collections=collections,
                           collection=asked if asked in collections else config.default_collection,
                           documents=request.args.get("mode") == "documents", limits=RetrievalLimits(),
                           passages=PassageLimits(), explain_stages=console_steps())


@blueprint.get("/console/trace")
def trace() -> Response:
    """A session's trace (any of its explain IRIs finds it): the page for a browser, its triples as
    RDF when asked (Accept or ``?format=``)."""
    view = _trace_or_404(request.args.get("id"))
    return linked_data_response(trace_quads(current_store(), view), lambda: render_template(
        "trace.html", trace=view, graph_triples=[quad_wire(q) for q in trace_graph_quads(current_store(), view)]),
        f"no GraphRAG session {view[SESSION.kind]}")


@blueprint.get("/console/sessions")
def sessions() -> str:
    page = request.args.get("page", "1")
    number = int(page) if page.isascii() and page.isdigit() and len(page) <= 12 else 0  # int("²") fails
    if not 1 <= number <= MAX_PAGE:
        raise BadRequest(f"page must be a positive integer, at most {MAX_PAGE}")
    rows = list_sessions(current_store(), limit=SESSIONS_PER_PAGE + 1, offset=(number - 1) * SESSIONS_PER_PAGE)
    return render_template("sessions.html", sessions=rows[:SESSIONS_PER_PAGE], page=number,
                           per_page=SESSIONS_PER_PAGE, has_next=len(rows) > SESSIONS_PER_PAGE)


@blueprint.get("/resource")
def resource() -> Response:
    """Every quad with ``iri`` as subject or object, in every graph: the page unless the client asks
    for RDF (TriG, Turtle, N-Triples, N-Quads, RDF/XML, JSON-LD where the data has no triple term)."""
    iri = iri_parameter("iri")
    store, limit = current_store(), current_config().max_result_rows
    outgoing = store.quads(subject=iri, limit=limit + 1)  # a remote engine would send every edge otherwise
    incoming = (q for q in store.quads(obj=iri, limit=limit + 1) if q.subject != iri)
    quads = list(islice(chain(outgoing, incoming), limit + 1))
    return linked_data_response(quads, lambda: resource_html(iri), f"nothing is known about <{iri.value}>",
                                limit=limit)


def _sorted_edges(rows: list[dict], other: str) -> list[dict]:
    """Edges by graph, predicate and the node at their other end (the templates leave the order to us)."""
    return sorted(rows, key=lambda row: (row["g"].value, row["p"].value, str(row[other])))


def resource_html(node: NamedNode) -> str | tuple[str, int]:
    """The HTML view of ``/resource?iri=``: label, edges both ways, and the sources of each fact.

    Facts of a collection's knowledge graph show the subgraphs that state them and the chains
    from there to the chunk, page and document (looked up in that collection's source graph).
    """
    store = current_store()
    outgoing = _sorted_edges(store.select("console_resource_out", values={"iri": [node]}), "o")
    incoming = _sorted_edges(store.select("console_resource_in", values={"iri": [node]}), "s")
    labels = store_labels(store, [node] + [row[k] for row in outgoing + incoming for k in ("s", "p", "o", "g")
                                           if k in row])
    edges = [(row, Triple(node, row["p"], row["o"]), "o") for row in outgoing]
    edges += [(row, Triple(row["s"], row["p"], node), "s") for row in incoming]
    by_collection: dict[str, set[Triple]] = {}
    for row, fact, _ in edges:
        collection = store.collection_of(row["g"])
        if collection is not None and fact.predicate != vocab.RDFS.label:
            by_collection.setdefault(collection, set()).add(fact)
    chains: dict[Triple, list] = {}
    subgraphs: dict[Triple, list[str]] = {}
    for collection, facts in by_collection.items():
        chains.update(source_chains_many(store, facts, collection))
        for row in store.select("console_fact_subgraphs", values={"fact": list(facts)},
                                default_graph=vocab.source_graph(collection)):
            subgraphs.setdefault(row["fact"], []).append(row["sg"].value)
    groups: dict[str, dict[NamedNode, dict]] = {"o": {}, "s": {}}  # direction -> graph -> predicate -> edges
    for row, fact, other in edges:
        group = groups[other].setdefault(row["g"], {"graph": term_view(row["g"], labels), "predicates": {}})
        predicate = group["predicates"].setdefault(row["p"], {"p": term_view(row["p"], labels), "edges": []})
        predicate["edges"].append({"other": term_view(row[other], labels),
                                   "subgraphs": sorted(subgraphs.get(fact, [])), "chains": chains.get(fact, [])})
    for direction in groups.values():
        for group in direction.values():
            group["predicates"] = list(group["predicates"].values())
    explained = parse_explain_iri(node.value)
    page = render_template("resource.html", iri=node.value, label=labels.get(node), limit=EDGE_LIMIT,
                           open_max=PREDICATE_OPEN_MAX,
                           is_session=explained is not None and explained[0] == SESSION.kind,
                           has_text=store.librarian_text(node) is not None,
                           source_kind=next((name for kind, name in vocab.SOURCE_KINDS.items()
                                             if next(store.quads(node, vocab.RDF.type, kind), None) is not None), None),
                           outgoing=list(groups["o"].values()), incoming=list(groups["s"].values()),
                           out_count=len(outgoing), in_count=len(incoming))
    return page if edges else (page, 404)


