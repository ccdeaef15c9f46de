"""HTTP load: concurrent clients against the real server (the README's production command), and the same
SPARQL query mix against ``oxigraph serve`` on the same data in the same run, as ratios.

Each phase lasts ``--seconds`` (default 60), loopback only:

1. sparql: ``--clients`` threads (default 20) send the SPARQL mix to Glassgraph, then to
   ``oxigraph serve --union-default-graph`` (same data, same default-graph semantics): the baseline;
2. mixed: the same SPARQL clients beside ``--rag-clients`` GraphRAG clients (SSE, offline LLM, a
   trace written per question) against Glassgraph: SPARQL answers/s against phase 1's, GraphRAG p50,
   and lost traces (each answer's session read back through /api/explain);
3. with ``--sweep``: phase 1 at 1, 4, 20 and 64 clients on both servers (or the levels given).

Every response is an answer (2xx), a refusal (429 or 503: the server turned the request away) or an
error (any other status, or no response). Throughput is answers/s: a refusal is not an answer. Each row also
says where the CPU went, in ms per answer: the client (this process's threads), the server (gunicorn's
processes, ``oxigraph serve``) and Glassgraph's query workers (``bench/process_cpu.py``): on a machine whose
cores the clients share, the ratio follows what each server spends per answer. Every
client sends one request at a time, which is within any fair share, so the summary line says FAIL
(exit code 1) when any request was refused, failed or lost its trace; the acceptance ratios are
printed as met or missed beside it (they do not change the exit code: the machine is shared).

Run from the project root: ``python -m bench.load_http`` (``--seconds 10`` for a quick look). The
Glassgraph store is the sample data (cached in ``GLASSGRAPH_BENCH_DIR``, copied per run); needs the
``oxigraph`` CLI (``pip install oxigraph``) for the baseline (``--no-oxigraph`` skips it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import requests

from bench.bench_retrieval import _table
from bench.process_cpu import CLIENT, QUERY_WORKERS, ROLES, SERVER, CpuSnapshot
from bench.workdir import cached_store
from server.config import PROJECT_ROOT, SAMPLE_DATA
from server.ingest.load import load_file
from server.stages import SESSION
from server.store import GraphStore

sys.path.append(str(PROJECT_ROOT / "tests"))  # the servers live with the tests that use them
from oxigraph_server import OxigraphServer  # noqa: E402
from production_server import ProductionServer  # noqa: E402

PREFIXES = """PREFIX e: <https://trustgraph.ai/e/>
PREFIX r: <https://trustgraph.ai/r/>
PREFIX tg: <https://trustgraph.ai/ns/>
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
"""
# The SPARQL mix: lookups, one- and two-hop neighbourhoods, provenance through a triple term,
# an aggregate over the collection graph, CONSTRUCT and ASK. Default graph = union of all graphs.
QUERIES = {
    "capital": ("json", "SELECT ?cap ?label WHERE { e:france r:capital ?cap . ?cap rdfs:label ?label }"),
    "label": ("json", 'SELECT ?s WHERE { ?s rdfs:label "Japan" }'),
    "out-edges": ("json", "SELECT ?p ?o WHERE { e:germany ?p ?o } LIMIT 100"),
    "in-edges": ("json", "SELECT ?s ?p WHERE { ?s ?p e:germany } LIMIT 100"),
    "two-hop": ("json", "SELECT ?n ?l WHERE { e:brazil ?p ?x . ?x ?q ?n . ?n rdfs:label ?l } LIMIT 200"),
    "provenance": ("json", "SELECT ?chunk ?text WHERE { ?sg tg:contains <<( e:france r:capital e:paris )>> ; "
                           "prov:wasDerivedFrom ?chunk . ?chunk tg:content ?text }"),
    "aggregate": ("json", "SELECT ?p (COUNT(*) AS ?n) WHERE { GRAPH <urn:trustgraph:graph:default> { ?s ?p ?o } } "
                          "GROUP BY ?p ORDER BY DESC(?n) LIMIT 10"),
    "construct": ("turtle", "CONSTRUCT WHERE { e:japan ?p ?o }"),
    "ask": ("json", "ASK { e:france r:capital e:paris }"),
}
ACCEPT = {"json": "application/sparql-results+json", "turtle": "text/turtle"}
QUESTIONS = ["What is the capital of France?", "What is the capital of Japan?",
             "Which countries border Germany?", "What currency does Brazil use?"]
SESSIONS = ("PREFIX prov: <http://www.w3.org/ns/prov#> SELECT (COUNT(?s) AS ?n) WHERE { "
            "GRAPH <urn:trustgraph:graph:explainability> { ?s a prov:Activity } }")
SWEEP = (1, 4, 20, 64)
ENGINE_TIMEOUT_S = "10"  # oxigraph serve holds a thread per query for --timeout-s (see bench/remote.py)
REFUSALS = (429, 503)  # the server turned the request away: busy, or unavailable
# The acceptance targets of the load (issue "Serve every client").
VS_OXIGRAPH_TARGET, MIXED_TARGET, RAG_P50_TARGET_MS = 0.8, 0.7, 150.0
READ_BACK_TRIES = 10


@dataclass
class Sample:
    kind: str
    status: int  # 0: the connection failed
    seconds: float
    session: str | None = None
    complete: bool = True  # a GraphRAG stream that ended with end_of_session


def outcome(status: int) -> str:
    """``answer`` (2xx), ``refusal`` (429 busy, 503 unavailable) or ``error`` (anything else; 0: no response)."""
    if 200 <= status < 300:
        return "answer"
    return "refusal" if status in REFUSALS else "error"


@dataclass
class Outcomes:
    """What a set of samples came to: answers, refusals and errors, and the answers' latencies (ms)."""

    requests: int = 0
    answers: int = 0
    refusals: int = 0
    errors: int = 0
    answer_ms: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, samples: list[Sample]) -> Outcomes:
        counted = cls(requests=len(samples))
        for sample in samples:
            kind = outcome(sample.status)
            setattr(counted, kind + "s", getattr(counted, kind + "s") + 1)
            if kind == "answer":
                counted.answer_ms.append(sample.seconds * 1000)
        return counted

    def answers_per_s(self, elapsed: float) -> float:
        return self.answers / elapsed if elapsed > 0 else 0.0

    def p(self, q: float) -> float:
        """The answers' latency percentile ``q`` in ms (refusals are quick: they would flatter it)."""
        return percentile(self.answer_ms, q)


