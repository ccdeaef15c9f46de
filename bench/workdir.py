"""Where benchmarks cache their generated data and stores (``GLASSGRAPH_BENCH_DIR``)."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from server.store import GraphStore


def bench_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "glassgraph-bench"
    path = Path(os.environ.get("GLASSGRAPH_BENCH_DIR") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached_store(name: str, fill: Callable[[GraphStore], None]) -> GraphStore:
    """The on-disk store ``name`` in the bench dir, filled by ``fill`` once (a marker file says it is done)."""
    path = bench_dir() / f"{name}-store"
    marker = bench_dir() / f"{name}-store.ok"
    if not marker.exists() and path.exists():
        shutil.rmtree(path)  # an interrupted fill: start over
    store = GraphStore(path)
    if not marker.exists():
        fill(store)
        store.flush()
        marker.write_text("ok\n")
    return store
