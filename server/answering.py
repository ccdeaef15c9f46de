"""The question-answering pipelines as Glassgraph runs them: GraphRAG and document RAG (``server/rag``) with their
traces recorded and streamed by the explain sink (``server.explain.stream``). The pipelines know the sink only
as the ``StageSink`` they are given, so ``server/rag`` imports nothing of ``server/explain``; they meet here."""
from __future__ import annotations

from server.config import Config
from server.explain.stream import ExplainStream
from server.rag.document_rag import DocumentRag
from server.rag.llm import LLM
from server.rag.passage_index import PassageIndex
from server.rag.pipeline import GraphRag
from server.rag.providers import make_llm
from server.rag.retrieval import Retriever
from server.store import GraphStore
from server.store_base import StoreBackend


def make_graph_rag(store: GraphStore, config: Config, passages: PassageIndex | None = None) -> GraphRag:
    """A pipeline with the configured LLM (and ``passages``, for graph + passages); build it once per store
    (the retriever caches labels)."""
    return GraphRag(store, Retriever(store), make_llm(config), config.check_answers, passages, sinks=ExplainStream)


def make_document_rag(store: StoreBackend, index: PassageIndex, llm: LLM, check_answers: bool = True) -> DocumentRag:
    """Document RAG over ``index`` with ``llm``, its traces recorded."""
    return DocumentRag(store, index, llm, check_answers, sinks=ExplainStream)