def read_sse(text: str) -> tuple[str | None, bool]:
    """(the session id, whether ``end_of_session`` came) of a GraphRAG SSE stream."""
    session, complete = None, False
    for line in text.splitlines():
        if line.startswith("data: "):
            message = json.loads(line[6:])
            explain_id = message.get("explain_id") or ""
            session = session or (explain_id if message.get("explain_kind") == SESSION.kind else None)
            complete = complete or bool(message.get("end_of_session"))
    return session, complete


def retry_after(response: requests.Response) -> float:
    """The response's Retry-After in seconds; 1 when it has none."""
    try:
        return float(response.headers.get("Retry-After", "1"))
    except ValueError:
        return 1.0


def read_back(method: str, url: str, **kwargs: object) -> requests.Response | None:
    """A verification request, sent again after a refusal (a few times); None when no response came."""
    for _ in range(READ_BACK_TRIES):
        try:
            response = requests.request(method, url, timeout=60, **kwargs)
        except requests.RequestException:
            return None
        if response.status_code not in REFUSALS:
            break
        time.sleep(retry_after(response))
    return response


# --- servers --------------------------------------------------------------------------------------

def sample_store() -> GraphStore:
    return cached_store("factbook-http", lambda store: load_file(store, SAMPLE_DATA, "default", progress=True))


