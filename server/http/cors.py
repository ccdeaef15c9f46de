"""Cross-origin reads, only for the origins an operator lists (``GLASSGRAPH_CORS_ORIGINS``).

With none listed (the default), a page on another site gets no ``Access-Control-Allow-Origin``: a
browser does not let it read a loopback store through its visitor, and its preflights (Private
Network Access included) are refused. ``*`` lets any origin read, for a public endpoint whose data
is public anyway. Clients that are not browsers send no ``Origin`` and are not affected.
"""
from __future__ import annotations

from flask import Flask, Response, request

from server.errors import Forbidden
from server.http.context import current_config

PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "GET, HEAD, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Accept, Authorization, Content-Type, Last-Event-ID",
    "Access-Control-Max-Age": "86400",
}
# a page on another site may read these too: linked-data alternates, a created graph, when to retry
EXPOSED_HEADERS = "Link, Location, Retry-After, Glassgraph-Trace"


def allowed_origin(origins: tuple[str, ...], origin: str | None) -> str | None:
    """The ``Access-Control-Allow-Origin`` value for a request from ``origin``; None: not allowed."""
    if not origin:
        return None
    if "*" in origins:
        return "*"
    return origin if origin.rstrip("/") in {allowed.rstrip("/") for allowed in origins} else None


def _refuse_foreign_preflight() -> None:
    """A preflight from an origin not listed is answered 403, so the browser sends nothing after it."""
    origin = request.headers.get("Origin")
    if request.method != "OPTIONS" or not origin or "Access-Control-Request-Method" not in request.headers:
        return
    if allowed_origin(current_config().cors_origins, origin) is None:
        raise Forbidden(f"cross-origin requests from {origin} are not allowed (GLASSGRAPH_CORS_ORIGINS)")


def _cors_headers(response: Response) -> Response:
    origins = current_config().cors_origins
    allowed = allowed_origin(origins, request.headers.get("Origin"))
    if origins and "*" not in origins:
        response.vary.add("Origin")
    if allowed is None:
        return response
    response.headers["Access-Control-Allow-Origin"] = allowed
    response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
    if request.method == "OPTIONS":
        response.headers.update(PREFLIGHT_HEADERS)
        if request.headers.get("Access-Control-Request-Private-Network", "").lower() == "true":
            response.headers["Access-Control-Allow-Private-Network"] = "true"
    return response


def install_cors(app: Flask) -> None:
    app.before_request(_refuse_foreign_preflight)
    app.after_request(_cors_headers)
