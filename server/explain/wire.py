"""The triples of one explain step as they travel in the stream (``explain_triples``), in TrustGraph's wire
shape: ``{"s", "p", "o", "g"?}`` with terms ``{"t": "i", "i"}`` (IRI), ``{"t": "l", "v", "d"?, "l"?}`` (literal,
datatype unless xsd:string, language), ``{"t": "r", "r": {"s", "p", "o"}}`` (triple term), ``{"t": "b", "b"}``.

A step carries what was recorded for it, plus what a client needs to show it with no other request: the
labels of the edges' terms (from the collection graph, as the LLM saw them) and, for the selection, the source
chain of each selected edge (subgraph -> chunk -> page -> document, from the collection's source graph).
"""
from __future__ import annotations

from collections.abc import Iterable

from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Quad, Triple

from server import vocab
from server.explain.trace import trace_quads
from server.labels import local_name, store_labels
from server.stages import EdgesRetrieved, EdgesSelected, StageResult
from server.store_base import StoreBackend
from server.vocab import Term


def term_wire(term: Term | BlankNode) -> dict:
    """One term in the wire shape."""
    if isinstance(term, NamedNode):
        return {"t": "i", "i": term.value}
    if isinstance(term, Literal):
        wire = {"t": "l", "v": term.value}
        if term.language:
            wire["l"] = term.language
        elif term.datatype != vocab.XSD.string:
            wire["d"] = term.datatype.value
        return wire
    if isinstance(term, Triple):
        return {"t": "r", "r": {"s": term_wire(term.subject), "p": term_wire(term.predicate),
                                "o": term_wire(term.object)}}
    return {"t": "b", "b": term.value}


def wire_term(wire: object) -> Term:
    """The term a wire dict names (the inverse of :func:`term_wire`; TrustGraph's clients also write a
    literal's datatype and language as ``dt`` and ``ln``, a triple term as ``{"t": "t", "tr"}``); ValueError
    for anything else, a blank node too (a pattern cannot name one)."""
    if not isinstance(wire, dict):
        raise ValueError(f"a term is a JSON object such as {{\"t\": \"i\", \"i\": IRI}}, got {wire!r:.80}")
    kind = wire.get("t")
    if kind == "i" and isinstance(wire.get("i"), str):
        return NamedNode(wire["i"])
    if kind == "l" and isinstance(wire.get("v"), str):
        language, datatype = wire.get("l") or wire.get("ln"), wire.get("d") or wire.get("dt")
        if language:
            return Literal(wire["v"], language=str(language))
        return Literal(wire["v"], datatype=NamedNode(str(datatype))) if datatype else Literal(wire["v"])
    inner = wire.get("r") if kind == "r" else wire.get("tr") if kind == "t" else None  # "t"/"tr": TrustGraph 2.x
    if isinstance(inner, dict):
        subject, predicate, obj = (wire_term(inner.get(part)) for part in ("s", "p", "o"))
        if not isinstance(subject, NamedNode) or not isinstance(predicate, NamedNode):
            raise ValueError("a triple term's subject and predicate are IRIs (RDF 1.2: a literal or a triple term "
                             f"is only an object), got {wire!r:.80}")
        return Triple(subject, predicate, obj)
    raise ValueError(f"not a term of the wire form (t: i, l, r or t): {wire!r:.80}")


def quad_wire(quad: Quad) -> dict:
    """One quad in the wire shape; ``g`` is the graph's IRI, left out for the default graph."""
    wire = {"s": term_wire(quad.subject), "p": term_wire(quad.predicate), "o": term_wire(quad.object)}
    if not isinstance(quad.graph_name, DefaultGraph):
        wire["g"] = quad.graph_name.value
    return wire


