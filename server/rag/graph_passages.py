"""Graph + passages (``passages`` in a GraphRAG request): beside its selected edges, an answer may rest on
text, the chunks that state those edges (their extraction sources) and the collection's best passages for
the question (``server.rag.passage_index``).

The passages are numbered after the edges, so one series of ``[n]`` marks cites both; the marks that name
a passage are recorded as cited spans, as document RAG records them. A model is given the edges and the
passages that fit its context. The offline answer still comes from the edges alone; when no edge answers,
it is the passages' best sentences (``server.rag.passage_answer``) instead of "no answer".
"""
from __future__ import annotations

from dataclasses import dataclass

from pyoxigraph import Triple

from server.provenance import source_chains_many
from server.rag.llm import LLM, PROMPT_CHARS_PER_TOKEN, passages_that_fit
from server.rag.passage_answer import Span, answering_sentences, extractive_passage_answer, used_passages
from server.rag.passage_index import Passage, PassageIndex
from server.store_base import StoreBackend

EDGE_LINE_CHARS = 80  # a selected edge's line in the answer prompt, to reserve its tokens


@dataclass(frozen=True)
class ContextPassage:
    """A passage given to the answer: its chunk, text and rank among the retrieved passages (None: it was
    not retrieved for the question but states a selected edge)."""

    chunk: str
    text: str
    rank: int | None


def stating_passages(store: StoreBackend, chosen: list[Triple], collection: str, limit: int) -> list[ContextPassage]:
    """The chunk each of the ``chosen`` edges was extracted from (its first source), in the edges' order,
    each chunk once and at most ``limit``."""
    chains = source_chains_many(store, chosen, collection)
    found: dict[str, ContextPassage] = {}
    for edge in chosen:
        for chain in chains.get(edge, []):
            chunk = chain[0]
            if chunk["type"] == "Chunk" and chunk.get("text"):
                found.setdefault(chunk["iri"], ContextPassage(chunk["iri"], chunk["text"], None))
                break
    return list(found.values())[:limit]


def model_context(llm: LLM, stating: list[ContextPassage], retrieved: list[Passage],
                  edge_count: int) -> list[ContextPassage]:
    """What a model is given beside ``edge_count`` edges: the stating passages, then the retrieved ones
    (each chunk once, with its retrieval rank), as many as fit its context."""
    passages = {p.chunk: p for p in stating}
    for rank, passage in enumerate(retrieved, start=1):  # a stating chunk retrieved too keeps its place
        passages[passage.chunk] = ContextPassage(passage.chunk, passage.text, rank)
    context = list(passages.values())
    return context[:passages_that_fit(llm, [p.text for p in context],
                                      int(edge_count * EDGE_LINE_CHARS / PROMPT_CHARS_PER_TOKEN))]


def offline_context(question: str, collection: str, retrieved: list[Passage],
                    index: PassageIndex) -> tuple[list[ContextPassage], str, list[Span]]:
    """When no edge answers ``question`` offline: the retrieved passages whose sentences answer it, and the
    answer made of those sentences (marks counted among those passages) with its spans."""
    sentences, _ = answering_sentences(question, collection, retrieved, index)
    used = used_passages(sentences)
    text, spans = extractive_passage_answer(sentences, [p.chunk for p in retrieved], used)
    return [ContextPassage(retrieved[i].chunk, retrieved[i].text, i + 1) for i in used], text, spans
