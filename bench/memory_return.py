"""Memory after a burst: does the worker hand back what a burst of large answers took?

``python -m bench.memory_return`` (``--clients 8 --rounds 2 --answer-mb 20 --never-reading 6``) starts
the production command (``tests/production_server.py``) twice over a store holding one graph of
``GRAPH_TRIPLES`` triples, with glibc's allocator as it is (``GLASSGRAPH_MALLOC_ARENAS=0``) and as the
worker sets it by default (bounded arenas, a fixed mmap threshold, a trim after large responses), and
runs the same burst against each: ``--clients`` clients each reading, ``--rounds`` times, SPARQL answers
(TSV) of a fifth of ``--answer-mb`` MB up to all of it and the graph through ``GET /store`` (written by
the store in the worker), while ``--never-reading`` clients ask for the largest answer and read none of
it (dropped after ``GLASSGRAPH_SEND_TIMEOUT``, lowered to 2 s here). The worker's RSS is read from
/proc: at rest after a warm-up, at its peak during the burst, and after the burst once the server has
been idle for ``--settle`` seconds. One table, with the ratio of each to the resting size and how long
the burst took.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import requests

from bench.bench_retrieval import _table
from server.config import PROJECT_ROOT

sys.path.append(str(PROJECT_ROOT / "tests"))  # the production command lives with the tests that use it
from production_server import TOKEN, ProductionServer  # noqa: E402

SEND_TIMEOUT_S = 2.0
GRAPH = "urn:glassgraph:bench:memory"
GRAPH_TRIPLES = 60_000  # sent in parts under GLASSGRAPH_MAX_BODY
VARIANTS = (("glibc as it is (GLASSGRAPH_MALLOC_ARENAS=0)", "0"), ("the worker's default (2 arenas, trim)", "2"))


def big_query(answer_mb: float) -> str:
    """A SELECT whose TSV answer is about ``answer_mb`` MB: 50,000 rows of a padded string."""
    pad = max(int(answer_mb * 1e6 / 50_000) - 10, 1)
    numbers = " ".join(map(str, range(500)))
    return (f"SELECT ?a ?b ?padded WHERE {{ VALUES ?a {{ {numbers} }} VALUES ?b {{ {' '.join(map(str, range(100)))} }}"
            f' BIND(CONCAT(STR(?a), "{"x" * pad}") AS ?padded) }}')


def worker_pid(master: int) -> int:
    """The gunicorn worker: the master's child."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == master:
                return int(entry.name)
    raise RuntimeError("no gunicorn worker found")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class PeakSampler:
    """The highest RSS of ``pid`` seen, sampled every 50 ms until ``stop()``."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def fetch(url: str, query: str) -> int:
    """The answer's size, read whole; asked again after a refusal (429: the query workers are busy)."""
    while True:
        response = requests.post(url + "/sparql", data={"query": query},
                                 headers={"Accept": "text/tab-separated-values"}, timeout=300)
        if response.status_code != 429:
            response.raise_for_status()
            return len(response.content)
        time.sleep(float(response.headers.get("Retry-After", "1")))


def load_graph(server: ProductionServer) -> None:
    for part in range(0, GRAPH_TRIPLES, 20_000):
        data = "".join(f'<urn:s{i}> <urn:p{i % 50}> "{"v" * 80} {i}" .\n' for i in range(part, part + 20_000))
        response = requests.post(server.url + "/store", params={"graph": GRAPH}, data=data.encode(), timeout=120,
                                 headers={"Content-Type": "application/n-triples", "Authorization": f"Bearer {TOKEN}"})
        response.raise_for_status()


def read_graph(url: str) -> int:
    response = requests.get(url + "/store", params={"graph": GRAPH}, headers={"Accept": "application/n-triples"},
                            timeout=300)
    response.raise_for_status()
    return len(response.content)


def job(url: str, number: int, answer_mb: float) -> int:
    """The ``number``-th request of the burst: an answer of (number % 5 + 1) fifths of ``answer_mb``, or
    the graph."""
    if number % 6 == 5:
        return read_graph(url)
    return fetch(url, big_query(answer_mb * (number % 6 + 1) / 5))


def never_read(port: int, query: str) -> socket.socket:
    body = urlencode({"query": query}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"POST /sparql HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/tab-separated-values\r\n"
                 b"Content-Type: application/x-www-form-urlencoded\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def run_variant(arenas: str, args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    server = ProductionServer(workdir / f"store-{arenas}", {"GLASSGRAPH_MALLOC_ARENAS": arenas,
                                                            "GLASSGRAPH_SEND_TIMEOUT": str(SEND_TIMEOUT_S)})
    try:
        pid = worker_pid(server.process.pid)
        load_graph(server)
        for number in range(12):  # warm-up, small: the query workers started, the app's code and caches loaded
            fetch(server.url, big_query(0.5 * (number % 4 + 1)))
        time.sleep(args.settle)
        resting = rss_mb(pid)
        query = big_query(args.answer_mb)
        sampler = PeakSampler(pid)
        stalled = [never_read(server.port, query) for _ in range(args.never_reading)]
        started = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            jobs = range(args.clients * args.rounds * 6)
            received = sum(pool.map(lambda number: job(server.url, number, args.answer_mb), jobs))
        burst_s = time.monotonic() - started
        time.sleep(SEND_TIMEOUT_S + 1)  # the never-reading clients are dropped by now
        peak = sampler.stop()
        time.sleep(args.settle)
        after = rss_mb(pid)
        for sock in stalled:
            sock.close()
        return {"resting": resting, "peak": peak, "after": after, "received_mb": received / 1e6, "burst_s": burst_s}
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--answer-mb", type=float, default=20.0)
    parser.add_argument("--never-reading", type=int, default=6)
    parser.add_argument("--settle", type=float, default=3.0, help="idle seconds before reading RSS at rest and after")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="glassgraph-memory-") as tmp:
        for name, arenas in VARIANTS:
            result = run_variant(arenas, args, Path(tmp))
            rows.append([name, f"{result['resting']:.0f}", f"{result['peak']:.0f}", f"{result['after']:.0f}",
                         f"{result['after'] / result['resting']:.2f}x", f"{result['received_mb']:.0f}",
                         f"{result['burst_s']:.1f}"])
    print(f"worker RSS (MB): {args.clients} clients x {args.rounds} rounds of 5 answers of up to "
          f"~{args.answer_mb:g} MB and one GET /store of {GRAPH_TRIPLES:,} triples, {args.never_reading} never-reading "
          f"clients; load average {os.getloadavg()[0]:.1f}")
    print(_table(["allocator", "resting", "peak", "after burst", "after / resting", "MB read", "burst s"], rows))


if __name__ == "__main__":
    main()