def start_glassgraph(workdir: Path, threads: int | None) -> ProductionServer:
    """The README's production command over a copy of the cached sample store (its own thread count unless
    ``threads`` is given)."""
    copy = workdir / "glassgraph" / "store"
    copy.parent.mkdir()
    sample_store().backup(copy)
    env = {"GLASSGRAPH_THREADS": str(threads)} if threads else {}
    return ProductionServer(copy, env=env, log_path=workdir / "glassgraph" / "gunicorn.log")


@contextmanager
def oxigraph_serve(workdir: Path) -> Iterator[tuple[str, int]]:
    """``oxigraph serve --union-default-graph`` over a copy of the same store; yields its query endpoint and
    process id."""
    location = workdir / "oxigraph" / "store"
    location.parent.mkdir()
    sample_store().backup(location)
    server = OxigraphServer(location, "--union-default-graph", "--timeout-s", ENGINE_TIMEOUT_S)
    try:
        yield server.url + "/query", server.process.pid
    finally:
        server.close()


# --- clients --------------------------------------------------------------------------------------

Call = Callable[[requests.Session, int], Sample]


def sparql_call(endpoint: str, queries: dict[str, tuple[str, str]] = QUERIES, prefixes: str = PREFIXES) -> Call:
    """A client's call: the next query of ``queries`` (name -> (answer format, text)) in turn."""
    names = list(queries)

    def call(session: requests.Session, n: int) -> Sample:
        name = names[n % len(names)]
        fmt, text = queries[name]
        started = time.perf_counter()
        try:
            response = session.get(endpoint, params={"query": prefixes + text}, headers={"Accept": ACCEPT[fmt]},
                                   timeout=120)
            status = response.status_code
        except requests.RequestException:
            status = 0
        return Sample("sparql", status, time.perf_counter() - started)

    return call


def graph_rag_call(base: str) -> Call:
    """A client's call: the next question, streamed as SSE; the sample keeps the session it returned."""
    def call(session: requests.Session, n: int) -> Sample:
        started = time.perf_counter()
        iri, complete = None, False
        try:
            response = session.post(base + "/api/graph-rag", json={"query": QUESTIONS[n % len(QUESTIONS)]},
                                    headers={"Accept": "text/event-stream"}, timeout=120)
            status = response.status_code
            if 200 <= status < 300:
                iri, complete = read_sse(response.text)
        except requests.RequestException:
            status = 0
        return Sample("graph-rag", status, time.perf_counter() - started, iri, complete)

    return call


def run_clients(seconds: float, calls: list[Call]) -> tuple[list[Sample], float]:
    """A thread per entry of ``calls``, each calling its call (n = 0, 1, ...) until ``seconds`` have passed."""
    samples: list[Sample] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(call: Call) -> None:
        mine, n = [], 0
        with requests.Session() as session:
            while time.monotonic() < deadline:
                mine.append(call(session, n))
                n += 1
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client, args=(call,)) for call in calls]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples, time.perf_counter() - started


