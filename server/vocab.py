"""Vocabulary: namespaces, the IRIs of docs/architecture.md ('Data model'), and builders for provenance triples.

Every IRI that Glassgraph mints is made here (a trace's in ``server/stages.py``, the stages' declaration), so
traces stay interchangeable with TrustGraph's.
"""
from __future__ import annotations

import datetime as _dt
import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode, Quad, Triple

Term = NamedNode | Literal | Triple


class Namespace:
    """``NS.name`` or ``NS["name"]`` gives the NamedNode ``base + name``.

    ``NS.name`` is made once and kept as an attribute (names written in code are few; a NamedNode
    costs an IRI parse); ``NS["name"]`` takes data (entity names) and is not kept.
    """

    def __init__(self, base: str) -> None:
        self.base = base

    def __getattr__(self, name: str) -> NamedNode:
        if name.startswith("__"):
            raise AttributeError(name)
        node = NamedNode(self.base + name)
        setattr(self, name, node)
        return node

    def __getitem__(self, name: str) -> NamedNode:
        return NamedNode(self.base + name)

    def __str__(self) -> str:
        return self.base


TG = Namespace("https://trustgraph.ai/ns/")
PROV = Namespace("http://www.w3.org/ns/prov#")
RDF = Namespace("http://www.w3.org/1999/02/22-rdf-syntax-ns#")
RDFS = Namespace("http://www.w3.org/2000/01/rdf-schema#")
XSD = Namespace("http://www.w3.org/2001/XMLSchema#")
DC = Namespace("http://purl.org/dc/elements/1.1/")
DCTERMS = Namespace("http://purl.org/dc/terms/")  # only TrustGraph's CLI reads it (server/http/triples.py)
SKOS = Namespace("http://www.w3.org/2004/02/skos/core#")
ENTITY = Namespace("https://trustgraph.ai/e/")  # extracted entities
RELATION = Namespace("https://trustgraph.ai/r/")  # extracted relations
SOURCE_KINDS = {TG.Document: "Document", TG.Page: "Page", TG.Chunk: "Chunk"}  # the classes of extraction sources

PREFIXES: dict[str, str] = {
    "tg": TG.base,
    "prov": PROV.base,
    "rdf": RDF.base,
    "rdfs": RDFS.base,
    "xsd": XSD.base,
    "dc": DC.base,
    "skos": SKOS.base,
    "e": ENTITY.base,
    "r": RELATION.base,
}

URN = "urn:trustgraph:"
EXPLAIN_COLLECTION = "explainability"
LIBRARIAN = "librarian"
LIBRARIAN_GRAPH = NamedNode(f"{URN}graph:{LIBRARIAN}")


# --- named graphs -------------------------------------------------------------------------------

def collection_graph(collection: str) -> NamedNode:
    """The graph holding a collection's extracted knowledge."""
    return NamedNode(f"{URN}graph:{collection}")


def source_graph(collection: str) -> NamedNode:
    """The graph holding a collection's extraction provenance."""
    return NamedNode(f"{URN}graph:{collection}:source")


def explain_graph(explain_collection: str = EXPLAIN_COLLECTION) -> NamedNode:
    """The graph holding query-time explainability."""
    return NamedNode(f"{URN}graph:{explain_collection}")


def check_collection_name(name: str, explain_collection: str = EXPLAIN_COLLECTION) -> None:
    """The one rule for user collection names: ValueError saying why ``name`` is not one.

    The librarian graph, the explainability graph (``explain_collection`` and the default name)
    and provenance graphs (``...:source``) share the ``urn:trustgraph:graph:`` namespace.
    """
    reason = _reserved_reason(name, explain_collection) or _text_reason(name)
    if reason:
        raise ValueError(f"{name!r} is not a user collection: {reason}")


def _reserved_reason(name: str, explain_collection: str) -> str | None:
    if name == LIBRARIAN:
        return "it is the librarian graph (document, chunk and answer text)"
    if name in (EXPLAIN_COLLECTION, explain_collection):
        return "it is the explainability graph (GraphRAG traces; GLASSGRAPH_EXPLAIN_COLLECTION)"
    if name.endswith(":source"):
        return "names ending in ':source' are collections' extraction provenance graphs"
    return None


