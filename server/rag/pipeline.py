"""The GraphRAG pipeline: a generator of messages and of its stages' results, which the sink it is given records
as it goes (``server.rag.staged_run``).

Order (docs/architecture.md, 'The GraphRAG pipeline'): explain(session), explain(retrieval), explain(selection), answer
chunks, explain(answer), final chunk (``end_of_stream`` and ``end_of_session``). A failure ends the
stream with one message carrying ``error`` and ``end_of_session``; the session records the error
(``tg:errorType``, ``tg:error``). Each entity is written in one transaction and the answer entity
together with its text, so a failure never leaves half an entity or an answer without text.

"I don't know" is an answer: when nothing retrieved is relevant (no edge, the model chose none, or
the deterministic fallback found none), the answer says that the graph does not answer the
question, its entity records ``tg:outcome "no-answer"`` (else ``"answered"``) and the final message
carries the outcome.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyoxigraph import NamedNode, Triple

from server.errors import EmbeddingsFailed, LLMFailed
from server.rag.choice import Choice, choose_edges, selection_facts
from server.rag.citations import citations, unsupported_sentences
from server.rag.graph_passages import ContextPassage, model_context, offline_context, stating_passages
from server.rag.llm import LLM, NO_ANSWER, render_prompt
from server.rag.messages import GraphRagResponse
from server.rag.offline import extractive_answer
from server.rag.passage_answer import Span, cited_spans
from server.rag.passage_index import Passage, PassageIndex, query_terms
from server.rag.retrieval import RetrievalLimits, Retriever
from server.rag.staged_run import Progress, StagedRun, StageSink
from server.rag.unread_members import unread_members
from server.stages import (
    ANSWER,
    RETRIEVAL,
    SELECTION,
    Answered,
    EdgesRetrieved,
    EdgesSelected,
    SessionStarted,
    StageResult,
)
from server.store import GraphStore


class GraphRag(StagedRun):
    """Retrieve -> select -> synthesize, over one store with one LLM."""

    def __init__(self, store: GraphStore, retriever: Retriever, llm: LLM, check_answers: bool = True,
                 passages: PassageIndex | None = None, *, sinks: Callable[[GraphStore], StageSink] | None) -> None:
        super().__init__(store, llm, sinks)
        self.retriever = retriever
        self.check_answers = check_answers  # a model's unsupported answer gives way to the deterministic one
        self.passages = passages  # for graph + passages (None: the embeddings setting cannot work)
        self.passages_error = "no passage index"  # why there is none

    def _stages(self, question: str, collection: str, limits: RetrievalLimits | None,
                progress: Progress) -> Iterator[GraphRagResponse | StageResult]:
        """Session, retrieval, selection, synthesis and answer: each stage's result and the answer's messages as it
        runs; ``progress.stage`` names the stage in hand."""
        yield SessionStarted(question, self.llm.model, collection, self.session_label)
        progress.stage = RETRIEVAL.kind
        graph = self.retriever.get_labelgraph(question, collection, limits)
        triples = {edge_id: Triple(*terms) for edge_id, terms in graph.uri_map.items()}
        labeled = dict(zip(graph.edge_ids, graph.labeled_edges, strict=True))
        retrieved = self._retrieved_passages(question, collection, limits)
        yield EdgesRetrieved([(triples[edge_id], labeled[edge_id]) for edge_id in graph.edge_ids], graph.seeds,
                             graph.seed_reasons, query_terms(question) if retrieved else [],
                             [(NamedNode(p.chunk), p.lexical, p.semantic, p.fused) for p in retrieved],
                             graph.seed_names)
        progress.stage = SELECTION.kind
        choice = choose_edges(self.llm, question, labeled, graph.relation_aliases)
        chosen = [triples[edge_id] for edge_id, _, _ in choice.edges]
        choice.cut += unread_members(self.store, collection, chosen, triples.values())
        selected = [labeled[edge_id] for edge_id, _, _ in choice.edges]
        context, offline = self._context(question, collection, chosen, retrieved, limits)
        yield EdgesSelected([(triples[edge_id], reasoning, by) for edge_id, reasoning, by in choice.edges], selected,
                            selection_facts(choice, triples), [p.rank for p in context if p.rank])
        progress.stage = "synthesis"
        pieces = []
        answer, spans = ([offline[0]], offline[1]) if offline else self._answer(question, selected, context)
        check = AnswerCheck([])
        if self.check_answers and (choice.edges or context) and not getattr(self.llm, "deterministic", False):
            answer = list(answer)  # read whole before any of it is sent: it may be replaced
            asked = [n for n, (edge_id, _, _) in enumerate(choice.edges, start=1) if edge_id in choice.asked]
            check = check_answer(question, selected, "".join(answer), context, asked if choice.asked else None)
            if check.replacement is not None:
                answer, spans = [check.replacement], check.spans
        for piece in itertools.chain(answer, [completeness_note(choice, selected)] if choice.edges else []):
            if piece:
                pieces.append(piece)
                yield GraphRagResponse("chunk", response=piece)
        if not "".join(pieces).strip():
            raise LLMFailed("the LLM returned an empty answer")
        text = "".join(pieces)
        spans = spans if spans is not None else cited_spans(text, [(p.chunk, p.text) for p in context],
                                                            len(selected) + 1)
        outcome = "answered" if spans else choice.outcome
        progress.stage = ANSWER.kind
        valid, invalid = citations(text, len(choice.edges) + len(context))
        yield Answered(text, outcome=outcome, cited=[n for n in valid if n <= len(choice.edges)], invalid=invalid,
                       spans=spans, unsupported=check.unsupported, fallback_reason=check.fallback_reason)
        progress.outcome = outcome

    def _retrieved_passages(self, question: str, collection: str, limits: RetrievalLimits | None) -> list[Passage]:
        """The collection's best passages for the question when the request asks for passages."""
        if limits is None or not limits.passages:
            return []
        if self.passages is None:
            raise EmbeddingsFailed(f"passages cannot be searched: {self.passages_error}")
        return self.passages.search(collection, question, limits.passages)

    def _context(self, question: str, collection: str, chosen: list[Triple], retrieved: list[Passage],
                 limits: RetrievalLimits | None) -> tuple[list[ContextPassage], tuple[str, list[Span]] | None]:
        """The passages the answer is given beside the edges (see ``server.rag.graph_passages``) and, offline
        when no edge answers, the answer made of their sentences with its spans."""
        if not retrieved:
            return [], None
        if not getattr(self.llm, "deterministic", False):
            stating = stating_passages(self.store, chosen, collection, limits.passages)
            return model_context(self.llm, stating, retrieved, len(chosen)), None
        if chosen:
            return [], None
        context, text, spans = offline_context(question, collection, retrieved, self.passages)
        return context, ((text, spans) if context else None)

    def _answer(self, question: str, selected: list[tuple[str, str, str]],
                context: list[ContextPassage]) -> tuple[Iterator[str] | list[str], list[Span] | None]:
        """A model's (or the offline) answer's pieces and, when known before it is read, the spans it cites
        (None: read from the model's marks)."""
        if context:
            return self.llm.stream(render_prompt("synthesize", question=question, edges=selected,
                                                 passages=[p.text for p in context])), None
        return (self.llm.answer(question, selected) if selected else iter([NO_ANSWER])), []


