"""with_keepalive: a generator read through a worker thread, with None while it is slow; joined: the frames of
a run that never waits, sent in few pieces."""
from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator

import pytest

from server.http.keepalive import joined, with_keepalive


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


def _frames(*frames: str, pause_after: str = "", pause_s: float = 0.0) -> Generator[str, None, None]:
    for frame in frames:
        yield frame
        if frame == pause_after:
            time.sleep(pause_s)


def test_frames_are_joined_in_order_up_to_the_size_of_a_piece() -> None:
    assert list(joined(_frames("a\n", "b\n", "c\n"), most_held_s=60)) == ["a\nb\nc\n"]
    frames = [f"data: {n:04d}\n\n" for n in range(10)]  # 12 characters each
    pieces = list(joined(_frames(*frames), most_chars=30, most_held_s=60))
    assert "".join(pieces) == "".join(frames)
    assert [len(piece) for piece in pieces] == [36, 36, 36, 12]


def test_a_frame_held_too_long_goes_out_with_the_next_one() -> None:
    """A slow step (a large store's retrieval) does not keep the steps before it from the client past it."""
    pieces = list(joined(_frames("a", "b", "c", pause_after="a", pause_s=0.1), most_held_s=0.05))
    assert pieces == ["ab", "c"]


def test_closing_the_pieces_closes_the_frames() -> None:
    """A client that leaves closes the response, and so the run (which records the session as cancelled)."""
    closed = threading.Event()

    def source() -> Generator[str, None, None]:
        try:
            yield "a" * 10
            yield "never read"
        finally:
            closed.set()

    frames = source()  # held here too: only joined's own close can close it now
    pieces = joined(frames, most_chars=5)
    assert next(pieces) == "a" * 10
    pieces.close()
    assert closed.is_set()


def test_the_frames_held_when_the_run_fails_go_out_before_the_error() -> None:
    def failing() -> Generator[str, None, None]:
        yield "session"
        raise RuntimeError("the store failed")

    pieces = joined(failing(), most_held_s=60)
    assert next(pieces) == "session"
    with pytest.raises(RuntimeError, match="the store failed"):
        next(pieces)
