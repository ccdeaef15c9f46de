"""Clients' SPARQL queries evaluated in worker processes that can be stopped.

pyoxigraph cannot cancel a query, and a query that produces no rows never returns to Python to
be told its time is up: in a thread it runs on after its deadline and after its client has left.
So a client's query runs in a worker process holding a read-only snapshot of the on-disk store;
when the deadline passes, the process is killed (CPU and memory come back at once) and the client
gets 422 naming the limit. Workers are started on first use and replaced after a kill. A worker's
memory is capped (``RLIMIT_DATA``), so one query cannot take the machine's memory either.

One more worker of its own prepares each update before the server runs it (``prepare_update``:
the guard, the protocol's USING graphs, a proof that it parses). The lexer and pyoxigraph's parser
can be driven to minutes, gigabytes or a stack overflow by a crafted text; in a worker that costs
the worker, not the server, and runaway queries never delay a write.

At most ``size`` queries run at once and at most ``WAITING_PER_WORKER * size`` more wait for a
worker, each for at most ``PATIENCE_S``; past either a query is refused with 429 and
``Retry-After``, so that runaway queries can never hold every thread of the server (health checks,
writes and GraphRAG keep theirs).

Freshness: the server counts its writes (``GraphStore.generation``); a task carries the count it
was sent at, and a worker whose snapshot is older opens a new one first, so a query sent after an
acknowledged write sees it. Opening a snapshot replays the store's write-ahead log, which grows
with every write until the server flushes it (after 5,000 trace-sized writes a snapshot took 11 s
to open, 10 ms after a flush), so the server flushes before a worker opens a new snapshot: the
flush then holds only the writes since the last one.
"""
from __future__ import annotations

import concurrent.futures
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

from pyoxigraph import Store

from server.config import PROJECT_ROOT
from server.errors import Busy, GlassgraphError, LimitExceeded, StoreFailed, Unavailable
from server.http.rdf_output import Answer
from server.http.sparql_errors import SyntaxProblem
from server.http.sparql_eval import (
    CheckedQuery,
    CheckTask,
    PreparedUpdate,
    QueryTask,
    UpdateTask,
    answer_query,
    check_query,
    check_syntax,
    deadline_exceeded,
    prepare_update,
)

_START_TIMEOUT_S = 60.0
WAITING_PER_WORKER = 4
PATIENCE_S = 5.0  # the longest a query waits for a worker
PARSES_WAITING = 8
_PARENT_CHECK_S = 1.0
_OPEN_ATTEMPTS, _OPEN_RETRY_S = 10, 0.01  # the n-th retry waits n times _OPEN_RETRY_S
_STEPS: dict[str, Callable[[object], object]] = {  # a worker's jobs other than a query, by name
    "check": lambda task: check_query(task, whole_parse=True),  # the guard, for a remote engine's query
    "syntax": check_syntax,  # the console editor's marks
    "update": prepare_update,
    "document": lambda task: _read_document(*task),  # an upload's text (server.http.document_readers)
}


def _read_document(data: bytes, declared: str | None, name: str | None) -> object:
    """``formats.read_document``, imported on a worker's first document (query workers never load pypdf)."""
    from server.ingest.formats import read_document

    return read_document(data, declared, name)


def _exit_with_parent(parent: int) -> None:
    """End this worker, even mid-query (the query runs without the GIL), once the server is gone."""
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(1)


class _Snapshot:
    """A worker's read-only view of the store, reopened when the server has written since."""

    def __init__(self, path: str) -> None:
        self.path, self.store, self.generation = path, None, -1

    def answer(self, generation: int, task: QueryTask) -> Answer:
        """The answer on a snapshot at least as new as ``generation``.

        An evaluation that fails on the store's side (a file the server compacted away under an
        old snapshot) is tried once more on a new snapshot.
        """
        try:
            return answer_query(self._open(generation), task)
        except StoreFailed:
            self.store = None
        return answer_query(self._open(generation), task)

    def _open(self, generation: int) -> Store:
        """A snapshot at ``generation``. Opening races the server's compactions (a file the manifest
        names can be gone a moment later), so a failed open is tried again a few times."""
        if self.store is not None and self.generation == generation:
            return self.store
        self.store = None
        for attempt in range(_OPEN_ATTEMPTS):
            time.sleep(_OPEN_RETRY_S * attempt)
            try:
                self.store, self.generation = Store.read_only(self.path), generation
                return self.store
            except (OSError, RuntimeError) as error:
                failure = error
        raise Unavailable(f"the store could not be opened for reading: {failure}")


