"""What describes the store, kept until the next write of data: the graphs described (VoID: counts,
property and class partitions), for the VoID page and the SPARQL editor's predicate completion, and the
collections with their triple counts, for the console's pages and ``/api/collections``.

Describing and counting read every graph, so anonymous pages must not do it per request: each value is
computed once and kept until the store's next write of data (explanations renew it at most every 30 s),
and while one request renews it the others answer with the last one.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from flask import Flask

from server.void import GraphDescription, describe_store

if TYPE_CHECKING:
    from server.store_base import StoreBackend

T = TypeVar("T")
TRACES_REFRESH_S = 30.0
_locks_lock = threading.Lock()
_locks: dict[str, threading.Lock] = {}  # one per kept value: one request at a time computes it


@dataclass(frozen=True)
class _Kept:
    data_generation: int  # the store's last write other than an explanation, when computed
    trace_writes: int
    at: float  # time.monotonic()
    value: Any


def kept_until_written(app: Flask, key: str, compute: Callable[[], T], traces_matter: bool = False,
                       lagging: bool = False) -> T:
    """``compute()``, kept in ``app.extensions[key]`` and computed again after each write of data by this
    process. GraphRAG explanations (which any client can cause) renew it at most every ``TRACES_REFRESH_S``
    when ``traces_matter``, and so does a store other processes write to (a remote engine): their writes
    are not counted here. One request at a time computes it; with ``lagging``, the others answer with the
    value it renews meanwhile, at once (a page's counts): under a stream of writes each waiting request
    found it stale again and computed it in turn, and a flood of 40 page clients waited 16-60 s."""
    store = app.extensions["glassgraph.runtime"].store
    with _locks_lock:
        lock = _locks.setdefault(key, threading.Lock())
    kept: _Kept | None = app.extensions.get(key)
    if kept is not None and not _stale(kept, store, traces_matter):
        return kept.value
    if not lock.acquire(blocking=not (lagging and kept is not None)):
        return kept.value  # another request is renewing it
    try:
        kept = app.extensions.get(key)
        if kept is None or _stale(kept, store, traces_matter):
            generation = store.data_generation  # before computing: a write meanwhile renews it
            kept = _Kept(generation, store.trace_writes, time.monotonic(), compute())
            app.extensions[key] = kept
        return kept.value
    finally:
        lock.release()


def _stale(kept: _Kept, store: StoreBackend, traces_matter: bool) -> bool:
    """Whether ``kept`` misses a write of data, or explanations (or another process's writes) of more than
    ``TRACES_REFRESH_S`` ago."""
    return (kept.data_generation != store.data_generation
            or ((store.shared or (traces_matter and kept.trace_writes != store.trace_writes))
                and time.monotonic() - kept.at >= TRACES_REFRESH_S))


def current_descriptions(app: Flask) -> list[GraphDescription]:
    """The store's graphs described (describing took 0.8 s on a 1.3M-quad store, so a question before
    each VoID request held a thread that long); explanations are described too, so they renew it."""
    store = app.extensions["glassgraph.runtime"].store
    return kept_until_written(app, "glassgraph.void", lambda: describe_store(store), traces_matter=True, lagging=True)


def current_collections(app: Flask, lagging: bool = True) -> list[dict[str, object]]:
    """``StoreBackend.collections()``: every collection with its triple counts (counting every graph took
    0.5-1.8 s a request on the sample); explanations are in no collection. Not ``lagging`` for a value kept in
    turn (the home page's), which would keep the last counts as if they were new."""
    store = app.extensions["glassgraph.runtime"].store
    return kept_until_written(app, "glassgraph.collections", store.collections, lagging=lagging)
