"""Operations: ``/healthz`` and structured request logging (one JSON line per request)."""
from __future__ import annotations

import json
import logging
import sys
import time

from flask import Blueprint, Flask, Response, g, jsonify, request

from server.errors import StoreUnavailable
from server.http.context import current_store

blueprint = Blueprint("ops", __name__)
access_log = logging.getLogger("glassgraph.access")


@blueprint.route("/healthz", methods=["GET"])
def healthz() -> Response:
    """``{"ok", "store", "collections"}``; 503 when the store cannot be read.

    Collections are counted from the named graphs (cheap), not with triple counts (a full scan).
    """
    store = current_store()
    try:
        collections = len(store.collection_names(graph.value for graph in store.named_graphs()))
    except (OSError, StoreUnavailable) as error:
        response = jsonify(ok=False, store=store.location, error=str(error))
        response.status_code = 503
        return response
    return jsonify(ok=True, store=store.location, collections=collections)


def install_request_logging(app: Flask) -> None:
    """Log method, path, status, duration (until the last byte is sent) and size of every request."""
    if not access_log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access_log.addHandler(handler)
        access_log.setLevel(logging.INFO)
        access_log.propagate = False

    @app.before_request
    def _start_clock() -> None:
        g.glassgraph_started = time.perf_counter()

    @app.after_request
    def _log_when_sent(response: Response) -> Response:
        started = g.get("glassgraph_started", time.perf_counter())
        method, path, status = request.method, request.path, response.status_code

        def write() -> None:
            access_log.info(json.dumps({"method": method, "path": path, "status": status,
                                        "duration_ms": round((time.perf_counter() - started) * 1000, 2)}))

        response.call_on_close(write)
        return response
