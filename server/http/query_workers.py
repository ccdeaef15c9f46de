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

Serving every client: at most ``size`` queries run at once (``GLASSGRAPH_QUERY_WORKERS``, by default one
per core); more wait for a worker, each client's in a line of its own, served in turn (``fair_queue``),
for at most ``GLASSGRAPH_QUEUE_WAIT`` (then 503). A client is refused (429) only past its fair share,
``GLASSGRAPH_QUEUE_PER_CLIENT`` queries waiting at once. A query that has used ``GLASSGRAPH_LONG_AFTER``
seconds of CPU (0.1 by default) moves to the long lane (``GLASSGRAPH_LONG_QUERIES`` at once, 429
past it): its place is given another worker, so runaway and heavy queries never hold the places of short
ones, and its process runs at a lower priority (``LONG_NICENESS``) until it is done, so they take the
CPU that short ones leave. CPU time, not time, tells a long query: on a loaded machine short ones take
longer too. Health checks, writes and GraphRAG have threads of their own.

Freshness: the server counts its writes (``StoreBackend.generation``). A query sent after an
acknowledged write of data (an update, the Graph Store, an ingest) is answered on a snapshot that holds
it; a worker whose snapshot is older opens a new one first. GraphRAG's traces, written by every
question, need no new snapshot on a query's path: a renewer thread opens new snapshots in idle
workers ahead of need, at most every ``RENEW_EVERY_S``, and a worker whose snapshot has missed writes
for ``STALE_AFTER_S`` renews it before its next query (busy workers are never idle). So /sparql
shows a trace within about a second; /api/explain and the console read the store itself, at once.
Opening a snapshot replays the store's write-ahead log, which grows with every write until the
server flushes it (after 5,000 trace-sized writes a snapshot took 11 s to open, 10 ms after a
flush), so the renewer flushes the server's writes at most every ``FLUSH_EVERY_S``, off the queries'
path: a flush before each opening cost a query after a write 30 ms more (75 ms instead of 27 on the
sample) and, by the compactions its small files set off, made most openings fail and start again.
"""
from __future__ import annotations

import concurrent.futures
import logging
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from pyoxigraph import Store

from server.config import PROJECT_ROOT
from server.errors import Busy, ClientLeft, GlassgraphError, LimitExceeded, StoreFailed, Unavailable
from server.http.fair_queue import FairQueue
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
from server.store import open_snapshot

if TYPE_CHECKING:
    from server.store_base import StoreBackend

log = logging.getLogger("glassgraph.queries")
_START_TIMEOUT_S = 60.0
WAITING_PER_CLIENT = 128  # GLASSGRAPH_QUEUE_PER_CLIENT's default
QUEUE_WAIT_S = 30.0  # GLASSGRAPH_QUEUE_WAIT's default: the longest a query waits for a worker
# GLASSGRAPH_LONG_AFTER's defaults: a query that has used this much CPU is a long one (ten times the heaviest
# query of bench/load_http.py's mix). At 1 s, eight runaway clients beside writers held both short places while
# they reached it (seconds of time on a loaded machine): selects waited 6 s at the median, and 30 s (503) in the
# soak. A query sent to a remote engine is long after this much of the engine's time.
LONG_AFTER_S, REMOTE_LONG_AFTER_S = 0.1, 1.0
_LONG_CHECK_S = 0.25  # how often a running query's CPU time is read
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
LONG_NICENESS = 19  # a long query's scheduling priority: the lowest (at 10, 8 of them took half the CPU)
RENEW_EVERY_S = 0.2  # the most often idle workers are given new snapshots after writes
FLUSH_EVERY_S = 1.0  # the most often the renewer flushes the server's writes (a snapshot replays the rest)
STALE_AFTER_S = 1.0  # the longest a busy worker answers on a snapshot that misses a trace
SERVER_CLIENT = "(server)"  # the client key of the server's own jobs (update parses, uploads)
_PARENT_CHECK_S = 1.0
_EVALUATION_ATTEMPTS = 4  # a query failing on the store's side, on a new snapshot each time
_READS_PAST_ERRORS = re.compile(r"MINUS|EXISTS", re.IGNORECASE)
_REAP_WAIT_S = 5.0  # how long a stopped worker process is waited for before a thread takes over the wait
_STEPS: dict[str, Callable[[object], object]] = {  # a worker's jobs other than a query, by name
    "check": lambda task: check_query(task, whole_parse=True),  # the guard, for a remote engine's query
    "syntax": check_syntax,  # the console editor's marks
    "update": prepare_update,
    "document": lambda task: _read_document(*task),  # an upload's text (server.http.document_readers)
}
# A job: ("query", generation, QueryTask), ("renew", generation), or a step's name and its task


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
    """A worker's read-only view of the store, reopened when the server has written since, and, for a query
    with an operator that reads past the store's errors, when the server has compacted away a table file
    that was there when it was opened.

    A read-only instance opens most table files when it first reads them, so a file deleted since the open is
    an error for the query that needs it (docs/decisions.md, decision 30): most queries end with it and are
    tried again on a new snapshot, but Oxigraph's ``MINUS`` without shared variables spins on it and its
    ``EXISTS`` counts it as a solution. Reopening for every query after a compaction took 12% of the SPARQL
    answers of the load bench's mixed phase, so only those queries have the directory listed first.
    """

    def __init__(self, path: str) -> None:
        self.path, self.store, self.generation = path, None, -1
        self.table_files: frozenset[str] = frozenset()  # the store's table files just after the open

    def answer(self, generation: int, task: QueryTask) -> Answer:
        """The answer on a snapshot at least as new as ``generation``.

        An evaluation that fails on the store's side (a file compacted away while the query ran) is tried
        again on a new snapshot, up to ``_EVALUATION_ATTEMPTS`` times: under load a compaction can also
        outrun the first new one (seen in the short soak: a 500 naming a missing ``.sst`` file).
        """
        renew_if_files_lost = reads_past_errors(task.text)
        for _ in range(_EVALUATION_ATTEMPTS - 1):
            try:
                return answer_query(self.open(generation, renew_if_files_lost), task)
            except StoreFailed:
                self.store = None
        return answer_query(self.open(generation, renew_if_files_lost), task)

    def open(self, generation: int, renew_if_files_lost: bool = False) -> Store:
        """A snapshot at ``generation`` (``store.open_snapshot``: a failed open is tried again for a while);
        with ``renew_if_files_lost``, one whose table files are all still there."""
        if self.store is not None and self.generation == generation and (
                not renew_if_files_lost or self.table_files.issubset(self._directory_entries())):
            return self.store
        self.store = None
        try:
            self.store, self.generation = open_snapshot(self.path), generation
        except OSError as error:
            raise Unavailable(f"the store could not be opened for reading: {error}") from None
        self.table_files = frozenset(name for name in self._directory_entries() if name.endswith(".sst"))
        return self.store

    def _directory_entries(self) -> list[str]:
        try:
            return os.listdir(self.path)
        except OSError:
            return []


def reads_past_errors(text: str) -> bool:
    """Whether a query may use an Oxigraph operator that reads past the store's errors (``MINUS`` without
    shared variables, ``EXISTS``): a word test on the text, so a word in a string or IRI counts too."""
    return _READS_PAST_ERRORS.search(text) is not None


def _serve(tasks: Connection, replies: Connection, store_path: str, memory_bytes: int, parent: int) -> None:
    """A worker's loop: ("query", generation, QueryTask), ("check", QueryTask), ("syntax", CheckTask) or
    ("update", UpdateTask) in; ("ok", Answer, CheckedQuery, SyntaxProblem | None or PreparedUpdate) or
    ("error", GlassgraphError) out, each with the CPU seconds the process has used so far (the server
    counts a job's CPU time from there, without reading /proc for every short job)."""
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    snapshot = _Snapshot(store_path)
    replies.send(("ready", time.process_time()))
    while True:
        try:
            job = tasks.recv()
        except EOFError:
            return
        try:
            if job[0] == "query":
                result = snapshot.answer(*job[1:])
            elif job[0] == "renew":
                snapshot.open(job[1])
                result = None
            else:
                result = _STEPS[job[0]](job[1])
            replies.send(("ok", result, time.process_time()))
        except GlassgraphError as error:
            replies.send(("error", error, time.process_time()))


class _Worker:
    """One worker process (``python -m server.http.query_workers``) and the two pipes to it.

    A plain subprocess rather than multiprocessing's spawn, which would import the server's own
    ``__main__`` (gunicorn, a test runner) again in every worker.
    """

    def __init__(self, store_path: Path | None, memory_bytes: int) -> None:
        self.generation = -1  # of the snapshot the process holds
        self.cpu_at_reply = 0.0  # the process's CPU seconds when it last answered: where a job's CPU time starts
        self.renewed_at = time.monotonic()  # when it last held the store's latest generation
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
            self.cpu_at_reply = self.replies.recv()[1]
        except (EOFError, OSError):
            self.kill()
            raise Unavailable("a query worker process did not start; try again") from None

    def ask(self, job: tuple, deadline_s: float, on_long: Callable[[], None] | None = None,
            long_after_s: float = LONG_AFTER_S, client_left: threading.Event | None = None) -> object:
        """The result of ``job``; kills the process when the deadline passes or the process dies.
        ``on_long`` is called once the job is a long one, when it has used ``long_after_s`` of CPU (not of
        time: on a loaded machine short jobs take longer too, and a lowered priority would starve them);
        if it raises, the job is stopped. Once ``client_left`` is set, the job is stopped (``ClientLeft``):
        nobody would read its answer, and a place in the long lane is not held for nobody."""
        if client_left is not None and client_left.is_set():  # it left while its query waited for a worker
            raise ClientLeft("the client left before its query ran")
        try:
            self.tasks.send(job)
            started = time.monotonic()
            answered = False
            while (on_long is not None or client_left is not None) and time.monotonic() - started < deadline_s:
                if self.replies.poll(min(_LONG_CHECK_S, deadline_s - (time.monotonic() - started))):
                    answered = True
                    break
                if client_left is not None and client_left.is_set():
                    self.kill()
                    raise ClientLeft(f"the client left after {time.monotonic() - started:.1f} s: its query was stopped")
                if on_long is not None and self.cpu_seconds() - self.cpu_at_reply >= long_after_s:
                    self._went_long(on_long)
                    on_long = None  # once
            remaining = deadline_s - (time.monotonic() - started)
            if not answered and (remaining <= 0 or not self.replies.poll(remaining)):
                self.kill()
                raise deadline_exceeded(deadline_s)
            reply = self.replies.recv()
        except (EOFError, OSError):
            exit_code = self._ended_with(_REAP_WAIT_S)
            self.kill()
            raise LimitExceeded(f"the request stopped its worker process (exit code {exit_code}): it used more "
                                "memory than GLASSGRAPH_QUERY_MEMORY allows, or is too long or deep to parse "
                                "safely") from None
        self.cpu_at_reply = reply[2]
        if reply[0] == "ok":
            return reply[1]
        raise reply[1]

    def _went_long(self, on_long: Callable[[], None]) -> None:
        try:
            on_long()
        except BaseException:
            self.kill()
            raise

    def cpu_seconds(self) -> float:
        """The CPU time the process has used (Linux: /proc); 0 where that cannot be read."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def renewed(self, generation: int) -> None:
        """The process answers on a snapshot at ``generation`` now."""
        if generation != self.generation:
            self.generation, self.renewed_at = generation, time.monotonic()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Stop the process and close its pipes; never raises. A killed process that does not end within
        ``_REAP_WAIT_S`` (in uninterruptible sleep on a loaded machine: seen once in a 5-minute soak, which
        then answered 500) is reaped by a thread of its own when it does."""
        self.process.kill()
        if self._ended_with(_REAP_WAIT_S) is None:
            threading.Thread(target=self.process.wait, name="reap-query-worker", daemon=True).start()
        self.tasks.close()
        self.replies.close()

    def _ended_with(self, wait_s: float) -> int | None:
        """The process's exit code once it has ended, within ``wait_s``; None if it has not."""
        try:
            return self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None


class _Pool:
    """Places for workers, handed out fairly between clients (``FairQueue``); a place holds a started
    worker or None (a spare worker, else a new one, is put in when the place is first used)."""

    def __init__(self, size: int, per_client: int, start: Callable[[], _Worker], what: str) -> None:
        self._start, self._size = start, size
        self.places: FairQueue[_Worker | None] = FairQueue([None] * size, per_client, what)
        self._spares: list[_Worker] = []  # started workers waiting for an empty place
        self._spares_lock = threading.Lock()
        self._refilling = self._closed = False

    def prestart(self) -> None:
        """Put a started worker in every empty free place."""
        for worker in self.places.take_all_free():
            try:
                if worker is None or not worker.alive:
                    worker = self._spare_or_new()
            except GlassgraphError:
                worker = None  # started again when the place is used
            self.places.put(worker)

    def add_spare(self, worker: _Worker) -> None:
        """Keep ``worker`` for the next empty place (starting a process costs more than a query)."""
        with self._spares_lock:
            if len(self._spares) < self._size and not self._closed:
                self._spares.append(worker)
                return
        worker.kill()

    def refill(self) -> None:
        """Start a spare worker in the background for the place a long or stopped query has just emptied, so
        that the next query in line finds one ready: started on the query's own turn, a process held the place
        for its start (0.2 s of CPU, seconds on a loaded machine), once per runaway query."""
        with self._spares_lock:
            if self._refilling or self._spares or self._closed:
                return
            self._refilling = True

        def start() -> None:
            try:
                worker = self._start()
            except GlassgraphError:
                worker = None  # started again on the place's next use
            with self._spares_lock:
                self._refilling = False
            if worker is not None:
                self.add_spare(worker)

        threading.Thread(target=start, name="query-worker-spare", daemon=True).start()

    def _spare_or_new(self) -> _Worker:
        with self._spares_lock:
            while self._spares:
                worker = self._spares.pop()
                if worker.alive:
                    return worker
        return self._start()

    @contextmanager
    def worker(self, client: str, wait_s: float) -> Iterator[_Worker]:
        """A worker for one job, put back afterwards if it lives."""
        worker = self.take(client, wait_s)
        try:
            yield worker
        finally:
            self.give_back(worker)

    def take(self, client: str, wait_s: float) -> _Worker:
        """A worker, started if its place has none; the caller must ``give_back`` it."""
        worker = self.places.take(client, wait_s)
        try:
            return worker if worker is not None and worker.alive else self._spare_or_new()
        except BaseException:
            self.places.put(None)
            raise

    def give_back(self, worker: _Worker) -> None:
        if worker.alive:
            self.places.put(worker)
            return
        self.places.put(None)
        self.refill()

    def close(self) -> None:
        with self._spares_lock:
            spares, self._spares, self._closed = self._spares, [], True
        for worker in [*self.places.close(), *spares]:
            if worker is not None:
                worker.kill()


class _LongLane:
    """Long queries (see ``_Worker.ask``): at most ``size`` at once, each moved out of the way of short ones
    (see ``_Place.move_aside``), and at most half of them (one at least) a client's, so that one client's
    runaway queries leave room for another's long one."""

    def __init__(self, size: int) -> None:
        self.size, self.per_client = size, max(1, size // 2)
        self._taken: Counter[str] = Counter()
        self._lock = threading.Lock()

    def enter(self, client: str) -> None:
        """Admit one long query of ``client``; 429 when ``size`` of them run already, or its share."""
        with self._lock:
            if self._taken[client] >= self.per_client:
                raise Busy(f"this client runs {self._taken[client]} long-running queries already, its share of the "
                           f"{self.size} (GLASSGRAPH_LONG_QUERIES): this one was stopped when it became one; try it "
                           "again when one of them has ended", {"Retry-After": "10"})
            if self._taken.total() >= self.size:
                raise Busy(f"{self.size} long-running queries are running already (GLASSGRAPH_LONG_QUERIES): this "
                           "one was stopped when it became one; try it again later", {"Retry-After": "10"})
            self._taken[client] += 1

    def leave(self, client: str) -> None:
        with self._lock:
            self._taken[client] -= 1
            if not self._taken[client]:
                del self._taken[client]


class _Place:
    """A worker's place in the pool, held for one job; ``release`` when the job is over."""

    def __init__(self, pool: _Pool, lane: _LongLane, worker: _Worker, client: str, lower_priority: bool) -> None:
        self.pool, self.lane, self.worker, self.lower_priority = pool, lane, worker, lower_priority
        self.client = client
        self._lock = threading.Lock()
        self._moved = self._released = False

    def move_aside(self) -> None:
        """The job has become a long one: it goes to the long lane (429 when that is full), its place
        gets a new worker for short jobs, and its own process runs at a lower priority."""
        with self._lock:
            if self._released:
                return
            self.lane.enter(self.client)
            log.info("a query moved to the long lane (worker process %d)", self.worker.process.pid)
            self._moved = True
            self.pool.places.put(None)
        self.pool.refill()
        if self.lower_priority:
            try:
                os.setpriority(os.PRIO_PROCESS, self.worker.process.pid, LONG_NICENESS)
            except OSError:  # the process has just ended: its answer is on its way
                pass

    def release(self) -> None:
        """Give the worker back; after a long job, keep it as a spare at its priority again (its place was
        given a new one), or stop it where the priority cannot be raised again (no CAP_SYS_NICE)."""
        with self._lock:
            self._released = True
            if not self._moved:
                self.pool.give_back(self.worker)
                return
        self.lane.leave(self.client)
        try:
            if self.lower_priority and self.worker.alive:
                os.setpriority(os.PRIO_PROCESS, self.worker.process.pid, 0)
        except OSError:
            self.worker.kill()
            return
        if self.worker.alive:
            self.pool.add_spare(self.worker)


class QueryWorkers:
    """Worker processes for clients' queries over the on-disk store at ``store_path``, and one more for
    the parse checks of updates (so that runaway queries never hold up writes); see the module docstring.
    With no ``store_path`` (a remote engine evaluates the queries) the query workers only check queries
    (``check_query``) and open no snapshot.

    ``store`` tells the generations (``StoreBackend.generation``, ``data_generation``) and flushes the
    server's recent writes before a snapshot is opened.
    """

    def __init__(self, store_path: Path | None, size: int, memory_mb: int, store: StoreBackend,
                 long_queries: int = 0, per_client: int = WAITING_PER_CLIENT, long_after_s: float | None = None,
                 queue_wait_s: float = QUEUE_WAIT_S) -> None:
        if long_after_s is None:
            long_after_s = LONG_AFTER_S if store_path is not None else REMOTE_LONG_AFTER_S
        self.store, self.long_after_s, self.queue_wait_s = store, long_after_s, queue_wait_s

        def start() -> _Worker:
            return _Worker(store_path, memory_mb * 1024 * 1024)

        self._queries = _Pool(size, per_client, start, "a query worker (GLASSGRAPH_QUERY_WORKERS)")
        self._parser = _Pool(1, per_client, start, "the parse worker")
        self._long = _LongLane(long_queries)
        self._flushed_generation, self._flushed_at = store.generation, time.monotonic()
        self._renewer = None if store_path is None else _Renewer(self)

    def prestart(self) -> None:
        """Start every worker now, in the background, so that the first queries find them ready (a start takes
        0.3 s on an idle machine, seconds on a loaded one); otherwise each starts on first use."""
        def start() -> None:
            self._parser.prestart()
            self._queries.prestart()

        threading.Thread(target=start, name="query-workers-start", daemon=True).start()

    def run(self, task: QueryTask, client: str, deadline_s: float, client_left: threading.Event | None = None
            ) -> Answer:
        """``task``'s answer (see the module docstring for the snapshot); 422 past ``deadline_s``; 503 when
        no worker came free within it; 429 past ``client``'s fair share or a full long lane; stopped when
        ``client_left`` is set (the connection closed, ``server.http.asgi``)."""
        worker = self._queries.take(client, self.queue_wait_s)
        place = _Place(self._queries, self._long, worker, client, lower_priority=True)
        try:
            self._renew(worker, self._required(worker))
            return worker.ask(("query", worker.generation, task), deadline_s, place.move_aside, self.long_after_s,
                              client_left)
        finally:
            place.release()

    def renew_idle(self) -> int:
        """Open a snapshot of the latest writes in each free worker whose snapshot is older (done by the
        renewer ahead of need, so that a query seldom waits for one); the number renewed."""
        renewed = 0
        for worker in self._queries.places.take_all_free():
            try:
                if worker is not None and worker.alive and worker.generation < self.store.generation:
                    self._renew(worker, self.store.generation)
                    renewed += 1
            except GlassgraphError:
                pass  # the worker is dead: its place starts a new one when next used
            finally:
                self._queries.places.put(worker if worker is not None and worker.alive else None)
        return renewed

    def _required(self, worker: _Worker) -> int:
        """The oldest snapshot ``worker`` may answer a query on: every write of data, and every trace once
        its snapshot has missed writes for ``STALE_AFTER_S``."""
        if time.monotonic() - worker.renewed_at >= STALE_AFTER_S:
            return self.store.generation
        return self.store.data_generation

    def _renew(self, worker: _Worker, required: int) -> None:
        """Give ``worker`` a snapshot at least at generation ``required``, unless its own is: the store's latest,
        the server's writes flushed first (so that opening the snapshot replays little). Opening is the
        server's work, not the client's: it has its own time limit, apart from the query's deadline."""
        if worker.generation >= required:
            return
        generation = self.store.generation
        worker.ask(("renew", generation), _START_TIMEOUT_S)
        worker.renewed(generation)

    def flush_written(self) -> None:
        """Flush the server's writes when there are new ones and ``FLUSH_EVERY_S`` has passed since the last
        flush, so that a snapshot opened later replays at most that much of the write-ahead log."""
        generation = self.store.generation
        if generation != self._flushed_generation and time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
            self.store.flush()
            self._flushed_generation, self._flushed_at = generation, time.monotonic()

    def check_and_forward(self, task: QueryTask, client: str, deadline_s: float,
                          forward: Callable[[CheckedQuery], Answer]) -> Answer:
        """``sparql_eval.check_query`` in a query worker, then ``forward`` (a remote engine evaluates the query) on a
        thread of its own that keeps the worker's place until the engine has answered; 422 at ``deadline_s``
        even if it has not. The engine's timeout does not stop every query (Oxigraph sorts on past it): such
        a query keeps a place as long as the engine works on it, in the long lane once it has run
        ``long_after_s`` (the engine's time, not this process's CPU), so the engine runs at most ``size``
        short and ``GLASSGRAPH_LONG_QUERIES`` long queries of this process at once. Never behind an update's
        parse."""
        worker = self._queries.take(client, self.queue_wait_s)
        try:
            checked = worker.ask(("check", task), deadline_s)
        except BaseException:
            self._queries.give_back(worker)
            raise
        answered: concurrent.futures.Future[Answer] = concurrent.futures.Future()
        place = _Place(self._queries, self._long, worker, client, lower_priority=False)

        def run() -> None:
            try:
                answered.set_result(forward(checked))
            except BaseException as error:  # noqa: BLE001 - handed to the request, if it still waits, without
                error.__context__ = error.__cause__ = None  # the frames that hold the engine's result: pyoxigraph's
                answered.set_exception(error.with_traceback(None))  # objects may only be dropped on this thread
            finally:
                place.release()

        threading.Thread(target=run, name="engine-query", daemon=True).start()
        try:
            return answered.result(timeout=min(self.long_after_s, deadline_s))
        except concurrent.futures.TimeoutError:
            place.move_aside()
        try:
            return answered.result(timeout=max(deadline_s - self.long_after_s, 0))
        except concurrent.futures.TimeoutError:
            raise deadline_exceeded(deadline_s) from None

    def prepare_update(self, task: UpdateTask, deadline_s: float) -> PreparedUpdate:
        """``sparql_eval.prepare_update`` in the parse worker: a text that would take the lexer or the
        parser past the deadline, the memory cap or the stack costs that worker, not the server (422)."""
        with self._parser.worker(SERVER_CLIENT, self.queue_wait_s) as worker:
            return worker.ask(("update", task), deadline_s)

    def check_syntax(self, task: CheckTask, client: str, deadline_s: float,
                     client_left: threading.Event | None = None) -> SyntaxProblem | None:
        """``sparql_eval.check_syntax`` in a query worker (a check is as costly as a query's parse, and
        the editor sends one per pause in typing: it must not hold up the updates' parse worker). A check
        that turns long (a text can make the parser's proof costly) steps aside as a query does, and stops
        as one does when its client leaves."""
        worker = self._queries.take(client, self.queue_wait_s)
        place = _Place(self._queries, self._long, worker, client, lower_priority=True)
        try:
            return worker.ask(("syntax", task), deadline_s, place.move_aside, self.long_after_s, client_left)
        finally:
            place.release()

    def close(self) -> None:
        """Stop every worker (the server is shutting down)."""
        if self._renewer is not None:
            self._renewer.stop()
        self._queries.close()
        self._parser.close()


class _Renewer:
    """A thread that flushes the server's writes (``flush_written``) and renews idle workers' snapshots after
    writes, at most every ``RENEW_EVERY_S``: a write then costs the next queries nothing, and readers see the
    server's GraphRAG traces within about ``STALE_AFTER_S``."""

    def __init__(self, workers: QueryWorkers) -> None:
        self._workers = workers
        self._stopped = threading.Event()
        threading.Thread(target=self._loop, name="snapshot-renewer", daemon=True).start()

    def _loop(self) -> None:
        while not self._stopped.wait(RENEW_EVERY_S):
            self._workers.flush_written()
            self._workers.renew_idle()

    def stop(self) -> None:
        self._stopped.set()


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), sys.argv[3],
           int(sys.argv[4]), int(sys.argv[5]))
