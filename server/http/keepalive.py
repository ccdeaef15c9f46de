"""How a streamed answer's frames are paced. While the pipeline waits on a model server, an SSE stream
sends a comment now and then (``with_keepalive``), so that proxies and clients do not drop a connection
that looks idle. A run that never waits on another process (the offline LLM on the embedded store, with
the shipped embeddings: ``Runtime.answers_wait``) needs neither that nor its frames sent one by one: the
thread and a hand-off and a pass of the event loop per frame cost the server a third of its work (under
one client on the sample, 19.5 ms of CPU a question without them, 28.5 with), so its frames go out
``joined``.

The pipeline runs in a worker thread (a generator may only be advanced and closed by one thread at
a time); the response reads its messages from a queue and gets ``None`` when ``interval_s`` passes
without one. Closing the reader stops the worker after the message it is waiting for, and the
worker closes the pipeline, which records the session as cancelled.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator
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


def joined(frames: Generator[str, None, None], most_chars: int = 64 * 1024, most_held_s: float = 0.02
           ) -> Iterator[str]:
    """``frames`` joined into pieces: a piece ends with the frame that takes it to ``most_chars``, or with the
    next frame made once one has been held ``most_held_s`` (on a large store a step can take that long: the
    client still sees the run advance). The frames held when ``frames`` fails go out before the error.
    Closing the pieces closes ``frames``."""
    pieces: list[str] = []
    size, held_at = 0, 0.0
    try:
        for frame in frames:
            if not pieces:
                held_at = time.monotonic()
            pieces.append(frame)
            size += len(frame)
            if size >= most_chars or time.monotonic() - held_at >= most_held_s:
                yield "".join(pieces)
                pieces, size = [], 0
    except Exception:
        if pieces:
            yield "".join(pieces)
        raise
    else:
        if pieces:
            yield "".join(pieces)
    finally:
        frames.close()
