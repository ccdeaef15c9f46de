"""Per-app objects for the blueprints (the store, the config) and the write-access rule."""
from __future__ import annotations

import hmac
from collections.abc import Iterable

from flask import current_app, request
from pyoxigraph import DefaultGraph, NamedNode

from server.config import Config
from server.errors import Forbidden, Unauthorized
from server.http.query_workers import QueryWorkers
from server.store_base import StoreBackend


def current_store() -> StoreBackend:
    return current_app.extensions["glassgraph.store"]


def current_config() -> Config:
    return current_app.config["GLASSGRAPH"]


def current_queries() -> QueryWorkers | None:
    """The worker processes for clients' queries; None for an in-memory store (see query_workers)."""
    return current_app.extensions.get("glassgraph.queries")


def current_client() -> str:
    """What a client's requests share, for its fair share of the query workers: its address."""
    return request.remote_addr or "-"


def notify_written(graphs: Iterable[NamedNode | DefaultGraph] | None = None) -> None:
    """Tell the store's listeners (label index, label cache) which collections changed.

    ``None`` (graphs unknown) invalidates every collection. Invalidation is lazy, but the next
    GraphRAG question then rebuilds the collection's label index (88 ms on the sample), so a write
    names the graphs it touched whenever it can.
    """
    store = current_store()
    graphs = store.named_graphs() if graphs is None else graphs
    for name in graphs:
        collection = store.collection_of(name) if isinstance(name, NamedNode) else None
        if collection is not None:
            store.notify_loaded(collection)


def require_write_access() -> None:
    """Writes need ``Authorization: Bearer <GLASSGRAPH_TOKEN>``.

    403 in read-only mode or when no token is configured (writes disabled), 401 without
    credentials, 403 with a wrong token.
    """
    config = current_config()
    if config.read_only:
        raise Forbidden("this server is read-only (GLASSGRAPH_READ_ONLY): writes are disabled")
    if not config.token:
        raise Forbidden("writes are disabled: no GLASSGRAPH_TOKEN is configured")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise Unauthorized("writes need the header 'Authorization: Bearer <token>'",
                        {"WWW-Authenticate": 'Bearer realm="glassgraph"'})
    if not hmac.compare_digest(given.strip().encode(), config.token.encode()):
        raise Forbidden("wrong bearer token", {"WWW-Authenticate": 'Bearer realm="glassgraph", '
                                                                         'error="invalid_token"'})
