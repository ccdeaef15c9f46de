"""Reading a document RAG session's passages back: what was retrieved (with scores and query terms),
which passages the answer used, and the spans its sentences rest on, each with its chunk's chain
(chunk -> page -> document) and the quoted text."""
from __future__ import annotations

from pyoxigraph import NamedNode

from server import vocab
from server.provenance import Chain, chunk_chains_many
from server.stages import SELECTION, session_id_of
from server.store_base import StoreBackend


def read_passages(store: StoreBackend, retrieval: NamedNode, answer: NamedNode | None,
                  collection: str | None) -> dict:
    """``{"query_terms", "passages", "spans", "unmentioned"}`` of a document RAG session (empty lists for a
    GraphRAG one without passages); ``unmentioned``: the question's names that no passage mentions.

    A passage is ``{"rank", "chunk", "lexical", "semantic", "fused", "selected", "chain"}``; a span
    ``{"mark", "chunk", "offset", "length", "quote", "chain"}``, its offset within the chunk's text.
    """
    graph = store.explain_graph
    terms = sorted(q.object.value for q in store.quads(retrieval, vocab.TG.queryTerm, graph=graph))
    selection = SELECTION.iri(session_id_of(retrieval.value))
    unmentioned = sorted(q.object.value for q in store.quads(selection, vocab.TG.unmentionedName, graph=graph))
    rows = store.select("explain_passages", values={"entity": [retrieval]}, default_graph=graph)
    span_rows = (store.select("explain_spans", values={"entity": [answer]}, default_graph=graph)
                 if answer is not None else [])
    span_rows.sort(key=lambda row: int(row["span"].value.rsplit(":", 1)[1]))
    chains = chunk_chains_many(store, [row["chunk"] for row in rows + span_rows], collection)
    passages = [{"rank": int(row["rank"].value), "chunk": row["chunk"].value,
                 "lexical": float(row["lexical"].value), "semantic": float(row["semantic"].value),
                 "fused": float(row["fused"].value), "selected": "selected" in row,
                 "chain": chains.get(row["chunk"], [])} for row in rows]
    spans = []
    for row in span_rows:
        offset, length = int(row["offset"].value), int(row["length"].value)
        chain = chains.get(row["chunk"], [])
        spans.append({"mark": int(row["mark"].value), "chunk": row["chunk"].value, "offset": offset,
                      "length": length, "quote": _quote(chain, offset, length), "chain": chain})
    return {"query_terms": terms, "passages": passages, "spans": spans, "unmentioned": unmentioned}


def _quote(chain: Chain, offset: int, length: int) -> str | None:
    """The cited sentence from the chunk's text; None when the chunk is gone or its text no longer holds the
    span (a document ingested again under the same IRIs with other chunk sizes)."""
    text = chain[0].get("text") if chain else None
    return None if text is None or offset + length > len(text) else text[offset:offset + length]
