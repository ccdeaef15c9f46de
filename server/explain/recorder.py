"""Writes one GraphRAG session's explainability entities (docs/architecture.md, 'Data model'), each atomically.

Besides the seed specification's triples, the session carries ``tg:model`` (the LLM that
produced the trace, a literal such as "offline" or "gpt-4o-mini") and ``tg:collection`` (the
collection queried, a literal). A stage that fails adds ``tg:errorType`` and ``tg:error``
literals to the session, so a failed session still says what happened.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from pyoxigraph import Literal, NamedNode, Quad, Triple

from server import vocab
from server.rag.choice import Choice
from server.rag.citations import citations
from server.store import GraphStore
from server.vocab import TG, XSD, Term


class RecordError(RuntimeError):
    """The store refused an explainability write (nothing of that entity was written)."""


class ExplainRecorder:
    """Records the entities of one session in ``store.explain_graph``; each method is one transaction."""

    def __init__(self, store: GraphStore, collection: str, model: str, session_id: str | None = None,
                 session_label: str = "GraphRAG query session") -> None:
        self.store = store
        self.session_label = session_label
        self.graph = store.explain_graph
        self.collection = collection
        self.model = model
        self.session_id = session_id or str(uuid.uuid4())
        self.started = False  # the session entity is written
        self.written: list[Quad] = []  # the quads of the last entity written (the stream's explain_triples)

    def session(self, question: str) -> str:
        """The session entity (question, start time, model, collection); returns its IRI."""
        iri = vocab.session_iri(self.session_id)
        quads = vocab.session_quads(self.graph, self.session_id, question, label=self.session_label)
        quads += [Quad(iri, TG.model, Literal(self.model), self.graph),
                  Quad(iri, TG.collection, Literal(self.collection), self.graph)]
        self._write(quads)
        self.started = True
        return iri.value

    def retrieval(self, edge_count: int, edges: Iterable[Triple] = (), seeds: Iterable[NamedNode] = (),
                  seed_reasons: Iterable[str] = (), terms: Iterable[str] = (),
                  passages: Iterable[tuple[NamedNode, float, float, float]] = ()) -> str:
        """The retrieval entity with the retrieved edges (triple terms), the seeds and, ranked, why each
        was taken (``tg:seedReason`` literals, "1. France: its label is spelled out in the question");
        with ``passages`` (graph + passages), those too, as :meth:`passages` records them."""
        iri = vocab.retrieval_iri(self.session_id)
        passages = list(passages)
        self._write(vocab.retrieval_quads(self.graph, self.session_id, edge_count, edges, seeds)
                    + [Quad(iri, TG.seedReason, Literal(reason), self.graph) for reason in seed_reasons]
                    + (vocab.passage_nodes(self.graph, self.session_id, terms, passages) if passages else []))
        return vocab.retrieval_iri(self.session_id).value

    def selection(self, edges: Iterable[tuple[Triple, str] | tuple[Triple, str, str]],
                  facts: Iterable[tuple[NamedNode, Term]] = (), passages: Iterable[int] = ()) -> str:
        """The selection and its edge-selection nodes (original terms, reasoning, who chose each) in one
        transaction; ``facts`` about the selection (see :func:`selection_facts`); the retrieved ``passages``
        (by rank) given to the answer beside the edges."""
        facts = [*facts, *((TG.selectedPassage, vocab.passage_iri(self.session_id, rank)) for rank in passages)]
        self._write(vocab.selection_quads(self.graph, self.session_id, edges, facts))
        return vocab.selection_iri(self.session_id).value

    def answer(self, text: str, outcome: str | None = None, edge_count: int = 0, unsupported: Iterable[str] = (),
               fallback_reason: str | None = None, passage_count: int = 0,
               spans: Iterable[tuple[int, str, int, int]] = ()) -> str:
        """The answer entity (its ``tg:outcome``, the edges its ``[n]`` marks cite among the ``edge_count``
        selected, a model's sentences that its edges do not hold as ``tg:unsupported`` and, when the
        deterministic answer replaced the model's, ``tg:answerFallback``) and its text (librarian graph) in
        one transaction. With passages beside the edges (numbered after them, ``passage_count``), the
        ``spans`` of them the answer cites, as :meth:`passage_answer` records them."""
        valid, invalid = citations(text, edge_count + passage_count)
        quads = vocab.answer_quads(self.graph, self.session_id, outcome, [n for n in valid if n <= edge_count],
                                   invalid) + vocab.span_nodes(self.graph, self.session_id, spans)
        return self._answer(quads, text, unsupported, fallback_reason)

    def passages(self, terms: Iterable[str], passages: Iterable[tuple[NamedNode, float, float, float]]) -> str:
        """A document RAG retrieval: the query terms and the ranked passages with their scores."""
        self._write(vocab.passage_retrieval_quads(self.graph, self.session_id, terms, passages))
        return vocab.retrieval_iri(self.session_id).value

    def passage_selection(self, ranks: Iterable[int], facts: Iterable[tuple[NamedNode, Term]] = ()) -> str:
        """The passages (by retrieval rank) a document RAG answer was made from."""
        self._write(vocab.passage_selection_quads(self.graph, self.session_id, ranks, facts))
        return vocab.selection_iri(self.session_id).value

    def passage_answer(self, text: str, outcome: str, spans: Iterable[tuple[int, str, int, int]],
                       unsupported: Iterable[str] = (), fallback_reason: str | None = None) -> str:
        """A document RAG answer: its outcome, the spans its marks rest on (``(mark, chunk, offset, length)``),
        a model's unsupported sentences and fallback as for GraphRAG, and its text, in one transaction."""
        quads = vocab.passage_answer_quads(self.graph, self.session_id, outcome, spans)
        return self._answer(quads, text, unsupported, fallback_reason)

    def _answer(self, quads: list[Quad], text: str, unsupported: Iterable[str], fallback_reason: str | None) -> str:
        """Write an answer entity's ``quads`` with its unsupported sentences, its fallback and its text."""
        iri = vocab.answer_iri(self.session_id)
        quads += [Quad(iri, TG.unsupported, Literal(sentence), self.graph) for sentence in unsupported]
        quads += [Quad(iri, TG.answerFallback, Literal(fallback_reason), self.graph)] if fallback_reason else []
        quads += vocab.content_quads(vocab.answer_document_iri(self.session_id), text)
        self._write(quads)
        return iri.value

    def _write(self, quads: list[Quad]) -> None:
        try:
            self.store.record_trace(quads)
        except Exception as exc:  # pyoxigraph raises OSError, RuntimeError or ValueError here
            raise RecordError(f"cannot write the explainability trace: {exc}") from exc
        self.written = quads

    def error(self, error_type: str, message: str) -> None:
        """Mark the session as failed (nothing is written if the session itself was not)."""
        if not self.started:
            return
        iri = vocab.session_iri(self.session_id)
        self._write([Quad(iri, TG.errorType, Literal(error_type), self.graph),
                     Quad(iri, TG.error, Literal(message), self.graph)])


def selection_facts(choice: Choice, edges: Mapping[str, Triple] | None = None) -> list[tuple[NamedNode, Term]]:
    """What a selection records about itself: ``tg:selectionMethod`` ("model", "fallback" or
    "deterministic"), ``tg:fallbackReason``, ``tg:cutEdges`` (relevant edges left out; 0: complete), and what
    the model saw: ``tg:promptEdges``, ``tg:promptBatches``, ``tg:trimmedEdges``, ``tg:promptTokens`` (counted
    or estimated), ``tg:contextTokens`` (configured), ``tg:selectionBatch`` (what became of each batch,
    "N: ..."), ``tg:unofferedEdges`` and, with ``edges`` (edge id -> triple), each ``tg:unofferedEdge``;
    ``tg:llmQueueMs``, the wait for the endpoint."""
    facts: list[tuple[NamedNode, Term]] = [(TG.selectionMethod, Literal(choice.method))]
    if choice.fallback_reason:
        facts.append((TG.fallbackReason, Literal(choice.fallback_reason)))
    counts = {TG.cutEdges: choice.cut, TG.promptEdges: choice.shown, TG.promptBatches: choice.batches,
              TG.trimmedEdges: choice.trimmed, TG.promptTokens: choice.prompt_tokens,
              TG.contextTokens: choice.context_tokens, TG.unofferedEdges: len(choice.unoffered),
              TG.llmQueueMs: round(choice.queued_s * 1000)}
    facts += [(name, Literal(str(value), datatype=XSD.integer)) for name, value in counts.items() if value is not None]
    facts += [(TG.selectionBatch, Literal(entry)) for entry in choice.batch_log]
    facts += [(TG.unofferedEdge, edges[edge_id]) for edge_id in choice.unoffered if edges and edge_id in edges]
    return facts