def label_quads(edges: Iterable[tuple[Triple, tuple[str, str, str]]], collection: str) -> list[Quad]:
    """``rdfs:label`` quads (collection graph) of the IRIs of labelled edges, each once; an IRI named by its
    local name only has no label to send."""
    graph = vocab.collection_graph(collection)
    seen: dict[NamedNode, str] = {}
    for triple, labels in edges:
        for term, label in zip((triple.subject, triple.predicate, triple.object), labels, strict=True):
            if isinstance(term, NamedNode) and term not in seen and label and label != local_name(term.value):
                seen[term] = label
    return [Quad(term, vocab.RDFS.label, Literal(label), graph) for term, label in seen.items()]


def step_quads(store: StoreBackend, result: StageResult, collection: str) -> list[Quad]:
    """What a client needs beside a step's recorded triples to show it: the labels of its edges' terms and, for
    the selected edges, their source chains."""
    if isinstance(result, EdgesRetrieved):
        return label_quads(result.edges, collection)
    if isinstance(result, EdgesSelected):
        chosen = [edge[0] for edge in result.edges]
        labels = label_quads(zip(chosen, result.labels, strict=True), collection)
        return labels + source_quads(store, chosen, collection)
    return []


_NODE_FACTS = (("label", vocab.RDFS.label), ("title", vocab.DC.title), ("offset", vocab.TG.charOffset),
               ("length", vocab.TG.charLength))


def source_quads(store: StoreBackend, edges: list[Triple], collection: str) -> list[Quad]:
    """The source chains of ``edges`` as quads of the collection's source graph (``sparql/prov_sources.rq``):
    ``sg tg:contains <<edge>>`` (a reifier read as the triple term), ``prov:wasDerivedFrom`` links from the
    subgraph up to the document, and each node's type, label, title and span; the librarian's titles in the
    librarian graph."""
    if not edges:
        return []
    graph = vocab.source_graph(collection)
    rows = store.select("prov_sources", values={"edge": list(dict.fromkeys(edges))}, default_graph=graph)
    quads: dict[Quad, None] = {}
    reached: dict[NamedNode, set[NamedNode]] = {}
    parents: set[tuple[NamedNode, NamedNode]] = set()
    for row in rows:
        node = row["node"]
        quads[Quad(row["sg"], vocab.TG.contains, row["edge"], graph)] = None
        reached.setdefault(row["sg"], set()).add(node)
        if "parent" in row:
            parents.add((node, row["parent"]))
        if "type" in row:
            quads[Quad(node, vocab.RDF.type, row["type"], graph)] = None
        for column, predicate in _NODE_FACTS:
            if column in row:
                quads[Quad(node, predicate, row[column], graph)] = None
        if "libraryTitle" in row:
            quads[Quad(node, vocab.DC.title, row["libraryTitle"], vocab.LIBRARIAN_GRAPH)] = None
    for sg, members in reached.items():  # the subgraph comes from its members that no other member comes from
        referenced = {parent for child, parent in parents if child in members}
        for nearest in sorted(members - referenced, key=str):
            quads[Quad(sg, vocab.PROV.wasDerivedFrom, nearest, graph)] = None
    for child, parent in sorted(parents, key=str):
        quads[Quad(child, vocab.PROV.wasDerivedFrom, parent, graph)] = None
    return list(quads)


def trace_graph_quads(store: StoreBackend, trace: dict) -> list[Quad]:
    """What the stream sent for a recorded trace (``read_trace``'s), read back for the trace page's graph: the
    trace's own quads (retrieved and selected edges), the labels of their terms and the selected edges'
    source chains."""
    quads = trace_quads(store, trace)
    edges = [q.object for q in quads if q.predicate in (vocab.TG.retrievedEdge, vocab.TG.edge)
             and isinstance(q.object, Triple)]
    collection = trace.get("collection")
    if not collection or not edges:
        return quads
    graph = vocab.collection_graph(collection)
    labels = store_labels(store, (t for e in edges for t in (e.subject, e.predicate, e.object)), graph)
    quads += [Quad(term, vocab.RDFS.label, Literal(label), graph) for term, label in labels.items()]
    selected = [q.object for q in quads if q.predicate == vocab.TG.edge and isinstance(q.object, Triple)]
    return quads + source_quads(store, selected, collection)
