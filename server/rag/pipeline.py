"""The GraphRAG pipeline: a generator of messages, recording its explainability as it goes.

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
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pyoxigraph import Quad, Triple

from server import vocab
from server.config import Config
from server.errors import BadRequest, ErrorType, GlassgraphError, LLMFailed, NotFound
from server.explain import wire
from server.explain.recorder import ExplainRecorder, RecordError, selection_facts
from server.rag.choice import Choice, choose_edges
from server.rag.citations import unsupported_sentences
from server.rag.llm import LLM, NO_ANSWER, LLMError
from server.rag.messages import GraphRagResponse
from server.rag.offline import extractive_answer
from server.rag.providers import make_llm
from server.rag.retrieval import RetrievalLimits, Retriever
from server.store import GraphStore

log = logging.getLogger(__name__)


class GraphRag:
    """Retrieve -> select -> synthesize, over one store with one LLM."""

    def __init__(self, store: GraphStore, retriever: Retriever, llm: LLM, check_answers: bool = True) -> None:
        self.store = store
        self.retriever = retriever
        self.llm = llm
        self.check_answers = check_answers  # a model's unsupported answer gives way to the deterministic one

    def run(self, question: str, collection: str = "default", explainable: bool = True,
            limits: RetrievalLimits | None = None) -> Iterator[GraphRagResponse]:
        """The message stream for one question; never raises for a failed stage."""
        question = (question or "").strip()
        try:
            self._check(question, collection)
        except GlassgraphError as exc:
            yield _failure(exc.type, exc.message)
            return
        recorder = ExplainRecorder(self.store, collection, self.llm.model) if explainable else None
        progress = _Progress()
        try:
            yield from self._stages(question, collection, limits, recorder, progress)
        except GeneratorExit:  # the client went away: say so in the trace, then stop
            if progress.stage != "done":
                self._record_error(recorder, ErrorType.CANCELLED, f"{progress.stage}: the client closed the stream")
            raise
        except Exception as exc:  # the stream must end with an error message, not break
            yield self._fail(recorder, *_failure_of(exc, progress.stage))
            return
        yield GraphRagResponse("chunk", end_of_stream=True, end_of_session=True, outcome=progress.outcome)

    def _stages(self, question: str, collection: str, limits: RetrievalLimits | None,
                recorder: ExplainRecorder | None, progress: _Progress) -> Iterator[GraphRagResponse]:
        """Session, retrieval, selection, synthesis and answer, each stage's messages as it runs;
        ``progress.stage`` names the stage in hand."""
        if recorder:
            yield self._explain(recorder.session(question), recorder.written)
        progress.stage = "retrieval"
        graph = self.retriever.get_labelgraph(question, collection, limits)
        triples = {edge_id: Triple(*terms) for edge_id, terms in graph.uri_map.items()}
        labeled = dict(zip(graph.edge_ids, graph.labeled_edges, strict=True))
        if recorder:
            iri = recorder.retrieval(len(graph.uri_map), triples.values(), graph.seeds, graph.seed_reasons)
            yield self._explain(iri, recorder.written + wire.label_quads(
                ((triples[edge_id], labeled[edge_id]) for edge_id in graph.edge_ids), collection))
        progress.stage = "selection"
        choice = choose_edges(self.llm, question, labeled, graph.relation_aliases)
        if recorder:
            chosen = [triples[edge_id] for edge_id, _, _ in choice.edges]
            iri = recorder.selection([(triples[edge_id], reasoning, by) for edge_id, reasoning, by in choice.edges],
                                     selection_facts(choice, triples))
            labels = wire.label_quads(((triples[edge_id], labeled[edge_id]) for edge_id, _, _ in choice.edges),
                                      collection)
            yield self._explain(iri, recorder.written + labels + wire.source_quads(self.store, chosen, collection))
        progress.stage = "synthesis"
        pieces = []
        selected = [labeled[edge_id] for edge_id, _, _ in choice.edges]
        answer = self.llm.answer(question, selected) if choice.edges else iter([NO_ANSWER])
        check = AnswerCheck([])
        if self.check_answers and choice.edges and not getattr(self.llm, "deterministic", False):
            answer = list(answer)  # read whole before any of it is sent: it may be replaced
            check = check_answer(question, selected, "".join(answer))
            answer = [check.replacement] if check.replacement else answer
        for piece in itertools.chain(answer, [completeness_note(choice, selected)] if choice.edges else []):
            if piece:
                pieces.append(piece)
                yield GraphRagResponse("chunk", response=piece)
        if not "".join(pieces).strip():
            raise LLMFailed("the LLM returned an empty answer")
        progress.stage = "answer"
        if recorder:
            answer_iri = recorder.answer("".join(pieces), choice.outcome, len(choice.edges),
                                         check.unsupported, check.fallback_reason)
            progress.stage = "done"
            yield self._explain(answer_iri, recorder.written)
        progress.outcome = choice.outcome

    def _check(self, question: str, collection: str) -> None:
        if not question:
            raise BadRequest("the question is empty")
        try:
            known = self.store.has_collection(collection)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        if not known:
            raise NotFound(f"no collection {collection!r}")

    def _explain(self, explain_id: str, quads: list[Quad]) -> GraphRagResponse:
        """An explain message with the step's triples inline (``explain_triples``)."""
        return GraphRagResponse("explain", explain_id=explain_id, explain_collection=self.store.explain_collection,
                                explain_kind=vocab.explain_kind(explain_id),
                                explain_triples=[wire.quad_wire(quad) for quad in quads])

    def _fail(self, recorder: ExplainRecorder | None, error_type: ErrorType, message: str) -> GraphRagResponse:
        self._record_error(recorder, error_type, message)
        return _failure(error_type, message)

    @staticmethod
    def _record_error(recorder: ExplainRecorder | None, error_type: ErrorType, message: str) -> None:
        if recorder is None:
            return
        try:
            recorder.error(error_type.wire_name, message)
        except Exception:  # the store itself may be what failed
            log.exception("could not record the error of session %s", recorder.session_id)


