"""How many calls one LLM endpoint runs at once (``GLASSGRAPH_LLM_CONCURRENCY``), shared by every
caller in the process: questions and ingest queue for the same slots.

A local model server (llama.cpp, llama-cpp-python, Ollama) computes one request at a time: a second
request sent meanwhile only waits in its queue, and a request its client gave up on may still be
computed there. Queueing here instead keeps the waiting visible (the trace and the job status say how
long and how many) and lets a cancelled caller leave the queue without having sent anything.
"""
from __future__ import annotations

import ipaddress
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from server.rag.llm import LLMCancelled

REMOTE_CONCURRENCY = 4  # calls at once to a hosted endpoint when not configured
_POLL_S = 0.1  # how often a waiting caller checks whether it was cancelled


class EndpointSlots:
    """``size`` calls at once; the others wait, questions before background work (ingest), each kind
    first come first: a question waits for the calls in progress, not for a document's queued chunks."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._queues = (deque[threading.Event](), deque[threading.Event]())  # questions', background work's
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        """Callers queued for a slot now."""
        return sum(len(queue) for queue in self._queues)

    @contextmanager
    def hold(self, cancelled: threading.Event, background: bool = False) -> Iterator[float]:
        """One slot for the ``with`` block; yields the seconds spent waiting for it. Raises
        :class:`LLMCancelled` if ``cancelled`` is set before a slot is free."""
        started = time.monotonic()
        queue = self._queues[background]
        with self._lock:
            turn = None if self._free and not self.waiting else threading.Event()
            if turn is None:
                self._free -= 1
            else:
                queue.append(turn)
        while turn is not None and not turn.wait(_POLL_S):
            if cancelled.is_set():
                with self._lock:
                    handed = turn.is_set()
                    if not handed:
                        queue.remove(turn)
                if handed:
                    self._release()
                raise LLMCancelled("cancelled while waiting for the LLM")
        try:
            yield time.monotonic() - started
        finally:
            self._release()

    def _release(self) -> None:
        """Hand the slot to the first waiter (a question's before background work), else free it."""
        with self._lock:
            queue = next((queue for queue in self._queues if queue), None)
            if queue is not None:
                queue.popleft().set()
            else:
                self._free += 1


_ENDPOINTS: dict[str, EndpointSlots] = {}
_ENDPOINTS_LOCK = threading.Lock()


def default_concurrency(base_url: str | None) -> int:
    """1 for a server on this machine (loopback), else ``REMOTE_CONCURRENCY``."""
    host = urlsplit(base_url or "").hostname
    if host is None:
        return REMOTE_CONCURRENCY  # the hosted default endpoint
    if host == "localhost":
        return 1
    try:
        return 1 if ipaddress.ip_address(host).is_loopback else REMOTE_CONCURRENCY
    except ValueError:
        return REMOTE_CONCURRENCY


def endpoint_slots(base_url: str, size: int | None) -> EndpointSlots:
    """The slots of ``base_url`` in this process (the first caller's ``size`` wins; None: the default)."""
    with _ENDPOINTS_LOCK:
        slots = _ENDPOINTS.get(base_url)
        if slots is None:
            slots = _ENDPOINTS[base_url] = EndpointSlots(max(1, size or default_concurrency(base_url)))
        return slots
