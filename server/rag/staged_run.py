"""What GraphRAG and document RAG share: a question run as stages that stream messages, recorded as
they complete, ending with one final message or one error message.

A subclass writes ``_stages``; ``run`` checks the question and the collection, makes the recorder
(none when not explainable), turns a failed stage into an error message recorded on the session, and a
client that left into a cancelled session.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pyoxigraph import Quad

from server import vocab
from server.errors import BadRequest, ErrorType, GlassgraphError, NotFound
from server.explain import wire
from server.explain.recorder import ExplainRecorder, RecordError
from server.rag.llm import LLM, LLMError
from server.rag.messages import GraphRagResponse
from server.store_base import StoreBackend

log = logging.getLogger(__name__)


@dataclass
class Progress:
    stage: str = "session"
    outcome: str | None = None  # "answered" or "no-answer" once the answer is complete


class StagedRun:
    """A question's stages over one store with one LLM; ``session_label`` names the session in its trace."""

    session_label = "GraphRAG query session"

    def __init__(self, store: StoreBackend, llm: LLM) -> None:
        self.store = store
        self.llm = llm

    def run(self, question: str, collection: str = "default", explainable: bool = True,
            limits: object = None) -> Iterator[GraphRagResponse]:
        """The message stream for one question; never raises for a failed stage."""
        question = (question or "").strip()
        try:
            self._check(question, collection)
        except GlassgraphError as exc:
            yield failure(exc.type, exc.message)
            return
        recorder = (ExplainRecorder(self.store, collection, self.llm.model, session_label=self.session_label)
                    if explainable else None)
        progress = Progress()
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

    def _stages(self, question: str, collection: str, limits: object, recorder: ExplainRecorder | None,
                progress: Progress) -> Iterator[GraphRagResponse]:
        raise NotImplementedError

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
        return failure(error_type, message)

    @staticmethod
    def _record_error(recorder: ExplainRecorder | None, error_type: ErrorType, message: str) -> None:
        if recorder is None:
            return
        try:
            recorder.error(error_type.wire_name, message)
        except Exception:  # the store itself may be what failed
            log.exception("could not record the error of session %s", recorder.session_id)


def _failure_of(exc: Exception, stage: str) -> tuple[ErrorType, str]:
    """The error type and message a stage's exception ends the stream with."""
    if isinstance(exc, GlassgraphError):
        return exc.type, f"{stage}: {exc.message}"
    if isinstance(exc, LLMError):
        return ErrorType.LLM_FAILED, f"{stage}: {exc}"
    if isinstance(exc, (RecordError, OSError)):
        log.exception("store failure during %s", stage)
        return ErrorType.STORE_FAILED, f"{stage}: {exc}"
    log.exception("failure during %s", stage)
    return ErrorType.INTERNAL, f"{stage}: {type(exc).__name__}: {exc}"


def failure(error_type: ErrorType, message: str) -> GraphRagResponse:
    """The one message of a run that failed."""
    return GraphRagResponse("chunk", error={"type": error_type.wire_name, "message": message},
                            end_of_stream=True, end_of_session=True)
