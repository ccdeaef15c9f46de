"""The memory TrustGraph sockets may hold in answers their clients have not taken yet.

An HTTP response is one answer on one connection; a socket multiplexes up to 16 requests, and a client
reading one frame now and then (inside ``GLASSGRAPH_SEND_TIMEOUT``) could keep all their answers in the
worker (16 SPARQL answers of 64 MB held about 4 GB before this budget). So the bytes an answer brings out
of the app are counted, from its first piece until it is closed, against two budgets: one per client
address (``GLASSGRAPH_MAX_RESULT_BYTES``: a client's sockets together hold about one largest answer, two
at most) and one for the process (``GLASSGRAPH_SOCKET_MEMORY``). A request starts only while both have
room; it waits for room (a client waits behind its own answers) up to ``GLASSGRAPH_QUEUE_WAIT``, then is
refused busy. The size of an answer is only known once the app has made it, so a client's requests are
admitted one at a time, each once the answer before it is counted, and a budget is passed by one answer
at most: a client holds at most its budget plus one answer. For the process, a request that may bring a
large answer reserves a largest answer (the client budget) until its answer is counted: requests of many
clients admitted at once cannot all pass an empty process budget (twelve addresses, each one unread
SELECT of 41 MB, held 500 MB of a 256 MB budget), and the process holds at most its budget plus one answer.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

CLIENT_REQUEST_BYTES = 4 << 20  # request frames of one client address waiting or being answered, at most
PROCESS_REQUEST_BYTES = 64 << 20  # those of every client together


@dataclass
class Holding:
    """What one answer holds: its client, and the bytes of it counted so far."""

    client: str
    bytes: int = 0


class AnswerBudget:
    """``AnswerBudget(process_bytes, client_bytes, wait_s)``: counts from the app's threads, admits, waits and
    releases on the event loop."""

    def __init__(self, process_bytes: int, client_bytes: int, wait_s: float) -> None:
        self.process_bytes, self.client_bytes, self.wait_s = process_bytes, client_bytes, wait_s
        self.held = 0
        self.by_client: dict[str, int] = {}
        self._lock = threading.Lock()
        self._released = asyncio.Condition()
        self._admitting: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # per client: its lock, its users
        self.reserved = 0  # largest answers reserved by requests admitted whose answers are not counted yet
        self.requests = 0  # bytes of request frames taken and not yet answered (``take_request``), on the loop
        self.requests_by_client: dict[str, int] = {}

    def _has_room(self, client: str, reserve: bool) -> bool:
        """Room for a request of ``client``: one that may bring a large answer counts the reservations too."""
        return (self.held + (self.reserved if reserve else 0) < self.process_bytes
                and self.by_client.get(client, 0) < self.client_bytes)

    @asynccontextmanager
    async def admission(self, client: str, reserve: bool = True) -> AsyncIterator[bool]:
        """True once the process and ``client`` hold less than their budgets, False after ``wait_s``. While
        True it is held, ``client``'s other requests wait: the caller runs its request and counts the first
        piece of the answer (a SPARQL answer is one piece) before the next is admitted, so that a client's
        requests sent at once cannot all pass an empty budget. With ``reserve`` (an answer that may be large)
        it also reserves a largest answer of the process budget meanwhile, so that many clients' cannot."""
        lock, users = self._admitting.setdefault(client, (asyncio.Lock(), [0]))
        users[0] += 1
        acquired = reserved = False
        try:
            try:
                async with asyncio.timeout(self.wait_s):
                    await lock.acquire()
                    acquired = True
                    async with self._released:
                        await self._released.wait_for(lambda: self._has_room(client, reserve))
                        if reserve:
                            self.reserved += self.client_bytes
                            reserved = True
            except TimeoutError:
                yield False
                return
            yield True
        finally:
            if acquired:
                lock.release()
            users[0] -= 1
            if not users[0]:
                del self._admitting[client]
            if reserved:
                self.reserved -= self.client_bytes
                async with self._released:
                    self._released.notify_all()

    def take_request(self, client: str, size: int) -> bool:
        """Whether a request frame of ``size`` bytes may wait for its turn: a client's requests wait behind each
        other (``admission``), each holding its frame (up to 1 MB), over as many sockets as it opens; forty
        sockets of one address, each with 16 such frames waiting, held 860 MB. Given back by ``give_request``."""
        if (self.requests_by_client.get(client, 0) + size > CLIENT_REQUEST_BYTES
                or self.requests + size > PROCESS_REQUEST_BYTES):
            return False
        self.requests += size
        self.requests_by_client[client] = self.requests_by_client.get(client, 0) + size
        return True

    def give_request(self, client: str, size: int) -> None:
        """The request taken by ``take_request`` is answered."""
        self.requests -= size
        left = self.requests_by_client.pop(client, 0) - size
        if left > 0:
            self.requests_by_client[client] = left

    def counted(self, pieces: Iterator[bytes], holding: Holding) -> Iterator[bytes]:
        """``pieces``, each counted against the budgets as it comes out of the app."""
        for piece in pieces:
            with self._lock:
                holding.bytes += len(piece)
                self.held += len(piece)
                self.by_client[holding.client] = self.by_client.get(holding.client, 0) + len(piece)
            yield piece

    async def release(self, holding: Holding) -> None:
        """The answer is closed: what it held is free, and requests waiting for room look again."""
        with self._lock:
            self.held -= holding.bytes
            left = self.by_client.pop(holding.client, 0) - holding.bytes
            if left > 0:
                self.by_client[holding.client] = left
            holding.bytes = 0
        async with self._released:
            self._released.notify_all()
