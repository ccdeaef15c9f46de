"""The Flask application factory: one store and one pipeline per process, a blueprint per area."""
from __future__ import annotations

from flask import Flask

from server.config import TEMPLATES_DIR, Config
from server.store import GraphStore


def create_app(config: Config | None = None, store: GraphStore | None = None) -> Flask:
    """Build the app; ``store`` defaults to the configured one (with the sample data on first start)."""
    from server.bootstrap import open_store

    config = config or Config.from_env()
    app = Flask(__name__, template_folder=str(TEMPLATES_DIR))
    app.config["GLASSGRAPH"] = config
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    app.extensions["glassgraph.store"] = store if store is not None else open_store(config)

    from server.http import api, console, graph_store, ops, sparql

    for module in (ops, sparql, graph_store, api, console):
        app.register_blueprint(module.blueprint)
    return app
