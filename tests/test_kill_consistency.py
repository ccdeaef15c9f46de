"""SIGKILL of the production server during a write leaves the store consistent: all or nothing.

Three writes, each sent to the real production command (``ProductionServer``: gunicorn, one
worker) over a fresh copy of a prepared store; the server's whole process group is killed with
SIGKILL while the write runs, then, once every thread of it has exited, the test process reopens
the store directory (Oxigraph recovers from its write-ahead log) and checks it:

* a GraphRAG run with ``explainable`` (streamed as NDJSON) writes its trace as four transactions:
  session, retrieval, selection (with its edge nodes), answer (with its text). The kill comes as the
  request is sent, or once the client has received 1..4 of the explain messages: the first question
  of a fresh server builds the label index between the session and the retrieval (a few hundred
  milliseconds) and the offline LLM scores 10,000 edges between the retrieval and the selection
  (about 100 ms), so each point lands in another stage; the answer follows the selection within a
  millisecond, so the kill after the selection races its write. Afterwards the trace is a prefix
  of those entities, each exactly as in an unkilled run, every entity the client was told about is
  there, and ``read_trace`` and ``list_sessions`` read it with the matching status.
* a Graph Store Protocol PUT of a large N-Triples body replacing a large graph, and
* a SPARQL update (``DELETE WHERE`` then ``INSERT DATA``, one request) replacing the same graph:
  afterwards the graph holds exactly the old triples or exactly the new ones (the new ones if the
  server had acknowledged the write), another graph is untouched and nothing else appears. Such a
  write builds its transaction (after parsing the body), writes it to the write-ahead log as one
  record (21 MB here, in 1 MB pieces over some tens of milliseconds: its point of no return) and
  then applies it to RocksDB's memtables, some hundreds of milliseconds before the response. The
  kills come at events the test sees, never after a delay: once the client has sent the whole body
  (before the transaction, which must be interrupted, retried on a busy machine as in
  test_load_atomic.py), when the log has grown by the record's first bytes, half of it (a torn
  record, which recovery must drop whole) and all of it (during the memtable inserts), and once the
  client has the response (the acknowledged write must survive).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import requests
from production_server import TOKEN, ProductionServer
from pyoxigraph import Literal, NamedNode, Quad, Triple
from write_ahead_log import wait_for_log, wal_bytes

from server import stages, vocab
from server.explain.trace import list_sessions, read_trace
from server.ingest.load import build_store
from server.store import GraphStore
from server.vocab import PROV

pytestmark = pytest.mark.kill  # conftest: kill tests are slow too
ENV = {"GLASSGRAPH_MAX_BODY": str(64 * 1024 * 1024)}
REQUEST_TIMEOUT_S = 300.0  # a bound for a hang: a first question on a busy machine took over 60 s
EXIT_TIMEOUT_S = 10.0

# --- killing the server ------------------------------------------------------------------------


def group_alive(pgid: int) -> bool:
    """Whether a thread of a process of group ``pgid`` still runs. Threads, not processes: a killed
    process's main thread is a zombie while its other threads still exit (a RocksDB thread may be
    finishing a write), and its files, the store's lock among them, are closed by the last one."""
    for stat in Path("/proc").glob("[0-9]*/task/[0-9]*/stat"):
        try:
            state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == pgid and state not in ("Z", "X"):
            return True
    return False


def kill(server: ProductionServer) -> None:
    """SIGKILL gunicorn and its worker at once; return when none of them runs."""
    pgid = server.process.pid
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.process.wait(timeout=EXIT_TIMEOUT_S)
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while group_alive(pgid):
        assert time.monotonic() < deadline, f"processes of group {pgid} outlived SIGKILL"
        time.sleep(0.01)


@dataclass
class InThread:
    """Runs ``_run`` in a daemon thread from the moment it is made."""

    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        raise NotImplementedError