def _text_reason(name: str) -> str | None:
    if not name:
        return "the name is empty"
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in name):
        return "it contains a lone surrogate (not valid Unicode text)"
    if any(ch.isspace() for ch in name):
        return "it contains white space"
    if name in (".", "..") or "/" in name:  # a URL path segment: clients that normalize URLs never reach it
        return "'.', '..' and names with '/' are path segments in the collection's URLs"
    try:
        NamedNode(f"{URN}graph:{name}")
    except ValueError as exc:
        return f"urn:trustgraph:graph:{name} is not a valid IRI ({exc})"
    return None


def collection_of_graph(graph: NamedNode) -> str | None:
    """The collection name of a knowledge graph IRI, or None for any other graph."""
    value = graph.value
    if not value.startswith(URN + "graph:"):
        return None
    name = value[len(URN + "graph:"):]
    try:
        check_collection_name(name)
    except ValueError:
        return None
    return name


# --- extracted entities and relations ---------------------------------------------------------

def slug(name: str) -> str:
    """``"Cote d'Ivoire"`` -> ``"cote-d-ivoire"``: ASCII, lower case, dashes. The one minting rule for
    entities and relations, shared by the sample's converter and document extraction."""
    ascii_ = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_.lower()).strip("-")


def entity_iri(name: str) -> NamedNode | None:
    """The entity an extracted name mints (``e:{slug}``); None when the name has no letter or digit."""
    key = slug(name)
    return ENTITY[key] if key else None


def relation_iri(name: str) -> NamedNode | None:
    """The relation an extracted predicate mints (``r:{slug}``); None when it has no letter or digit."""
    key = slug(name)
    return RELATION[key] if key else None


# --- extraction-provenance IRIs ---------------------------------------------------------------

def document_iri(doc_id: str) -> NamedNode:
    return NamedNode(f"{URN}doc:{doc_id}")


def page_iri(doc_id: str, page: int) -> NamedNode:
    return NamedNode(f"{URN}doc:{doc_id}/p{page}")


def chunk_iri(doc_id: str, page: int, chunk: int) -> NamedNode:
    return NamedNode(f"{URN}doc:{doc_id}/p{page}/c{chunk}")


def subgraph_iri(doc_id: str, page: int, chunk: int) -> NamedNode:
    return NamedNode(f"{URN}subgraph:{doc_id}/p{page}/c{chunk}")


def activity_iri(doc_id: str) -> NamedNode:
    """The ingest (extraction) activity of a document."""
    return NamedNode(f"{URN}activity:{doc_id}")


def agent_iri(name: str) -> NamedNode:
    """The software agent of an extraction: ``name`` is slugged (extractor, model, prompt versions)."""
    return NamedNode(f"{URN}agent:{slug(name)}")


def processing_iri(processing_id: str) -> NamedNode:
    """A library processing record (TrustGraph's add-processing): ``processing_id`` percent-encoded, any text."""
    return NamedNode(f"{URN}processing:{quote(processing_id, safe='')}")


# --- builders --------------------------------------------------------------------------------

def entity_quads(graph: NamedNode, subject: NamedNode, pairs: Iterable[tuple[NamedNode, Term]]) -> list[Quad]:
    """``subject``'s (predicate, object) ``pairs`` as quads of ``graph``."""
    return [Quad(subject, p, o, graph) for p, o in pairs]


def now_literal() -> Literal:
    """The time now as ``xsd:dateTime`` in its canonical form (the store's: no trailing zeros in the
    fraction), so that the stream's triples say what the store holds."""
    seconds, _, fraction = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")[:-6].partition(".")
    fraction = fraction.rstrip("0")
    return Literal(f"{seconds}.{fraction}Z" if fraction else f"{seconds}Z", datatype=XSD.dateTime)


def integer_literal(value: int) -> Literal:
    """An ``xsd:integer`` literal."""
    return Literal(str(value), datatype=XSD.integer)


