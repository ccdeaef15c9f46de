"""with_keepalive: a generator read through a worker thread, with None while it is slow."""
from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from server.http.keepalive import with_keepalive


def test_messages_come_in_order_with_none_while_the_source_is_slow() -> None:
    release = threading.Event()

    def slow() -> Iterator[str]:
        yield "a"
        assert release.wait(30)  # slow until the reader has had a keep-alive
        yield "b"
        yield "c"

    out = []
    for message in with_keepalive(slow(), 0.1):
        out.append(message)
        if message is None:
            release.set()
    assert [m for m in out if m is not None] == ["a", "b", "c"]
    assert out[0] == "a" and out[-2:] == ["b", "c"]
    assert None in out[1:-2]


def test_closing_the_reader_stops_and_closes_the_source_in_the_worker() -> None:
    release, closed = threading.Event(), threading.Event()
    closed_by: list[str] = []

    def source() -> Iterator[str]:
        try:
            yield "a"
            release.wait(5)
            yield "b"
            yield "never read"
        finally:
            closed_by.append(threading.current_thread().name)
            closed.set()

    reader = with_keepalive(source(), 0.05)
    assert next(reader) == "a"
    assert next(reader) is None  # the source is waiting
    reader.close()  # the client went away
    assert not closed.is_set()  # the worker is still inside the source: it finishes that step first
    release.set()
    assert closed.wait(5)
    assert closed_by == ["graph-rag-stream"]


def test_an_error_in_the_source_reaches_the_reader() -> None:
    def failing() -> Iterator[str]:
        yield "a"
        raise ValueError("broken source")

    reader = with_keepalive(failing(), 1.0)
    assert next(reader) == "a"
    with pytest.raises(ValueError, match="broken source"):
        next(reader)
