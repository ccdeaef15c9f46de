"""The on-disk store's write-ahead log as the kill tests watch it: a kill point that is an event in the
store's own files (the log has grown by so many bytes), not a delay."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.0002  # how often the log's size is read while a writer runs


def wal_bytes(path: Path) -> int:
    """The size of the store's write-ahead log (RocksDB's ``*.log`` files)."""
    total = 0
    for entry in os.scandir(path):
        try:
            total += entry.stat().st_size if entry.name.endswith(".log") else 0
        except FileNotFoundError:  # a log RocksDB has just retired
            pass
    return total


def wait_for_log(path: Path, size: int, running: Callable[[], bool]) -> None:
    """Until the write-ahead log of the store at ``path`` holds ``size`` bytes, or the writer is no longer
    ``running()``."""
    while running() and wal_bytes(path) < size:
        time.sleep(POLL_S)