def document_quads(graph: NamedNode, doc: NamedNode, title: str, source: str | None = None,
                   mime_type: str | None = None, sha256: str | None = None, size: int | None = None) -> list[Quad]:
    """A tg:Document; an ingested one also names its media type, the sha256 of its bytes and their size."""
    pairs: list[tuple[NamedNode, Term]] = [(RDF.type, PROV.Entity), (RDF.type, TG.Document),
                                           (DC.title, Literal(title)), (RDFS.label, Literal(title))]
    if source:
        pairs.append((DC.source, Literal(source)))
    if mime_type:
        pairs.append((TG.mimeType, Literal(mime_type)))
    if sha256:
        pairs.append((TG.sha256, Literal(sha256)))
    if size is not None:
        pairs.append((TG.size, integer_literal(size)))
    return entity_quads(graph, doc, pairs)


def page_quads(graph: NamedNode, page: NamedNode, label: str, doc: NamedNode,
               number: int | None = None) -> list[Quad]:
    pairs: list[tuple[NamedNode, Term]] = [(RDF.type, PROV.Entity), (RDF.type, TG.Page),
                                           (RDFS.label, Literal(label)), (PROV.wasDerivedFrom, doc)]
    if number is not None:
        pairs.append((TG.pageNumber, integer_literal(number)))
    return entity_quads(graph, page, pairs)


def chunk_quads(graph: NamedNode, chunk: NamedNode, label: str, page: NamedNode,
                span: tuple[int, int, int] | None = None) -> list[Quad]:
    """A tg:Chunk; ``span`` is ``(index, character offset, character length)`` in its page's text."""
    pairs: list[tuple[NamedNode, Term]] = [(RDF.type, PROV.Entity), (RDF.type, TG.Chunk),
                                           (RDFS.label, Literal(label)), (PROV.wasDerivedFrom, page)]
    if span is not None:
        index, offset, length = span
        pairs += [(TG.chunkIndex, integer_literal(index)), (TG.charOffset, integer_literal(offset)),
                  (TG.charLength, integer_literal(length))]
    return entity_quads(graph, chunk, pairs)


def subgraph_quads(graph: NamedNode, subgraph: NamedNode, chunk: NamedNode,
                   facts: Iterable[Triple], activity: NamedNode | None = None) -> list[Quad]:
    pairs: list[tuple[NamedNode, Term]] = [(RDF.type, PROV.Entity), (RDF.type, TG.Subgraph),
                                           (PROV.wasDerivedFrom, chunk)]
    if activity is not None:
        pairs.append((PROV.wasGeneratedBy, activity))
    pairs.extend((TG.contains, fact) for fact in facts)
    return entity_quads(graph, subgraph, pairs)


def mention_quads(graph: NamedNode, chunk: NamedNode, entities: Iterable[NamedNode]) -> list[Quad]:
    """``chunk tg:mentions entity``: an entity of the collection whose label the chunk's text contains."""
    return entity_quads(graph, chunk, [(TG.mentions, entity) for entity in entities])


def activity_quads(graph: NamedNode, activity: NamedNode, doc: NamedNode, agent: NamedNode, agent_label: str,
                   started: Literal, ended: Literal, settings: Iterable[tuple[NamedNode, Term]]) -> list[Quad]:
    """The ingest activity of ``doc`` (one per document) and its software agent; ``settings`` are the
    activity's own properties (model, prompt versions, chunk size and overlap, counts)."""
    pairs: list[tuple[NamedNode, Term]] = [
        (RDF.type, PROV.Activity), (RDFS.label, Literal("Document extraction")), (PROV.used, doc),
        (PROV.wasAssociatedWith, agent), (PROV.startedAtTime, started), (PROV.endedAtTime, ended)]
    pairs.extend(settings)
    return entity_quads(graph, activity, pairs) + entity_quads(graph, agent, [(RDF.type, PROV.Agent),
                                                                  (RDFS.label, Literal(agent_label))])


def content_quads(item: NamedNode, text: str, title: str | None = None,
                  mime_type: str = "text/plain") -> list[Quad]:
    """Librarian-graph content of a document, page, chunk or answer."""
    pairs: list[tuple[NamedNode, Term]] = [(TG.content, Literal(text)), (TG.mimeType, Literal(mime_type))]
    if title:
        pairs.append((DC.title, Literal(title)))
    return entity_quads(LIBRARIAN_GRAPH, item, pairs)


def double_literal(value: float) -> Literal:
    """An ``xsd:double`` literal of ``value`` rounded to 6 decimals (a score)."""
    return Literal(repr(round(value, 6)), datatype=XSD.double)
