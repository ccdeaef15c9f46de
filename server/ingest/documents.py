"""Ingesting one document: its bytes become pages, chunks, facts and their provenance, in one transaction.

The document's IRI derives from the sha256 of its bytes and from its collection
(``urn:trustgraph:doc:{first 20 hex digits}-{collection tag}``, :func:`document_id`), so the same bytes
are recognised in a collection and ingesting them again changes nothing there, while the same bytes in
another collection (chunked otherwise, perhaps) are another document with pages, chunks and text of its
own. A different file with the title of a document already in the collection is a new version:
``prov:wasRevisionOf`` the old one (which stays until it is deleted). Everything the document brings
(knowledge triples, provenance, librarian text) is written in one transaction, with the deletion of the
earlier extraction when it replaces one: a crash at any moment leaves all of it or none.
The data model is in docs/architecture.md ('Ingested documents').
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath

from pyoxigraph import Literal, NamedNode, Quad, Triple

from server import vocab
from server.errors import LimitExceeded, LLMFailed
from server.ingest.catalog import delete_values, existing_document, list_documents
from server.ingest.chunking import Span, TooManyChunks, split
from server.ingest.extraction import PROMPTS, ChunkFacts, Completer, extract_all, ground, prompt_versions
from server.ingest.facts import FactBuilder
from server.ingest.formats import MAX_PAGES, Document, Page, read_document
from server.rag.label_index import LabelIndex
from server.rag.passage_index import PassageIndex, PassageRow
from server.store_base import StoreBackend
from server.vocab import DC, PROV, RDFS, TG

ID_LENGTH = 20  # hex digits of the sha256 in a document's IRI
COLLECTION_TAG_LENGTH = 8  # hex digits of the collection name's sha256 after them
MAX_CHUNKS = 20_000  # per document: 40 MB of text at the default size; counted while splitting (chunk size 1
# over 3 MB of text made 3 million spans, +590 MB, before the count)
MAX_WARNINGS_KEPT = 20  # warnings an ingest records in its activity (tg:warning); tg:warningCount counts all
EXTRACTOR = "kg-extract (relationships, definitions)"
MENTIONS_ONLY = "kg-extract (label mentions only: no LLM configured)"

Progress = Callable[[int], None]  # called with the number of chunks just finished


@dataclass(frozen=True)
class IngestOptions:
    title: str | None = None  # default: the title in the document, else the file name
    chunk_size: int = 2000
    chunk_overlap: int = 100
    workers: int = 4  # chunks sent to the LLM at once
    replace: bool = False  # extract a document already in the collection again (the new run replaces it)

    def __post_init__(self) -> None:
        """ValueError for settings that cannot work (the splitter's own rule for size and overlap)."""
        split("", self.chunk_size, self.chunk_overlap)
        if self.chunk_overlap > self.chunk_size // 2:  # else the chunks' text grows with size x length
            raise ValueError(f"chunk overlap must be at most half the chunk size ({self.chunk_size // 2}), "
                             f"not {self.chunk_overlap}")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")


@dataclass
class IngestReport:
    """What an ingest did; ``unchanged``: the same bytes were already in the collection."""

    id: str
    iri: str
    title: str
    media_type: str
    collection: str
    pages: int = 0
    chunks: int = 0
    facts: int = 0
    mentions: int = 0
    unusable_lines: int = 0
    ungrounded: int = 0  # extracted facts dropped: their chunk does not name their entities
    warnings: list[str] = field(default_factory=list)
    revision_of: list[str] = field(default_factory=list)
    extracted: bool = False  # an LLM extracted facts (False: mentions only)
    unchanged: bool = False


@dataclass
class _Chunk:
    page: int
    index: int
    offset: int
    text: str
    mentions: list[NamedNode] = field(default_factory=list)
    facts: list[Triple] = field(default_factory=list)


def chunk_spans(document: Document, options: IngestOptions) -> list[tuple[Page, int, Span]]:
    """``(page, chunk index from 1, span)`` of every chunk of ``document``; LimitExceeded (422) past
    ``MAX_PAGES`` pages or ``MAX_CHUNKS`` chunks, before any chunk is stored or sent to an LLM."""
    if len(document.pages) > MAX_PAGES:
        raise LimitExceeded(f"the document has {len(document.pages)} pages (sections), more than the {MAX_PAGES} "
                            "one document may have")
    found: list[tuple[Page, int, Span]] = []
    for page in document.pages:
        try:  # counted while splitting: the spans held never pass MAX_CHUNKS
            spans = split(page.text, options.chunk_size, options.chunk_overlap, limit=MAX_CHUNKS - len(found))
        except TooManyChunks:
            raise LimitExceeded(f"the document makes more than {MAX_CHUNKS} chunks of {options.chunk_size} "
                                "characters: split it, or use a larger --chunk-size") from None
        found += [(page, index, span) for index, span in enumerate(spans, start=1)]
    return found


def document_id(data: bytes, collection: str) -> tuple[str, str]:
    """``(id, sha256 hex)`` of a document's bytes in ``collection``: see :func:`collection_document_id`."""
    digest = hashlib.sha256(data).hexdigest()
    return collection_document_id(digest, collection), digest


def collection_document_id(digest: str, collection: str) -> str:
    """The id of the document with sha256 ``digest`` in ``collection``: the digest's first ``ID_LENGTH`` hex
    digits (recognisable), a hyphen, and a tag of the collection (the first ``COLLECTION_TAG_LENGTH`` hex digits
    of its name's sha256), so that no page, chunk or text is shared between collections."""
    tag = hashlib.sha256(collection.encode("utf-8")).hexdigest()[:COLLECTION_TAG_LENGTH]
    return f"{digest[:ID_LENGTH]}-{tag}"


class Ingester:
    """Ingests documents into a store's collections; ``llm`` None extracts mentions only."""

    def __init__(self, store: StoreBackend, index: LabelIndex, llm: Completer | None,
                 passages: PassageIndex | None = None) -> None:
        """``passages``: the passage index the document's chunks are added to (embedded before the write)."""
        self.store, self.index, self.llm, self.passages = store, index, llm, passages

    def ingest(self, data: bytes, collection: str, declared: str | None = None, name: str | None = None,
               options: IngestOptions = IngestOptions(), progress: Progress | None = None,
               total: Callable[[int], None] | None = None, document: Document | None = None) -> IngestReport:
        """Ingest ``data`` (a file's bytes; ``declared`` its media type, ``name`` its file name) into
        ``collection``. ``total(n)`` learns the number of chunks, ``progress(n)`` each one done.
        ``document``: the bytes already read by :func:`~server.ingest.formats.read_document` (a PDF's
        text may take seconds), else they are read here."""
        doc_id, digest = document_id(data, collection)
        doc = vocab.document_iri(doc_id)
        if existing_document(self.store, collection, doc_id) is not None and not options.replace:
            return self._unchanged(doc_id, collection)
        document = document or read_document(data, declared, name)
        title = (options.title or document.title or (PurePath(name).name if name else "") or f"Document {doc_id[:8]}")
        title = title.encode("utf-8", "replace").decode("utf-8")  # a file name not in UTF-8 reaches argv as surrogates
        report = IngestReport(doc_id, doc.value, title, document.media_type, collection, pages=len(document.pages),
                              extracted=self.llm is not None)
        started = vocab.now_literal()
        chunks = self._chunks(document, options, collection)
        report.chunks = len(chunks)
        if total is not None:
            total(len(chunks))
        labels = self._extract(chunks, collection, options, report, progress)
        report.revision_of = [d.value for d in self._same_title(title, collection, doc)]
        quads = self._document_quads(doc, digest, len(data), document, chunks, report)
        quads += self._knowledge_quads(chunks, labels, report)
        quads += vocab.activity_quads(vocab.source_graph(collection), vocab.activity_iri(doc_id), doc,
                                      *self._agent(), started, vocab.now_literal(), self._settings(options, report))
        passages = self._passage_rows(report, document, chunks)
        vectors = self.passages.prepare(collection, passages) if self.passages else None  # fails before any write
        with self.store.writing():
            if existing_document(self.store, collection, doc_id) is None:
                self.store.extend(quads)
            elif not options.replace:  # ingested meanwhile
                return self._unchanged(doc_id, collection)
            else:  # the earlier extraction goes in the same transaction: a crash leaves one or the other
                self.store.update_then_extend("ingest_delete_document", delete_values(collection, doc), quads)
            if self.passages:
                self.passages.add(collection, passages, vectors, replaced_document=doc.value)
        self.store.notify_loaded(collection, _added_labels(quads, vocab.collection_graph(collection)))
        return report

    # --- steps -------------------------------------------------------------------------------------

    @staticmethod
    def _passage_rows(report: IngestReport, document: Document, chunks: list[_Chunk]) -> list[PassageRow]:
        """The chunks as the passage index reads them: under the document's title and the page's section."""
        sections = {page.number: page.title for page in document.pages}
        return [PassageRow(vocab.chunk_iri(report.id, chunk.page, chunk.index).value,
                           vocab.document_iri(report.id).value,
                           " · ".join(t for t in (report.title, sections.get(chunk.page)) if t), chunk.text)
                for chunk in chunks]

    def _chunks(self, document: Document, options: IngestOptions, collection: str) -> list[_Chunk]:
        chunks = []
        for page, index, span in chunk_spans(document, options):
            text = page.text[span.offset:span.offset + span.length]
            chunks.append(_Chunk(page.number, index, span.offset, text, self.index.mentioned(text, collection)))
        return chunks

    def _extract(self, chunks: list[_Chunk], collection: str, options: IngestOptions, report: IngestReport,
                 progress: Progress | None) -> dict[NamedNode, str]:
        """Each chunk's facts (with an LLM); returns the labels of the terms they introduce."""
        if self.llm is None:
            if progress is not None:
                progress(len(chunks))
            return {}
        done = (lambda: progress(1)) if progress is not None else None
        extracted: list[ChunkFacts] = extract_all(self.llm, [c.text for c in chunks], options.workers, done)
        builder = FactBuilder(self.index, collection)
        builder.resolve_names(extracted)
        for chunk, facts in zip(chunks, extracted, strict=True):
            ground(facts, chunk.text, lambda name, chunk=chunk: builder.resolved(name) in chunk.mentions)
            chunk.facts = builder.triples(facts)
            report.unusable_lines += facts.skipped
            report.ungrounded += facts.ungrounded
            report.warnings += [f"page {chunk.page} chunk {chunk.index}: {error}" for error in facts.errors]
        if extracted and all(len(facts.errors) == len(PROMPTS) for facts in extracted):
            raise LLMFailed("every extraction call failed, so nothing was ingested; the first: "
                            f"{extracted[0].errors[0]}")
        if report.unusable_lines:
            report.warnings.append(f"{report.unusable_lines} line(s) of the LLM's replies were unusable and skipped")
        if report.ungrounded:
            report.warnings.append(f"{report.ungrounded} extracted fact(s) were dropped: their chunk does not name "
                                   "their entities, or they copy a prompt's example")
        return builder.new_labels()

    def _same_title(self, title: str, collection: str, this: NamedNode) -> list[NamedNode]:
        """Ingested documents (with a sha256) of ``collection`` titled ``title``: this one's earlier versions."""
        graph = vocab.source_graph(collection)
        return sorted((q.subject for q in self.store.quads(None, DC.title, Literal(title), graph)
                       if q.subject != this and next(self.store.quads(q.subject, TG.sha256, None, graph), None)
                       is not None),
                      key=lambda node: node.value)

    def _document_quads(self, doc: NamedNode, digest: str, size: int, document: Document, chunks: list[_Chunk],
                        report: IngestReport) -> list[Quad]:
        """The document's provenance (document, pages, chunks, subgraphs, mentions) and librarian text."""
        source = vocab.source_graph(report.collection)
        activity = vocab.activity_iri(report.id)
        text_type = "text/markdown" if document.media_type == "text/markdown" else "text/plain"
        quads = vocab.document_quads(source, doc, report.title, mime_type=document.media_type, sha256=digest,
                                     size=size)
        quads += [Quad(doc, PROV.wasRevisionOf, NamedNode(old), source) for old in report.revision_of]
        quads += vocab.content_quads(doc, "\n\n".join(page.text for page in document.pages), report.title, text_type)
        for page in document.pages:
            page_node = vocab.page_iri(report.id, page.number)
            quads += vocab.page_quads(source, page_node, f"Page {page.number}", doc, number=page.number)
            if page.title:
                quads.append(Quad(page_node, DC.title, Literal(page.title), source))
            quads += vocab.content_quads(page_node, page.text, page.title, text_type)
        for chunk in chunks:
            node = vocab.chunk_iri(report.id, chunk.page, chunk.index)
            quads += vocab.chunk_quads(source, node, f"Chunk {chunk.index}", vocab.page_iri(report.id, chunk.page),
                                       span=(chunk.index, chunk.offset, len(chunk.text)))
            quads += vocab.content_quads(node, chunk.text, mime_type=text_type)
            quads += vocab.mention_quads(source, node, chunk.mentions)
            report.mentions += len(chunk.mentions)
            if chunk.facts:
                quads += vocab.subgraph_quads(source, vocab.subgraph_iri(report.id, chunk.page, chunk.index), node,
                                              chunk.facts, activity)
        return quads

    def _knowledge_quads(self, chunks: list[_Chunk], labels: dict[NamedNode, str], report: IngestReport) -> list[Quad]:
        """The facts of every chunk, once each, and the labels of the terms they introduce; the activity
        records which labels it wrote (``tg:labelled``) and which facts the collection already held with
        no provenance (``tg:kept``, loaded as RDF): deleting the document takes neither of those."""
        knowledge, source = vocab.collection_graph(report.collection), vocab.source_graph(report.collection)
        activity = vocab.activity_iri(report.id)
        facts = list(dict.fromkeys(fact for chunk in chunks for fact in chunk.facts))
        report.facts = len(facts)
        used = {term for fact in facts for term in (fact.subject, fact.predicate, fact.object)}
        quads = [Quad(fact.subject, fact.predicate, fact.object, knowledge) for fact in facts]
        quads += [Quad(activity, TG.kept, fact, source) for fact in facts
                  if self._loaded_as_rdf(fact, knowledge, source)]
        for term, name in labels.items():
            if term in used:
                quads += [Quad(term, RDFS.label, Literal(name), knowledge), Quad(activity, TG.labelled, term, source)]
        return quads

    def _loaded_as_rdf(self, fact: Triple, knowledge: NamedNode, source: NamedNode) -> bool:
        """Whether the collection holds ``fact`` already, and either no document's subgraph states it or
        an earlier ingest found it so."""
        if next(self.store.quads(fact.subject, fact.predicate, fact.object, knowledge), None) is None:
            return False
        return (next(self.store.quads(None, TG.contains, fact, None), None) is None
                or next(self.store.quads(None, TG.kept, fact, source), None) is not None)

    def _agent(self) -> tuple[NamedNode, str]:
        if self.llm is None:
            return vocab.agent_iri(MENTIONS_ONLY), MENTIONS_ONLY
        label = f"{EXTRACTOR} with {self.llm.model}; prompts {', '.join(prompt_versions())}"
        return vocab.agent_iri(label), label

    def _settings(self, options: IngestOptions, report: IngestReport) -> list[tuple[NamedNode, Literal]]:
        """The activity's own properties: extraction settings and what it produced."""
        integer = vocab.integer_literal
        settings: list[tuple[NamedNode, Literal]] = [
            (TG.chunkSize, integer(options.chunk_size)), (TG.chunkOverlap, integer(options.chunk_overlap)),
            (TG.pageCount, integer(report.pages)), (TG.chunkCount, integer(report.chunks)),
            (TG.factCount, integer(report.facts)), (TG.warningCount, integer(len(report.warnings)))]
        settings += [(TG.warning, Literal(warning)) for warning in report.warnings[:MAX_WARNINGS_KEPT]]
        if self.llm is not None:
            settings.append((TG.llmModel, Literal(self.llm.model)))
            settings += [(TG.promptVersion, Literal(version)) for version in prompt_versions()]
        return settings

    def _unchanged(self, doc_id: str, collection: str) -> IngestReport:
        (known,) = list_documents(self.store, collection, vocab.document_iri(doc_id))
        return IngestReport(doc_id, known["iri"], known["title"] or "", known["media_type"] or "", collection,
                            unchanged=True)


def _added_labels(quads: list[Quad], knowledge: NamedNode) -> list[tuple[str, Literal, bool]]:
    """The ``rdfs:label``s ``quads`` add to the collection graph ``knowledge``, as label indexes take them
    (none for an offline ingest, which writes no knowledge)."""
    written = [q for q in quads if q.graph_name == knowledge]
    predicates = {q.predicate for q in written}
    return [(q.subject.value, q.object, q.subject in predicates) for q in written if q.predicate == RDFS.label]
