"""The explain sink a pipeline is given (``server.rag.staged_run.StageSink``): each stage result recorded
(``ExplainRecorder``) and sent on as the stream's explain message, with the step's triples and what a client
needs to show the step with no other request (``server.explain.wire.step_quads``)."""
from __future__ import annotations

from server.explain import wire
from server.explain.recorder import ExplainRecorder
from server.rag.messages import GraphRagResponse
from server.stages import SessionStarted, StageResult
from server.store_base import StoreBackend


class ExplainStream:
    """Records one session of ``store`` and makes each recorded stage an explain message."""

    def __init__(self, store: StoreBackend) -> None:
        self.store = store
        self.recorder = ExplainRecorder(store)
        self.collection = ""  # the session's, once it is recorded

    @property
    def session_id(self) -> str:
        return self.recorder.session_id

    def send(self, result: StageResult) -> GraphRagResponse:
        """Record ``result``; its explain message (``explain_triples``: what was written, plus labels and sources)."""
        stage, quads = self.recorder.record(result)
        if isinstance(result, SessionStarted):
            self.collection = result.collection
        quads = quads + wire.step_quads(self.store, result, self.collection)
        return GraphRagResponse("explain", explain_id=stage.iri(self.session_id).value,
                                explain_collection=self.store.explain_collection, explain_kind=stage.kind,
                                explain_triples=[wire.quad_wire(quad) for quad in quads])

    def error(self, error_type: str, message: str) -> None:
        """Mark the session as failed."""
        self.recorder.error(error_type, message)
