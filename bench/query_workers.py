"""What evaluating clients' queries in worker processes costs, against evaluating them in the server.

    python -m bench.query_workers [--runs N]

Over the sample store (the Factbook, 378k quads), each query shape is answered ``--runs`` times:
baseline ``in-process`` (``sparql_eval.answer_query`` on the server's own store, as before query
workers), ``worker`` (``QueryWorkers.run``: the task and the answer cross a pipe), and ``worker
after a write`` (a one-triple update before each query, so the worker opens a new snapshot first).
Prints median milliseconds and the ratio to the baseline; the machine is shared, so its load
average is printed too.
"""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from statistics import median

from bench.workdir import cached_store
from server.config import SAMPLE_DATA
from server.http.query_workers import QueryWorkers
from server.http.sparql_eval import QueryTask, answer_query
from server.ingest.load import load_file
from server.store import GraphStore

JSON = "application/sparql-results+json"
QUERIES = {
    "ASK": "ASK { ?s ?p ?o }",
    "label lookup": 'SELECT ?s WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> "France" }',
    "1,000 rows": "SELECT ?s ?p ?o WHERE { ?s ?p ?o } LIMIT 1000",
    "count 378k": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
}


def _timed(call: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return median(samples)


def _write(store: GraphStore, n: list[int]) -> None:
    n[0] += 1
    store.run_update(f"INSERT DATA {{ GRAPH <urn:bench:writes> {{ <urn:bench:s> <urn:bench:n> {n[0]} }} }}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    store = cached_store("sample", lambda s: load_file(s, SAMPLE_DATA, "default", progress=False))
    workers = QueryWorkers(store.path, size=1, memory_mb=2048, store=store)
    written = [0]
    print(f"store: {store.path}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"median of {args.runs} runs")
    print(f"{'query':<14}{'in-process ms':>15}{'worker ms':>11}{'ratio':>7}{'after a write ms':>18}{'ratio':>7}")
    try:
        for name, text in QUERIES.items():
            task = QueryTask(text, JSON, 100_000, 64 * 1024 * 1024)
            workers.run(task, "bench", 60)  # start the worker and open its snapshot
            base = _timed(lambda task=task: answer_query(store.raw, task), args.runs)
            worker = _timed(lambda task=task: workers.run(task, "bench", 60), args.runs)
            fresh = _timed(lambda task=task: (_write(store, written), workers.run(task, "bench", 60)),
                           args.runs)
            print(f"{name:<14}{base:>15.2f}{worker:>11.2f}{worker / base:>6.1f}x{fresh:>18.2f}{fresh / base:>6.1f}x")
    finally:
        workers.close()
        store.run_update("DROP SILENT GRAPH <urn:bench:writes>")


if __name__ == "__main__":
    main()
