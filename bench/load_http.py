"""HTTP load: concurrent clients against the real server (the README's production command), and the same
SPARQL query mix against ``oxigraph serve`` on the same data, as a ratio.

Three phases of ``--seconds`` each (default 60), ``--clients`` threads (default 20), loopback only:

1. mixed: SPARQL queries and GraphRAG requests (SSE, offline LLM) against Glassgraph; no 5xx and
   no lost trace (sessions counted before and after, each one read back through /api/explain);
2. sparql: the SPARQL mix alone against Glassgraph;
3. oxigraph: the same SPARQL mix against ``oxigraph serve --union-default-graph`` (same data,
   same default-graph semantics) — the baseline.

Run from the project root: ``python -m bench.load_http`` (``--seconds 10`` for a quick look). The
Glassgraph store is the sample data (cached in ``GLASSGRAPH_BENCH_DIR``, copied per run); needs the
``oxigraph`` CLI (``pip install oxigraph``) for phase 3 (``--no-oxigraph`` skips it).
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from bench.bench_retrieval import _table
from bench.workdir import cached_store
from server.config import PROJECT_ROOT, SAMPLE_DATA
from server.ingest.load import load_file

sys.path.append(str(PROJECT_ROOT / "tests"))  # the production command lives with the tests that use it
from production_server import ProductionServer, free_port  # noqa: E402

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


@dataclass
class Sample:
    kind: str
    status: int  # 0: the connection failed
    seconds: float
    session: str | None = None
    complete: bool = True  # a GraphRAG stream that ended with end_of_session


def wait_until_up(url: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited with status {process.returncode}")
        try:
            requests.get(url, timeout=5)
            return
        except requests.RequestException:
            time.sleep(0.2)
    sys.exit(f"{url} did not come up in {seconds} s")


# --- servers --------------------------------------------------------------------------------------

def start_glassgraph(workdir: Path, threads: int) -> ProductionServer:
    """The README's production command over a copy of the cached sample store."""
    source = cached_store("factbook-http", lambda store: load_file(store, SAMPLE_DATA, "default", progress=True))
    copy = workdir / "glassgraph-store"
    source.backup(copy)
    return ProductionServer(copy, env={"GLASSGRAPH_THREADS": str(threads)}, log_path=workdir / "glassgraph.log")


