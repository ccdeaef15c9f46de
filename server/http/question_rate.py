"""A per-client rate for anonymous GraphRAG questions (``GLASSGRAPH_QUESTION_RATE`` a minute; 0: none).

Each client address has a bucket of that many questions, refilled continuously; a question that finds
it empty is refused (429, ``Retry-After``: when the next one is allowed). A request with the write token
is not counted. Behind a reverse proxy every client has the proxy's address: rate-limit there instead.
"""
from __future__ import annotations

import math
import threading
import time

from server.errors import Busy

MAX_CLIENTS = 10_000  # buckets kept: past it the full ones are forgotten, then the oldest


class QuestionRate:
    """The buckets of one app's clients; ``take`` is thread-safe."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (questions left, when counted)
        self._lock = threading.Lock()

    def take(self, client: str) -> None:
        """Count one question of ``client``; ``Busy`` (429) when its bucket is empty."""
        if self.per_minute <= 0:
            return
        now = time.monotonic()
        with self._lock:
            left, then = self._buckets.get(client, (self.per_minute, now))
            left = min(self.per_minute, left + (now - then) * self.per_minute / 60)
            if left < 1:
                wait = math.ceil((1 - left) * 60 / self.per_minute)
                raise Busy(f"more than {self.per_minute:g} questions a minute from {client} "
                           "(GLASSGRAPH_QUESTION_RATE): try again shortly", {"Retry-After": str(wait)})
            self._buckets[client] = (left - 1, now)
            if len(self._buckets) > MAX_CLIENTS:
                self._forget_full(now)

    def _forget_full(self, now: float) -> None:
        for client, (left, then) in list(self._buckets.items()):
            if left + (now - then) * self.per_minute / 60 >= self.per_minute:
                del self._buckets[client]
        for client in list(self._buckets)[:max(len(self._buckets) - MAX_CLIENTS, 0)]:  # many addresses at once
            del self._buckets[client]
