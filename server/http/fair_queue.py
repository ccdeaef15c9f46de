"""A pool of workers handed out fairly between clients.

Each client's callers wait in a line of their own, and a freed worker goes to the next client in
turn (round robin), so one client's fifty queries wait behind another client's one instead of in
front of it. Waiting is bounded by time, not by the number of callers: under ordinary concurrency
every caller gets a worker, later. A client is refused (429) only past its fair share, a number of
callers waiting at once that ordinary use does not reach.
"""
from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Generic, TypeVar

from server.errors import Busy, Unavailable

T = TypeVar("T")
_CLOSED = object()


class _Waiter:
    __slots__ = ("ready", "item")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.item: object = None


class FairQueue(Generic[T]):
    """``items`` handed out by :meth:`take` and returned by :meth:`put`, round robin between clients.

    ``per_client``: the most callers of one client that may wait at once (429 past it);
    ``what``: the pool's name in refusals ("query workers (GLASSGRAPH_QUERY_WORKERS)").
    """

    def __init__(self, items: list[T], per_client: int, what: str) -> None:
        self._lock = threading.Lock()
        self._free: list[T] = list(items)
        self._lines: OrderedDict[str, deque[_Waiter]] = OrderedDict()  # the next client to serve first
        self._per_client, self._what = per_client, what
        self._closed = False

    def take(self, client: str, wait_s: float) -> T:
        """A free item, else one handed over when it is ``client``'s turn; 503 after ``wait_s``."""
        with self._lock:
            if self._closed:
                raise Unavailable("the server is shutting down")
            if self._free and not self._lines:
                return self._free.pop()  # the most recently used: its caches are warm
            line = self._lines.setdefault(client, deque())
            if len(line) >= self._per_client:
                raise Busy(f"{self._per_client} requests of this client are already waiting for {self._what}: "
                           "send fewer at once", {"Retry-After": "1"})
            waiter = _Waiter()
            line.append(waiter)
        if not waiter.ready.wait(wait_s):
            with self._lock:
                if not waiter.ready.is_set():
                    line.remove(waiter)
                    if not line and self._lines.get(client) is line:
                        del self._lines[client]
                    raise Unavailable(f"no {self._what} came free within {wait_s:g} s (GLASSGRAPH_QUEUE_WAIT): "
                                      "the server is overloaded; try again shortly", {"Retry-After": "5"})
        if waiter.item is _CLOSED:
            raise Unavailable("the server is shutting down")
        return waiter.item  # type: ignore[return-value]

    def put(self, item: T) -> None:
        """Return ``item``: to the next client in turn if any is waiting, else to the free items."""
        with self._lock:
            waiter = self._next_waiter()
            if waiter is None:
                self._free.append(item)
                return
            waiter.item = item
            waiter.ready.set()

    def take_all_free(self) -> list[T]:
        """Every free item, without waiting (none while callers wait: they come first)."""
        with self._lock:
            if self._lines:
                return []
            free, self._free = self._free, []
            return free

    def waiting(self) -> int:
        with self._lock:
            return sum(len(line) for line in self._lines.values())

    def close(self) -> list[T]:
        """Refuse callers from now on (waiting ones get 503); the free items, for the caller to stop."""
        with self._lock:
            self._closed = True
            while (waiter := self._next_waiter()) is not None:
                waiter.item = _CLOSED
                waiter.ready.set()
            free, self._free = self._free, []
            return free

    def _next_waiter(self) -> _Waiter | None:
        """The first waiter of the client whose turn it is; that client goes to the back of the round."""
        if not self._lines:
            return None
        client, line = next(iter(self._lines.items()))
        waiter = line.popleft()
        if line:
            self._lines.move_to_end(client)
        else:
            del self._lines[client]
        return waiter