class Body(io.BytesIO):
    """A request body that sets ``sent`` once the client has read its end (all of it is on the socket)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sent = threading.Event()

    def read(self, size: int | None = -1) -> bytes:
        piece = super().read(size)
        if not piece:
            self.sent.set()
        return piece


@dataclass
class Background(InThread):
    """A request running in a thread: its status, or None when the connection broke; ``done`` is set when
    either is known."""

    send: Callable[[], requests.Response]
    status: int | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def _run(self) -> None:
        try:
            self.status = self.send().status_code
        except requests.RequestException:
            self.status = None
        finally:
            self.done.set()

    def join(self) -> None:
        self.thread.join(REQUEST_TIMEOUT_S)
        assert not self.thread.is_alive(), "the request outlived the server"


def fresh_copy(template: Path, directory: Path) -> Path:
    path = directory / "store"
    shutil.copytree(template, path)
    return path


# --- a large graph replaced by PUT or by a SPARQL update ----------------------------------------

TRIPLES = 20_000
GRAPH = NamedNode("http://example.org/graph/replaced")
KEEP_GRAPH = NamedNode("http://example.org/graph/kept")
# (what, how far): "sent", the client has sent the whole request; "wal", a fraction of what its commit adds
# to the write-ahead log (0: its first bytes); "answered", the client has the response.
KILL_POINTS = [("sent", 0.0), ("wal", 0.0), ("wal", 0.5), ("wal", 1.0), ("answered", 1.0)]


def triples(tag: str, count: int) -> frozenset[Triple]:
    return frozenset(Triple(NamedNode(f"http://example.org/{tag}/{i}"), NamedNode(f"http://example.org/p{i % 50}"),
                            Literal(f"{tag} value {i} with some padding")) for i in range(count))


OLD, NEW, KEEP = triples("old", TRIPLES), triples("new", TRIPLES), triples("keep", 10)


def n_triples(content: frozenset[Triple]) -> str:
    return "".join(f"{t.subject} {t.predicate} {t.object} .\n" for t in content)


def put_request(url: str, body: Body) -> requests.Response:
    return requests.put(url + "/store", params={"graph": GRAPH.value}, data=body,
                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/n-triples"},
                        timeout=REQUEST_TIMEOUT_S)


def update_request(url: str, body: Body) -> requests.Response:
    return requests.post(url + "/sparql", data=body, timeout=REQUEST_TIMEOUT_S,
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/sparql-update"})


WRITES = {"put": put_request, "update": update_request}
BODIES = {"put": n_triples(NEW).encode(),
          "update": (f"DELETE WHERE {{ GRAPH {GRAPH} {{ ?s ?p ?o }} }} ;\n"
                     f"INSERT DATA {{ GRAPH {GRAPH} {{\n{n_triples(NEW)}}} }}").encode()}


def send_write(url: str, kind: str) -> tuple[Background, Body]:
    """The write ``kind`` in a thread, with its body (``sent`` once it is all on the socket)."""
    body = Body(BODIES[kind])
    return Background(lambda: WRITES[kind](url, body)), body


@dataclass(frozen=True)
class Graphs:
    replaced: frozenset[Triple]
    kept: frozenset[Triple]
    others: int  # quads in any other graph


def read_graphs(path: Path) -> Graphs:
    store = GraphStore(path)  # reopening after the kill: recovery from the write-ahead log
    replaced, kept, others = set(), set(), 0
    for quad in store.raw:
        if quad.graph_name == GRAPH:
            replaced.add(quad.triple)
        elif quad.graph_name == KEEP_GRAPH:
            kept.add(quad.triple)
        else:
            others += 1
    return Graphs(frozenset(replaced), frozenset(kept), others)


def state(graphs: Graphs) -> str:
    """"old", "new", or what a half-applied write left."""
    if graphs.replaced == OLD:
        return "old"
    if graphs.replaced == NEW:
        return "new"
    return (f"half-applied: {len(graphs.replaced & OLD)} old and {len(graphs.replaced & NEW)} new triples "
            f"(of {len(OLD)} and {len(NEW)}), {len(graphs.replaced - OLD - NEW)} others")


@pytest.fixture(scope="module")
def graph_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store holding OLD in GRAPH and KEEP in KEEP_GRAPH."""
    path = tmp_path_factory.mktemp("graph-template") / "store"
    store = GraphStore(path)
    store.extend([Quad(t.subject, t.predicate, t.object, GRAPH) for t in OLD]
                 + [Quad(t.subject, t.predicate, t.object, KEEP_GRAPH) for t in KEEP])
    store.flush()
    del store  # pyoxigraph closes the store when it is dropped
    return path


