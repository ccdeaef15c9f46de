"""How long GraphRAG traces are kept: at most ``GLASSGRAPH_TRACE_MAX_SESSIONS`` sessions, none older than
``GLASSGRAPH_TRACE_MAX_AGE_DAYS`` (0: no bound). Anonymous questions write traces, so the server prunes
on its own (``AutoPrune``, at most once a ``PRUNE_INTERVAL_S``); ``glassgraph sessions --prune`` does
the same on demand. A pruned session loses its whole trace (each stage's entity and the nodes it lists) and its
answer text (``sparql/explain_delete_sessions.ru``).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyoxigraph import NamedNode

from server.stages import SESSION
from server.store_base import StoreBackend

BATCH = 200  # sessions deleted per update
PRUNE_INTERVAL_S = 60.0


@dataclass(frozen=True)
class Retention:
    max_sessions: int  # 0: any number
    max_age_days: float  # 0: any age

    @property
    def bounded(self) -> bool:
        return self.max_sessions > 0 or self.max_age_days > 0


def expired_sessions(store: StoreBackend, retention: Retention, now: datetime | None = None) -> list[NamedNode]:
    """The sessions past the policy: beyond the newest ``max_sessions``, or started before the age bound."""
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=retention.max_age_days)
    expired = []
    rows = store.query("explain_sessions", default_graph=store.explain_graph)  # newest first
    for position, row in enumerate(rows):
        too_many = 0 < retention.max_sessions <= position
        if too_many or (retention.max_age_days > 0 and _started(row["time"].value) < cutoff):
            expired.append(row[SESSION.kind])
    return expired


def prune_sessions(store: StoreBackend, retention: Retention, now: datetime | None = None) -> int:
    """Delete the sessions past ``retention``; returns how many."""
    if not retention.bounded:
        return 0
    expired = expired_sessions(store, retention, now)
    for start in range(0, len(expired), BATCH):
        rows = [(session, store.explain_graph) for session in expired[start:start + BATCH]]
        store.update("explain_delete_sessions", {(SESSION.kind, "eg"): rows})
    return len(expired)


def _started(text: str) -> datetime:
    started = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return started if started.tzinfo else started.replace(tzinfo=timezone.utc)


class AutoPrune:
    """Prunes a store at most once every ``interval_s``, from whichever request thread asks first."""

    def __init__(self, retention: Retention, interval_s: float = PRUNE_INTERVAL_S) -> None:
        self.retention, self.interval_s = retention, interval_s
        self._lock = threading.Lock()
        self._next = 0.0

    def maybe_prune(self, store: StoreBackend) -> None:
        if not self.retention.bounded or time.monotonic() < self._next or not self._lock.acquire(blocking=False):
            return
        try:
            self._next = time.monotonic() + self.interval_s
            prune_sessions(store, self.retention)
        finally:
            self._lock.release()
