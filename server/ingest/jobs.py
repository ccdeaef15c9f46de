"""Ingest in the background, for the HTTP API: one document at a time, answering never waits for it.

A job lives here while it is queued or running, and after it failed (the last ``MAX_FAILED``);
once committed, the document is read from the store like any other. Queued jobs hold their bytes:
``MAX_QUEUED`` bounds that memory (429 past it).
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from server.errors import Busy, GlassgraphError
from server.ingest.documents import Ingester, IngestOptions
from server.ingest.formats import Document

log = logging.getLogger(__name__)

MAX_QUEUED = 16
MAX_FAILED = 100


@dataclass
class Job:
    id: str
    collection: str
    title: str | None
    media_type: str
    status: str = "queued"  # queued, running, failed
    error: str | None = None
    submitted: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    chunks: int | None = None
    chunks_done: int = 0
    workers: int = 1  # chunks sent to the LLM at once
    llm_waiting: Callable[[], int] | None = None  # calls queued for the LLM endpoint now (questions too)

    def to_dict(self) -> dict:
        """The fields of a listed document (pages and facts are known once it is ingested), and progress:
        ``llm_waiting`` counts the calls (of any job or question) queued for the LLM endpoint's slots
        while this job runs (``GLASSGRAPH_LLM_CONCURRENCY``)."""
        waiting = self.llm_waiting() if self.llm_waiting is not None and self.status == "running" else None
        return {"id": self.id, "collection": self.collection, "title": self.title, "media_type": self.media_type,
                "status": self.status, "error": self.error, "submitted": self.submitted, "pages": None,
                "chunks": self.chunks, "facts": None, "chunks_done": self.chunks_done, "workers": self.workers,
                "llm_waiting": waiting, "warning_messages": []}


class IngestJobs:
    """The background queue of one app: a single worker thread, so documents commit in order."""

    def __init__(self, ingester: Ingester) -> None:
        self.ingester = ingester
        self._jobs: OrderedDict[tuple[str, str], Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest")

    def submit(self, job: Job, data: bytes, document: Document, name: str | None, options: IngestOptions) -> Job:
        """Queue ``job`` (``document``: ``data`` as read when the upload was checked); the same document already
        queued or running is that job. Busy when the queue is full."""
        key = (job.collection, job.id)
        with self._lock:
            current = self._jobs.get(key)
            if current is not None and current.status != "failed":
                return current
            if sum(j.status == "queued" for j in self._jobs.values()) >= MAX_QUEUED:
                raise Busy(f"{MAX_QUEUED} documents are already waiting to be ingested: try again later",
                           {"Retry-After": "10"})
            self._jobs[key] = job
        job.workers = options.workers
        slots = getattr(self.ingester.llm, "slots", None)
        job.llm_waiting = (lambda: slots.waiting) if slots is not None else None
        self._pool.submit(self._run, job, data, document, name, options)
        return job

    def get(self, collection: str, doc_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get((collection, doc_id))

    def of_collection(self, collection: str) -> list[Job]:
        with self._lock:
            return [job for (name, _), job in self._jobs.items() if name == collection]

    def _run(self, job: Job, data: bytes, document: Document, name: str | None, options: IngestOptions) -> None:
        job.status = "running"

        def total(count: int) -> None:
            job.chunks = count

        def progress(count: int) -> None:
            job.chunks_done += count

        try:
            self.ingester.ingest(data, job.collection, name=name, options=options, progress=progress, total=total,
                                 document=document)
        except GlassgraphError as exc:
            self._failed(job, exc.message)
        except Exception as exc:  # the worker thread must survive anything; the job says what happened
            log.exception("ingest of %s into %r failed", job.id, job.collection)
            self._failed(job, f"internal error: {type(exc).__name__}: {exc}")
        else:
            with self._lock:
                self._jobs.pop((job.collection, job.id), None)

    def _failed(self, job: Job, message: str) -> None:
        job.status, job.error = "failed", message
        with self._lock:
            failed = [key for key, j in self._jobs.items() if j.status == "failed"]
            for key in failed[:max(0, len(failed) - MAX_FAILED)]:
                del self._jobs[key]