def _serve(tasks: Connection, replies: Connection, store_path: str, memory_bytes: int, parent: int) -> None:
    """A worker's loop: ("query", generation, QueryTask), ("check", QueryTask), ("syntax", CheckTask) or
    ("update", UpdateTask) in; ("ok", Answer, CheckedQuery, SyntaxProblem | None or PreparedUpdate) or
    ("error", GlassgraphError) out."""
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    snapshot = _Snapshot(store_path)
    replies.send(("ready",))
    while True:
        try:
            job = tasks.recv()
        except EOFError:
            return
        try:
            if job[0] == "query":
                result = snapshot.answer(*job[1:])
            else:
                result = _STEPS[job[0]](job[1])
            replies.send(("ok", result))
        except GlassgraphError as error:
            replies.send(("error", error))


class _Worker:
    """One worker process (``python -m server.http.query_workers``) and the two pipes to it.

    A plain subprocess rather than multiprocessing's spawn, which would import the server's own
    ``__main__`` (gunicorn, a test runner) again in every worker.
    """

    def __init__(self, store_path: Path | None, memory_bytes: int) -> None:
        self.generation = -1  # of the snapshot the process holds
        task_read, task_write = os.pipe()
        reply_read, reply_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "server.http.query_workers", str(task_read), str(reply_write), str(store_path or ""),
             str(memory_bytes), str(os.getpid())],
            pass_fds=(task_read, reply_write), cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
            env={**os.environ, "RUST_BACKTRACE": "0"})
        os.close(task_read)
        os.close(reply_write)
        self.tasks, self.replies = Connection(task_write, readable=False), Connection(reply_read, writable=False)
        try:
            if not self.replies.poll(_START_TIMEOUT_S):
                raise EOFError
            self.replies.recv()
        except (EOFError, OSError):
            self.kill()
            raise Unavailable("a query worker process did not start; try again") from None

    def ask(self, job: tuple, deadline_s: float) -> object:
        """The result of ``job``; kills the process when the deadline passes or the process dies."""
        try:
            self.tasks.send(job)
            if not self.replies.poll(deadline_s):
                self.kill()
                raise deadline_exceeded(deadline_s)
            reply = self.replies.recv()
        except (EOFError, OSError):
            exit_code = self.process.wait(5)
            self.kill()
            raise LimitExceeded(f"the request stopped its worker process (exit code {exit_code}): it used more "
                                "memory than GLASSGRAPH_QUERY_MEMORY allows, or is too long or deep to parse "
                                "safely") from None
        if reply[0] == "ok":
            return reply[1]
        raise reply[1]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        self.tasks.close()
        self.replies.close()


class _Slots:
    """``size`` workers handed out one job at a time, with at most ``waiting`` callers waiting, each
    at most ``PATIENCE_S``; ``busy`` is the refusal past either."""

    def __init__(self, size: int, waiting: int, start: Callable[[], _Worker], busy: str) -> None:
        self._start, self._busy = start, busy
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)  # a free slot whose process is started on first use
        self._waiting = threading.BoundedSemaphore(waiting)
        self._closed = False

    @contextmanager
    def worker(self) -> Iterator[_Worker]:
        """A worker for one job, started if its slot has none, put back afterwards if it lives."""
        worker = self.take()
        try:
            yield worker
        finally:
            self.give_back(worker)

    def take(self) -> _Worker:
        """A worker, started if its slot has none; the caller must ``give_back`` it."""
        worker = self._take()
        try:
            return worker if worker is not None else self._start()
        except BaseException:
            self._idle.put(None)
            raise

    def give_back(self, worker: _Worker) -> None:
        self._idle.put(worker if worker.alive else None)

    def _take(self) -> _Worker | None:
        busy = Busy(f"{self._busy}: try again shortly ({PATIENCE_S:g} s is the longest wait)", {"Retry-After": "5"})
        if self._closed or not self._waiting.acquire(blocking=False):
            raise busy
        try:
            return self._idle.get(timeout=PATIENCE_S)
        except queue.Empty:
            raise busy from None
        finally:
            self._waiting.release()

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                return
            if worker is not None:
                worker.kill()