@dataclass(frozen=True)
class Reference:
    wal_bytes: int  # what the unkilled write's commit added to the write-ahead log


def measure(template: Path, directory: Path, kind: str) -> Reference:
    """The write unkilled: what it logs (and that it replaces the graph)."""
    path = fresh_copy(template, directory)
    server = ProductionServer(path, ENV)
    try:
        before = wal_bytes(path)
        response = WRITES[kind](server.url, Body(BODIES[kind]))
        reference = Reference(wal_bytes(path) - before)
        assert response.status_code == 204, response.text
    finally:
        server.close()
    assert state(read_graphs(path)) == "new" and reference.wal_bytes > 0
    return reference


@pytest.fixture(scope="module")
def references(graph_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Reference]:
    return {kind: measure(graph_template, tmp_path_factory.mktemp(f"measure-{kind}"), kind) for kind in WRITES}


def killed_write(path: Path, kind: str, point: tuple[str, float], reference: Reference) -> tuple[int | None, Graphs]:
    """Send the write, SIGKILL the server at ``point``; (status if answered, store after)."""
    server = ProductionServer(path, ENV)
    try:
        logged = wal_bytes(path)
        request, body = send_write(server.url, kind)
        what, fraction = point
        if what == "wal":
            wait_for_log(path, logged + max(1, int(reference.wal_bytes * fraction)), request.thread.is_alive)
        else:
            event = body.sent if what == "sent" else request.done
            assert event.wait(REQUEST_TIMEOUT_S), f"not {what} in {REQUEST_TIMEOUT_S:g} s"
        kill(server)
        request.join()
    finally:
        kill(server)
    return request.status, read_graphs(path)


@pytest.mark.parametrize("point", KILL_POINTS, ids=[f"{what}-{fraction}" for what, fraction in KILL_POINTS])
@pytest.mark.parametrize("kind", list(WRITES))
def test_a_killed_graph_replacement_is_all_or_nothing(tmp_path: Path, graph_template: Path,
                                                      references: dict[str, Reference], kind: str,
                                                      point: tuple[str, float]) -> None:
    earliest = point == KILL_POINTS[0]
    for attempt in range(3 if earliest else 1):
        status, graphs = killed_write(fresh_copy(graph_template, tmp_path / str(attempt)), kind, point,
                                      references[kind])
        assert state(graphs) in ("old", "new")
        assert status in (None, 204)
        if status == 204:  # acknowledged: it must have survived the kill
            assert state(graphs) == "new"
        assert graphs.kept == KEEP and graphs.others == 0
        if status is None:
            break
    if earliest:  # the kill interrupts the write before its transaction
        assert status is None and state(graphs) == "old"


# --- a GraphRAG trace -----------------------------------------------------------------------------

E, R = "https://trustgraph.ai/e/", "https://trustgraph.ai/r/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
DISTRICTS, STREETS = 100, 100
QUESTION = {"query": "What is the capital of Atlantis?", "explainable": True, "streaming": True,
            "entity_limit": 1000, "triple_limit": 100, "max_subgraph_size": 10_000, "max_path_length": 2}
STAGES = ("session", "retrieval", "selection", "answer")  # one transaction each, in this order
STAGE_OF = {"session": "session", "retrieval": "retrieval", "selection": "selection", "edge": "selection",
            "answer": "answer", "answer-document": "answer",
            "grounding": "retrieval"}  # TrustGraph 2.x's grounding is written with the retrieval (decision 24)
Entity = frozenset[tuple[str, str, str]]


