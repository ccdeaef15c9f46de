"""Writes one session's explainability entities (docs/architecture.md, 'Data model'), each atomically: a
stage result (``server.stages``) becomes its stage's quads, in one transaction.

Besides the seed specification's triples, the session carries ``tg:model`` (the LLM that produced the trace, a
literal such as "offline" or "gpt-4o-mini") and ``tg:collection`` (the collection queried, a literal). A stage
that fails adds ``tg:errorType`` and ``tg:error`` literals to the session, so a failed session still says what
happened.
"""
from __future__ import annotations

import uuid

from pyoxigraph import Literal, Quad

from server.rag.staged_run import RecordError
from server.stages import SESSION, Stage, StageResult, stage_of
from server.store_base import StoreBackend
from server.vocab import TG


class ExplainRecorder:
    """Records the entities of one session in ``store.explain_graph``; each call is one transaction."""

    def __init__(self, store: StoreBackend, session_id: str | None = None) -> None:
        self.store = store
        self.graph = store.explain_graph
        self.session_id = session_id or str(uuid.uuid4())
        self.started = False  # the session entity is written

    def record(self, result: StageResult) -> tuple[Stage, list[Quad]]:
        """Write ``result`` as its stage's entity; returns the stage and the quads written."""
        stage = stage_of(result)
        quads = stage.quads(self.graph, self.session_id, result)
        self._write(quads)
        self.started = self.started or stage is SESSION
        return stage, quads

    def _write(self, quads: list[Quad]) -> None:
        """Write ``quads`` in one transaction, or none of them (``RecordError``)."""
        try:
            self.store.record_trace(quads)
        except Exception as exc:  # pyoxigraph raises OSError, RuntimeError or ValueError here
            raise RecordError(f"cannot write the explainability trace: {exc}") from exc

    def error(self, error_type: str, message: str) -> None:
        """Mark the session as failed (nothing is written if the session itself was not)."""
        if not self.started:
            return
        iri = SESSION.iri(self.session_id)
        self._write([Quad(iri, TG.errorType, Literal(error_type), self.graph),
                     Quad(iri, TG.error, Literal(message), self.graph)])
