"""Secrets kept out of the server's log: a ``token=`` (or ``access_token=``) in a logged request line.

uvicorn logs every websocket handshake with its query string ('... "WebSocket /api/v1/flow/default/import/
triples?token=..." 403'), and TrustGraph's clients send their token that way on some sockets.
"""
from __future__ import annotations

import logging
import re

SECRET_PARAMETER = re.compile(r"(?i)([?&](?:access_)?token=)[^&\s\"]*")
LOGGERS = ("uvicorn.error", "uvicorn.access", "gunicorn.error", "gunicorn.access")


def redacted(text: str) -> str:
    """``text`` with the value of each token parameter replaced by ``***``."""
    return SECRET_PARAMETER.sub(r"\1***", text)


class SecretRedaction(logging.Filter):
    """Rewrites a record's message arguments (and message) so that no token parameter is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redacted(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def install() -> None:
    """The filter on the loggers of uvicorn and gunicorn (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretRedaction) for f in logger.filters):
            logger.addFilter(SecretRedaction())