@dataclass
class AnswerCheck:
    """A model's answer checked against its edges: the sentences that name what no selected edge holds
    and, when the deterministic answer replaces it, why and that answer."""

    unsupported: list[str]
    fallback_reason: str | None = None
    replacement: str | None = None
    spans: list[Span] | None = None  # the replacement's cited spans


def check_answer(question: str, selected: list[tuple[str, str, str]], text: str,
                 context: list[ContextPassage] = (), asked: list[int] | None = None) -> AnswerCheck:
    """``text``'s unsupported sentences (``citations.unsupported_sentences``; the ``context`` passages are
    numbered after the edges); with any, the deterministic answer replaces it: of the ``selected`` edges, or of
    those ``asked`` for (their numbers: the edges the deterministic selector chose too, when it chose any), so
    that a model that chose and answered beside the question is not followed by its edges' unrelated facts."""
    numbered = dict(enumerate(selected, start=1)) | {len(selected) + n: (p.text,)
                                                     for n, p in enumerate(context, start=1)}
    unsupported = unsupported_sentences(text, question, numbered, selected)
    if not unsupported:
        return AnswerCheck([])
    reason = f"{len(unsupported)} sentence(s) of the model's answer name what no selected edge or passage holds"
    numbers = list(range(1, len(selected) + 1)) if asked is None else asked
    if selected and not numbers:
        return AnswerCheck(unsupported, f"{reason}, and none of its edges is one the question asks for: no answer",
                           NO_ANSWER, [])
    return AnswerCheck(unsupported, f"{reason}; the deterministic answer replaces it",
                       extractive_answer([selected[n - 1] for n in numbers], numbers) if selected else NO_ANSWER, [])


def completeness_note(choice: Choice, selected: list[tuple[str, str, str]]) -> str:
    """The answer's last words on its selection: cut (how many relevant edges were left out) or, for a list
    (a relation with more than one selected edge), complete."""
    if choice.cut:
        return f" Cut: {choice.cut} more relevant edge(s) were left out of this answer."
    relations = [p for _, p, _ in selected]
    if len(set(relations)) < len(relations):
        return f" Complete: the answer rests on all {len(selected)} relevant edges found."
    return ""
