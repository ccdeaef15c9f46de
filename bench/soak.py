"""Soak: the production server under mixed load, runaway queries, slow and never-reading clients and an
anonymous flood, on loopback only.

``python -m bench.soak`` (``--clients 20 --minutes 5 --runaway 8 --slow 10 --slow-body 2 --never-read 10
--flood 40``; ``--quick``: 30 s, 6 clients, 2 runaway, 3 slow, 1 slow body, 2 never-reading, 8 flooding)
starts the production command (gunicorn, one uvicorn-based worker,
``tests/production_server.py``) over a new store that the server builds from the sample data, with a
write token and ``GLASSGRAPH_DEADLINE`` lowered to ``--deadline`` (5 s), then runs, all at once:

- ``--clients`` mixed clients, each looping over SPARQL SELECT (GET and POST), SPARQL updates that
  insert a unique triple, Graph Store PUT then GET of a small graph with unique content, and
  GraphRAG questions (one JSON answer, or streamed as SSE);
- ``--runaway`` clients (not among ``--clients``) sending a query that would run for minutes;
  they back off per ``Retry-After`` when refused busy (429);
- ``--slow`` clients (not among ``--clients``) holding connections by sending request headers one
  byte a second, and ``--slow-body`` more sending a body that way;
- ``--never-read`` clients, each one connection with a 4 KB receive buffer that asks (POST /sparql,
  TSV) for an answer of about ``--never-read-mb`` MB (under ``GLASSGRAPH_MAX_RESULT_BYTES``) and
  reads nothing until the run ends; then it reads what is left, to tell whether the server dropped it;
- ``--flood`` anonymous clients looping over ``/``, ``/console/ask``, ``/api/collections`` and
  ``GET /store`` of the librarian graph (whose answer is refused past ``GLASSGRAPH_MAX_ROWS``);
- one prober timing ``GET /healthz`` every 0.2 s, and one sampling the worker's RSS from /proc as often.

Every loop stops by itself at the end of the run or after ``MAX_RATE`` requests a second on average.
Then every acknowledged write is read back (an ASK per update triple, a GET per graph), every
returned GraphRAG session is read back through ``/api/explain``, gunicorn's log and the process
tree are checked for worker crashes and for query processes still burning CPU, and one table is
printed with a met/missed row per target (among them: no refusal of an ordinary SPARQL select, and the
gunicorn worker's RSS after the run within ``RSS_GROWTH_TARGET`` of its resting size, measured after the
warm-up and before the clients). Exit code 0 when every target is met, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import select
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlencode

import requests
from pyoxigraph import RdfFormat, parse

from bench.bench_retrieval import _table
from bench.load_http import PREFIXES, REFUSALS, percentile, read_back, read_sse, retry_after
from server.config import PROJECT_ROOT, Config
from server.stages import SESSION, STAGES

sys.path.append(str(PROJECT_ROOT / "tests"))  # the production command lives with the tests that use it
from production_server import TOKEN, ProductionServer  # noqa: E402

HOST = "127.0.0.1"
MAX_RATE = 200  # a loop's request bound: this many a second of the run, on average
PROBE_EVERY_S = 0.2
REQUEST_TIMEOUT_S = 60.0
HEALTHZ_TIMEOUT_S = 10.0
HEALTHZ_P99_TARGET_MS = 1000.0
RSS_GROWTH_TARGET = 1.5  # the worker's RSS after the run, at most this times its resting size
SETTLE_S = 3.0  # after the run, before the worker's RSS is read
UNREAD_RCVBUF = 4096  # a never-reading client's receive buffer
UNREAD_ROW_BYTES = 600  # about one row of the never-read answer in TSV (two texts of the sample, twice)
DRAIN_S = 30.0  # how long a never-reading client reads what is left after the run
FLOOD_PATHS = ["/", "/console/ask", "/api/collections", "/store?graph=urn:trustgraph:graph:librarian"]
RUNAWAY_QUERY = 'SELECT * { ?a ?b ?c . ?d ?e ?f FILTER(STR(?c) = CONCAT(STR(?f), "zz")) }'
SOAK = "urn:glassgraph:soak:"
UPDATE_GRAPH = SOAK + "updates"
COUNTRIES = ["France", "Japan", "Germany", "Brazil", "Canada", "India", "Kenya", "Peru", "Chile", "Egypt"]
SELECTS = [  # labels, a country's capital, counts with LIMIT; {iri} and {name} are the country's
    'SELECT ?s WHERE {{ ?s rdfs:label "{name}" }}',
    "SELECT ?capital ?label WHERE {{ e:{iri} r:capital ?capital . ?capital rdfs:label ?label }}",
    "SELECT ?p (COUNT(*) AS ?n) WHERE {{ e:{iri} ?p ?o }} GROUP BY ?p ORDER BY DESC(?n) LIMIT 10",
]
QUESTIONS = ["What is the capital of {name}?", "Which countries border {name}?", "What currency does {name} use?"]
RESULTS_JSON = {"Accept": "application/sparql-results+json"}
WRITE = {"Authorization": f"Bearer {TOKEN}"}
N_TRIPLES = "application/n-triples"
MAX_EXAMPLES = 10  # unexpected answers, lost writes, ... printed under the table
HELD_TO_END, CLOSED = -1, 0  # how a slow connection ended when it got no answer
_SLOW_BODY = b"query=SELECT+%3Fs+WHERE+%7B+%3Fs+%3Fp+%3Fo+%7D+LIMIT+1"
_SLOW_BODY_HEAD = (b"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/sparql-results+json\r\n"
                   b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(_SLOW_BODY))
SLOW_HEADER = (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: glassgraph-soak\r\n\r\n", 0)
SLOW_BODY = (_SLOW_BODY_HEAD + _SLOW_BODY, len(_SLOW_BODY_HEAD))  # (request, from where it goes a byte a second)


@dataclass(frozen=True)
class Settings:
    clients: int = 20
    seconds: float = 300.0
    runaway: int = 8
    slow: int = 10  # slow headers
    deadline_s: float = 5.0
    slow_body: int = 2
    never_read: int = 10
    never_read_mb: int = 20  # more, and the query outlives the soak's deadline on a loaded machine
    flood: int = 40
    server_env: tuple[tuple[str, str], ...] = ()  # more settings for the server (--set NAME=VALUE)


QUICK = Settings(clients=6, seconds=30.0, runaway=2, slow=3, slow_body=1, never_read=2, flood=8)


@dataclass
class Tally:
    """What the clients saw; change it only under ``lock`` (the methods do)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    normal: list[tuple[str, int, float]] = field(default_factory=list)  # mixed clients: (kind, status, seconds)
    unexpected: list[str] = field(default_factory=list)  # the first few mixed answers neither 2xx nor 429
    health: list[tuple[int, float]] = field(default_factory=list)
    runaway: list[tuple[int, bool]] = field(default_factory=list)  # (status or 0, names GLASSGRAPH_DEADLINE)
    slow: list[int] = field(default_factory=list)  # statuses, or HELD_TO_END / CLOSED
    updates: list[str] = field(default_factory=list)  # acknowledged update triples (N-Triples)
    graphs: dict[str, str] = field(default_factory=dict)  # acknowledged PUT: graph -> N-Triples sent
    misread: set[str] = field(default_factory=set)  # graphs whose read right after their PUT differed
    sessions: list[str] = field(default_factory=list)
    broken_answers: int = 0  # GraphRAG 200s without a session id, or streams without end_of_session
    flood: list[tuple[str, int, float]] = field(default_factory=list)  # (path, status, seconds)
    unread: list[tuple[int, str]] = field(default_factory=list)  # never-reading clients: (status, how it ended)
    rss_mb: list[float] = field(default_factory=list)  # the worker's, sampled during the run
    verify_deadline: list[str] = field(default_factory=list)  # checking reads after the run that got 422
    held: int = 0
    held_max: int = 0
    held_longest_s: float = 0.0

    def add(self, name: str, item: object) -> None:
        with self.lock:
            getattr(self, name).append(item)

    def note_unexpected(self, text: str) -> None:
        with self.lock:
            if len(self.unexpected) < MAX_EXAMPLES:
                self.unexpected.append(text)

    def acknowledge_graph(self, graph: str, body: str) -> None:
        with self.lock:
            self.graphs[graph] = body

    def note_misread(self, graph: str) -> None:
        with self.lock:
            self.misread.add(graph)

    def answered(self, session: str | None, complete: bool) -> None:
        with self.lock:
            if session:
                self.sessions.append(session)
            self.broken_answers += not session or not complete

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Count a slow connection as held for the time of the block."""
        started = time.monotonic()
        with self.lock:
            self.held += 1
            self.held_max = max(self.held_max, self.held)
        try:
            yield
        finally:
            with self.lock:
                self.held -= 1
                self.held_longest_s = max(self.held_longest_s, time.monotonic() - started)


class Soak:
    """One run: the server's address, when the run ends, what the clients saw."""

    def __init__(self, url: str, settings: Settings, worker: int | None = None) -> None:
        self.url = url
        self.worker = worker  # the gunicorn worker's pid, whose RSS is sampled
        self.port = int(url.rsplit(":", 1)[1])
        self.settings = settings
        self.run_id = uuid.uuid4().hex[:8]
        self.ends = time.monotonic() + settings.seconds
        self.max_requests = int(settings.seconds * MAX_RATE) + 1
        self.query_timeout_s = 2 * settings.deadline_s + REQUEST_TIMEOUT_S  # a wait for a worker, then the run
        self.tally = Tally()

    def loop(self) -> Iterator[int]:
        """0, 1, 2, ... until the run ends or ``max_requests``."""
        for n in range(self.max_requests):
            if time.monotonic() >= self.ends:
                return
            yield n

    def sleep(self, seconds: float) -> None:
        """Sleep, but not past the end of the run."""
        time.sleep(max(0.0, min(seconds, self.ends - time.monotonic())))


