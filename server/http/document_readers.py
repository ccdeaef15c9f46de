"""An uploaded document read (its text extracted: pypdf for a PDF) in a worker process that is killed at
its budget, never in a request thread.

pypdf checks nothing inside a page: a 1.7 KB one-page PDF drawing a form XObject of 100,000 operators
40 times read for 48-57 s in the request thread before its refusal (pypdf allows 5,000 such drawings,
so hours), holding the GIL all along. The workers are the query workers' own processes
(``query_workers``: a plain subprocess per worker, pipes, ``RLIMIT_DATA``), asked for the step
``"document"`` (``formats.read_document``); past ``GLASSGRAPH_DOCUMENT_SECONDS`` the worker is killed and
the upload refused (422), and a worker that runs out of ``GLASSGRAPH_DOCUMENT_MEMORY`` dies with the same
answer. Nothing is stored or queued before the document has been read.
"""
from __future__ import annotations

import time

from server.errors import LimitExceeded, UnreadableDocument
from server.http.query_workers import QUEUE_WAIT_S, SERVER_CLIENT, WAITING_PER_CLIENT, _Pool, _Worker
from server.ingest.formats import Document

READERS = 1  # worker processes reading documents (uploads are read one at a time per reader)


class DocumentReaders:
    """``READERS`` worker processes reading uploads within ``budget_s`` seconds and ``memory_mb`` MB each."""

    def __init__(self, budget_s: float, memory_mb: int) -> None:
        self.budget_s, self.memory_mb = budget_s, memory_mb
        self._readers = _Pool(READERS, WAITING_PER_CLIENT, lambda: _Worker(None, memory_mb * 1024 * 1024),
                              "a document reader (uploads are read one at a time)")

    def read(self, data: bytes, declared: str | None, name: str | None) -> Document:
        """``formats.read_document(data, declared, name)`` in a worker: its own refusals (415, 422), or 422 when
        the worker passed its budget or its memory and was killed; 503 when no reader came free in time."""
        with self._readers.worker(SERVER_CLIENT, QUEUE_WAIT_S) as worker:
            started = time.monotonic()
            try:
                return worker.ask(("document", (data, declared, name)), self.budget_s)
            except LimitExceeded:
                if worker.alive:  # a refusal of read_document's own (the page or section limit)
                    raise
        cost = f"took more than {self.budget_s:g} s (GLASSGRAPH_DOCUMENT_SECONDS)" \
            if time.monotonic() - started >= self.budget_s else \
            f"needed more than {self.memory_mb} MB of memory (GLASSGRAPH_DOCUMENT_MEMORY)"
        raise UnreadableDocument(f"reading the document {cost}: it is too costly to read, and its reader was stopped")

    def close(self) -> None:
        """Stop every reader (the server is shutting down)."""
        self._readers.close()
