"""Security headers: no content sniffing anywhere; HTML pages run only the app's own scripts and
styles and cannot be framed."""
from __future__ import annotations

from flask import Flask, Response

# No inline script, style or event handler; nothing from elsewhere; no plugins; never in a frame.
CONTENT_SECURITY_POLICY = ("default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                           "frame-ancestors 'none'")
HTML_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Frame-Options": "DENY"}


def _security_headers(response: Response) -> Response:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if response.mimetype == "text/html":
        for key, value in HTML_HEADERS.items():
            response.headers.setdefault(key, value)
    return response


def install_security_headers(app: Flask) -> None:
    """After every request, errors included: ``nosniff``; on HTML, the CSP and ``X-Frame-Options``."""
    app.after_request(_security_headers)