def city_lines() -> Iterator[str]:
    """Atlantis, its capital, 100 districts of 100 labelled streets each: 10,000 edges two hops away."""
    yield f'<{E}atlantis> <{LABEL}> "Atlantis" .\n<{E}atlantis> <{R}capital> <{E}poseidonia> .\n'
    yield f'<{E}poseidonia> <{LABEL}> "Poseidonia" .\n<{R}capital> <{LABEL}> "capital" .\n'
    yield f'<{R}district> <{LABEL}> "district" .\n<{R}street> <{LABEL}> "street" .\n'
    for d in range(DISTRICTS):
        yield f'<{E}atlantis> <{R}district> <{E}d{d}> .\n<{E}d{d}> <{LABEL}> "District {d}" .\n'
        for s in range(STREETS):
            yield f'<{E}d{d}> <{R}street> <{E}s{d}_{s}> .\n<{E}s{d}_{s}> <{LABEL}> "Street {d} {s}" .\n'


@pytest.fixture(scope="module")
def rag_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("rag-template")
    data = directory / "atlantis.nt"
    data.write_text("".join(city_lines()), encoding="utf-8")
    build_store(directory / "store", data, "default", progress=False)
    return directory / "store"


@dataclass
class Stream(InThread):
    """A streamed GraphRAG request in a thread, collecting the explain ids it receives."""

    url: str
    explain_ids: list[str] = field(default_factory=list)
    ended: bool = False
    stopped: bool = False
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def _run(self) -> None:
        try:
            with requests.post(self.url + "/api/graph-rag", json=QUESTION, stream=True, timeout=REQUEST_TIMEOUT_S,
                               headers={"Accept": "application/x-ndjson"}) as response:
                # each piece as it arrives (the server sends 64 KB chunks); the default 512-byte pieces make
                # iter_lines quadratic in a line's length: the retrieval's 6 MB line took 20 s to read,
                # so the kills after it came long after the server had answered
                for line in response.iter_lines(chunk_size=None):
                    self._receive(json.loads(line))
        except (requests.RequestException, ValueError):  # cut by the kill, maybe within a line
            pass
        finally:
            with self.arrived:
                self.stopped = True
                self.arrived.notify_all()

    def _receive(self, message: dict) -> None:
        with self.arrived:
            if message.get("explain_id"):
                self.explain_ids.append(message["explain_id"])
            self.ended = self.ended or bool(message.get("end_of_session"))
            self.arrived.notify_all()

    def wait_for(self, count: int) -> None:
        """Until ``count`` explain messages have arrived (woken by each message, not by a clock)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.explain_ids) >= count or self.stopped, REQUEST_TIMEOUT_S)
            assert len(self.explain_ids) >= count, f"got only {self.explain_ids}"

    def acknowledged(self) -> set[str]:
        """The stages the server said it had written (each message follows its commit)."""
        return {STAGE_OF[stages.parse_explain_iri(iri)[0]] for iri in self.explain_ids}


@dataclass(frozen=True)
class Trace:
    """What a store holds of GraphRAG traces, read back."""

    entities: dict[str, Entity]  # stage -> its quads, session id and time normalized
    sessions: list[dict]  # list_sessions
    trace: dict | None  # read_trace of the one session


def normalized(quad: Quad, session_id: str) -> tuple[str, str, str]:
    obj = "TIME" if quad.predicate == PROV.startedAtTime else str(quad.object)
    return tuple(str(term).replace(session_id, "ID") for term in (quad.subject, quad.predicate, obj))


def explain_quads(store: GraphStore) -> list[Quad]:
    """The explainability graph, and the answer texts of the librarian graph."""
    answers = [q for q in store.raw.quads_for_pattern(None, None, None, vocab.LIBRARIAN_GRAPH)
               if isinstance(q.subject, NamedNode) and stages.parse_explain_iri(q.subject.value)]
    return [*store.raw.quads_for_pattern(None, None, None, store.explain_graph), *answers]


def read_traces(path: Path) -> Trace:
    store = GraphStore(path)  # reopening after the kill
    entities: dict[str, set] = {}
    session_ids = set()
    for quad in explain_quads(store):
        parsed = stages.parse_explain_iri(quad.subject.value) if isinstance(quad.subject, NamedNode) else None
        assert parsed is not None, f"an explainability quad of no session: {quad}"
        session_ids.add(parsed[1])
        entities.setdefault(STAGE_OF[parsed[0]], set()).add(normalized(quad, parsed[1]))
    assert len(session_ids) <= 1, f"quads of several sessions: {session_ids}"
    trace = read_trace(store, stages.SESSION.iri(session_ids.pop()).value) if session_ids else None
    return Trace({k: frozenset(v) for k, v in entities.items()}, list_sessions(store), trace)


def run_until(template: Path, directory: Path, messages: int | None) -> tuple[Stream, Trace]:
    """Ask the question; SIGKILL the server once ``messages`` explain messages have arrived (None:
    let it answer, then stop it gracefully). Returns the stream and the store read back."""
    path = fresh_copy(template, directory)
    server = ProductionServer(path, ENV)
    try:
        stream = Stream(server.url)
        if messages is None:
            stream.thread.join(REQUEST_TIMEOUT_S)
            server.close()
        else:
            stream.wait_for(messages)
            kill(server)
        stream.thread.join(REQUEST_TIMEOUT_S)
    finally:
        kill(server)
    return stream, read_traces(path)


@pytest.fixture(scope="module")
def complete(rag_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The trace of the question when nothing is killed."""
    stream, trace = run_until(rag_template, tmp_path_factory.mktemp("rag-complete"), None)
    assert stream.ended and stream.acknowledged() == set(STAGES)
    assert set(trace.entities) == set(STAGES)
    assert trace.trace["status"] == "answered" and trace.trace["edges"] and trace.trace["answer_text"]
    return trace


