"""Document ingestion on a real on-disk store, with the real openai client talking to a scripted
OpenAI-compatible server that extracts from each chunk's own text (tests/extraction_llm.py).

The documents are 20 Factbook "Background" texts, read from the sample's librarian graph, ingested
as plain text and as Markdown, and a PDF written in the test with fpdf2.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest
from conftest import SampleStores
from extraction_llm import PREDICATE, respond
from pyoxigraph import Literal, NamedNode, Triple
from scripted_llm import Reply, ScriptedLLM

from server import vocab
from server.answering import make_graph_rag
from server.config import Config
from server.errors import LLMFailed, UnreadableDocument, UnsupportedDocument
from server.explain.trace import read_trace
from server.ingest.catalog import delete_document, existing_document, list_documents
from server.ingest.documents import Ingester, IngestOptions, document_id
from server.rag.label_index import LabelIndex
from server.rag.openai_llm import OpenAILLM
from server.store import GraphStore
from server.vocab import DC, PROV, RDF, RDFS, SKOS, TG

BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

SMALL_CHUNKS = IngestOptions(chunk_size=400, chunk_overlap=40, workers=4)


def background_texts(store: GraphStore, count: int = 20) -> list[tuple[str, str]]:
    """``(country, text)`` of the first ``count`` Factbook 'Background' fields (by document IRI)."""
    source = vocab.source_graph("default")
    found = []
    for quad in store.quads(None, DC.title, Literal("Background"), source):
        page = next(store.quads(quad.subject, PROV.wasDerivedFrom, None, source)).object
        doc = next(store.quads(page, PROV.wasDerivedFrom, None, source)).object
        title = next(store.quads(doc, DC.title, None, source)).object.value
        found.append((doc.value, title, store.librarian_text(quad.subject)))
    found.sort()
    return [(title, text) for _, title, text in found[:count] if text]


def extraction_llm(scripted: ScriptedLLM, **settings: object) -> OpenAILLM:
    scripted.responder = respond
    return OpenAILLM(Config(llm="openai", llm_base_url=scripted.base_url, llm_model="scripted-model",
                            llm_retries=0, **settings))


def pdf_bytes(pages: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def chains(store: GraphStore, collection: str) -> dict[Triple, list[tuple[NamedNode, NamedNode, NamedNode]]]:
    """Every fact of the collection's subgraphs -> its (chunk, page, document) chains."""
    source = vocab.source_graph(collection)
    found: dict[Triple, list] = {}
    for quad in store.quads(None, TG.contains, None, source):
        chunk = next(store.quads(quad.subject, PROV.wasDerivedFrom, None, source)).object
        page = next(store.quads(chunk, PROV.wasDerivedFrom, None, source)).object
        doc = next(store.quads(page, PROV.wasDerivedFrom, None, source)).object
        found.setdefault(quad.object, []).append((chunk, page, doc))
    return found


def integer(store: GraphStore, subject: NamedNode, predicate: NamedNode, collection: str) -> int:
    return int(next(store.quads(subject, predicate, None, vocab.source_graph(collection))).object.value)


def span_text(store: GraphStore, chunk: NamedNode, page: NamedNode, collection: str) -> str:
    """The chunk's text as its offsets cut it out of its page's text."""
    offset = integer(store, chunk, TG.charOffset, collection)
    length = integer(store, chunk, TG.charLength, collection)
    return store.librarian_text(page)[offset:offset + length]


@pytest.fixture
def ingested(store: GraphStore, sample_stores: SampleStores, scripted_llm: ScriptedLLM,
             tmp_path: Path) -> tuple[GraphStore, list[tuple[str, str]]]:
    """20 Background texts ingested into collection ``world``: even ones as text, odd ones as Markdown (read from
    the embedded sample store: an engine loaded with the whole sample only for its texts cost 20 s)."""
    texts = background_texts(sample_stores.of("embedded"))
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    for i, (country, text) in enumerate(texts):
        if i % 2:
            data, name = f"# {country}\n\n## Background\n\n{text}\n".encode(), f"{country}.md"
        else:
            data, name = text.encode(), f"{country}.txt"
        report = ingester.ingest(data, "world", name=name, options=SMALL_CHUNKS)
        assert report.facts > 0 and not report.unchanged, report
    return store, texts


