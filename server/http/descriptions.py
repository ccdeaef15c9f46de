"""The store's graphs described (VoID: counts, property and class partitions), for the VoID page and the
SPARQL editor's predicate completion.

Describing counts every graph, so the descriptions are kept until the next write of data (explanations
renew them at most every 30 s).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from flask import Flask

from server.void import GraphDescription, describe_store

_describing = threading.Lock()
TRACES_REFRESH_S = 30.0


@dataclass(frozen=True)
class _Described:
    data_writes: int  # the store's writes other than explanations, when described
    trace_writes: int
    at: float  # time.monotonic()
    descriptions: list[GraphDescription]


def current_descriptions(app: Flask) -> list[GraphDescription]:
    """The store's graphs described, again after each write of data; GraphRAG explanations (which any
    client can cause) renew it at most every ``TRACES_REFRESH_S`` (describing took 0.8 s on a
    1.3M-quad store, so a question before each VoID request held a thread that long). A store other
    processes write to (a remote engine) is described again every ``TRACES_REFRESH_S`` as well."""
    store = app.extensions["glassgraph.store"]
    with _describing:
        cached: _Described | None = app.extensions.get("glassgraph.void")
        data_writes = store.generation - store.trace_writes
        if (cached is None or cached.data_writes != data_writes
                or ((cached.trace_writes != store.trace_writes or store.shared)  # other workers' writes unseen
                    and time.monotonic() - cached.at >= TRACES_REFRESH_S)):
            cached = _Described(data_writes, store.trace_writes, time.monotonic(), describe_store(store))
            app.extensions["glassgraph.void"] = cached
        return cached.descriptions