@dataclass
class _Progress:
    stage: str = "session"
    outcome: str | None = None  # "answered" or "no-answer" once the answer is complete


def _failure_of(exc: Exception, stage: str) -> tuple[ErrorType, str]:
    """The error type and message a stage's exception ends the stream with."""
    if isinstance(exc, GlassgraphError):
        return exc.type, f"{stage}: {exc.message}"
    if isinstance(exc, LLMError):
        return ErrorType.LLM_FAILED, f"{stage}: {exc}"
    if isinstance(exc, (RecordError, OSError)):
        log.exception("store failure during %s", stage)
        return ErrorType.STORE_FAILED, f"{stage}: {exc}"
    log.exception("GraphRAG failure during %s", stage)
    return ErrorType.INTERNAL, f"{stage}: {type(exc).__name__}: {exc}"


def _failure(error_type: ErrorType, message: str) -> GraphRagResponse:
    return GraphRagResponse("chunk", error={"type": error_type.wire_name, "message": message},
                            end_of_stream=True, end_of_session=True)


def make_graph_rag(store: GraphStore, config: Config) -> GraphRag:
    """A pipeline with the configured LLM; build it once per store (the retriever caches labels)."""
    return GraphRag(store, Retriever(store), make_llm(config), config.check_answers)


@dataclass
class AnswerCheck:
    """A model's answer checked against its edges: the sentences that name what no selected edge holds
    and, when the deterministic answer replaces it, why and that answer."""

    unsupported: list[str]
    fallback_reason: str | None = None
    replacement: str | None = None


def check_answer(question: str, selected: list[tuple[str, str, str]], text: str) -> AnswerCheck:
    """``text``'s unsupported sentences (``citations.unsupported_sentences``); with any, the deterministic
    answer of the ``selected`` edges replaces it."""
    unsupported = unsupported_sentences(text, question, dict(enumerate(selected, start=1)), selected)
    if not unsupported:
        return AnswerCheck([])
    return AnswerCheck(unsupported, f"{len(unsupported)} sentence(s) of the model's answer name what no selected "
                       "edge holds; the deterministic answer replaces it", extractive_answer(selected))


def completeness_note(choice: Choice, selected: list[tuple[str, str, str]]) -> str:
    """The answer's last words on its selection: cut (how many relevant edges were left out) or, for a list
    (a relation with more than one selected edge), complete."""
    if choice.cut:
        return f" Cut: {choice.cut} more relevant edge(s) were left out of this answer."
    relations = [p for _, p, _ in selected]
    if len(set(relations)) < len(relations):
        return f" Complete: the answer rests on all {len(selected)} relevant edges found."
    return ""