@pytest.mark.slow
def test_twenty_background_texts_give_facts_with_full_chains_and_exact_spans(ingested) -> None:
    store, texts = ingested
    assert len(texts) == 20
    documents = list_documents(store, "world")
    assert len(documents) == 20
    assert {d["media_type"] for d in documents} == {"text/plain", "text/markdown"}
    assert sum(d["chunks"] for d in documents) > 40  # 400-character chunks: several per text
    found = chains(store, "world")
    knowledge = vocab.collection_graph("world")
    facts = [q for q in store.quads(None, None, None, knowledge) if q.predicate != RDFS.label]
    assert len(facts) > 100

    @functools.cache  # a chunk states several facts: each store read once (a round trip on a remote store)
    def exact_span(chunk: NamedNode, page: NamedNode) -> str:
        text = span_text(store, chunk, page, "world")
        assert text == store.librarian_text(chunk)  # the offsets are exact
        return text

    @functools.cache
    def is_document(doc: NamedNode) -> bool:
        return (doc, RDF.type, TG.Document) in {(q.subject, q.predicate, q.object) for q in
                                               store.quads(doc, RDF.type, None, vocab.source_graph("world"))}

    @functools.cache
    def label_of(term: NamedNode) -> str:
        return next(store.quads(term, RDFS.label, None, knowledge)).object.value

    for quad in facts:  # every fact of the collection traces to a chunk, a page and a document
        fact = Triple(quad.subject, quad.predicate, quad.object)
        assert found.get(fact), f"no provenance for {fact}"
        for chunk, page, doc in found[fact]:
            assert is_document(doc)
            text = exact_span(chunk, page)
            labels = [label_of(term) for term in (fact.subject, fact.object) if isinstance(term, NamedNode)]
            for label in labels:
                if fact.predicate != SKOS.definition:
                    assert label in text, (label, text)


def test_a_graphrag_question_traces_to_the_chunk_and_span_of_its_fact(ingested) -> None:
    store, texts = ingested
    rag = make_graph_rag(store, Config(store_path=None, llm="offline"))
    # a name mentioned with others in some chunk: ask what it is mentioned with
    knowledge = vocab.collection_graph("world")
    relation = vocab.relation_iri(PREDICATE)
    subject = sorted({q.subject for q in store.quads(None, relation, None, knowledge)}, key=str)[3]
    name = next(store.quads(subject, RDFS.label, None, knowledge)).object.value
    messages = list(rag.run(f"What is {name} mentioned with?", "world", explainable=True))
    session = next(m.explain_id for m in messages if m.explain_kind == "session")
    trace = read_trace(store, session)
    assert trace["status"] == "answered"
    checked = 0
    for edge in trace["edges"]:
        for chain in edge["sources"]:
            chunk, page, doc = chain
            assert [node["type"] for node in chain] == ["Chunk", "Page", "Document"]
            page_text = store.librarian_text(NamedNode(page["iri"]))
            span = page_text[chunk["offset"]:chunk["offset"] + chunk["length"]]
            assert span == chunk["text"]
            assert edge["labels"][0] in span and edge["labels"][2] in span
            assert doc["title"] in {country for country, _ in texts} | {f"{c}.txt" for c, _ in texts}
            checked += 1
    assert checked > 0


