"""Moving documents ingested before their identity included the collection to their new IRIs.

Until then a document's id was the first 20 hex digits of its sha256 alone, so the same bytes in two
collections shared their document, page and chunk IRIs, and with them their librarian text (two
``tg:content`` values for a chunk chunked two ways). :func:`migrate_document_ids` gives each such
document of each collection its id of today (``documents.collection_document_id``) in one transaction:
its provenance in the collection's source graph (document, pages, chunks, subgraphs, ingest activity,
and links to it such as ``prov:wasRevisionOf``) is rewritten, and its librarian text copied to the new
IRIs, each chunk's text cut again from its page's text by the chunk's own ``tg:charOffset`` and
``tg:charLength`` (so a chunk shared by two collections gets each its own). It runs when the store is
opened (``bootstrap.open_store``) and as ``glassgraph migrate``; a store with nothing to move is left
as it is, so running it again changes nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.ingest.documents import ID_LENGTH, collection_document_id
from server.store_base import StoreBackend
from server.vocab import PROV, TG

DOC = vocab.URN + "doc:"


def old_style_documents(store: StoreBackend) -> list[tuple[str, NamedNode, str]]:
    """``(collection, document, new id)`` of every ingested document whose IRI is its sha256 prefix alone."""
    found = []
    for quad in store.quads(None, TG.sha256, None, None):
        collection = _collection_of_source(quad.graph_name)
        doc, digest = quad.subject, quad.object.value
        if collection is None or not isinstance(doc, NamedNode) or doc.value != DOC + digest[:ID_LENGTH]:
            continue
        found.append((collection, doc, collection_document_id(digest, collection)))
    return found


def migrate_document_ids(store: StoreBackend) -> int:
    """Move every old-style document to its collection's IRIs (one transaction); returns how many moved."""
    with store.writing():
        documents = old_style_documents(store)
        if not documents:
            return 0
        removed: list[Quad] = []
        added: list[Quad] = []
        old_nodes: set[NamedNode] = set()
        by_collection: dict[str, list[tuple[NamedNode, str]]] = {}
        for collection, doc, new_id in documents:
            by_collection.setdefault(collection, []).append((doc, new_id))
        for collection, moves in by_collection.items():
            rename = _renamer({doc.value.removeprefix(DOC): new_id for doc, new_id in moves})
            source = vocab.source_graph(collection)
            quads = list(dict.fromkeys(q for doc, _ in moves for q in _document_quads(store, doc, source)))
            removed += quads
            added += [Quad(rename(q.subject), q.predicate, rename(q.object), q.graph_name) for q in quads]
            texts, nodes = _librarian_quads(store, quads, rename, source)
            added += texts
            old_nodes |= nodes
        removed += [q for node in old_nodes for q in store.quads(node, None, None, vocab.LIBRARIAN_GRAPH)]
        store.rewrite(list(dict.fromkeys(removed)), list(dict.fromkeys(added)))
    for collection in {collection for collection, _, _ in documents}:
        store.notify_loaded(collection)
    return len(documents)


def _collection_of_source(graph: object) -> str | None:
    if not isinstance(graph, NamedNode) or not graph.value.endswith(":source"):
        return None
    return vocab.collection_of_graph(NamedNode(graph.value.removesuffix(":source")))


Rename = Callable[[object], object]


def _renamer(moves: dict[str, str]) -> Rename:
    """Renames the IRIs of each moved document's hierarchy (``moves``: old id -> new id): the document, its
    pages and chunks (``doc:{id}/...``), subgraphs (``subgraph:{id}/...``) and its ingest activity."""
    activities = {vocab.activity_iri(old): vocab.activity_iri(new) for old, new in moves.items()}

    def rename(term: object) -> object:
        if term in activities:
            return activities[term]
        if not isinstance(term, NamedNode):
            return term
        for kind in (DOC, vocab.URN + "subgraph:"):
            old, slash, rest = term.value.removeprefix(kind).partition("/")
            if term.value.startswith(kind) and old in moves and (slash or kind == DOC):
                return NamedNode(f"{kind}{moves[old]}{slash}{rest}")
        return term
    return rename


def _document_quads(store: StoreBackend, doc: NamedNode, source: NamedNode) -> Iterator[Quad]:
    """Every quad of ``source`` about ``doc``'s hierarchy, or pointing at one of its nodes."""
    nodes = _hierarchy(store, doc, source)
    seen: set[Quad] = set()
    for node in nodes:
        for quad in [*store.quads(node, None, None, source), *store.quads(None, None, node, source)]:
            if quad not in seen:
                seen.add(quad)
                yield quad


def _hierarchy(store: StoreBackend, doc: NamedNode, source: NamedNode) -> list[NamedNode]:
    """``doc``, its pages, chunks and subgraphs (each derived from the one before) and its ingest activity."""
    level, nodes = [doc], [doc]
    for _ in range(3):
        level = [q.subject for parent in level for q in store.quads(None, PROV.wasDerivedFrom, parent, source)
                 if isinstance(q.subject, NamedNode)]
        nodes += level
    nodes += [q.subject for q in store.quads(None, PROV.used, doc, source) if isinstance(q.subject, NamedNode)]
    return list(dict.fromkeys(nodes))


def _librarian_quads(store: StoreBackend, quads: list[Quad], rename: Rename,
                     source: NamedNode) -> tuple[list[Quad], set[NamedNode]]:
    """The librarian text of the document's nodes under their new IRIs, and the old nodes that had text."""
    kinds = (TG.Document, TG.Page, TG.Chunk)
    nodes = {q.subject for q in quads if q.predicate == vocab.RDF.type and q.object in kinds}
    added, old_nodes = [], set()
    for node in nodes:
        texts = list(store.quads(node, None, None, vocab.LIBRARIAN_GRAPH))
        if not texts:
            continue
        old_nodes.add(node)
        chunk_text = _chunk_text(store, node, source)
        for quad in texts:
            if quad.predicate == TG.content and chunk_text is not None:
                continue
            added.append(Quad(rename(node), quad.predicate, quad.object, vocab.LIBRARIAN_GRAPH))
        if chunk_text is not None:
            added.append(Quad(rename(node), TG.content, Literal(chunk_text), vocab.LIBRARIAN_GRAPH))
    return added, old_nodes


def _chunk_text(store: StoreBackend, chunk: NamedNode, source: NamedNode) -> str | None:
    """A chunk's text cut from its page's by its offset and length in ``source``; None when it cannot be."""
    def number(predicate: NamedNode) -> int | None:
        quad = next(iter(store.quads(chunk, predicate, None, source)), None)
        return int(quad.object.value) if quad is not None else None
    offset, length = number(TG.charOffset), number(TG.charLength)
    page = next(iter(store.quads(chunk, PROV.wasDerivedFrom, None, source)), None)
    if offset is None or length is None or page is None:
        return None
    text = store.librarian_text(page.object)
    return None if text is None else text[offset:offset + length]

