"""A document's identity includes its collection: the same bytes in two collections, chunked two ways,
keep their own pages, chunks and text; deleting from one leaves the other whole; a store built when
ids were the sha256 prefix alone is migrated to that, idempotently; and a replace is one transaction.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from pyoxigraph import NamedNode

from server import vocab
from server.ingest import documents as documents_module
from server.ingest.catalog import delete_document, list_documents
from server.ingest.documents import ID_LENGTH, Ingester, IngestOptions, document_id
from server.ingest.migrate import migrate_document_ids, old_style_documents
from server.rag.label_index import LabelIndex
from server.store import GraphStore
from server.store_base import StoreBackend
from server.vocab import PROV, TG

BOTH_BACKENDS = True
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

TEXT = ("Portugal borders Spain to the north and east. Lisbon is its capital and largest city. " * 40).encode()
WIDE, NARROW = IngestOptions(chunk_size=3000, chunk_overlap=100), IngestOptions(chunk_size=100, chunk_overlap=10)


def ingest_twice(store: StoreBackend) -> tuple[documents_module.IngestReport, documents_module.IngestReport]:
    ingester = Ingester(store, LabelIndex(store), None)
    return (ingester.ingest(TEXT, "alpha", name="notes.txt", options=WIDE),
            ingester.ingest(TEXT, "beta", name="notes.txt", options=NARROW))


def chunk_texts(store: StoreBackend, collection: str) -> dict[str, list[str]]:
    """Each chunk of the collection -> every ``tg:content`` the librarian holds for it."""
    source = vocab.source_graph(collection)
    return {quad.subject.value: [q.object.value for q in store.quads(quad.subject, TG.content, None,
                                                                     vocab.LIBRARIAN_GRAPH)]
            for quad in store.quads(None, vocab.RDF.type, TG.Chunk, source)}


def assert_own_text(store: StoreBackend, collection: str, size: int) -> None:
    """Every chunk of the collection has one text, its span of its page's text, at most ``size`` long."""
    source = vocab.source_graph(collection)
    texts = chunk_texts(store, collection)
    assert texts
    for chunk, contents in texts.items():
        offset = int(next(store.quads(NamedNode(chunk), TG.charOffset, None, source)).object.value)
        length = int(next(store.quads(NamedNode(chunk), TG.charLength, None, source)).object.value)
        page = next(store.quads(NamedNode(chunk), PROV.wasDerivedFrom, None, source)).object
        assert contents == [store.librarian_text(page)[offset:offset + length]], chunk
        assert len(contents[0]) <= size


def test_the_same_bytes_in_two_collections_share_no_chunk(store: StoreBackend) -> None:
    alpha, beta = ingest_twice(store)
    assert alpha.iri != beta.iri and alpha.id[:ID_LENGTH] == beta.id[:ID_LENGTH]  # the sha256 prefix still shows
    assert not set(chunk_texts(store, "alpha")) & set(chunk_texts(store, "beta"))
    assert_own_text(store, "alpha", 3000)
    assert_own_text(store, "beta", 100)
    assert len(chunk_texts(store, "alpha")) == 2 and len(chunk_texts(store, "beta")) > 30


def test_the_same_bytes_again_in_the_same_collection_are_unchanged(store: StoreBackend) -> None:
    alpha, _ = ingest_twice(store)
    again = Ingester(store, LabelIndex(store), None).ingest(TEXT, "alpha", name="other.txt", options=NARROW)
    assert again.unchanged and again.id == alpha.id == document_id(TEXT, "alpha")[0]


def test_deleting_from_one_collection_leaves_the_other_whole(store: StoreBackend) -> None:
    alpha, _ = ingest_twice(store)
    before = chunk_texts(store, "beta")
    assert delete_document(store, "alpha", NamedNode(alpha.iri))
    assert chunk_texts(store, "beta") == before
    assert [d["id"] for d in list_documents(store, "beta")] == [document_id(TEXT, "beta")[0]]
    librarian = store.quads(None, None, None, vocab.LIBRARIAN_GRAPH)
    assert not [q for q in librarian if q.subject.value.startswith(alpha.iri)]


