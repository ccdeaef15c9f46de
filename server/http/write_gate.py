"""Who may write, decided from a request's headers alone.

``write_refusal`` is the one rule (``context.require_write_access`` raises it inside the app);
``early_write_refusal`` applies it before a write's body is read: the ASGI bridge calls it on the
request head, so an unauthenticated upload is answered 401/403 without buffering its body, and
``install_write_gate`` does the same under werkzeug (``glassgraph serve``), before the app reads it.
"""
from __future__ import annotations

import hmac
from collections.abc import Callable

from flask import Flask, request

from server.config import Config
from server.errors import Forbidden, GlassgraphError, Unauthorized

_WRITE_METHODS = ("PUT", "POST", "DELETE", "PATCH")


def write_refusal(config: Config, authorization: str | None) -> GlassgraphError | None:
    """Why a write with this ``Authorization`` header is refused; None when it may write.

    403 in read-only mode or when no token is configured (writes disabled), 401 without
    credentials, 403 with a wrong token.
    """
    if config.read_only:
        return Forbidden("this server is read-only (GLASSGRAPH_READ_ONLY): writes are disabled")
    if not config.token:
        return Forbidden("writes are disabled: no GLASSGRAPH_TOKEN is configured")
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return Unauthorized("writes need the header 'Authorization: Bearer <token>'",
                            {"WWW-Authenticate": 'Bearer realm="glassgraph"'})
    if not hmac.compare_digest(given.strip().encode(), config.token.encode()):
        return Forbidden("wrong bearer token", {"WWW-Authenticate": 'Bearer realm="glassgraph", error="invalid_token"'})
    return None


def token_accepted(config: Config, token: str) -> bool:
    """Whether a client presenting ``token`` (TrustGraph's socket auth) is who it says: the configured token,
    or any when none is configured (reads are anyone's; its writes are refused by ``write_refusal``)."""
    return not config.token or hmac.compare_digest(token.strip().encode(), config.token.encode())


def is_write(method: str, path: str, content_type: str | None) -> bool:
    """Whether the request head alone shows a write: a Graph Store write, a document upload or delete, a
    library processing record added or removed, or an update sent as ``application/sparql-update``. (A form
    POST to ``/sparql`` may be a query, which anyone may send: its body, at most ``GLASSGRAPH_MAX_BODY``, is
    read before it is told apart.)"""
    if method not in _WRITE_METHODS:
        return False
    if path == "/store" or path.startswith("/store/"):
        return True
    if (path.startswith("/api/collections/") and "/documents" in path) or path.startswith("/api/library/"):
        return True
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return path == "/sparql" and method == "POST" and media == "application/sparql-update"


def early_write_refusal(config: Config) -> Callable[[str, str, Callable[[str], str | None]], GlassgraphError | None]:
    """``check(method, path, header)`` for the bridge: the refusal of a write the head shows, else None."""
    def check(method: str, path: str, header: Callable[[str], str | None]) -> GlassgraphError | None:
        if not is_write(method, path, header("content-type")):
            return None
        return write_refusal(config, header("authorization"))
    return check


def install_write_gate(app: Flask) -> None:
    """Before the body is read (install it before ``body.install_whole_body_reading``)."""
    check = early_write_refusal(app.config["GLASSGRAPH"])

    @app.before_request
    def _refuse_unauthorised_write() -> None:
        refusal = check(request.method, request.path, request.headers.get)
        if refusal is not None:
            raise refusal
