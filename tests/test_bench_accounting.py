"""bench/load_http.py's accounting, fed real responses from servers on loopback: a refusal (429, 503) is
not an answer, answers/s counts answers only, and the summary line fails when anything was refused; and
bench/process_cpu.py's CPU accounting by role, over a real process tree."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
import requests
from loopback_listener import LoopbackListener

from server.config import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:
    sys.path.append(str(PROJECT_ROOT))  # bench/ is not installed: it is imported from the checkout
from bench import load_http  # noqa: E402

SSE_ANSWER = (b'data: {"explain_id": "urn:trustgraph:session:1", "explain_kind": "session"}\n\n'
              b'data: {"response": "Paris.", "end_of_session": true}\n\n')


@pytest.fixture
def servers():
    """Four endpoints on loopback: one answers 200, one 429 (busy), one 503 (unavailable), one 500."""
    listeners = {status: LoopbackListener(status=status, headers={"Retry-After": "1"})
                 for status in (200, 429, 503, 500)}
    yield listeners
    for listener in listeners.values():
        listener.close()


def test_refusals_are_counted_apart_from_answers_and_fail_the_summary(servers) -> None:
    calls = [(2, load_http.sparql_call(servers[200].url))] + [
        (1, load_http.sparql_call(servers[status].url)) for status in (429, 503, 500)]
    samples, elapsed = load_http.run_phase(3, 2.0, calls)  # each client goes round the five calls in turn: 2 s
    # lets every client reach the 500 endpoint however loaded the machine (0.3 s did not always, at load 13)
    counted = load_http.Outcomes.of(samples)

    assert counted.requests == len(samples) == sum(len(listener.calls) for listener in servers.values())
    assert counted.answers == len(servers[200].calls) > 0
    assert counted.refusals == len(servers[429].calls) + len(servers[503].calls) > 0
    assert counted.errors == len(servers[500].calls) > 0
    assert len(counted.answer_ms) == counted.answers  # latencies are the answers' only
    assert counted.answers_per_s(elapsed) == pytest.approx(len(servers[200].calls) / elapsed)

    passed, line = load_http.verdict([load_http.Measured("sparql", "glassgraph", 3, counted, elapsed)], [], [])
    assert not passed
    assert line.startswith("FAIL")
    assert f"answered {counted.answers} of {counted.requests}" in line
    assert f"{counted.refusals} refused" in line


def test_a_run_with_every_request_answered_passes_and_oxigraphs_refusals_are_not_glassgraphs(servers) -> None:
    answered, elapsed = load_http.run_phase(2, 0.2, [(1, load_http.sparql_call(servers[200].url))])
    refused, _ = load_http.run_phase(2, 0.2, [(1, load_http.sparql_call(servers[429].url))])
    glassgraph = load_http.measure("sparql", "glassgraph", 2, answered, elapsed)
    baseline = load_http.measure("sparql", "oxigraph serve", 2, refused, elapsed)

    passed, line = load_http.verdict([glassgraph, baseline], [], [])
    assert passed, line
    assert line.startswith("PASS")
    assert glassgraph.rate > 0 and baseline.rate == 0


def base(listener: LoopbackListener) -> str:
    return listener.url.removesuffix("/sparql")  # a listener answers every path alike


def test_a_refused_question_is_a_refusal_and_an_answer_whose_trace_does_not_read_back_is_lost(servers) -> None:
    streamed = LoopbackListener(reply=SSE_ANSWER, content_type="text/event-stream")
    explained = LoopbackListener(reply=b'{"status": "answered"}', content_type="application/json")
    try:
        with requests.Session() as session:
            samples = [load_http.graph_rag_call(base(listener))(session, 0)
                       for listener in (streamed, servers[429], servers[200])]  # the last: no session in its answer
        counted = load_http.Outcomes.of(samples)
        assert (counted.answers, counted.refusals, counted.errors) == (2, 1, 0)
        assert samples[0].session == "urn:trustgraph:session:1" and samples[0].complete

        lost = load_http.lost_traces(base(explained), samples)
        assert len(lost) == 1 and "without a session id" in lost[0]
        assert explained.calls == ["GET /api/explain?id=urn%3Atrustgraph%3Asession%3A1 HTTP/1.1"]
        assert len(load_http.lost_traces(base(servers[500]), samples)) == 2  # the trace does not read back
    finally:
        streamed.close()
        explained.close()


BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"


def test_cpu_is_counted_by_role_across_a_server_process_tree() -> None:
    """A server that burns 0.3 s of CPU and starts a query worker burning 0.4 s (its command line names
    server.http.query_workers, as the real ones do): each role gets its own, the client (this test) little."""
    from bench.process_cpu import CLIENT, QUERY_WORKERS, SERVER, CpuSnapshot

    worker = BURN.format(seconds=0.4) + "import sys\nsys.stdin.read()\n"  # alive until the test ends: an exited
    # worker's command line is gone, and with it its role (the test once read it a moment too late)
    server_code = ("import subprocess, sys\n"
                   f"child = subprocess.Popen([sys.executable, '-c', {worker!r}, 'server.http.' + 'query_workers'])\n"
                   + BURN.format(seconds=0.3) + "print('done', flush=True)\nsys.stdin.read()\nchild.wait()\n")
    # (the marker is spelled in two pieces: the server's own command line holds its code and must not name it)
    server = subprocess.Popen([sys.executable, "-c", server_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        before = CpuSnapshot.of(server.pid)
        assert server.stdout.readline() == "done\n"
        deadline = time.monotonic() + 30
        while CpuSnapshot.of(server.pid).spent_since(before)[QUERY_WORKERS] < 0.35 and time.monotonic() < deadline:
            time.sleep(0.05)
        spent = CpuSnapshot.of(server.pid).spent_since(before)
    finally:
        server.stdin.close()
        server.wait(30)
    assert 0.3 <= spent[SERVER] < 1.0, spent
    assert 0.35 <= spent[QUERY_WORKERS] < 1.0, spent
    assert spent[CLIENT] < 0.3, spent


def test_the_server_budget_is_what_the_ratio_leaves_the_server_process_of_the_cpu_an_answer_costs() -> None:
    def measured(server: str, cpu: dict[str, float]) -> load_http.Measured:
        return load_http.Measured("sparql", server, 20, load_http.Outcomes(requests=1000, answers=1000), 1.0, cpu)

    glassgraph = measured("glassgraph", {"client": 0.9, "server": 1.1, "query workers": 1.4})
    oxigraph = measured("oxigraph serve", {"client": 0.8, "server": 1.2, "query workers": 0.0})
    line = load_http.server_budget(glassgraph, oxigraph)
    # 2.0 ms an answer for oxigraph serve; 0.8x allows Glassgraph 2.5 ms, of which client and workers take 2.3
    assert "oxigraph serve 2.00 ms" in line and "query workers 2.30 ms" in line and "server process 1.10 ms" in line
    assert "may spend 0.20 ms an answer" in line and "the ratio would be 0.87x" in line
    assert load_http.server_budget(measured("glassgraph", {}), oxigraph) is None  # no CPU read: nothing to say
    costly = measured("glassgraph", {"client": 1.0, "server": 1.1, "query workers": 2.0})
    assert "may spend nothing" in load_http.server_budget(costly, oxigraph)  # 3.0 ms before the server process