def old_way(monkeypatch: pytest.MonkeyPatch, store: StoreBackend) -> None:
    """The store as the ingester built it when a document's id was its sha256 prefix alone."""
    with monkeypatch.context() as patch:
        patch.setattr(documents_module, "collection_document_id", lambda digest, collection: digest[:ID_LENGTH])
        ingest_twice(store)
        Ingester(store, LabelIndex(store), None).ingest(b"A second version of the notes.", "alpha", name="notes.txt")


def test_a_store_built_the_old_way_is_migrated_once(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    old_way(monkeypatch, store)
    shared = vocab.document_iri(document_id(TEXT, "any")[1][:ID_LENGTH])
    assert len(old_style_documents(store)) == 3
    assert any(len(texts) == 2 for texts in chunk_texts(store, "beta").values())  # the bug: two texts, one chunk

    assert migrate_document_ids(store) == 3
    assert_own_text(store, "alpha", 3000)
    assert_own_text(store, "beta", 100)
    ids = {collection: [d["id"] for d in list_documents(store, collection)] for collection in ("alpha", "beta")}
    assert document_id(TEXT, "alpha")[0] in ids["alpha"] and ids["beta"] == [document_id(TEXT, "beta")[0]]
    assert not list(store.quads(shared, None, None, None)) and not list(store.quads(None, None, shared, None))
    revision = [q.object.value for q in store.quads(None, PROV.wasRevisionOf, None, vocab.source_graph("alpha"))]
    assert revision == [vocab.document_iri(document_id(TEXT, "alpha")[0]).value]  # links follow the move
    activity = vocab.activity_iri(document_id(TEXT, "beta")[0])
    assert next(store.quads(activity, PROV.used, None, None)).object.value.endswith(document_id(TEXT, "beta")[0])

    size = len(store)
    assert migrate_document_ids(store) == 0 and len(store) == size  # idempotent
    again = Ingester(store, LabelIndex(store), None).ingest(TEXT, "beta", name="notes.txt", options=NARROW)
    assert again.unchanged  # re-ingesting the same bytes is still recognised
    assert delete_document(store, "alpha", vocab.document_iri(document_id(TEXT, "alpha")[0]))
    assert_own_text(store, "beta", 100)


def test_documents_with_no_sha256_are_not_touched(france_store: StoreBackend) -> None:
    """The sample's documents are named by country code (``urn:trustgraph:doc:fr``): nothing to move."""
    size = len(france_store)
    assert old_style_documents(france_store) == [] and migrate_document_ids(france_store) == 0
    assert len(france_store) == size


class CountingStore(GraphStore):
    """The embedded store, counting its transactions (each ``extend`` and each ``run_update`` is one)."""

    transactions = 0

    def extend(self, quads) -> None:  # noqa: ANN001
        self.transactions += 1
        super().extend(quads)

    def run_update(self, text: str, base_iri: str | None = None) -> None:
        self.transactions += 1
        super().run_update(text, base_iri)


def test_replace_deletes_and_writes_in_one_transaction(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "store")
    ingester = Ingester(store, LabelIndex(store), None)
    first = ingester.ingest(TEXT, "alpha", name="notes.txt", options=WIDE)
    before = {q for q in store.raw if q.graph_name != vocab.LIBRARIAN_GRAPH or TG.dataVersion != q.predicate}
    store.transactions = 0
    again = ingester.ingest(TEXT, "alpha", name="notes.txt", options=IngestOptions(chunk_size=3000, chunk_overlap=100,
                                                                                    replace=True))
    assert store.transactions == 1  # a crash between a delete and a write would have lost the document
    assert again.id == first.id and not again.unchanged
    after = {q for q in store.raw if q.graph_name != vocab.LIBRARIAN_GRAPH or TG.dataVersion != q.predicate}
    changed = {q.predicate for q in before ^ after}
    assert changed <= {PROV.startedAtTime, PROV.endedAtTime}  # the same extraction, at another time
