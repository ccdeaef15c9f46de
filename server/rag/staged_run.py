"""What GraphRAG and document RAG share: a question run as stages that stream messages, recorded as
they complete, ending with one final message or one error message.

A subclass writes ``_stages``, which yields the answer's messages and a typed result per stage
(``server.stages``); ``run`` checks the question and the collection, hands each result to the sink it was given
(``server.explain.stream.ExplainStream`` records it and makes it an explain message; none when not
explainable), turns a failed stage into an error message recorded on the session, and a client that left into
a cancelled session.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from server.errors import BadRequest, ErrorType, GlassgraphError
from server.rag.llm import LLM, LLMError
from server.rag.messages import GraphRagResponse
from server.stages import SESSION, STAGES, SessionStarted, StageResult, stage_of
from server.store_base import StoreBackend

log = logging.getLogger(__name__)
DONE = "done"  # the run's last stage is recorded: a client that leaves now leaves it answered


class RecordError(RuntimeError):
    """A sink could not record a stage: the store refused the write (``store-error``)."""


class StageSink(Protocol):
    """Where a run's stage results go, one sink per run."""

    session_id: str

    def send(self, result: StageResult) -> GraphRagResponse:
        """Take ``result`` (raising :class:`RecordError` when it cannot be kept); the stream's explain message."""

    def error(self, error_type: str, message: str) -> None:
        """The run failed or its client left: say so."""


@dataclass
class Progress:
    stage: str = SESSION.kind
    outcome: str | None = None  # "answered" or "no-answer" once the answer is complete


class StagedRun:
    """A question's stages over one store with one LLM; ``session_label`` names the session in its trace; ``sinks``
    makes an explainable run's sink (None: nothing is recorded)."""

    session_label = SessionStarted.label  # the dataclass's default

    def __init__(self, store: StoreBackend, llm: LLM, sinks: Callable[[StoreBackend], StageSink] | None) -> None:
        self.store = store
        self.llm = llm
        self.sinks = sinks

    def run(self, question: str, collection: str = "default", explainable: bool = True,
            limits: object = None) -> Iterator[GraphRagResponse]:
        """The message stream for one question; never raises for a failed stage."""
        question = (question or "").strip()
        try:
            self._check(question, collection)
        except GlassgraphError as exc:
            yield failure(exc.type, exc.message)
            return
        sink = self.sinks(self.store) if explainable and self.sinks else None
        progress = Progress()
        try:
            for item in self._stages(question, collection, limits, progress):
                if isinstance(item, GraphRagResponse):
                    yield item
                elif sink:
                    message = sink.send(item)
                    if stage_of(item) is STAGES[-1]:
                        progress.stage = DONE
                    yield message
        except GeneratorExit:  # the client went away: say so in the trace, then stop
            if progress.stage != DONE:
                self._record_error(sink, ErrorType.CANCELLED, f"{progress.stage}: the client closed the stream")
            raise
        except Exception as exc:  # the stream must end with an error message, not break
            yield self._fail(sink, *_failure_of(exc, progress.stage))
            return
        yield GraphRagResponse("chunk", end_of_stream=True, end_of_session=True, outcome=progress.outcome)

    def _stages(self, question: str, collection: str, limits: object,
                progress: Progress) -> Iterator[GraphRagResponse | StageResult]:
        raise NotImplementedError

    def _check(self, question: str, collection: str) -> None:
        if not question:
            raise BadRequest("the question is empty")
        self.store.require_collection(collection)

    def _fail(self, sink: StageSink | None, error_type: ErrorType, message: str) -> GraphRagResponse:
        self._record_error(sink, error_type, message)
        return failure(error_type, message)

    @staticmethod
    def _record_error(sink: StageSink | None, error_type: ErrorType, message: str) -> None:
        if sink is None:
            return
        try:
            sink.error(error_type.wire_name, message)
        except Exception:  # the store itself may be what failed
            log.exception("could not record the error of session %s", sink.session_id)


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
