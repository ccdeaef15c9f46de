"""The services of one server process, built once at start-up and handed to the Flask app.

The store and the decision whether it is a remote engine, the query workers, the document readers, the
GraphRAG pipeline (its retriever keeps the label index of each collection), the document RAG pipeline (its
passage index), the ingest queue sharing both indexes, and the per-process limits on questions. Blueprints
read them from here (``http.context``); none builds a service of its own, so two blueprints never hold two
label indexes of one store.

An LLM that cannot be set up (``GLASSGRAPH_LLM=openai`` with no key and no base URL) does not stop the
server: the SPARQL endpoint and the console work, and each question or upload is refused with the reason
(``providers.llm_ready`` words it, for the CLIs too).
"""
from __future__ import annotations

import threading

from server.answering import make_document_rag, make_graph_rag
from server.config import Config
from server.errors import EmbeddingsFailed, LLMFailed
from server.explain.retention import AutoPrune
from server.http.document_readers import DocumentReaders
from server.http.query_workers import QueryWorkers
from server.http.question_rate import QuestionRate
from server.ingest.documents import Ingester
from server.ingest.jobs import IngestJobs
from server.rag.document_rag import DocumentRag
from server.rag.passage_index import make_passage_index
from server.rag.pipeline import GraphRag
from server.rag.providers import llm_ready, make_extractor
from server.remote_store import RemoteStore
from server.store_base import StoreBackend


class Runtime:
    """One process's services over ``store`` with ``config`` (see the module docstring)."""

    def __init__(self, config: Config, store: StoreBackend) -> None:
        self.config, self.store = config, store
        self.remote = isinstance(store, RemoteStore)  # the engine evaluates clients' queries itself
        # a question's run can wait on another process besides its LLM: an engine, an embeddings server, Qdrant
        self.answers_wait = self.remote or config.embeddings != "wordllama" or config.vectors != "local"
        self.queries: QueryWorkers | None = None  # None: an in-memory store, queried in the request's thread
        if self.remote or (store.path is not None and config.query_workers > 0):
            # a remote engine evaluates, but worker processes still check what is sent
            self.queries = QueryWorkers(
                None if self.remote else store.path, max(config.query_workers, 1), config.query_memory_mb, store,
                config.long_queries, config.queue_per_client, config.long_after_s, config.queue_wait_s)
        self.readers = DocumentReaders(config.document_read_s, config.document_memory_mb)
        self.answer_slots = threading.BoundedSemaphore(config.max_answers)
        self.question_rate = QuestionRate(config.question_rate)
        self.auto_prune = AutoPrune(config.retention)
        self._rag: GraphRag | None = None
        self._document_rag: DocumentRag | None = None
        self._jobs: IngestJobs | None = None
        self._llm_error = ""  # why there is no pipeline
        self._embeddings_error = ""  # why there is no passage index (document RAG only)
        passages = None
        try:
            passages = make_passage_index(store, config)
        except EmbeddingsFailed as exc:
            self._embeddings_error = str(exc)
        try:
            self._rag = llm_ready(lambda: make_graph_rag(store, config, passages))
            if self._embeddings_error:
                self._rag.passages_error = self._embeddings_error
            if passages is not None:
                self._document_rag = make_document_rag(store, passages, self._rag.llm, config.check_answers)
            self._jobs = IngestJobs(Ingester(store, self._rag.retriever.index,
                                             llm_ready(lambda: make_extractor(config)), passages))
        except LLMFailed as exc:
            self._llm_error = str(exc)

    @property
    def pipeline(self) -> GraphRag:
        """The GraphRAG pipeline; :class:`LLMFailed` when the LLM cannot be set up."""
        if self._rag is None:
            raise LLMFailed(self._llm_error)
        return self._rag

    @property
    def document_rag(self) -> DocumentRag:
        """The document RAG pipeline; :class:`LLMFailed` as for the pipeline, :class:`EmbeddingsFailed` when the
        embeddings setting cannot work (documents are then ingested without passages)."""
        if self._rag is None:
            raise LLMFailed(self._llm_error)
        if self._document_rag is None:
            raise EmbeddingsFailed(self._embeddings_error)
        return self._document_rag

    @property
    def ingest_jobs(self) -> IngestJobs:
        """The queue of uploaded documents, one extraction at a time; :class:`LLMFailed` as for the pipeline."""
        if self._jobs is None:
            raise LLMFailed(self._llm_error)
        return self._jobs

    @property
    def queued_jobs(self) -> IngestJobs | None:
        """The ingest queue when there is one (listing documents needs no LLM)."""
        return self._jobs

    def close(self) -> None:
        """Stop the worker processes (a test's server; a production server ends with its process)."""
        if self.queries is not None:
            self.queries.close()
        self.readers.close()
