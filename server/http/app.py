"""The Flask application factory: one store and one pipeline per process, a blueprint per area."""
from __future__ import annotations

from flask import Flask, Response, request

from server.config import TEMPLATES_DIR, Config
from server.remote_store import RemoteStore
from server.store_base import StoreBackend

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, HEAD, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Accept, Authorization, Content-Type, Last-Event-ID",
    "Access-Control-Max-Age": "86400",
    # a page on another site may read these too: linked-data alternates, a created graph, when to retry
    "Access-Control-Expose-Headers": "Link, Location, Retry-After, Glassgraph-Trace",
}
_ON_EVERY_RESPONSE = ("Access-Control-Allow-Origin", "Access-Control-Expose-Headers")


def create_app(config: Config | None = None, store: StoreBackend | None = None) -> Flask:
    """Build the app; ``store`` defaults to the configured one (with the sample data on first start)."""
    from server.bootstrap import open_store
    from server.http.body import install_whole_body_reading
    from server.http.errors import install_error_handlers
    from server.http.headers import install_security_headers
    from server.http.ops import install_request_logging
    from server.http.query_workers import QueryWorkers

    config = config or Config.from_env()
    app = Flask(__name__, template_folder=str(TEMPLATES_DIR))
    app.config["GLASSGRAPH"] = config
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    app.config["MAX_FORM_MEMORY_SIZE"] = config.max_body_bytes
    store = app.extensions["glassgraph.store"] = store if store is not None else open_store(config)
    if isinstance(store, RemoteStore) or (store.path is not None and config.query_workers > 0):
        # a remote engine evaluates, but worker processes still check what is sent
        app.extensions["glassgraph.queries"] = QueryWorkers(
            None if isinstance(store, RemoteStore) else store.path, max(config.query_workers, 1),
            config.query_memory_mb, store, config.long_queries, config.queue_per_client, config.long_after_s,
            config.queue_wait_s)

    from server.http import (
        api,
        console,
        dataset,
        documents,
        graph_store,
        neighbourhood,
        ops,
        sources,
        sparql,
        sparql_editor,
    )

    for module in (ops, sparql, sparql_editor, graph_store, api, documents, console, sources, neighbourhood, dataset):
        app.register_blueprint(module.blueprint)
    install_whole_body_reading(app)
    install_error_handlers(app)
    install_request_logging(app)
    install_security_headers(app)
    app.after_request(_cors)
    app.after_request(_vary)
    return app


def _vary(response: Response) -> Response:
    """Reads are negotiated on Accept: caches must keep one copy per Accept."""
    if request.method in ("GET", "HEAD"):
        response.vary.add("Accept")
    return response


def _cors(response: Response) -> Response:
    """Any origin may read (browser consoles, other sites); writes still need the bearer token."""
    for key, value in CORS_HEADERS.items():
        if key in _ON_EVERY_RESPONSE or request.method == "OPTIONS":
            response.headers.setdefault(key, value)
    return response
