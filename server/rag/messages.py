"""The message schema of the GraphRAG stream (docs/architecture.md, 'Message schema')."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class GraphRagResponse:
    """One message of the stream: a ``chunk`` of the answer (or the final/error message) or an ``explain`` event."""

    message_type: str  # "chunk" | "explain"
    response: str = ""
    error: dict | None = None  # {"type": ..., "message": ...}
    end_of_stream: bool = False
    end_of_session: bool = False
    explain_id: str | None = None
    explain_collection: str | None = None
    explain_kind: str | None = None  # the stage's kind (server/stages.py): clients need not parse IRIs
    outcome: str | None = None  # on the final message: "answered" or "no-answer" (the graph does not answer it)
    explain_triples: list[dict] | None = None  # explain messages: the step's triples (server/explain/wire.py)

    def to_dict(self) -> dict:
        """Every field, JSON-ready; the values are shared, not copied (``dataclasses.asdict`` deep-copied an
        explain message's triples: half of a GraphRAG question's CPU on the sample)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}
