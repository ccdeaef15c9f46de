"""The Flask application factory: the process's services built once (``server.runtime``), a blueprint per area."""
from __future__ import annotations

from flask import Flask, Response, request

from server.config import TEMPLATES_DIR, Config
from server.runtime import Runtime
from server.store_base import StoreBackend


def create_app(config: Config | None = None, store: StoreBackend | None = None) -> Flask:
    """Build the app and its services (``server.runtime``); ``store`` defaults to the configured one (with
    the sample data on first start)."""
    from server.bootstrap import open_store
    from server.http.body import install_whole_body_reading
    from server.http.cors import install_cors
    from server.http.errors import install_error_handlers
    from server.http.headers import install_security_headers
    from server.http.ops import install_request_logging
    from server.http.write_gate import install_write_gate

    config = config or Config.from_env()
    app = Flask(__name__, template_folder=str(TEMPLATES_DIR))
    app.config["GLASSGRAPH"] = config
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    app.config["MAX_FORM_MEMORY_SIZE"] = config.max_body_bytes
    app.extensions["glassgraph.runtime"] = Runtime(config, store if store is not None else open_store(config))

    from server.http import (
        api,
        console,
        dataset,
        documents,
        graph_store,
        library,
        neighbourhood,
        ops,
        sources,
        sparql,
        sparql_editor,
        triples,
        trustgraph_rest,
    )

    for module in (ops, sparql, sparql_editor, graph_store, api, triples, documents, library, console, sources,
                   neighbourhood, dataset, trustgraph_rest):
        app.register_blueprint(module.blueprint)
    install_write_gate(app)  # before the body is read
    install_whole_body_reading(app)
    install_error_handlers(app)
    install_request_logging(app)
    install_security_headers(app)
    install_cors(app)
    app.after_request(_vary)
    return app


def _vary(response: Response) -> Response:
    """Reads are negotiated on Accept: caches must keep one copy per Accept."""
    if request.method in ("GET", "HEAD"):
        response.vary.add("Accept")
    return response
