"""Shared fixtures: real on-disk stores in temporary directories."""
from __future__ import annotations

from pathlib import Path

import pytest
from console_browser import browser, console_url, page, session_iri  # noqa: F401  (fixtures: the console in Chromium)
from scripted_llm import scripted_llm  # noqa: F401  (fixture: scripted OpenAI-compatible server)

from server.config import SAMPLE_DATA
from server.ingest.load import build_store
from server.store import GraphStore


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    """An empty on-disk store of its own for one test."""
    return GraphStore(tmp_path / "store")


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """One on-disk store with the sample dataset in the `default` collection, shared by a session.

    Tests may add explain traces to it; tests that change the knowledge graph use `store`.
    """
    path = tmp_path_factory.mktemp("sample") / "store"
    build_store(path, SAMPLE_DATA, "default", progress=False)  # same content as load_file, faster
    return GraphStore(path)


@pytest.fixture
def france_store(store: GraphStore) -> GraphStore:
    """``store`` with :func:`add_france`."""
    return add_france(store)


def add_france(store: GraphStore) -> GraphStore:
    """A small France graph with full extraction provenance, built with the vocab builders.

    ``e:france r:capital e:paris`` is contained (triple term) in the subgraph of Chunk 2 of Page 4
    ("Government") of the document "France"; ``e:france r:currency e:euro`` is contained in Chunk 1 of
    Page 5 ("Economy") in the RDF-star reifier form; ``e:france r:motto "Liberté, égalité, fraternité"@fr``.
    """
    from pyoxigraph import BlankNode, Literal, Quad, Triple

    from server import vocab
    from server.vocab import ENTITY, RDF, RDFS, RELATION, TG

    kg, src = vocab.collection_graph("default"), vocab.source_graph("default")
    capital = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
    currency = Triple(ENTITY.france, RELATION.currency, ENTITY.euro)
    motto = Triple(ENTITY.france, RELATION.motto, Literal("Liberté, égalité, fraternité", language="fr"))
    labels = {ENTITY.france: "France", ENTITY.paris: "Paris", ENTITY.euro: "Euro", RELATION.capital: "capital",
              RELATION.currency: "currency", RELATION.motto: "motto"}
    quads = [Quad(t.subject, t.predicate, t.object, kg) for t in (capital, currency, motto)]
    quads += [Quad(iri, RDFS.label, Literal(label), kg) for iri, label in labels.items()]
    doc = vocab.document_iri("fr")
    quads += vocab.document_quads(src, doc, "France")
    quads += vocab.content_quads(doc, "France is a country in Western Europe.", title="France")
    for number, title, chunk, text in ((4, "Government", 2, "The capital of France is Paris."),
                                       (5, "Economy", 1, "France uses the euro.")):
        page_node, chunk_node = vocab.page_iri("fr", number), vocab.chunk_iri("fr", number, chunk)
        quads += vocab.page_quads(src, page_node, f"Page {number}", doc)
        quads += vocab.content_quads(page_node, text, title=title)
        quads += vocab.chunk_quads(src, chunk_node, f"Chunk {chunk}", page_node)
        quads += vocab.content_quads(chunk_node, text, title=title)
    quads += vocab.subgraph_quads(src, vocab.subgraph_iri("fr", 4, 2), vocab.chunk_iri("fr", 4, 2), [capital, motto])
    reified = vocab.subgraph_iri("fr", 5, 1)
    quads += vocab.subgraph_quads(src, reified, vocab.chunk_iri("fr", 5, 1), [])
    reifier = BlankNode()
    quads += [Quad(reified, TG.contains, reifier, src), Quad(reifier, RDF.reifies, currency, src)]
    store.extend(quads)
    store.notify_loaded("default")
    return store