def run_phase(clients: int, seconds: float, calls: list[tuple[int, Call]]) -> tuple[list[Sample], float]:
    """``clients`` threads for ``seconds``; each picks its next call by the weights in ``calls``."""
    schedule = [call for weight, call in calls for _ in range(weight)]

    def client(index: int) -> Call:
        return lambda session, n: schedule[(index + n) % len(schedule)](session, n // len(schedule) + index)

    return run_clients(seconds, [client(i) for i in range(clients)])


def percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


# --- checks and the summary -----------------------------------------------------------------------

def count_sessions(base: str) -> int:
    response = read_back("GET", base + "/sparql", params={"query": SESSIONS}, headers={"Accept": "text/csv"})
    if response is None or response.status_code != 200:
        answered = "no answer" if response is None else f"{response.status_code} {response.text[:300]}"
        raise RuntimeError(f"the sessions could not be counted: {answered}")
    return int(response.text.split()[1])


def lost_traces(base: str, rag: list[Sample]) -> list[str]:
    """GraphRAG answers (2xx) whose session does not read back answered through /api/explain, or that came
    without a session id or without end_of_session: one line each."""
    lost = []
    for sample in rag:
        if outcome(sample.status) != "answer":
            continue
        if not sample.session or not sample.complete:
            lost.append(f"an answer (HTTP {sample.status}) without a session id or end_of_session")
            continue
        trace = read_back("GET", base + "/api/explain", params={"id": sample.session})
        if trace is None or trace.status_code != 200 or trace.json().get("status") != "answered":
            lost.append(f"{sample.session}: {trace.status_code if trace is not None else 'no response'} "
                        f"{trace.text[:120] if trace is not None else ''}")
    return lost


def same_answers(glassgraph: str, oxigraph: str, queries: dict[str, tuple[str, str]] = QUERIES,
                 prefixes: str = PREFIXES) -> list[str]:
    """The query mix gives the same number of result lines on both servers (same data, same semantics)."""
    problems = []
    for name, (fmt, text) in queries.items():
        sizes = []
        for endpoint in (glassgraph, oxigraph):
            response = read_back("GET", endpoint, params={"query": prefixes + text},
                                 headers={"Accept": "text/csv" if fmt == "json" else "application/n-triples"})
            sizes.append(len(response.text.strip().splitlines()) if response is not None and response.ok else -1)
        if sizes[0] != sizes[1]:
            problems.append(f"{name}: {sizes[0]} lines from Glassgraph, {sizes[1]} from Oxigraph")
    return problems


@dataclass
class Measured:
    """One row of the tables: who was asked, by how many clients, and what came back."""

    phase: str
    server: str
    clients: int
    outcomes: Outcomes
    elapsed: float
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by role (bench/process_cpu.py)

    @property
    def rate(self) -> float:
        return self.outcomes.answers_per_s(self.elapsed)

    def row(self, baseline: Measured | None = None) -> list[str]:
        o = self.outcomes
        ratio = f"{self.rate / baseline.rate:.2f}x" if baseline and baseline.rate else "-"
        return [self.phase, self.server, str(self.clients), str(o.requests), str(o.answers), str(o.refusals),
                str(o.errors), f"{self.rate:.1f}", ratio, f"{o.p(50):.1f}", f"{o.p(99):.1f}", self.cpu_per_answer()]

    def cpu_per_answer(self) -> str:
        """CPU ms per answer of the client, the server and its query workers: ``client / server / workers``."""
        if not self.cpu or not self.outcomes.answers:
            return "-"
        return " / ".join(f"{self.cpu[role] * 1000 / self.outcomes.answers:.2f}" for role in ROLES)


HEADER = ["phase", "server/kind", "clients", "requests", "answers", "refused", "errors", "answers/s", "ratio",
          "p50 ms", "p99 ms", "CPU ms/answer: client / server / workers"]


def measure(phase: str, server: str, clients: int, samples: list[Sample], elapsed: float,
            cpu: dict[str, float] | None = None) -> Measured:
    return Measured(phase, server, clients, Outcomes.of(samples), elapsed, cpu or {})


def measured_phase(phase: str, server: str, clients: int, root: int,
                   run: Callable[[], tuple[list[Sample], float]]) -> Measured:
    """``run`` (a phase of clients) measured: its answers and the CPU the client and ``root``'s tree spent."""
    before = CpuSnapshot.of(root)
    samples, elapsed = run()
    return measure(phase, server, clients, samples, elapsed, CpuSnapshot.of(root).spent_since(before))


def verdict(measured: list[Measured], lost: list[str], problems: list[str]) -> tuple[bool, str]:
    """(passed, the summary line): FAIL when any request was refused or failed, or a trace was lost."""
    glassgraph = [m for m in measured if m.server != "oxigraph serve"]
    refused = sum(m.outcomes.refusals for m in glassgraph)
    errors = sum(m.outcomes.errors for m in glassgraph)
    asked = sum(m.outcomes.requests for m in glassgraph)
    answered = sum(m.outcomes.answers for m in glassgraph)
    passed = not (refused or errors or lost or problems)
    return passed, (f"{'PASS' if passed else 'FAIL'}: Glassgraph answered {answered} of {asked} requests; "
                    f"{refused} refused (429/503), {errors} errors, {len(lost)} lost traces, "
                    f"{len(problems)} other problems")


def targets(sparql: Measured | None, oxigraph: Measured | None, mixed: Measured | None,
            rag: Measured | None, lost: list[str]) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for the acceptance figures this run measured."""
    found = []
    if sparql and oxigraph and oxigraph.rate:
        found.append((f"SPARQL answers/s >= {VS_OXIGRAPH_TARGET}x oxigraph serve",
                      f"{sparql.rate / oxigraph.rate:.2f}x", sparql.rate >= VS_OXIGRAPH_TARGET * oxigraph.rate))
    if sparql and mixed and sparql.rate:
        found.append((f"mixed phase SPARQL answers/s >= {MIXED_TARGET}x the SPARQL-only phase",
                      f"{mixed.rate / sparql.rate:.2f}x", mixed.rate >= MIXED_TARGET * sparql.rate))
    if rag:
        p50 = rag.outcomes.p(50)
        found.append((f"GraphRAG p50 under {RAG_P50_TARGET_MS:g} ms", f"{p50:.0f} ms",
                      rag.outcomes.answers > 0 and p50 < RAG_P50_TARGET_MS))
        found.append(("0 lost traces", str(len(lost)), not lost))
    return found


def server_budget(sparql: Measured, oxigraph: Measured, target: float = VS_OXIGRAPH_TARGET) -> str | None:
    """What the ratio to ``oxigraph serve`` asks of Glassgraph's server process, where the clients share the
    cores and answers/s follow the CPU an answer costs (client + server, + query workers): the most the server
    process may spend an answer for ``target``, against what it spent, and the ratio were it to spend nothing."""
    if not (sparql.cpu and oxigraph.cpu and sparql.outcomes.answers and oxigraph.outcomes.answers):
        return None
    glassgraph = {role: seconds * 1000 / sparql.outcomes.answers for role, seconds in sparql.cpu.items()}
    baseline = sum(oxigraph.cpu.values()) * 1000 / oxigraph.outcomes.answers
    rest = glassgraph[CLIENT] + glassgraph[QUERY_WORKERS]
    budget = baseline / target - rest
    allowed = f"may spend {budget:.2f} ms an answer" if budget > 0 else "may spend nothing"
    return (f"CPU an answer: oxigraph serve {baseline:.2f} ms with its client; Glassgraph's client and query "
            f"workers {rest:.2f} ms, its server process {glassgraph[SERVER]:.2f} ms. For {target:g}x the server "
            f"process {allowed}; spending none, the ratio would be {baseline / rest:.2f}x")


# --- the run --------------------------------------------------------------------------------------

def parse_levels(text: str) -> list[int]:
    levels = sorted({int(level) for level in text.split(",") if level.strip()})
    if not levels or not all(1 <= level <= 100 for level in levels):
        raise argparse.ArgumentTypeError("client counts 1..100, separated by commas")
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="duration of each phase (default 60)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent SPARQL clients (default 20)")
    parser.add_argument("--rag-clients", type=int, default=4,
                        help="GraphRAG clients beside them in the mixed phase (default 4)")
    parser.add_argument("--threads", type=int, help="GLASSGRAPH_THREADS (default: the server's own)")
    parser.add_argument("--sweep", nargs="?", const=",".join(map(str, SWEEP)), type=parse_levels,
                        help="also the SPARQL phase at these client counts (default 1,4,20,64)")
    parser.add_argument("--no-oxigraph", action="store_true", help="skip the oxigraph serve baseline")
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 100 or not 0 <= args.rag_clients <= 50 or not 0 < args.seconds <= 600:
        parser.error("--clients must be 1..100, --rag-clients 0..50 and --seconds 0..600")
    levels = sorted({args.clients, *(args.sweep or [])})
    measured: dict[tuple[str, int], Measured] = {}
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="glassgraph-load-") as tmp:
        workdir = Path(tmp)
        server = start_glassgraph(workdir, args.threads)
        base = server.url
        try:
            servers = {"glassgraph": (base + "/sparql", server.process.pid)}
            with nullcontext() if args.no_oxigraph else oxigraph_serve(workdir) as oxigraph:
                if oxigraph:
                    servers["oxigraph serve"] = oxigraph
                    problems += same_answers(base + "/sparql", oxigraph[0])  # also warms both
                for clients in levels:
                    for name, (endpoint, root) in servers.items():
                        measured[name, clients] = measured_phase(
                            "sparql", name, clients, root,
                            lambda n=clients, e=endpoint: run_phase(n, args.seconds, [(1, sparql_call(e))]))
            rag_call = graph_rag_call(base)
            rag_call(requests.Session(), 0)  # warm the label index and the pipeline
            before = count_sessions(base)
            before_cpu = CpuSnapshot.of(server.process.pid)
            samples, elapsed = run_clients(args.seconds, [sparql_call(base + "/sparql")] * args.clients
                                           + [rag_call] * args.rag_clients)
            mixed_cpu = CpuSnapshot.of(server.process.pid).spent_since(before_cpu)
            mixed = measure("mixed", "glassgraph: sparql", args.clients,
                            [s for s in samples if s.kind == "sparql"], elapsed)
            rag_samples = [s for s in samples if s.kind == "graph-rag"]
            rag = measure("mixed", "glassgraph: graph-rag", args.rag_clients, rag_samples, elapsed)
            lost = lost_traces(base, rag_samples)
            recorded = count_sessions(base) - before
        finally:
            server.close()
    return report(args, levels, measured, (mixed, rag, mixed_cpu), lost, recorded, problems)


def report(args: argparse.Namespace, levels: list[int], measured: dict[tuple[str, int], Measured],
           mixed_phase: tuple[Measured, Measured, dict[str, float]], lost: list[str], recorded: int,
           problems: list[str]) -> int:
    """Print the tables, the targets and the summary line; the exit code."""
    sparql, oxigraph = measured["glassgraph", args.clients], measured.get(("oxigraph serve", args.clients))
    mixed, rag, mixed_cpu = mixed_phase
    print(f"{args.clients} SPARQL clients (+{args.rag_clients} GraphRAG clients in the mixed phase), "
          f"{args.seconds:g} s per phase, the production command"
          + (f" with GLASSGRAPH_THREADS={args.threads}" if args.threads else "")
          + "; answers/s counts 2xx only, latencies are the answers'")
    rows = [oxigraph.row(oxigraph)] if oxigraph else []
    print(_table(HEADER, rows + [sparql.row(oxigraph), mixed.row(sparql), rag.row()]))
    if len(levels) > 1:
        print("\nsweep: the SPARQL mix at each concurrency (ratio: Glassgraph / oxigraph serve)")
        rows = []
        for clients in levels:
            baseline = measured.get(("oxigraph serve", clients))
            if baseline:
                rows.append(baseline.row(baseline))
            rows.append(measured["glassgraph", clients].row(baseline))
        print(_table(HEADER, rows))
    budget = oxigraph and server_budget(sparql, oxigraph)
    if budget:
        print(budget)
    mixed_cpu = ", ".join(f"{role} {seconds / mixed.elapsed:.2f}" for role, seconds in mixed_cpu.items())
    print(f"mixed phase, CPU seconds a second: {mixed_cpu} (one server process runs GraphRAG and serves HTTP)")
    answered = rag.outcomes.answers
    print(f"\ntraces: {answered} GraphRAG answers, {recorded} sessions recorded, {len(lost)} lost "
          "(not read back answered through /api/explain)")
    print("acceptance targets (met or missed; they do not change the exit code):")
    for name, value, met in targets(sparql, oxigraph, mixed, rag, lost):
        print(f"  {'met   ' if met else 'MISSED'} {name}: {value}")
    passed, line = verdict(list(measured.values()) + [mixed, rag], lost, problems)
    for problem in (lost + problems)[:20]:
        print("  PROBLEM:", problem)
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores)")
    print(line)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
