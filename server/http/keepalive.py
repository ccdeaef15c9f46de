"""Keep-alives for streamed answers: while the pipeline waits on a slow LLM, an SSE stream sends a
comment now and then, so that proxies and clients do not drop a connection that looks idle.

The pipeline runs in a worker thread (a generator may only be advanced and closed by one thread at
a time); the response reads its messages from a queue and gets ``None`` when ``interval_s`` passes
without one. Closing the reader stops the worker after the message it is waiting for, and the
worker closes the pipeline, which records the session as cancelled.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from queue import Empty, Queue
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def with_keepalive(messages: Iterator[T], interval_s: float) -> Iterator[T | None]:
    """``messages`` in order, with ``None`` after each ``interval_s`` that passes without one."""
    queue: Queue = Queue()
    stop = threading.Event()

    def pump() -> None:
        try:
            for message in messages:
                if stop.is_set():
                    break
                queue.put((message, None))
        except BaseException as error:  # handed to the reader, which raises it
            queue.put((None, error))
        finally:
            close = getattr(messages, "close", None)
            if close is not None:
                close()
            queue.put(_DONE)

    threading.Thread(target=pump, name="graph-rag-stream", daemon=True).start()
    try:
        while True:
            try:
                item = queue.get(timeout=interval_s)
            except Empty:
                yield None
                continue
            if item is _DONE:
                return
            message, error = item
            if error is not None:
                raise error
            yield message
    finally:
        stop.set()