def test_a_pdf_gives_one_page_per_pdf_page(store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    pages = ["Portugal borders Spain. Lisbon is the capital of Portugal.",
             "Spain borders France and Portugal. Madrid is the capital of Spain.",
             "Andorra lies between France and Spain."]
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    report = ingester.ingest(pdf_bytes(pages), "iberia", name="iberia.pdf", options=IngestOptions(title="Iberia"))
    assert (report.pages, report.media_type, report.title) == (3, "application/pdf", "Iberia")
    source = vocab.source_graph("iberia")
    for number, text in enumerate(pages, start=1):
        page = vocab.page_iri(report.id, number)
        assert integer(store, page, TG.pageNumber, "iberia") == number
        assert " ".join(store.librarian_text(page).split()) == text
    found = chains(store, "iberia")
    madrid = Triple(vocab.entity_iri("Spain"), vocab.relation_iri(PREDICATE), vocab.entity_iri("Madrid"))
    assert [page for _, page, _ in found[madrid]] == [vocab.page_iri(report.id, 2)]
    assert next(store.quads(NamedNode(report.iri), TG.mimeType, None, source)).object.value == "application/pdf"


@pytest.mark.slow
def test_a_new_text_about_france_attaches_to_the_samples_france(sample_copy: GraphStore,
                                                                scripted_llm: ScriptedLLM) -> None:
    store = sample_copy
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    ingester.ingest(b"France hosted the Tour de France and Paris hosted the Olympics.", "default", name="f.txt")
    knowledge = vocab.collection_graph("default")
    tour = vocab.entity_iri("Tour")
    assert (next(store.quads(vocab.ENTITY.france, vocab.relation_iri(PREDICATE), None, knowledge), None)
            is not None), "the fact hangs off the sample's e:france"
    labels = [q.object.value for q in store.quads(vocab.ENTITY.france, RDFS.label, None, knowledge)]
    assert labels == ["France"]  # linked, not labelled again
    assert tour is not None


@pytest.mark.slow
def test_offline_ingest_links_chunks_to_the_entities_they_mention(sample_copy: GraphStore) -> None:
    store = sample_copy
    before = sum(1 for _ in store.quads(None, None, None, vocab.collection_graph("default")))
    report = Ingester(store, LabelIndex(store), None).ingest(
        b"A travel note. The capital of France is Paris, a city on the Seine.", "default", name="note.txt")
    assert (report.facts, report.extracted) == (0, False)
    assert sum(1 for _ in store.quads(None, None, None, vocab.collection_graph("default"))) == before
    chunk = vocab.chunk_iri(report.id, 1, 1)
    mentioned = {q.object for q in store.quads(chunk, TG.mentions, None, vocab.source_graph("default"))}
    assert {vocab.ENTITY.france, vocab.ENTITY.paris} <= mentioned
    assert vocab.ENTITY["the"] not in mentioned
    rag = make_graph_rag(store, Config(store_path=None, llm="offline"))
    messages = list(rag.run("What is the capital of France?", "default", explainable=True))
    trace = read_trace(store, next(m.explain_id for m in messages if m.explain_kind == "session"))
    mentions = [chain for edge in trace["edges"] for chain in edge.get("mentions", [])]
    assert any(chain[0]["iri"] == chunk.value for chain in mentions)


def test_the_same_bytes_again_change_nothing_and_a_new_version_says_so(store: GraphStore) -> None:
    ingester = Ingester(store, LabelIndex(store), None)
    first = ingester.ingest(b"Version one of the notes.", "notes", name="notes.txt")
    size = len(store)
    again = ingester.ingest(b"Version one of the notes.", "notes", name="other-name.txt")
    assert again.unchanged and again.id == first.id and len(store) == size
    second = ingester.ingest(b"Version two of the notes.", "notes", name="notes.txt")
    assert second.revision_of == [first.iri]
    revision = next(store.quads(NamedNode(second.iri), PROV.wasRevisionOf, None, vocab.source_graph("notes")))
    assert revision.object == NamedNode(first.iri)


def test_deleting_keeps_a_fact_another_document_states(store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    one = ingester.ingest(b"Lisbon and Porto are cities.", "cities", name="one.txt")
    two = ingester.ingest(b"Lisbon and Porto are cities; so is Braga.", "cities", name="two.txt")
    knowledge, source = vocab.collection_graph("cities"), vocab.source_graph("cities")
    shared = (vocab.entity_iri("Lisbon"), vocab.relation_iri(PREDICATE), vocab.entity_iri("Porto"))
    braga = (vocab.entity_iri("Lisbon"), vocab.relation_iri(PREDICATE), vocab.entity_iri("Braga"))

    def has(fact: tuple) -> bool:
        return next(store.quads(*fact, knowledge), None) is not None

    assert has(shared) and has(braga)
    assert delete_document(store, "cities", NamedNode(two.iri))
    assert has(shared) and not has(braga)
    assert next(store.quads(vocab.entity_iri("Braga"), RDFS.label, None, knowledge), None) is None
    assert store.librarian_text(vocab.chunk_iri(two.id, 1, 1)) is None
    assert next(store.quads(NamedNode(two.iri), None, None, source), None) is None
    assert existing_document(store, "cities", one.id) is not None
    assert delete_document(store, "cities", NamedNode(one.iri))
    assert not has(shared)
    assert next(store.quads(None, None, None, knowledge), None) is None  # labels went with the last facts
    assert next(store.quads(None, None, None, source), None) is None  # and the whole provenance
    assert not delete_document(store, "cities", NamedNode(one.iri))


def test_junk_and_timeouts_give_a_document_with_no_facts_and_counted_warnings(
        store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    llm = extraction_llm(scripted_llm, llm_timeout_s=0.5)
    scripted_llm.reply("not json at all\n{\"subject\": \"A\"}\n[1, 2]")  # definitions: junk
    scripted_llm.stall(5)  # relationships: times out
    report = Ingester(store, LabelIndex(store), llm).ingest(b"Alpha met Beta.", "junk", name="j.txt",
                                                            options=IngestOptions(workers=1))
    assert report.facts == 0 and report.chunks == 1
    assert report.unusable_lines == 4
    assert any("timed out" in warning for warning in report.warnings)
    assert existing_document(store, "junk", report.id) is not None
    assert list_documents(store, "junk")[0]["warnings"] == len(report.warnings)


@pytest.mark.parametrize("data, name, error, words", [
    (bytes(range(256)) * 4, "binary.txt", UnsupportedDocument, "not"),
    (b"", "empty.txt", UnreadableDocument, "empty"),
])
def test_bad_documents_leave_nothing_behind(store: GraphStore, data: bytes, name: str, error: type,
                                            words: str) -> None:
    with pytest.raises(error, match=words):
        Ingester(store, LabelIndex(store), None).ingest(data, "bad", name=name)
    assert len(store) == 0
    assert existing_document(store, "bad", document_id(data, "bad")[0]) is None


@pytest.mark.slow
def test_ingesting_then_deleting_leaves_the_sample_exactly_as_it_was(sample_copy: GraphStore,
                                                                    scripted_llm: ScriptedLLM) -> None:
    store = sample_copy
    before = sorted(map(str, store.quads()))
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    report = ingester.ingest(b"France borders Spain. Paris is in France. Zorblat visited Paris.", "default",
                             name="travel.txt")
    assert report.facts > 0 and report.mentions > 0
    assert delete_document(store, "default", NamedNode(report.iri))
    assert sorted(map(str, store.quads())) == before


def test_extraction_replies_are_parsed_tolerantly() -> None:
    from server.ingest.extraction import parse_definitions, parse_relationships

    reply = "\n".join([
        "```jsonl",
        '{"subject": "A", "predicate": "knows", "object": "B", "object-entity": true}',
        '[{"subject": "A", "predicate": "age", "object": 41, "object-entity": false}]',
        '{"subject": "A", "predicate": "knows"}',  # no object
        '{"subject": "A", "predicate": "knows", "object": "C", "object-entity": "yes"}',  # not a boolean
        '{"subject": "\\ud800", "predicate": "knows", "object": "D"}',  # a lone surrogate
        "Sure! Here you go.",
        "```",
    ])
    found, skipped = parse_relationships(reply)
    assert [(r.subject, r.predicate, r.object, r.object_entity) for r in found] == [
        ("A", "knows", "B", True), ("A", "age", "41", False)]
    assert skipped == 4
    definitions, skipped = parse_definitions('{"entity": "A", "definition": "A letter."}\n{"entity": ""}\n')
    assert [(d.entity, d.definition) for d in definitions] == [("A", "A letter.")] and skipped == 1


def test_the_label_index_takes_a_documents_new_labels_without_a_rebuild(store: GraphStore,
                                                                       scripted_llm: ScriptedLLM) -> None:
    index = LabelIndex(store)
    ingester = Ingester(store, index, extraction_llm(scripted_llm))
    ingester.ingest(b"Lisbon and Porto are cities.", "cities", name="one.txt")
    built = index._indexes["cities"] if "cities" in index._indexes else index._index("cities")
    ingester.ingest(b"Braga and Porto Alegre and Coimbra are cities.", "cities", name="two.txt")
    assert index._indexes.get("cities") is built  # updated in place, not dropped
    fresh = LabelIndex(store)
    for question in ("Is Braga near Porto Alegre?", "Coimbra", "What about Lisbon and Porto?"):
        assert index.lookup_tiers(question, "cities", 10) == fresh.lookup_tiers(question, "cities", 10)
    assert index.lookup("Porto Alegre", "cities", 1) == [vocab.entity_iri("Porto Alegre")]
    assert index.focus_relations("what is mentioned with Braga", "cities") == [vocab.relation_iri(PREDICATE)]


def test_an_llm_that_fails_every_call_ingests_nothing(store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    llm = extraction_llm(scripted_llm)
    scripted_llm.responder = lambda request: Reply(status=503, error="model is loading")
    with pytest.raises(LLMFailed, match="every extraction call failed.*HTTP 503: model is loading"):
        Ingester(store, LabelIndex(store), llm).ingest(b"Alpha met Beta. Gamma met Delta.", "down", name="d.txt")
    assert len(store) == 0


def test_replace_extracts_a_document_again(store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    data = b"Lisbon and Porto are cities."
    offline = Ingester(store, LabelIndex(store), None).ingest(data, "again", name="a.txt")
    assert offline.facts == 0
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    assert ingester.ingest(data, "again", name="a.txt").unchanged
    redone = ingester.ingest(data, "again", name="a.txt", options=IngestOptions(replace=True))
    # 2 facts: a relationship and a definition
    assert (redone.id, redone.facts, redone.unchanged, redone.revision_of) == (offline.id, 2, False, [])
    documents = list_documents(store, "again")
    assert [(d["id"], d["facts"], d["model"]) for d in documents] == [(offline.id, 2, "scripted-model")]


def test_documents_that_would_amplify_are_refused_before_anything_is_stored(store: GraphStore) -> None:
    from server.errors import LimitExceeded
    from server.ingest.documents import MAX_CHUNKS, MAX_PAGES

    ingester = Ingester(store, LabelIndex(store), None)
    headings = "".join(f"# s{n}\n" for n in range(MAX_PAGES + 1)).encode()
    with pytest.raises(LimitExceeded, match=f"more than the {MAX_PAGES}"):
        ingester.ingest(headings, "amp", name="many.md")
    with pytest.raises(LimitExceeded, match=f"more than {MAX_CHUNKS} chunks of 1 characters"):
        ingester.ingest(b"a " * (MAX_CHUNKS + 1), "amp", name="tiny.txt", options=IngestOptions(chunk_size=1,
                                                                                               chunk_overlap=0))
    with pytest.raises(ValueError, match="at most half the chunk size"):
        IngestOptions(chunk_size=10_000, chunk_overlap=9_999)
    assert len(store) == 0


def test_deleting_a_document_keeps_what_was_loaded_as_rdf_before_it(store: GraphStore,
                                                                    scripted_llm: ScriptedLLM) -> None:
    """A fact, labels and an agent loaded as RDF stay when two documents that state the fact are deleted."""
    from pyoxigraph import Quad

    knowledge, source = vocab.collection_graph("movies"), vocab.source_graph("movies")
    lisbon, porto, relation = vocab.entity_iri("Lisbon"), vocab.entity_iri("Porto"), vocab.relation_iri(PREDICATE)
    curator = NamedNode("urn:example:curator")
    loaded = [Quad(lisbon, relation, porto, knowledge), Quad(lisbon, RDFS.label, Literal("Lisbon"), knowledge),
              Quad(porto, RDFS.label, Literal("Porto"), knowledge),
              Quad(relation, RDFS.label, Literal(PREDICATE), knowledge),
              Quad(curator, RDF.type, PROV.Agent, source), Quad(curator, RDFS.label, Literal("Curator"), source)]
    store.extend(loaded)
    def data() -> list[str]:  # a remote store's data version changes with every write (decision 13): not data
        return sorted(str(q) for q in store.quads() if q.predicate != TG.dataVersion)

    before = data()
    ingester = Ingester(store, LabelIndex(store), extraction_llm(scripted_llm))
    one = ingester.ingest(b"Lisbon and Porto and Braga are cities.", "movies", name="one.txt")
    two = ingester.ingest(b"Lisbon and Porto are cities.", "movies", name="two.txt")
    assert delete_document(store, "movies", NamedNode(one.iri))
    assert delete_document(store, "movies", NamedNode(two.iri))
    assert data() == before