def check_trace(trace: Trace, complete: Trace, acknowledged: set[str]) -> None:
    """A prefix of the stages, each entity whole, every acknowledged one there, readable."""
    written = [stage for stage in STAGES if stage in trace.entities]
    assert written == list(STAGES[:len(written)]), f"a later entity without an earlier one: {written}"
    for stage in written:
        assert trace.entities[stage] == complete.entities[stage], f"half-written {stage} entity"
    assert acknowledged <= set(written), f"acknowledged {sorted(acknowledged)} but the store has {written}"
    if not written:
        assert trace.trace is None and trace.sessions == []
        return
    status = "answered" if len(written) == len(STAGES) else "incomplete"
    assert [s["status"] for s in trace.sessions] == [status] and trace.trace["status"] == status
    assert (trace.trace["retrieval"] is None) == ("retrieval" not in written)
    assert trace.trace["edge_count"] == (complete.trace["edge_count"] if "retrieval" in written else None)
    assert len(trace.trace["edges"]) == (len(complete.trace["edges"]) if "selection" in written else 0)
    assert trace.trace["answer_text"] == (complete.trace["answer_text"] if status == "answered" else None)


@pytest.mark.parametrize("messages", [0, 1, 2, 3, 4])
def test_a_killed_graph_rag_run_leaves_a_readable_trace(tmp_path: Path, rag_template: Path, complete: Trace,
                                                        messages: int) -> None:
    """Killed after ``messages`` explain messages: 0 as the request is sent (before or while the
    session is written), 1 while the label index is built (retrieval), 2 while the LLM selects, 3
    around the answer's write, 4 after it."""
    stream, trace = run_until(rag_template, tmp_path, messages)
    check_trace(trace, complete, stream.acknowledged())


# --- the checks themselves ----------------------------------------------------------------------

def test_the_checks_see_half_applied_writes(complete: Trace) -> None:
    """What each test would report if a kill left half a write (no server: the states are made up)."""
    half = frozenset(list(OLD)[:TRIPLES // 2]) | frozenset(list(NEW)[TRIPLES // 2:])
    assert state(Graphs(half, KEEP, 0)).startswith("half-applied: 10000 old and 10000 new")
    assert state(Graphs(frozenset(), KEEP, 0)).startswith("half-applied: 0 old and 0 new")
    whole = complete.entities
    torn = {**whole, "selection": frozenset(sorted(whole["selection"])[1:])}
    skipped = {stage: quads for stage, quads in whole.items() if stage != "selection"}
    for entities, message in ((torn, "half-written selection"), (skipped, "a later entity without an earlier one")):
        with pytest.raises(AssertionError, match=message):
            check_trace(replace(complete, entities=entities), complete, set())
    with pytest.raises(AssertionError, match="acknowledged"):
        check_trace(replace(complete, entities={"session": whole["session"]}), complete, {"session", "retrieval"})