# --- mixed clients --------------------------------------------------------------------------------

def send(soak: Soak, http: requests.Session, kind: str, method: str, path: str, timeout: float = REQUEST_TIMEOUT_S,
         **kwargs: object) -> requests.Response | None:
    """A mixed client's request, timed and tallied (the whole body read); None when no answer came."""
    started = time.perf_counter()
    try:
        response = http.request(method, soak.url + path, timeout=timeout, **kwargs)
    except requests.RequestException as error:
        response, answer = None, f"no answer ({type(error).__name__})"
    else:
        answer = f"{response.status_code} {response.text[:200]!r}"
    status = response.status_code if response is not None else 0
    soak.tally.add("normal", (kind, status, time.perf_counter() - started))
    if not (200 <= status < 300 or status in REFUSALS):
        soak.tally.note_unexpected(f"{method} {path} ({kind}): {answer}")
    return response


def select_text(n: int) -> str:
    name = COUNTRIES[n % len(COUNTRIES)]
    return PREFIXES + SELECTS[n % len(SELECTS)].format(name=name, iri=name.lower())


def question(n: int) -> str:
    return QUESTIONS[n % len(QUESTIONS)].format(name=COUNTRIES[n // len(QUESTIONS) % len(COUNTRIES)])


def select_get(soak: Soak, http: requests.Session, client: int, n: int) -> None:
    send(soak, http, "select", "GET", "/sparql", soak.query_timeout_s, params={"query": select_text(n)},
         headers=RESULTS_JSON)


def select_post(soak: Soak, http: requests.Session, client: int, n: int) -> None:
    send(soak, http, "select", "POST", "/sparql", soak.query_timeout_s, data=select_text(n).encode(),
         headers={**RESULTS_JSON, "Content-Type": "application/sparql-query"})


def update(soak: Soak, http: requests.Session, client: int, n: int) -> None:
    triple = f'<{SOAK}s:{soak.run_id}:{client}:{n}> <{SOAK}p> "update {n} of client {client}" .'
    response = send(soak, http, "update", "POST", "/sparql",
                    data=f"INSERT DATA {{ GRAPH <{UPDATE_GRAPH}> {{ {triple} }} }}",
                    headers={**WRITE, "Content-Type": "application/sparql-update"})
    if response is not None and response.status_code == 204:
        soak.tally.add("updates", triple)


def triples(text: str | bytes) -> set[str]:
    """The triples of an N-Triples document, each written out the same way."""
    return {str(quad.triple) for quad in parse(text, format=RdfFormat.N_TRIPLES)}


def graph_put_get(soak: Soak, http: requests.Session, client: int, n: int) -> None:
    """PUT a new graph, then GET it back; an acknowledged PUT that does not read back is noted."""
    graph = f"{SOAK}graph:{soak.run_id}:{client}:{n}"
    body = "".join(f'<{graph}#s> <{SOAK}p{i}> "PUT {n} of client {client}, triple {i}" .\n' for i in range(3))
    put = send(soak, http, "graph store", "PUT", "/store", params={"graph": graph}, data=body.encode(),
               headers={**WRITE, "Content-Type": N_TRIPLES})
    if put is None or put.status_code not in (201, 204):
        return
    soak.tally.acknowledge_graph(graph, body)
    got = send(soak, http, "graph store", "GET", "/store", params={"graph": graph}, headers={"Accept": N_TRIPLES})
    if got is not None and got.status_code < 500 and not reads_back(got, body):
        soak.tally.note_misread(graph)


def reads_back(response: requests.Response, body: str) -> bool:
    return response.status_code == 200 and triples(response.content) == triples(body)


def rag_json(soak: Soak, http: requests.Session, client: int, n: int) -> None:
    response = send(soak, http, "graph-rag", "POST", "/api/graph-rag", json={"query": question(n), "streaming": False},
                    headers={"Accept": "application/json"})
    if response is not None and response.status_code == 200:
        try:
            session = response.json().get(SESSION.kind)
        except ValueError:
            session = None
        soak.tally.answered(session, complete=True)


def rag_stream(soak: Soak, http: requests.Session, client: int, n: int) -> None:
    response = send(soak, http, "graph-rag", "POST", "/api/graph-rag", json={"query": question(n), "streaming": True},
                    headers={"Accept": "text/event-stream"})
    if response is not None and response.status_code == 200:
        soak.tally.answered(*read_sse(response.text))


KINDS = ["select", "update", "graph store", "graph-rag"]
STEPS: list[Callable[[Soak, requests.Session, int, int], None]] = [
    select_get, update, rag_json, select_post, graph_put_get, rag_stream]


def mixed_client(soak: Soak, client: int) -> None:
    with requests.Session() as http:
        for n in soak.loop():
            STEPS[(client + n) % len(STEPS)](soak, http, client, n)


# --- runaway, slow and probing clients ------------------------------------------------------------

def runaway_client(soak: Soak, client: int) -> None:
    """The runaway query again and again (GET and POST in turn), backing off as the server asks."""
    with requests.Session() as http:
        for n in soak.loop():
            method, kwargs = ("GET", {"params": {"query": RUNAWAY_QUERY}}) if n % 2 == 0 else (
                "POST", {"data": RUNAWAY_QUERY.encode(), "headers": {"Content-Type": "application/sparql-query"}})
            try:
                response = http.request(method, soak.url + "/sparql", timeout=soak.query_timeout_s, **kwargs)
            except requests.RequestException:
                soak.tally.add("runaway", (0, False))
                soak.sleep(1.0)
                continue
            soak.tally.add("runaway", (response.status_code, "GLASSGRAPH_DEADLINE" in response.text))
            if response.status_code == 429:
                soak.sleep(retry_after(response))


def prober(soak: Soak, client: int) -> None:
    """``GET /healthz`` every ``PROBE_EVERY_S``, each timed."""
    with requests.Session() as http:
        for _ in soak.loop():
            started = time.perf_counter()
            try:
                status = http.get(soak.url + "/healthz", timeout=HEALTHZ_TIMEOUT_S).status_code
            except requests.RequestException:
                status = 0
            elapsed = time.perf_counter() - started
            soak.tally.add("health", (status, elapsed))
            soak.sleep(PROBE_EVERY_S - elapsed)


def memory_sampler(soak: Soak, client: int) -> None:
    """The worker's RSS every ``PROBE_EVERY_S``."""
    for _ in soak.loop():
        if soak.worker is not None:
            soak.tally.add("rss_mb", rss_mb(soak.worker))
        soak.sleep(PROBE_EVERY_S)


def slow_client(soak: Soak, client: int, request: bytes = SLOW_HEADER[0], slow_from: int = SLOW_HEADER[1]) -> None:
    """One slow connection after another, each sending ``request`` one byte a second from ``slow_from``."""
    for _ in soak.loop():
        soak.tally.add("slow", hold_connection(soak, request, slow_from))


def slow_body_client(soak: Soak, client: int) -> None:
    slow_client(soak, client, *SLOW_BODY)


def hold_connection(soak: Soak, request: bytes, slow_from: int) -> int:
    """Send ``request``, one byte a second from ``slow_from`` on: the answer's status; CLOSED when the
    connection ended without one, HELD_TO_END when the run ended first."""
    try:
        with socket.create_connection((HOST, soak.port), timeout=HEALTHZ_TIMEOUT_S) as sock, soak.tally.holding():
            sock.sendall(request[:slow_from])
            for byte in request[slow_from:]:
                if time.monotonic() >= soak.ends:
                    return HELD_TO_END
                sock.sendall(bytes([byte]))
                if select.select([sock], [], [], 1.0)[0]:
                    break  # answered (or closed) before the request was complete
            sock.settimeout(soak.query_timeout_s)
            return answer_status(sock)
    except OSError:
        return CLOSED


def never_read_query(megabytes: int) -> str:
    """A query whose TSV answer is about ``megabytes`` MB on the sample (its texts), in few rows."""
    rows = max(1, min(megabytes * 1_000_000 // UNREAD_ROW_BYTES, Config().max_result_rows - 1))
    return PREFIXES + ("SELECT ?one ?other (CONCAT(?one, ?other) AS ?both) WHERE { ?c tg:content ?one . "
                       f"?d tg:content ?other }} LIMIT {rows}")


def never_reading_client(soak: Soak, client: int) -> None:
    """A connection with a small receive buffer asks for a large answer and, once it is answered (its status
    line peeked at, not read; asked again after a refusal or a 422 at the deadline), reads nothing until the
    run ends; then it reads what is left (``DRAIN_S`` at most) and tallies how it ended: ``complete`` (the
    server held the whole answer for it), ``cut off`` (the server dropped it) or ``still sending``."""
    body = urlencode({"query": never_read_query(soak.settings.never_read_mb)}).encode()
    request = (b"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/tab-separated-values\r\n"
               b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    for _ in soak.loop():
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UNREAD_RCVBUF)  # before connect: the window
                sock.settimeout(soak.query_timeout_s)
                sock.connect((HOST, soak.port))
                sock.sendall(request)
                status = peeked_status(sock)
                if status in REFUSALS or status == 422:
                    soak.tally.add("unread", (status, "not answered, asked again"))
                    soak.sleep(1.0)
                    continue
                with soak.tally.holding():
                    soak.sleep(soak.ends - time.monotonic())
                soak.tally.add("unread", drain(sock))
        except OSError as error:
            soak.tally.add("unread", (CLOSED, f"no answer ({type(error).__name__})"))
        return


def peeked_status(sock: socket.socket) -> int:
    """The status of the response coming on ``sock``, left unread in its buffer (MSG_PEEK); CLOSED if none."""
    while True:
        head = sock.recv(64, socket.MSG_PEEK)
        if not head:
            return CLOSED
        if b"\r\n" in head or len(head) == 64:
            return int(head.split(b" ", 2)[1])
        time.sleep(0.05)  # the status line is not all there yet


def drain(sock: socket.socket) -> tuple[int, str]:
    """Read a response to its end (or for ``DRAIN_S``): (its status, how it ended)."""
    received, ended, deadline = bytearray(), "still sending", time.monotonic() + DRAIN_S
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            piece = sock.recv(1 << 20)
            if not piece:
                ended = "closed"
                break
            received += piece
            if complete_response(received):
                ended = "complete"
                break
    except TimeoutError:
        pass
    except OSError:
        ended = "reset"
    status = int(received.split(b" ", 2)[1]) if received.startswith(b"HTTP/") else CLOSED
    if ended in ("closed", "reset"):
        ended = f"cut off after {len(received) / 1e6:.1f} MB"
    return status, ended


def complete_response(received: bytearray) -> bool:
    """Whether ``received`` holds a whole HTTP response (by Content-Length, or a chunked body's last chunk)."""
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    if not _:
        return False
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return body.endswith(b"0\r\n\r\n")


def flood_client(soak: Soak, client: int) -> None:
    """Anonymous requests for the store-wide pages, one after another, each timed."""
    with requests.Session() as http:
        for n in soak.loop():
            path = FLOOD_PATHS[(client + n) % len(FLOOD_PATHS)]
            started = time.perf_counter()
            try:
                status = http.get(soak.url + path, timeout=REQUEST_TIMEOUT_S, headers={"Accept": N_TRIPLES}
                                  if path.startswith("/store") else {}).status_code
            except requests.RequestException:
                status = 0
            soak.tally.add("flood", (path, status, time.perf_counter() - started))


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (/proc/PID/status), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def answer_status(sock: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        piece = sock.recv(4096)
        if not piece:
            return CLOSED
        head += piece
    return int(head.split(b" ", 2)[1])


def drive(soak: Soak) -> None:
    """Every client in a thread of its own until each stops by itself; a client's error is raised here."""
    settings, errors = soak.settings, []

    def guarded(role: Callable[[Soak, int], None], client: int) -> None:
        try:
            role(soak, client)
        except Exception as error:  # a bug in the benchmark: it must not just count less
            errors.append(error)

    roles = [(prober, 1), (memory_sampler, 1), (mixed_client, settings.clients), (runaway_client, settings.runaway),
             (slow_client, settings.slow), (slow_body_client, settings.slow_body),
             (never_reading_client, settings.never_read), (flood_client, settings.flood)]
    threads = [threading.Thread(target=guarded, args=(role, i), name=f"{role.__name__}-{i}")
               for role, count in roles for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


# --- after the run: processes, writes, traces -----------------------------------------------------

def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (state, ppid, ..., utime at 11, stime at 12); [] if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and int(stat[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def descendants(pid: int) -> list[int]:
    found = children(pid)
    return found + [below for child in found for below in descendants(child)]


def running(pid: int) -> bool:
    return _stat(pid)[:1] not in ([], ["Z"])


def query_processes(master: int) -> list[int]:
    """Every running process under gunicorn's worker(s): the query workers (however they are started)."""
    return [pid for worker in children(master) for pid in descendants(worker) if running(pid)]


def cpu_seconds(pid: int) -> float:
    stat = _stat(pid)
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK") if stat else 0.0


def burning(pids: list[int], window_s: float = 2.0) -> int:
    """How many of ``pids`` use more than half a CPU over ``window_s``."""
    before = {pid: cpu_seconds(pid) for pid in pids}
    time.sleep(window_s)
    return sum(1 for pid, used in before.items() if cpu_seconds(pid) - used > window_s / 2)


def left_running(pids: list[int], grace_s: float = 5.0) -> int:
    """How many of ``pids`` still run ``grace_s`` after the server stopped."""
    deadline = time.monotonic() + grace_s
    while (alive := [pid for pid in pids if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return len(alive)


def worker_crashes(server: ProductionServer, first_workers: list[int]) -> int:
    """Worker restarts: "Booting worker" lines past the first, or a gunicorn worker pid that changed."""
    boots = server.log_path.read_text(errors="replace").count("Booting worker")
    replaced = server.process.poll() is not None or children(server.process.pid) != first_workers
    return max(boots - 1, int(replaced))


def log_problems(server: ProductionServer) -> list[str]:
    """gunicorn's log lines that report an error, a warning or a 5xx answer; a traceback as its exception
    and the innermost project line it went through."""
    marks = ("[ERROR]", "[CRITICAL]", "[WARNING]", '"status": 5')
    problems, place = [], None
    for line in server.log_path.read_text(errors="replace").splitlines():
        if line.startswith("Traceback"):
            place = ""
        elif place is not None and line.startswith("  File ") and (not place or str(PROJECT_ROOT) in line):
            place = line.strip()
        elif place is not None and not line.startswith(" "):
            problems.append(f"{line} ({place})")
            place = None
        elif any(mark in line for mark in marks):
            problems.append(line)
    return problems


def verify_read(soak: Soak, method: str, path: str, **kwargs: object) -> requests.Response | None:
    """A read that checks an acknowledged write. A 422 (stopped at the soak's low deadline) proves nothing
    about the write: it is counted (``verify_deadline``, in the table) and the read is sent once more. Seen
    about once in four short soaks: the first read after the run, on a worker whose snapshot sat idle for
    seconds, spun to the deadline while the same ASK on a new snapshot took 1 ms (see docs/decisions.md 21)."""
    response = read_back(method, soak.url + path, **kwargs)
    if response is not None and response.status_code == 422:
        soak.tally.add("verify_deadline", path)
        response = read_back(method, soak.url + path, **kwargs)
    return response


def update_found(soak: Soak, triple: str) -> str:
    """'' when ASK finds the acknowledged triple, else why not (the answer's status, or no answer)."""
    response = verify_read(soak, "GET", "/sparql", params={"query": f"ASK {{ GRAPH <{UPDATE_GRAPH}> {{ {triple} }} }}"},
                           headers=RESULTS_JSON)
    if response is None:
        return "ASK: no response"
    if response.status_code != 200:
        return f"ASK: {response.status_code} {response.text[:120]}"
    return "" if response.json().get("boolean") is True else "ASK: false"


def graph_found(soak: Soak, graph: str, body: str) -> bool:
    response = verify_read(soak, "GET", "/store", params={"graph": graph}, headers={"Accept": N_TRIPLES})
    return response is not None and reads_back(response, body)


def trace_complete(soak: Soak, session: str) -> bool:
    """The session's trace reads back whole: answered, or no-answer (a question the graph cannot answer, such as
    Japan's land borders, is recorded so), with its retrieval, selection and answer."""
    response = verify_read(soak, "GET", "/api/explain", params={"id": session}, headers={"Accept": "application/json"})
    if response is None or response.status_code != 200:
        return False
    trace = response.json()
    return trace.get("status") in ("answered", "no-answer") and all(trace.get(stage.kind) for stage in STAGES)


def lost_writes(soak: Soak) -> list[str]:
    """Acknowledged update triples that ASK does not find, and acknowledged graphs that do not read back."""
    tally = soak.tally
    with ThreadPoolExecutor(2) as pool:  # two at a time: the query workers' default number
        updates = list(pool.map(lambda triple: update_found(soak, triple), tally.updates))
        graphs = list(pool.map(lambda item: graph_found(soak, *item), tally.graphs.items()))
    lost = [f"{triple} ({why})" for triple, why in zip(tally.updates, updates, strict=True) if why]
    return lost + [graph for graph, found in zip(tally.graphs, graphs, strict=True)
                   if not found or graph in tally.misread]


def lost_traces(soak: Soak) -> list[str]:
    """Returned sessions whose trace is missing or incomplete (and GraphRAG answers that returned none)."""
    with ThreadPoolExecutor(4) as pool:
        complete = list(pool.map(lambda session: trace_complete(soak, session), soak.tally.sessions))
    lost = [session for session, ok in zip(soak.tally.sessions, complete, strict=True) if not ok]
    return lost + ["a GraphRAG answer without a session id or end_of_session"] * soak.tally.broken_answers


# --- the result -----------------------------------------------------------------------------------

@dataclass
class Result:
    settings: Settings
    tally: Tally
    lost_writes: list[str]
    lost_traces: list[str]
    crashes: int
    query_processes: int  # alive after the run
    burning: int  # of those, using CPU after the run
    left_running: int  # still running after the server stopped
    log_problems: list[str]
    rss_resting_mb: float  # the gunicorn worker's, after the warm-up, before the clients
    rss_after_mb: float  # the same, ``SETTLE_S`` after every client has stopped

    def statuses(self) -> list[int]:
        """The status of every answer the clients got (0: none; a never-reading client's missing answer is
        not counted: the server may drop it)."""
        tally = self.tally
        return ([status for _, status, _ in tally.normal + tally.flood]
                + [status for status, _ in tally.health + tally.runaway]
                + [status for status in tally.slow if status > 0]
                + [status for status, _ in tally.unread if status > 0])

    @property
    def requests(self) -> int:
        tally = self.tally
        return (len(tally.normal) + len(tally.health) + len(tally.runaway) + len(tally.slow) + len(tally.flood)
                + len(tally.unread))

    @property
    def refused_selects(self) -> int:
        """Ordinary SPARQL selects (the mixed clients') refused: 429 or 503."""
        return sum(1 for kind, status, _ in self.tally.normal if kind == "select" and status in REFUSALS)

    @property
    def rss_growth(self) -> float:
        return self.rss_after_mb / self.rss_resting_mb if self.rss_resting_mb else 0.0

    @property
    def runaway_started(self) -> int:
        return len(self.tally.runaway)

    @property
    def acknowledged_writes(self) -> int:
        return len(self.tally.updates) + len(self.tally.graphs)

    @property
    def health_p99_ms(self) -> float:
        return percentile([seconds * 1000 for _, seconds in self.tally.health], 99)

    def targets(self) -> list[tuple[str, bool]]:
        statuses = self.statuses()
        return [("0 5xx", not any(status >= 500 for status in statuses)),
                ("0 requests without an answer", 0 not in statuses),
                ("0 lost traces", not self.lost_traces),
                ("0 lost acknowledged writes", not self.lost_writes),
                ("0 worker crashes", self.crashes == 0),
                (f"/healthz p99 under {HEALTHZ_P99_TARGET_MS / 1000:g} s", self.health_p99_ms < HEALTHZ_P99_TARGET_MS),
                ("0 query processes left running", self.burning == 0 and self.left_running == 0),
                ("0 ordinary SPARQL selects refused", self.refused_selects == 0),
                (f"worker RSS after the run within {RSS_GROWTH_TARGET:g}x of resting",
                 0 < self.rss_growth <= RSS_GROWTH_TARGET)]

    @property
    def passed(self) -> bool:
        return all(met for _, met in self.targets())


def _p50_p99(seconds: list[float]) -> str:
    millis = [s * 1000 for s in seconds]
    return f"{percentile(millis, 50):.1f} / {percentile(millis, 99):.1f}"


def _counts(statuses: list[int]) -> str:
    names = {HELD_TO_END: "held to the end", CLOSED: "no answer"}
    return ", ".join(f"{names.get(status, status)} x{n}" for status, n in sorted(Counter(statuses).items()))


def _answers(tallied: list[tuple[str, int, float]], key: str) -> str:
    """The statuses and latencies of the ``(key, status, seconds)`` entries of ``tallied`` with this key."""
    samples = [(status, seconds) for k, status, seconds in tallied if k == key]
    return f"{_counts([status for status, _ in samples])} ({_p50_p99([seconds for _, seconds in samples])})"


def rows(result: Result) -> list[list[str]]:
    """The table's measurement rows, then one row per target."""
    settings, tally, config = result.settings, result.tally, Config()
    stopped = sum(1 for status, named in tally.runaway if status == 422 and named)
    refused = sum(1 for status, _ in tally.runaway if status == 429)
    other = len(tally.runaway) - stopped - refused
    statuses = result.statuses()
    measured = [
        ["clients", f"{settings.clients} mixed; on top: {settings.runaway} runaway, {settings.slow} slow-header, "
                    f"{settings.slow_body} slow-body, {settings.never_read} never-reading "
                    f"(~{settings.never_read_mb} MB answers), {settings.flood} flooding, 1 /healthz prober"],
        ["minutes", f"{settings.seconds / 60:.3g}"],
        ["server settings", f"GLASSGRAPH_DEADLINE={settings.deadline_s:g} s (lowered for the soak), "
                            f"GLASSGRAPH_QUERY_WORKERS={config.query_workers}, "
                            f"GLASSGRAPH_BODY_TIMEOUT={config.body_timeout_s:g} s"
                            + "".join(f", {name}={value}" for name, value in settings.server_env)],
        ["requests", f"{result.requests} (mixed {len(tally.normal)}, /healthz {len(tally.health)}, "
                     f"runaway {len(tally.runaway)}, slow {len(tally.slow)}, flood {len(tally.flood)}, "
                     f"never-read {len(tally.unread)})"],
        *[[f"mixed answers: {kind} (p50 / p99 ms)", _answers(tally.normal, kind)] for kind in KINDS],
        ["ordinary SPARQL selects refused (429/503)", str(result.refused_selects)],
        *[[f"flood answers: GET {path} (p50 / p99 ms)", _answers(tally.flood, path)] for path in FLOOD_PATHS],
        ["never-reading clients: status, how each ended", "; ".join(
            f"{status or 'none'} {ended} x{n}" for (status, ended), n in sorted(Counter(tally.unread).items()))],
        ["worker RSS MB: resting / peak during the run / after it",
         f"{result.rss_resting_mb:.0f} / {max(tally.rss_mb, default=0):.0f} / {result.rss_after_mb:.0f} "
         f"({result.rss_growth:.2f}x)"],
        ["5xx", str(sum(1 for status in statuses if status >= 500))],
        ["acknowledged writes", f"{len(tally.updates)} updates, {len(tally.graphs)} graph PUTs"],
        ["lost writes", str(len(result.lost_writes))],
        ["checking reads stopped at the deadline, then sent again", str(len(result.tally.verify_deadline))],
        ["GraphRAG sessions returned", str(len(tally.sessions))],
        ["lost traces", str(len(result.lost_traces))],
        ["latency of normal (mixed) requests p50 / p99 (ms)", _p50_p99([seconds for _, _, seconds in tally.normal])],
        ["/healthz p50 / p99 (ms)", _p50_p99([seconds for _, seconds in tally.health])],
        ["runaway queries started / stopped (422) / refused busy (429) / other",
         f"{result.runaway_started} / {stopped} / {refused} / {other}"],
        ["slow and never-reading clients held (max at once)",
         f"{tally.held_max} of {settings.slow + settings.slow_body + settings.never_read}, longest "
         f"{tally.held_longest_s:.0f} s; slow: {_counts(tally.slow) or 'none ended'}"],
        ["worker crashes", str(result.crashes)],
        ["query processes after the run", f"{result.query_processes} alive, {result.burning} burning CPU, "
                                          f"{result.left_running} left after shutdown"],
        ["server log: errors, warnings, 5xx", str(len(result.log_problems))],
    ]
    return measured + [[f"target: {name}", "met" if met else "MISSED"] for name, met in result.targets()]


def report(result: Result) -> str:
    """The table, then a few examples of whatever went wrong."""
    lines = [_table(["measure", "value"], rows(result))]
    for title, items in (("unexpected answer", result.tally.unexpected), ("lost write", result.lost_writes),
                         ("lost trace", result.lost_traces), ("server log", result.log_problems)):
        lines += [f"  {title}: {item}" for item in items[:MAX_EXAMPLES]]
    return "\n".join(lines)


# --- running --------------------------------------------------------------------------------------

def warm_up(url: str) -> None:
    """One GraphRAG answer (builds the label index) and one query (starts a query worker)."""
    requests.post(url + "/api/graph-rag", json={"query": question(0), "streaming": False},
                  timeout=REQUEST_TIMEOUT_S).raise_for_status()
    requests.get(url + "/sparql", params={"query": select_text(0)}, headers=RESULTS_JSON,
                 timeout=REQUEST_TIMEOUT_S).raise_for_status()


def run(settings: Settings) -> Result:
    """Start the server over a new sample store, soak it, check everything; the server is stopped after."""
    with tempfile.TemporaryDirectory(prefix="glassgraph-soak-") as tmp:
        server = ProductionServer(Path(tmp) / "store", env={"GLASSGRAPH_LOAD_SAMPLE": "true",
                                                              "GLASSGRAPH_DEADLINE": f"{settings.deadline_s:g}",
                                                              **dict(settings.server_env)})
        try:
            warm_up(server.url)
            first_workers = children(server.process.pid)
            resting = rss_mb(first_workers[0])
            soak = Soak(server.url, settings, first_workers[0])
            drive(soak)
            time.sleep(SETTLE_S)
            after = rss_mb(first_workers[0])
            processes = query_processes(server.process.pid)
            hot = burning(processes)
            writes, traces = lost_writes(soak), lost_traces(soak)
            crashes = worker_crashes(server, first_workers)
        finally:
            server.close()
        return Result(settings, soak.tally, writes, traces, crashes, len(processes), hot, left_running(processes),
                      log_problems(server), resting, after)


def parse_args(argv: list[str] | None) -> Settings:
    default = Settings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=default.clients,
                        help=f"mixed clients (default {default.clients}); the runaway and slow ones come on top")
    parser.add_argument("--minutes", type=float, default=default.seconds / 60, help="default %(default)g")
    parser.add_argument("--runaway", type=int, default=default.runaway, help="runaway clients (default %(default)s)")
    parser.add_argument("--slow", type=int, default=default.slow, help="slow-header clients (default %(default)s)")
    parser.add_argument("--slow-body", type=int, default=default.slow_body,
                        help="slow-body clients (default %(default)s)")
    parser.add_argument("--never-read", type=int, default=default.never_read,
                        help="never-reading clients (default %(default)s)")
    parser.add_argument("--never-read-mb", type=int, default=default.never_read_mb,
                        help="about how large an answer each asks for, in MB (default %(default)s)")
    parser.add_argument("--flood", type=int, default=default.flood,
                        help="anonymous clients flooding the store-wide pages (default %(default)s)")
    parser.add_argument("--deadline", type=float, default=default.deadline_s,
                        help="GLASSGRAPH_DEADLINE for the soak, in seconds (default %(default)g)")
    parser.add_argument("--set", action="append", default=[], type=server_setting, metavar="NAME=VALUE",
                        help="a GLASSGRAPH_ setting for the server (repeatable), to tune against the soak")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {QUICK.seconds:g} s, {QUICK.clients} clients, {QUICK.runaway} runaway, "
                             f"{QUICK.slow} slow, {QUICK.never_read} never-reading, {QUICK.flood} flooding")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 100 and 0 < args.minutes <= 60 and 0 <= args.runaway <= 50
            and 0 <= args.slow <= 200 and 0 <= args.slow_body <= 200 and 0 <= args.never_read <= 50
            and 1 <= args.never_read_mb <= 60 and 0 <= args.flood <= 100 and 0 < args.deadline <= 60):
        parser.error("--clients must be 1..100, --minutes 0..60, --runaway 0..50, --slow and --slow-body 0..200, "
                     "--never-read 0..50, --never-read-mb 1..60, --flood 0..100, --deadline 0..60")
    if args.quick:
        return replace(QUICK, deadline_s=args.deadline, server_env=tuple(args.set))
    return Settings(clients=args.clients, seconds=args.minutes * 60, runaway=args.runaway, slow=args.slow,
                    deadline_s=args.deadline, slow_body=args.slow_body, never_read=args.never_read,
                    never_read_mb=args.never_read_mb, flood=args.flood, server_env=tuple(args.set))


def server_setting(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--set``: a GLASSGRAPH_ variable (the deadline has its own option)."""
    name, equals, value = text.partition("=")
    if not equals or not name.startswith("GLASSGRAPH_") or name == "GLASSGRAPH_DEADLINE":
        raise argparse.ArgumentTypeError("NAME=VALUE with a GLASSGRAPH_ name (--deadline sets GLASSGRAPH_DEADLINE)")
    return name, value


def main(argv: list[str] | None = None) -> int:
    result = run(parse_args(argv))
    print(report(result))
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
