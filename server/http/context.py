"""Per-app objects for the blueprints (the runtime's services, the config) and the write-access rule."""
from __future__ import annotations

import threading
from collections.abc import Iterable

from flask import current_app, request
from pyoxigraph import DefaultGraph, NamedNode

from server import vocab
from server.config import Config
from server.http.query_workers import QueryWorkers
from server.http.write_gate import write_refusal
from server.runtime import Runtime
from server.store_base import StoreBackend


def current_runtime() -> Runtime:
    """The app's services (``server.runtime``), built when the app was."""
    return current_app.extensions["glassgraph.runtime"]


def current_store() -> StoreBackend:
    return current_runtime().store


def current_config() -> Config:
    return current_app.config["GLASSGRAPH"]


def current_queries() -> QueryWorkers | None:
    """The worker processes for clients' queries; None for an in-memory store (see query_workers)."""
    return current_runtime().queries


def current_client() -> str:
    """What a client's requests share, for its fair share of the query workers: its address."""
    return request.remote_addr or "-"


CLIENT_LEFT = "glassgraph.client_left"  # the environ's threading.Event, set when the client closes the connection


def client_left() -> threading.Event | None:
    """Set once this request's client has closed its connection (``server.http.asgi``); None where the server
    cannot tell (the development server)."""
    return request.environ.get(CLIENT_LEFT)


def public_root() -> str:
    """The server's base URL, no trailing slash: ``GLASSGRAPH_PUBLIC_URL`` when set (trusted), else the
    URL the client addressed (its ``Host`` header, which anyone can set)."""
    configured = current_config().public_url
    return configured.rstrip("/") if configured else request.host_url.rstrip("/")


def public_url(path: str | None = None) -> str:
    """``path`` (default: this request's path, without its query) under :func:`public_root`."""
    return public_root() + (request.script_root + request.path if path is None else path)


def notify_written(graphs: Iterable[NamedNode | DefaultGraph] | None = None) -> None:
    """Tell the store's listeners (label index, label cache, passage index) which collections changed.

    ``None`` (graphs unknown) invalidates every collection. Invalidation is lazy, but the next
    GraphRAG question then rebuilds the collection's label index (88 ms on the sample), so a write
    names the graphs it touched whenever it can.
    """
    store = current_store()
    graphs = store.named_graphs() if graphs is None else graphs
    changed: list[str] = []
    for name in graphs:
        if name == vocab.LIBRARIAN_GRAPH:  # texts of any collection's chunks (the passage index reads them)
            changed += [entry["collection"] for entry in store.collections()]
        elif isinstance(name, NamedNode):  # a knowledge graph, or a provenance graph (``...:source``)
            changed.append(store.collection_of(NamedNode(name.value.removesuffix(":source"))))
    for collection in dict.fromkeys(c for c in changed if c is not None):
        store.notify_loaded(collection)


def require_write_access() -> None:
    """Writes need ``Authorization: Bearer <GLASSGRAPH_TOKEN>`` (``write_gate.write_refusal``)."""
    refusal = write_refusal(current_config(), request.headers.get("Authorization"))
    if refusal is not None:
        raise refusal
