"""Where a SPARQL request's time goes through Glassgraph on a remote engine (``bench/remote.py --profile``).

1. ``spans``: one client, one request at a time, so the figures do not depend on how many cores the
   tiers share: each query of a mix sent to the engine directly and through Glassgraph (the
   production command), in turn, ``rounds`` times; per query the median of each and what Glassgraph
   adds. The first row is a static file from Glassgraph: what its HTTP tier costs with no query work.
2. ``profile_app``: the same queries through the Flask app built in this process over the same
   engine (its test client: no HTTP server), every thread of it profiled (cProfile), the calls with
   the most time listed. The query workers' checking runs in their own processes: it shows as the
   time the request thread waits for them.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import requests

from bench.bench_retrieval import _table
from bench.load_http import ACCEPT
from server.config import Config
from server.http.app import create_app

PROFILE_LINES = 30


def _median_ms(session: requests.Session, method: str, url: str, rounds: int, **kwargs: object) -> tuple[float, int]:
    """(the median of ``rounds`` requests in ms, how many were answered 2xx)."""
    times, answered = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        response = session.request(method, url, timeout=60, **kwargs)
        times.append((time.perf_counter() - started) * 1000)
        answered += response.ok
    return statistics.median(times), answered


def spans(app_url: str, engine_url: str, queries: dict[str, tuple[str, str]], prefixes: str,
          rounds: int) -> str:
    """The table of part 1: per query, the median direct, through Glassgraph, and the difference (ms)."""
    rows = []
    with requests.Session() as session:
        static, answered = _median_ms(session, "GET", app_url + "/static/favicon.svg", rounds)
        rows.append(["a static file (Glassgraph's HTTP tier)", "-", f"{static:.2f}", "-", f"{answered}/{rounds}"])
        for name, (fmt, text) in {"ask-empty": ("json", "ASK {}"), **queries}.items():
            params = {"query": (prefixes if name != "ask-empty" else "") + text}
            headers = {"Accept": ACCEPT[fmt]}
            _median_ms(session, "GET", engine_url + "/query", 3, params=params, headers=headers)  # warm both
            _median_ms(session, "GET", app_url + "/sparql", 3, params=params, headers=headers)
            direct, direct_ok = _median_ms(session, "GET", engine_url + "/query", rounds, params=params,
                                           headers=headers)
            through, through_ok = _median_ms(session, "GET", app_url + "/sparql", rounds, params=params,
                                             headers=headers)
            rows.append([name, f"{direct:.2f}", f"{through:.2f}", f"{through - direct:+.2f}",
                         f"{through_ok}/{rounds} ({direct_ok}/{rounds} direct)"])
    return _table(["request", "engine directly ms", "through Glassgraph ms", "Glassgraph adds ms", "answered"],
                  rows)


@contextmanager
def every_thread_profiled() -> Iterator[list[cProfile.Profile]]:
    """This thread and every thread started inside the block, each with a profiler of its own."""
    profiles = [cProfile.Profile()]

    def start(*_: object) -> None:  # a new thread's first profiling event: it profiles itself from here on
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()

    threading.setprofile(start)
    profiles[0].enable()
    try:
        yield profiles
    finally:
        profiles[0].disable()
        threading.setprofile(None)  # threads started from now on are not profiled


def profile_app(engine_url: str, queries: dict[str, tuple[str, str]], prefixes: str, rounds: int) -> str:
    """Part 2: the calls with the most cumulative time, then the most time of their own, for ``rounds``
    passes over ``queries`` through the app in this process."""
    config = Config(store_path=engine_url, load_sample=False, llm="offline")
    app = create_app(config)
    client = app.test_client()

    def ask_all() -> int:
        answered = 0
        for fmt, text in queries.values():
            answered += client.get("/sparql", query_string={"query": prefixes + text},
                                   headers={"Accept": ACCEPT[fmt]}).status_code == 200
        return answered

    try:
        ask_all()  # warm: the query workers, the connections to the engine
        with every_thread_profiled() as profiles:
            started = time.perf_counter()
            answered = sum(ask_all() for _ in range(rounds))
            elapsed = time.perf_counter() - started
    finally:
        app.extensions["glassgraph.runtime"].close()
    out = io.StringIO()
    stats = pstats.Stats(*profiles, stream=out)
    out.write(f"{answered} of {rounds * len(queries)} requests answered in {elapsed:.2f} s "
              f"({elapsed / (rounds * len(queries)) * 1000:.2f} ms each, profiling overhead included), "
              f"{len(profiles)} threads profiled\n")
    stats.sort_stats("cumulative").print_stats(PROFILE_LINES)
    stats.sort_stats("tottime").print_stats(PROFILE_LINES)
    return out.getvalue()
