"""Errors mapped to status codes in one place: JSON or plain text bodies, never a stack trace."""
from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from server.http.negotiation import prefers

log = logging.getLogger("glassgraph.http")

_TYPES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
          406: "not_acceptable", 408: "request_timeout", 409: "conflict", 413: "content_too_large",
          415: "unsupported_media_type", 422: "limit_exceeded", 429: "busy", 500: "internal_error",
          502: "bad_gateway", 503: "unavailable"}


class HttpError(Exception):
    """An error answer: ``HttpError(404, "no graph <g>")``; ``headers`` are added to the response."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def error_type(status: int) -> str:
    return _TYPES.get(status, "error")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """JSON (``{"error": {"type", "message"}}``) for the API and JSON-preferring clients, else text."""
    wants_json = request.path.startswith("/api/") or prefers(
        request.headers.get("Accept"), "application/json", ["text/plain"])
    if wants_json:
        response = jsonify(error={"type": error_type(status), "message": message})
    else:
        response = Response(message.rstrip("\n") + "\n", mimetype="text/plain")
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def install_error_handlers(app: Flask) -> None:
    """HttpError, werkzeug's HTTP errors (404, 405, 413, ...) and anything unexpected (a logged 500)."""

    @app.errorhandler(HttpError)
    def _http_error(error: HttpError) -> Response:
        return error_response(error.status, error.message, error.headers)

    @app.errorhandler(HTTPException)
    def _werkzeug_error(error: HTTPException) -> Response:
        status = error.code or 500
        message = error.description or error.name
        if status == 413:
            limit = app.config.get("MAX_CONTENT_LENGTH")
            message = f"request body larger than the limit of {limit} bytes (GLASSGRAPH_MAX_BODY)"
        headers = {k: v for k, v in error.get_headers() if k.lower() == "allow"}
        return error_response(status, message, headers)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, f"internal error ({type(error).__name__}); see the server log")