def start_oxigraph(workdir: Path) -> tuple[subprocess.Popen, str]:
    """oxigraph serve --union-default-graph over the same sample data, loaded with ``oxigraph load``."""
    cli = shutil.which("oxigraph", path=str(Path(sys.executable).parent)) or shutil.which("oxigraph")
    if cli is None:
        sys.exit("the oxigraph CLI is missing: pip install oxigraph (or run with --no-oxigraph)")
    data, location = workdir / "factbook.nq", workdir / "oxigraph-store"
    with gzip.open(SAMPLE_DATA, "rb") as packed, data.open("wb") as plain:
        shutil.copyfileobj(packed, plain)
    subprocess.run([cli, "load", "--location", str(location), "--file", str(data)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = free_port()
    log = (workdir / "oxigraph.log").open("wb")
    process = subprocess.Popen([cli, "serve", "--location", str(location), "--bind", f"127.0.0.1:{port}",
                                "--union-default-graph"], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    wait_until_up(base + "/query?query=ASK%7B%7D", process)
    return process, base


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --- clients --------------------------------------------------------------------------------------

def sparql_call(endpoint: str, queries: dict[str, tuple[str, str]] = QUERIES,
                prefixes: str = PREFIXES) -> Callable[[requests.Session, int], Sample]:
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


def graph_rag_call(base: str) -> Callable[[requests.Session, int], Sample]:
    def call(session: requests.Session, n: int) -> Sample:
        started = time.perf_counter()
        iri, complete = None, False
        try:
            with session.post(base + "/api/graph-rag", json={"query": QUESTIONS[n % len(QUESTIONS)]},
                              headers={"Accept": "text/event-stream"}, stream=True, timeout=120) as response:
                status = response.status_code
                for line in response.iter_lines(decode_unicode=True):
                    if line.startswith("data: "):
                        message = json.loads(line[6:])
                        iri = iri or message.get("explain_id")
                        complete = complete or bool(message.get("end_of_session"))
        except requests.RequestException:
            status = 0
        return Sample("graph-rag", status, time.perf_counter() - started, iri, complete)

    return call


def run_phase(clients: int, seconds: float, calls: list[tuple[int, Callable[[requests.Session, int], Sample]]]
              ) -> tuple[list[Sample], float]:
    """``clients`` threads for ``seconds``; each picks its next call by the weights in ``calls``."""
    schedule = [call for weight, call in calls for _ in range(weight)]
    samples: list[Sample] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        mine = []
        with requests.Session() as session:
            n = index
            while time.monotonic() < deadline:
                mine.append(schedule[n % len(schedule)](session, n // len(schedule) + index))
                n += 1
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples, time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def summarize(phase: str, kind: str, samples: list[Sample], elapsed: float) -> list[str]:
    times = [s.seconds * 1000 for s in samples]
    fivexx = sum(1 for s in samples if s.status >= 500)
    failed = sum(1 for s in samples if s.status == 0 or (400 <= s.status < 500))
    return [phase, kind, str(len(samples)), f"{len(samples) / elapsed:.1f}", f"{percentile(times, 50):.1f}",
            f"{percentile(times, 90):.1f}", f"{percentile(times, 99):.1f}", f"{max(times, default=0):.1f}",
            str(fivexx), str(failed)]


def count_sessions(base: str) -> int:
    response = requests.get(base + "/sparql", params={"query": SESSIONS}, headers={"Accept": "text/csv"})
    response.raise_for_status()
    return int(response.text.split()[1])


def check_traces(base: str, rag: list[Sample], before: int) -> tuple[str, list[str]]:
    """Every GraphRAG session that started is recorded and reads back answered; (summary, problems)."""
    problems = []
    started = [s.session for s in rag if s.session]
    recorded = count_sessions(base) - before
    if recorded != len(started):
        problems.append(f"{len(started)} sessions started but {recorded} recorded")
    answered = 0
    for iri in started:
        trace = requests.get(base + "/api/explain", params={"id": iri}, timeout=60)
        if trace.status_code == 200 and trace.json().get("status") == "answered":
            answered += 1
        else:
            problems.append(f"{iri}: HTTP {trace.status_code} {trace.text[:120]}")
    problems += [f"a stream did not end with end_of_session (HTTP {s.status})" for s in rag if not s.complete]
    summary = (f"traces: {len(started)} GraphRAG sessions started, {recorded} recorded, {answered} read back "
               f"answered, {len(started) - answered} lost")
    return summary, problems


def same_answers(glassgraph: str, oxigraph: str, queries: dict[str, tuple[str, str]] = QUERIES,
                 prefixes: str = PREFIXES) -> list[str]:
    """The query mix gives the same number of result lines on both servers (same data, same semantics)."""
    problems = []
    for name, (fmt, text) in queries.items():
        sizes = []
        for endpoint in (glassgraph, oxigraph):
            body = requests.get(endpoint, params={"query": prefixes + text}, headers={"Accept": "text/csv"
                                if fmt == "json" else "application/n-triples"}, timeout=120).text
            sizes.append(len(body.strip().splitlines()))
        if sizes[0] != sizes[1]:
            problems.append(f"{name}: {sizes[0]} lines from Glassgraph, {sizes[1]} from Oxigraph")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="duration of each phase (default 60)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (default 20)")
    parser.add_argument("--threads", type=int, default=32, help="request threads, GLASSGRAPH_THREADS (default 32)")
    parser.add_argument("--rag-weight", type=int, default=1, help="GraphRAG requests per 9 SPARQL ones (default 1)")
    parser.add_argument("--no-oxigraph", action="store_true", help="skip the oxigraph serve baseline")
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 100 or not 0 < args.seconds <= 600:
        parser.error("--clients must be 1..100 and --seconds 0..600")
    rows: list[list[str]] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="glassgraph-load-") as tmp:
        workdir = Path(tmp)
        server = start_glassgraph(workdir, args.threads)
        base = server.url
        try:
            sparql = sparql_call(base + "/sparql")
            rag = graph_rag_call(base)
            rag(requests.Session(), 0)  # warm the label index and the pipeline
            before = count_sessions(base)
            samples, elapsed = run_phase(args.clients, args.seconds, [(9, sparql), (args.rag_weight, rag)])
            rag_samples = [s for s in samples if s.kind == "graph-rag"]
            rows.append(summarize("mixed", "all", samples, elapsed))
            rows.append(summarize("mixed", "sparql", [s for s in samples if s.kind == "sparql"], elapsed))
            rows.append(summarize("mixed", "graph-rag", rag_samples, elapsed))
            fivexx = sum(1 for s in samples if s.status >= 500)
            if fivexx:
                problems.append(f"{fivexx} responses were 5xx")
            traces, found = check_traces(base, rag_samples, before)
            problems += found
            samples, elapsed = run_phase(args.clients, args.seconds, [(1, sparql)])
            rows.append(summarize("sparql", "glassgraph", samples, elapsed))
            if not args.no_oxigraph:
                oxi, oxi_base = start_oxigraph(workdir)
                try:
                    problems += same_answers(base + "/sparql", oxi_base + "/query")
                    samples, elapsed = run_phase(args.clients, args.seconds, [(1, sparql_call(oxi_base + "/query"))])
                    rows.append(summarize("sparql", "oxigraph serve", samples, elapsed))
                finally:
                    stop(oxi)
        finally:
            server.close()
    header = ["phase", "server/kind", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "5xx", "4xx/failed"]
    print(f"{args.clients} clients, {args.seconds:g} s per phase, the production command with "
          f"GLASSGRAPH_THREADS={args.threads}")
    print(_table(header, rows))
    if not args.no_oxigraph:
        glass, oxi_row = rows[-2], rows[-1]
        print(f"\nSPARQL mix, Glassgraph / oxigraph serve: throughput x{float(glass[3]) / float(oxi_row[3]):.2f}, "
              f"p50 latency x{float(glass[4]) / max(float(oxi_row[4]), 1e-9):.2f}, "
              f"p99 latency x{float(glass[6]) / max(float(oxi_row[6]), 1e-9):.2f}")
    print(traces)
    print(f"problems: {len(problems)}")
    for problem in problems[:20]:
        print("  PROBLEM:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
