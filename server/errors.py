"""Every error a user can meet, in one list: its name on the wire, its HTTP status, its exit code.

Code raises a typed error (``raise NotFound(f"no collection {name!r}")``); the HTTP layer answers
its ``status`` with ``{"error": {"type": name, "message": ...}}``, the command line prints the
message and exits with its ``exit_code``, and a GraphRAG stream carries ``{"type", "message"}``.
Nothing chooses a status or an exit code by reading a message.
"""
from __future__ import annotations

from enum import Enum


class ErrorType(Enum):
    """``(name, HTTP status, exit code)``; exit codes: 1 the operation failed, 2 usage, 3 the store
    is held by another process."""

    BAD_REQUEST = ("bad-request", 400, 2)
    UNAUTHORIZED = ("unauthorized", 401, 1)
    FORBIDDEN = ("forbidden", 403, 1)
    NOT_FOUND = ("not-found", 404, 1)
    METHOD_NOT_ALLOWED = ("method-not-allowed", 405, 2)
    NOT_ACCEPTABLE = ("not-acceptable", 406, 2)
    REQUEST_TIMEOUT = ("request-timeout", 408, 1)
    CONTENT_TOO_LARGE = ("content-too-large", 413, 2)
    UNSUPPORTED_MEDIA_TYPE = ("unsupported-media-type", 415, 2)
    UNSUPPORTED_DOCUMENT = ("unsupported-document", 415, 1)  # bytes of no format ingest reads
    LIMIT_EXCEEDED = ("limit-exceeded", 422, 1)
    UNREADABLE_DOCUMENT = ("unreadable-document", 422, 1)  # empty, corrupt, truncated, encrypted
    BUSY = ("busy", 429, 1)
    INTERNAL = ("internal-error", 500, 1)
    STORE_FAILED = ("store-error", 500, 1)
    REMOTE_FAILED = ("remote-error", 502, 1)
    LLM_FAILED = ("llm-error", 502, 1)
    EMBEDDINGS_FAILED = ("embeddings-error", 502, 1)  # the embeddings server: down, or vectors of another size
    UNAVAILABLE = ("unavailable", 503, 1)
    STORE_LOCKED = ("store-locked", 503, 3)
    CANNOT_CONNECT = ("cannot-connect", 503, 3)  # a client's: no connection to the server
    # An outcome of a GraphRAG run that has started (recorded in its trace)
    CANCELLED = ("cancelled", 499, 1)  # the client left: recorded in the trace, never sent

    def __init__(self, wire_name: str, status: int, exit_code: int) -> None:
        self.wire_name, self.status, self.exit_code = wire_name, status, exit_code

    @classmethod
    def of_status(cls, status: int) -> ErrorType:
        """The type for an HTTP status that came from elsewhere (werkzeug's own 404, 405, ...)."""
        return next((t for t in cls if t.status == status), cls.INTERNAL)


class GlassgraphError(Exception):
    """An error with its type; ``headers`` go on an HTTP answer (``Retry-After``, ``WWW-Authenticate``)."""

    type = ErrorType.INTERNAL

    def __init__(self, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}

    @property
    def status(self) -> int:
        return self.type.status

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type.wire_name, "message": self.message}


class BadRequest(GlassgraphError):
    type = ErrorType.BAD_REQUEST


class Unauthorized(GlassgraphError):
    type = ErrorType.UNAUTHORIZED


class Forbidden(GlassgraphError):
    type = ErrorType.FORBIDDEN


class NotFound(GlassgraphError):
    type = ErrorType.NOT_FOUND


class NotAcceptable(GlassgraphError):
    type = ErrorType.NOT_ACCEPTABLE


class RequestTimeout(GlassgraphError):
    type = ErrorType.REQUEST_TIMEOUT


class ClientLeft(GlassgraphError):
    """The client closed its connection while its request was being worked on: the work was stopped, and
    the answer (logged) is sent to nobody."""

    type = ErrorType.CANCELLED


class ContentTooLarge(GlassgraphError):
    type = ErrorType.CONTENT_TOO_LARGE

    @classmethod
    def over_limit(cls, limit: int | None) -> ContentTooLarge:
        """A body over ``GLASSGRAPH_MAX_BODY``: the one wording, however the body was framed."""
        return cls(f"request body larger than the limit of {limit} bytes (GLASSGRAPH_MAX_BODY); nothing of it "
                   "was applied")


class UnsupportedMediaType(GlassgraphError):
    type = ErrorType.UNSUPPORTED_MEDIA_TYPE


class UnsupportedDocument(GlassgraphError):
    """A document whose bytes are of no format ingest reads, or not of the format it claims."""

    type = ErrorType.UNSUPPORTED_DOCUMENT


class UnreadableDocument(GlassgraphError):
    """A document of a known format that cannot be read: empty, corrupt, truncated, encrypted, no pages."""

    type = ErrorType.UNREADABLE_DOCUMENT


class LimitExceeded(GlassgraphError):
    type = ErrorType.LIMIT_EXCEEDED


class Busy(GlassgraphError):
    type = ErrorType.BUSY


class StoreFailed(GlassgraphError):
    type = ErrorType.STORE_FAILED


class RemoteFailed(GlassgraphError):
    type = ErrorType.REMOTE_FAILED


class LLMFailed(GlassgraphError):
    type = ErrorType.LLM_FAILED


class EmbeddingsFailed(GlassgraphError):
    type = ErrorType.EMBEDDINGS_FAILED


class Unavailable(GlassgraphError):
    type = ErrorType.UNAVAILABLE


class StoreLocked(GlassgraphError):
    type = ErrorType.STORE_LOCKED


class CannotConnect(GlassgraphError):
    type = ErrorType.CANNOT_CONNECT


class StoreUnavailable(GlassgraphError):
    """The remote SPARQL engine cannot be reached (or says it is unavailable); the message names its URL."""

    type = ErrorType.UNAVAILABLE
