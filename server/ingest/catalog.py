"""The documents of a collection: listing them and deleting one (``sparql/ingest_*.r[qu]``)."""
from __future__ import annotations

from pyoxigraph import NamedNode

from server import vocab
from server.store_base import StoreBackend, Values

_INTEGERS = ("size", "pages", "chunks", "facts", "warnings")


def document_of_id(doc_id: str) -> NamedNode | None:
    """The IRI of document ``doc_id`` (the part after ``urn:trustgraph:doc:``); None if it cannot be one."""
    if not doc_id or any(ch in doc_id for ch in "/:?#<> \"{}|\\^`") or not doc_id.isprintable():
        return None
    try:
        return vocab.document_iri(doc_id)
    except ValueError:
        return None


def holds_document(store: StoreBackend, collection: str, doc: NamedNode) -> bool:
    """Whether ``collection``'s provenance has document ``doc``."""
    return next(store.quads(doc, vocab.RDF.type, vocab.TG.Document, vocab.source_graph(collection)), None) is not None


def existing_document(store: StoreBackend, collection: str, doc_id: str) -> NamedNode | None:
    """Document ``doc_id`` if the collection holds it."""
    doc = document_of_id(doc_id)
    return doc if doc is not None and holds_document(store, collection, doc) else None


def list_documents(store: StoreBackend, collection: str, doc: NamedNode | None = None) -> list[dict]:
    """``{"id", "iri", "title", "media_type", "sha256", "size", "source", "ingested", "model", "pages", "chunks",
    "facts", "warnings"}`` of each document of ``collection`` (or of ``doc`` only), by title."""
    rows = store.select("ingest_documents", values={"doc": [doc]}, default_graph=vocab.source_graph(collection))
    documents: dict[str, dict] = {}
    for row in rows:
        iri = row["doc"].value
        if iri in documents:  # a document with two titles or two activities: the first row
            continue
        entry = {"id": iri.removeprefix(vocab.URN + "doc:"), "iri": iri}
        for key, column in (("title", "title"), ("media_type", "mediaType"), ("sha256", "sha256"),
                            ("source", "source"), ("ingested", "ingested"), ("model", "model")):
            entry[key] = row[column].value if column in row else None
        for key in _INTEGERS:
            entry[key] = int(row[key].value) if key in row else None
        documents[iri] = entry
    return list(documents.values())


def delete_values(collection: str, doc: NamedNode) -> Values:
    """The parameters of ``sparql/ingest_delete_document.ru`` for ``doc`` in ``collection``."""
    return {("doc", "kg", "src"): [(doc, vocab.collection_graph(collection), vocab.source_graph(collection))]}


def document_warnings(store: StoreBackend, collection: str, doc: NamedNode) -> list[str]:
    """The warnings the ingest of ``doc`` recorded (the first ``MAX_WARNINGS_KEPT``), sorted."""
    rows = store.select("ingest_warnings", values={"doc": [doc]}, default_graph=vocab.source_graph(collection))
    return sorted(row["warning"].value for row in rows)


def delete_document(store: StoreBackend, collection: str, doc: NamedNode) -> bool:
    """Delete ``doc`` from ``collection`` (see ``sparql/ingest_delete_document.ru``); False if it is not there."""
    with store.writing():
        if not holds_document(store, collection, doc):
            return False
        store.update("ingest_delete_document", delete_values(collection, doc))
    store.notify_loaded(collection)
    return True
