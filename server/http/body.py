"""The request body, read whole before any view runs, and form fields decoded strictly.

Werkzeug stops reading a chunked body (no Content-Length) at the size limit and hands the prefix on
as if it were the whole body, so an update cut in the middle ran its first half. Here the body is
read once, however it is framed; over ``GLASSGRAPH_MAX_BODY`` the request is refused with 413
before anything sees a byte of it, and views read the complete body from memory.
"""
from __future__ import annotations

import io
from urllib.parse import parse_qsl

from flask import Flask, request

from server.errors import BadRequest, ContentTooLarge

_READ_SIZE = 64 * 1024


def _read_framed(stream: io.RawIOBase, length: int | None, limit: int) -> bytes:
    """Exactly ``length`` bytes, or until the stream ends when the length is unknown (chunked)."""
    if length is not None and length > limit:
        raise ContentTooLarge.over_limit(limit)
    wanted = length if length is not None else limit + 1
    parts, received = [], 0
    while received < wanted:
        part = stream.read(min(_READ_SIZE, wanted - received))
        if not part:
            break
        parts.append(part)
        received += len(part)
    if received > limit:
        raise ContentTooLarge.over_limit(limit)
    return b"".join(parts)


def install_whole_body_reading(app: Flask) -> None:
    """Before every view: the body read into memory within the limit, Content-Length set to its size."""

    @app.before_request
    def _read_whole_body() -> None:
        environ = request.environ
        declared = environ.get("CONTENT_LENGTH")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if not chunked and not declared:
            return
        try:
            length = None if chunked else int(declared)
        except ValueError:
            raise BadRequest(f"Content-Length is not a number: {declared!r}") from None
        body = _read_framed(environ["wsgi.input"], length, app.config["MAX_CONTENT_LENGTH"])
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ["wsgi.input_terminated"] = False


def form_fields(raw: bytes) -> dict[str, list[str]]:
    """``application/x-www-form-urlencoded`` (or a query string) decoded strictly as UTF-8.

    Werkzeug keeps an invalid escape such as ``%E9`` as its literal text, which would store
    ``caf%E9`` for ``café`` sent as Latin-1; here it is a 400.
    """
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("form or query-string parameters must be UTF-8 (percent-encoded UTF-8 bytes); "
                             "these are not") from None
    fields: dict[str, list[str]] = {}
    for name, value in pairs:
        fields.setdefault(name, []).append(value)
    return fields
