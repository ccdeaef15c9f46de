"""Errors answered in one place: the status and type of every error come from ``server.errors``;
the body is JSON, a page in the console's layout (for a browser: HTML preferred to text and JSON,
outside ``/api/``) or plain text, never a stack trace."""
from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, render_template, request
from markupsafe import escape
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from server.errors import ContentTooLarge, ErrorType, GlassgraphError
from server.http.negotiation import prefers

log = logging.getLogger("glassgraph.http")


def error_response(error_type: ErrorType, message: str, headers: dict[str, str] | None = None) -> Response:
    """JSON (``{"error": {"type", "message"}}``) for the API and JSON-preferring clients, else text."""
    accept = request.headers.get("Accept")
    is_api = request.path.startswith("/api/")
    if is_api or prefers(accept, "application/json", ["text/plain"]):
        response = jsonify(error={"type": error_type.wire_name, "message": message})
    elif prefers(accept, "text/html", ["text/plain", "application/json"]):
        response = Response(_error_page(error_type.status, message), mimetype="text/html")
    else:
        response = Response(message.rstrip("\n") + "\n", mimetype="text/plain")
    response.status_code = error_type.status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def _error_page(status: int, message: str) -> str:
    """The error as a console page; plain text in a ``pre`` if the page itself cannot be rendered."""
    reason = HTTP_STATUS_CODES.get(status, "Error")
    try:
        return render_template("error.html", status=status, reason=reason, message=message)
    except Exception:  # a broken template must not hide the error it was reporting
        log.exception("the error page could not be rendered")
        return f"<!doctype html><title>{status} {reason}</title><pre>{escape(message)}</pre>"


def install_error_handlers(app: Flask) -> None:
    """Typed errors, werkzeug's own HTTP errors (404, 405, 413, ...) and anything unexpected (a logged 500)."""

    @app.errorhandler(GlassgraphError)
    def _typed_error(error: GlassgraphError) -> Response:
        return error_response(error.type, error.message, error.headers)

    @app.errorhandler(HTTPException)
    def _werkzeug_error(error: HTTPException) -> Response:
        error_type = ErrorType.of_status(error.code or 500)
        message = error.description or error.name
        if error_type is ErrorType.CONTENT_TOO_LARGE:
            message = ContentTooLarge.over_limit(app.config.get("MAX_CONTENT_LENGTH")).message
        headers = {k: v for k, v in error.get_headers() if k.lower() == "allow"}
        return error_response(error_type, message, headers)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(ErrorType.INTERNAL, f"internal error ({type(error).__name__}); see the server log")