class QueryWorkers:
    """``size`` worker processes for clients' queries and one more for parse checks (so that
    runaway queries never hold up writes) over the on-disk store at ``store_path``; see the module
    docstring. With no ``store_path`` (a remote engine evaluates the queries) the query workers only check
    queries (``check_query``) and open no snapshot."""

    def __init__(self, store_path: Path | None, size: int, memory_mb: int, flush: Callable[[], None]) -> None:
        """``flush`` persists the server's recent writes (``GraphStore.flush``)."""
        self.flush = flush

        def start() -> _Worker:
            return _Worker(store_path, memory_mb * 1024 * 1024)

        self._queries = _Slots(size, WAITING_PER_WORKER * size, start,
                               "every query worker is busy (GLASSGRAPH_QUERY_WORKERS) with queries waiting")
        self._parser = _Slots(1, PARSES_WAITING, start, f"{PARSES_WAITING} requests are waiting for a parse check")

    def run(self, task: QueryTask, generation: int, deadline_s: float) -> Answer:
        """``task``'s answer; 422 past ``deadline_s``; 429 when the queue is full or no worker came free in time."""
        with self._queries.worker() as worker:
            if worker.generation != generation:
                self.flush()
            answer = worker.ask(("query", generation, task), deadline_s)
            worker.generation = generation
            return answer

    def check_and_forward(self, task: QueryTask, deadline_s: float,
                          forward: Callable[[CheckedQuery], Answer]) -> Answer:
        """``sparql_eval.check_query`` in a query worker, then ``forward`` (a remote engine evaluates the query)
        on a thread of its own that keeps the worker's place until the engine has answered; 422 at
        ``deadline_s`` even if it has not. The engine's timeout does not stop every query (Oxigraph sorts
        on past it): such a query keeps its place as long as the engine works on it, so the engine runs at
        most ``size`` of this process's queries at once and more are refused here (429). Never behind an
        update's parse."""
        worker = self._queries.take()
        try:
            checked = worker.ask(("check", task), deadline_s)
        except BaseException:
            self._queries.give_back(worker)
            raise
        answered: concurrent.futures.Future[Answer] = concurrent.futures.Future()

        def run() -> None:
            try:
                answered.set_result(forward(checked))
            except BaseException as error:  # noqa: BLE001 - handed to the request, if it still waits, without
                error.__context__ = error.__cause__ = None  # the frames that hold the engine's result: pyoxigraph's
                answered.set_exception(error.with_traceback(None))  # objects may only be dropped on this thread
            finally:
                self._queries.give_back(worker)

        threading.Thread(target=run, name="engine-query", daemon=True).start()
        try:
            return answered.result(timeout=deadline_s)
        except concurrent.futures.TimeoutError:
            raise deadline_exceeded(deadline_s) from None

    def prepare_update(self, task: UpdateTask, deadline_s: float) -> PreparedUpdate:
        """``sparql_eval.prepare_update`` in the parse worker: a text that would take the lexer or the
        parser past the deadline, the memory cap or the stack costs that worker, not the server (422)."""
        with self._parser.worker() as worker:
            return worker.ask(("update", task), deadline_s)

    def check_syntax(self, task: CheckTask, deadline_s: float) -> SyntaxProblem | None:
        """``sparql_eval.check_syntax`` in a query worker (a check is as costly as a query's parse, and
        the editor sends one per pause in typing: it must not hold up the updates' parse worker)."""
        with self._queries.worker() as worker:
            return worker.ask(("syntax", task), deadline_s)

    def close(self) -> None:
        """Stop every worker (the server is shutting down)."""
        self._queries.close()
        self._parser.close()


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), sys.argv[3],
           int(sys.argv[4]), int(sys.argv[5]))
