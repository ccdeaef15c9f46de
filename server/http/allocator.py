"""The worker's C allocator (glibc malloc, which Python's large objects and pyoxigraph's Rust code use) made
to hand memory back to the system after a burst.

Left as it is, glibc keeps what a burst took: each request thread gets an arena of its own (up to eight
per core), a freed block inside an arena stays in the process, and the size above which a block gets
pages of its own (and gives them back when freed) rises to the largest block freed, up to 32 MB, so
answers of a few megabytes end up inside arenas. The worker's RSS then stayed at 3.1 GB after one run of
the attacker's probes and 9 GB after two. ``tune(arenas)`` bounds the arenas and fixes that size at
``MMAP_THRESHOLD``; ``Trimmer`` gives back the free pages of every arena (``malloc_trim(0)``) shortly
after a large response. On a C library other than glibc both do nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time

M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # mallopt parameters (malloc.h)
MMAP_THRESHOLD = 1024 * 1024  # a block this large gets pages of its own, given back when it is freed
TRIM_AFTER_BYTES = 4 * 1024 * 1024  # a request or response this large is followed by a trim
TRIM_DELAY_S = 1.0  # after a large response, how long to wait (for others to end too) before trimming


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 (glibc's own: musl and others lack them)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def tune(arenas: int) -> bool:
    """At most ``arenas`` malloc arenas (for the threads that have none yet: call it before they start)
    and a fixed mmap threshold; False where the C library is not glibc."""
    if _LIBC is None:
        return False
    _LIBC.mallopt(M_ARENA_MAX, arenas)
    _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)  # which also stops the trim threshold's rise
    return True


class Trimmer:
    """``malloc_trim(0)`` on a thread of its own, ``TRIM_DELAY_S`` after a large request or response was
    noted (``note(nbytes)``), at most once per ``TRIM_DELAY_S`` however many there were."""

    def __init__(self) -> None:
        self._due = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def note(self, nbytes: int) -> None:
        if nbytes < TRIM_AFTER_BYTES or _LIBC is None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)
                self._thread.start()
        self._due.set()

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            time.sleep(TRIM_DELAY_S)  # the response's objects are dropped after its last byte
            _LIBC.malloc_trim(0)
