"""TrustGraph's websocket API (/api/v1/socket) on the README's production server: the frames TrustGraph's
clients send (auth first, then {id, service, flow, request}) answered in its shapes, bad frames answered
with its error shape, and the real ``trustgraph-cli`` from PyPI (installed apart, in
``.venv/trustgraph-cli``, by the README's test command: its scripts share names with Glassgraph's) asking
GraphRAG, document RAG and SPARQL questions."""
from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st
from production_server import TOKEN, ProductionServer, answered_status
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from server.http.trustgraph_socket import MAX_FRAME_BYTES, RequestError, internal_request

pytestmark = pytest.mark.slow

TRUSTGRAPH_CLI = Path(sys.prefix) / "trustgraph-cli"  # pip install --target .venv/trustgraph-cli trustgraph-cli
FACTS = """@prefix e: <https://trustgraph.ai/e/> . @prefix r: <https://trustgraph.ai/r/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
e:germany rdfs:label "Germany" ; r:borders e:austria, e:france .
e:austria rdfs:label "Austria" . e:france rdfs:label "France" . r:borders rdfs:label "borders" ."""
CANAL = "The Suez Canal was completed in 1869. It made Egypt a hub of trade."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProductionServer]:
    live = ProductionServer(tmp_path_factory.mktemp("trustgraph") / "store")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    loaded = requests.put(f"{live.url}/store", params={"graph": "urn:trustgraph:graph:default"}, data=FACTS,
                          headers={**auth, "Content-Type": "text/turtle"}, timeout=30)
    assert loaded.status_code in (201, 204), loaded.text
    job = requests.post(f"{live.url}/api/collections/notes/documents", params={"name": "egypt.txt"},
                        data=CANAL.encode(), headers={**auth, "Content-Type": "text/plain"}, timeout=30).json()
    deadline = time.monotonic() + 60
    while requests.get(live.url + job["url"], timeout=30).json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    yield live
    live.close()


def socket(server: ProductionServer, token: str = "") -> ClientConnection:
    """A socket past TrustGraph's first-frame auth."""
    client = connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10)
    client.send(json.dumps({"type": "auth", "token": token}))
    assert json.loads(client.recv(timeout=10)) == {"type": "auth-ok", "workspace": "default",
                                                   "default_workspace": "default"}
    return client


def answers(client: ClientConnection, frame: dict) -> list[dict]:
    """Every frame answering ``frame`` (it has an id), through the one marked complete."""
    client.send(json.dumps(frame))
    received = []
    while not received or not received[-1].get("complete"):
        received.append(json.loads(client.recv(timeout=60)))
        assert received[-1]["id"] == frame["id"]
    return received


def test_graph_rag_streams_trustgraph_messages_and_sparql_answers_in_batches(server: ProductionServer) -> None:
    with socket(server) as client:
        frames = answers(client, {"id": "q1", "service": "graph-rag", "flow": "default", "request": {
            "query": "Which countries border Germany?", "collection": "default", "entity-limit": 10,
            "streaming": True}})
        text = "".join(f["response"].get("response", "") for f in frames)
        assert "Austria" in text and "France" in text and frames[-1]["response"]["end_of_session"] is True
        assert all("error" not in f["response"] for f in frames)  # absent fields are left out, not null
        assert all(f["response"].get("message_type") != "explain" for f in frames)  # not asked for ...
        whole = answers(client, {"id": "q2", "service": "graph-rag", "request": {
            "query": "Which countries border Germany?", "collection": "default"}})
        assert len(whole) == 1 and "Austria" in whole[0]["response"]["response"]
        trace = requests.get(f"{server.url}/api/explain", params={"id": whole[0]["response"]["session"]}, timeout=30)
        assert trace.status_code == 200 and trace.json()["edges"]  # ... but recorded, as every question is
        rows = answers(client, {"id": "q3", "service": "sparql", "request": {
            "query": "SELECT ?o WHERE { ?s <https://trustgraph.ai/r/borders> ?o } ORDER BY ?o", "batch-size": 1}})
        assert [f["response"]["bindings"] for f in rows] == [[{"values": [{"t": "i", "i": f"https://trustgraph.ai/e/{c}"}]}]
                                                             for c in ("austria", "france")]
        assert [f["complete"] for f in rows] == [False, True] and rows[0]["response"]["variables"] == ["o"]
        [ask] = answers(client, {"id": "q4", "service": "sparql", "request": {"query": "ASK { ?s ?p ?o }"}})
        assert ask["response"] == {"query-type": "ask", "ask-result": True}


def test_bad_frames_get_trustgraph_error_frames_and_the_socket_stays(server: ProductionServer) -> None:
    client = connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10)
    client.send(json.dumps({"id": "early", "service": "sparql", "request": {"query": "ASK {}"}}))
    assert json.loads(client.recv(timeout=10))["error"]["type"] == "unauthorized"  # before auth
    client.send(json.dumps({"type": "auth", "token": TOKEN}))
    assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
    for bad in ("not json", "[1, 2]", "null"):
        client.send(bad)
        assert json.loads(client.recv(timeout=10))["error"]["type"] == "bad-request"
    [unknown] = answers(client, {"id": "u", "service": "agent", "request": {}})
    assert unknown["error"]["type"] == "unknown-service" and "graph-rag" in unknown["error"]["message"]
    [missing] = answers(client, {"id": "m", "service": "graph-rag", "request": {"query": "x?", "collection": "nosuch"}})
    assert missing["error"] == {"type": "not-found", "message": "no collection 'nosuch'"}
    [malformed] = answers(client, {"id": "s", "service": "sparql", "request": {"query": "SELEC"}})
    assert malformed["error"]["type"] == "bad-request" and "SELECT" in malformed["error"]["message"]
    [limits] = answers(client, {"id": "l", "service": "graph-rag", "request": {"query": "x?", "entity-limit": 0}})
    assert limits["error"]["type"] == "bad-request" and "'entity-limit'" in limits["error"]["message"]  # as sent
    [passages] = answers(client, {"id": "d", "service": "document-rag", "request": {"query": "x?", "doc-limit": 0,
                                                                                   "streaming": True}})
    assert "'doc-limit'" in passages["error"]["message"] and "passages" not in passages["error"]["message"]
    client.send("x" * (MAX_FRAME_BYTES + 1))  # a frame past the limit closes the socket, with its reason
    with pytest.raises(ConnectionClosed) as closed:
        client.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    with socket(server) as again:  # the server serves on
        assert answers(again, {"id": "a", "service": "sparql", "request": {"query": "ASK { ?s ?p ?o }"}})


def test_a_request_frame_is_made_into_glassgraph_s_own() -> None:
    internal = internal_request({"service": "graph-rag", "request": {
        "query": "q?", "collection": "c", "entity-limit": 5, "edge-score-limit": 30, "streaming": True}})
    assert (internal.method, internal.path, internal.accept) == ("POST", "/api/graph-rag", "application/x-ndjson")
    assert json.loads(internal.body) == {"query": "q?", "collection": "c", "explainable": True,  # traced always
                                         "entity_limit": 5, "streaming": True}
    documents = internal_request({"service": "document-rag", "request": {"query": "q?", "doc-limit": 7}})
    assert json.loads(documents.body)["passages"] == 7 and documents.accept == "application/json"
    for frame in ({"service": "nope", "request": {}}, {"service": "sparql", "request": []},
                  {"service": "sparql", "request": {"query": 1}}, {"service": "sparql", "request": {
                      "query": "ASK {}", "batch-size": 0}}):
        with pytest.raises(RequestError):
            internal_request(frame)


# Runs trustgraph-cli's tools one after another, each as ``python -m trustgraph.cli.TOOL ARGS`` would (its module
# run as __main__, its output and exit code captured), for the JSON [tool, args] lines it reads: one process
# imports the client library once (0.8 s a tool, several seconds on a busy machine), not once a tool.
CLI_DRIVER = """
import contextlib, io, json, runpy, sys, traceback
commands = sys.stdin
for line in commands:
    tool, args = json.loads(line)
    out, err = (io.TextIOWrapper(io.BytesIO(), "utf-8", write_through=True) for _ in range(2))  # .buffer too
    sys.argv, sys.stdin, code = [tool, *args], io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("trustgraph.cli." + tool, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
            code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush(), sys.stderr.flush()
    print(json.dumps([code, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()]), file=sys.__stdout__,
          flush=True)
"""


class TrustgraphCli:
    """trustgraph-cli's tools (by their modules: their script names are Glassgraph's too) in one process of
    their own (``CLI_DRIVER``); called as ``subprocess.run`` would be, with the same result."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", CLI_DRIVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                        env={**os.environ, "PYTHONPATH": str(TRUSTGRAPH_CLI)})

    def __call__(self, tool: str, server: ProductionServer, *args: str) -> subprocess.CompletedProcess:
        """``tool -u SERVER_URL args`` against ``server``."""
        full = ["-u", server.url + "/", *args]
        self.process.stdin.write(json.dumps([tool, full]) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 120)
        assert ready, f"trustgraph-cli's {tool} did not finish in 120 s"
        line = self.process.stdout.readline()
        assert line, f"trustgraph-cli's driver ended (exit {self.process.wait()}) running {tool}"
        code, out, err = json.loads(line)
        return subprocess.CompletedProcess([f"trustgraph.cli.{tool}", *full], code, out, err)

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


@pytest.fixture(scope="module")
def trustgraph_cli() -> Iterator[TrustgraphCli]:
    """The tools of the real trustgraph-cli from PyPI, run by one process for the module."""
    tools = TrustgraphCli()
    yield tools
    tools.close()


@pytest.mark.skipif(not TRUSTGRAPH_CLI.is_dir(), reason="trustgraph-cli is not installed in .venv/trustgraph-cli "
                    "(the README's test command installs it)")
def test_the_real_trustgraph_cli_asks_glassgraph(server: ProductionServer, trustgraph_cli: TrustgraphCli) -> None:
    graph = trustgraph_cli("invoke_graph_rag", server, "-q", "Which countries border Germany?")
    assert graph.returncode == 0, graph.stderr
    assert "Austria" in graph.stdout and "France" in graph.stdout
    documents = trustgraph_cli("invoke_document_rag", server, "-C", "notes", "-q", "When was the Suez Canal completed?")
    assert documents.returncode == 0 and documents.stdout.strip() == "The Suez Canal was completed in 1869 [1].", \
        documents.stderr
    table = trustgraph_cli("invoke_sparql_query", server, "-q",
                           "SELECT ?o WHERE { ?s <https://trustgraph.ai/r/borders> ?o } ORDER BY ?o")
    assert table.returncode == 0, table.stderr
    assert [line.strip() for line in table.stdout.splitlines()] == [
        "o", "-" * len("https://trustgraph.ai/e/austria"), "https://trustgraph.ai/e/austria", "https://trustgraph.ai/e/france"]
    first = trustgraph_cli("invoke_sparql_query", server, "-l", "2", "-q", big_select(100_001))  # > GLASSGRAPH_MAX_ROWS
    assert first.returncode == 0 and len(first.stdout.splitlines()) == 2 + 2, first.stdout[-300:]  # head, rule, 2 rows
    pattern = trustgraph_cli("query_graph", server, "-s", "https://trustgraph.ai/e/germany", "-p",
                             "https://trustgraph.ai/r/borders")
    assert pattern.returncode == 0, pattern.stderr
    assert sorted(pattern.stdout.splitlines()) == [f"https://trustgraph.ai/e/germany https://trustgraph.ai/r/borders "
                                                   f"https://trustgraph.ai/e/{c}" for c in ("austria", "france")]
    wrong = trustgraph_cli("invoke_graph_rag", server, "-C", "nosuch", "-q", "x?")
    assert wrong.stdout.strip() == "Exception: no collection 'nosuch'"  # how it reports a server's error (exit 0)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "service", "flow", "request", "type"]),
                       st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                                        st.sampled_from(["query", "collection", "streaming", "entity-limit",
                                                         "doc-limit", "batch-size"]), inner, max_size=4),
                                    max_leaves=8)))
def test_any_frame_is_made_into_a_request_or_refused_with_a_request_error(frame: dict) -> None:
    frame.setdefault("service", "graph-rag")
    try:
        internal = internal_request(frame)
    except RequestError as error:
        assert error.type in ("bad-request", "unknown-service")
        return
    assert internal.path in ("/api/graph-rag", "/api/document-rag", "/sparql")
    if internal.method == "POST":
        assert isinstance(json.loads(internal.body), dict)  # whatever its fields hold, the API checks them


def test_api_triples_answers_a_pattern_and_refuses_what_is_not_one(tmp_path: Path) -> None:
    from pyoxigraph import Literal, NamedNode, Quad, Triple

    from server import vocab
    from server.config import Config
    from server.http.app import create_app
    from server.store import GraphStore

    store = GraphStore(tmp_path / "store")
    fact = Triple(NamedNode("http://e/a"), NamedNode("http://e/p"), Literal("one", language="en"))
    graph = vocab.collection_graph("default")
    store.extend([Quad(fact.subject, fact.predicate, fact.object, graph),
                  Quad(NamedNode("http://e/sg"), vocab.TG.contains, fact, graph),
                  *(Quad(NamedNode(f"http://e/n{i}"), NamedNode("http://e/p"), Literal(str(i)), graph)
                    for i in range(5))])
    client = create_app(Config(store_path=None, load_sample=False, query_workers=0), store=store).test_client()

    def ask(body: object) -> tuple[int, dict]:
        response = client.post("/api/triples", json=body)
        return response.status_code, response.get_json()

    wire_fact = {"t": "r", "r": {"s": {"t": "i", "i": "http://e/a"}, "p": {"t": "i", "i": "http://e/p"},
                                 "o": {"t": "l", "v": "one", "ln": "en"}}}  # TrustGraph's own key for a language
    status, found = ask({"o": wire_fact})
    assert status == 200 and [t["s"] for t in found["triples"]] == [{"t": "i", "i": "http://e/sg"}]
    status, found = ask({"p": {"t": "i", "i": "http://e/p"}, "limit": 3})
    assert (status, len(found["triples"]), found["truncated"]) == (200, 3, True)
    for bad in ({"s": {"t": "l", "v": "x"}}, {"p": wire_fact}, {"s": {"t": "i", "i": "not an iri"}},
                {"o": {"t": "b", "b": "x"}}, {"o": "http://e/a"}, {"x": 1}, {"limit": 0}, {"limit": -1},
                {"limit": True}, {"g": 5}, {"collection": ["a"]}, [],
                {"s": {"t": "r", "r": {"s": {"t": "l", "v": "x"}}}},
                {"o": {"t": "r", "r": {**wire_fact["r"], "s": wire_fact}}},  # a triple term as a subject: RDF 1.2 no
                {"s": {"t": "r", "r": {**wire_fact["r"], "s": wire_fact}}},
                {"o": {"t": "r", "r": {**wire_fact["r"], "p": {"t": "l", "v": "x"}}}}):
        status, error = ask(bad)
        assert status == 400 and error["error"]["type"] == "bad-request", bad
        assert "PyNamedOrBlankNode" not in error["error"]["message"], error  # the binding's words, not ours
    assert ask({"collection": "nosuch"})[0] == 404
    strict = create_app(Config(store_path=None, load_sample=False, query_workers=0, max_result_rows=2),
                        store=store).test_client()
    found = strict.post("/api/triples", json={"p": {"t": "i", "i": "http://e/p"}, "limit": 1000})  # TrustGraph's
    assert (found.status_code, len(found.get_json()["triples"]), found.get_json()["truncated"]) == (200, 2, True)



def test_a_described_subject_cut_at_the_limit_keeps_its_types_and_single_values(tmp_path: Path) -> None:
    """TrustGraph's trace reader asks for 100 quads of a step and knows it by its rdf:type: a retrieval step
    of 150 edges lost its type, so the tool showed an empty trace."""
    from pyoxigraph import Literal, NamedNode, Quad

    from server import vocab
    from server.config import Config
    from server.http.app import create_app
    from server.store import GraphStore

    store, graph, step = GraphStore(tmp_path / "store"), vocab.collection_graph("default"), NamedNode("http://e/step")
    singles = [Quad(step, vocab.RDF.type, vocab.PROV.Entity, graph),
               Quad(step, NamedNode("http://e/count"), Literal("150"), graph)]
    edges = [Quad(step, NamedNode("http://e/edge"), NamedNode(f"http://e/o{i}"), graph) for i in range(150)]
    store.extend(edges + singles)
    client = create_app(Config(store_path=None, load_sample=False, query_workers=0), store=store).test_client()
    found = client.post("/api/triples", json={"s": {"t": "i", "i": step.value}, "limit": 100}).get_json()
    answered = [(t["p"]["i"], t["o"].get("i") or t["o"].get("v")) for t in found["triples"]]
    assert len(answered) == 100 and found["truncated"] is True
    assert answered[:2] == [(vocab.RDF.type.value, vocab.PROV.Entity.value), ("http://e/count", "150")]
    assert {p for p, _ in answered[2:]} == {"http://e/edge"}

def test_a_wrong_token_fails_auth_and_an_empty_one_reads_as_anyone(server: ProductionServer) -> None:
    client = connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10)
    client.send(json.dumps({"type": "auth", "token": "not-" + TOKEN}))
    assert json.loads(client.recv(timeout=10))["type"] == "auth-failed"  # TrustGraph's client raises on it
    [early] = answers(client, {"id": "e", "service": "sparql", "request": {"query": "ASK {}"}})
    assert early["error"]["type"] == "unauthorized"  # still not past auth
    client.close()
    with socket(server) as anyone:
        [ask] = answers(anyone, {"id": "a", "service": "sparql", "request": {"query": "ASK { ?s ?p ?o }"}})
        assert ask["response"]["ask-result"] is True


@settings(max_examples=150, deadline=None)
@given(st.one_of(
    st.text(max_size=60),
    st.builds(json.dumps, st.dictionaries(st.sampled_from(["id", "service", "request", "type", "token"]),
                                          st.none() | st.integers() | st.floats() | st.text(max_size=10)
                                          | st.sampled_from(["sparql", "graph-rag", "auth"]), max_size=5)),
    st.integers(1, 5000).map(lambda depth: "[" * depth + "]" * depth),
    st.sampled_from(['{"id": NaN, "service": "sparql"}', '{"id": "\\ud800", "service": "x"}',
                     '{"id": 1, "service": "sparql", "request": {"query": "ASK {\\udfff}"}}', '{"type": "auth"}'])))
def test_any_frame_on_the_live_socket_gets_strict_json_or_nothing_and_the_socket_stays(
        server: ProductionServer, frame: str) -> None:
    with socket(server) as client:
        client.send(frame)
        client.send(json.dumps({"id": "probe", "service": "sparql", "request": {"query": "ASK {}"}}))
        while True:  # the fuzzed frame's replies (if any) come before or after the probe's answer
            reply = json.loads(client.recv(timeout=30), parse_constant=lambda name: pytest.fail(f"{name} sent"))
            assert reply.get("type") == "auth-failed" or reply.get("error", {}).get("type") != "internal-error", reply
            if reply.get("id") == "probe":
                assert reply["response"] == {"query-type": "ask", "ask-result": True}
                break


def test_a_socket_closed_mid_answer_frees_its_answer_slot(tmp_path: Path) -> None:
    live = ProductionServer(tmp_path / "store", env={"GLASSGRAPH_MAX_ANSWERS": "2"})
    try:
        loaded = requests.put(f"{live.url}/store", params={"graph": "urn:trustgraph:graph:default"}, data=FACTS,
                              headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/turtle"}, timeout=30)
        assert loaded.status_code in (201, 204)
        for n in range(12):  # each closes while its streamed answer is being made: 2 slots, 12 closes
            client = socket(live)
            client.send(json.dumps({"id": f"q{n}", "service": "graph-rag", "request": {
                "query": "Which countries border Germany?", "streaming": True, "explainable": True}}))
            client.close()
        deadline = time.monotonic() + 30
        statuses = []
        while len(statuses) < 4:  # answers made for the closed sockets may still hold the slots for a while
            status = requests.post(f"{live.url}/api/graph-rag", json={"query": "Which countries border Germany?"},
                                   timeout=60).status_code
            if status == 200:
                statuses.append(status)
            else:
                assert status == 429 and time.monotonic() < deadline, f"slots never came back: {status}"
                time.sleep(0.2)
    finally:
        live.close()


def big_select(rows: int) -> str:
    """A SELECT of ``rows`` rows, each 384 hex digits (which the socket's compression halves at best), from no
    data."""
    side = int(rows ** 0.5) + 1
    numbers = " ".join(str(n) for n in range(side))
    return (f'SELECT ?v WHERE {{ VALUES ?a {{ {numbers} }} VALUES ?b {{ {numbers} }} BIND(STR(?a * {side} + ?b) AS ?n) '
            'BIND(CONCAT(SHA512(?n), SHA512(CONCAT(?n, "b")), SHA512(CONCAT(?n, "c"))) AS ?v) }')


def unread_socket(live: ProductionServer) -> ClientConnection:
    """A socket past auth whose client stops reading once one frame waits unread (a 4 KB receive buffer)."""
    import socket as sockets

    raw = sockets.socket()
    raw.setsockopt(sockets.SOL_SOCKET, sockets.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", live.port))
    client = connect(f"ws://127.0.0.1:{live.port}/api/v1/socket", sock=raw, max_queue=1, max_size=None,
                     open_timeout=10)
    client.send(json.dumps({"type": "auth", "token": ""}))
    assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
    return client


def test_a_socket_that_reads_nothing_is_dropped_after_the_send_timeout(tmp_path: Path) -> None:
    live = ProductionServer(tmp_path / "store", env={"GLASSGRAPH_SEND_TIMEOUT": "1"})
    try:
        client = unread_socket(live)
        client.send(json.dumps({"id": "big", "service": "sparql", "request": {"query": big_select(60_000),
                                                                               "batch-size": 100}}))
        deadline = time.monotonic() + 60  # ~12 MB of frames once compressed; the buffers hold a few; the server
        while "dropped a TrustGraph socket" not in live.own_log():  # waits 1 s for the client, then drops it
            assert time.monotonic() < deadline, live.log_tail()
            time.sleep(0.1)
        frames = []
        with pytest.raises(ConnectionClosed):
            while True:
                frames.append(json.loads(client.recv(timeout=10)))
        assert frames and not frames[-1]["complete"]  # cut short: the answer's last frame never came
        assert "dropped a TrustGraph socket" in live.log_path.read_text()
        assert requests.get(f"{live.url}/healthz", timeout=10).status_code == 200
    finally:
        live.close()


def test_answers_a_client_leaves_unread_are_bounded_and_freed_once_read(tmp_path: Path) -> None:
    live = ProductionServer(tmp_path / "store", env={"GLASSGRAPH_SOCKET_MEMORY": "1", "GLASSGRAPH_QUEUE_WAIT": "1"})
    try:
        client = unread_socket(live)
        client.send(json.dumps({"id": "big", "service": "sparql", "request": {"query": big_select(60_000),
                                                                               "batch-size": 100}}))
        assert json.loads(client.recv(timeout=60))["id"] == "big"  # its 23 MB answer is made, and held unread
        client.send(json.dumps({"id": "next", "service": "sparql", "request": {"query": "ASK {}"}}))
        time.sleep(2)  # it waits GLASSGRAPH_QUEUE_WAIT for room (1 MB here), then is refused
        final: dict[str, dict] = {}
        rows = 100
        while len(final) < 2:
            frame = json.loads(client.recv(timeout=60))
            rows += len(frame.get("response", {}).get("bindings", []))
            if frame["complete"]:
                final[frame["id"]] = frame
        assert final["next"]["error"]["type"] == "too-many-requests"
        assert rows >= 60_000 and "error" not in final["big"]  # the held answer came whole
        [after] = answers(client, {"id": "after", "service": "sparql", "request": {"query": "ASK {}"}})
        assert after["response"]["ask-result"] is True  # read, the answer's bytes are free again
        client.close()
    finally:
        live.close()


def test_sparql_frames_keep_every_term_honour_the_limit_and_refuse_a_graph_past_one_frame(
        server: ProductionServer) -> None:
    query = ('SELECT ?a ?b WHERE { { VALUES (?a ?b) { (<urn:x> "chat"@fr) (<<( <urn:x> <urn:p> "t\\tab" )>> UNDEF) '
             '("2" UNDEF) (1.5e0 UNDEF) } } UNION { BIND(BNODE() AS ?a) BIND(5 AS ?b) } }')
    with socket(server) as client:
        cut = answers(client, {"id": "t", "service": "sparql", "request": {"query": query, "batch-size": 2,
                                                                          "limit": 3}})
        assert [len(f["response"]["bindings"]) for f in cut] == [2, 1] and [f["complete"] for f in cut] == [False, True]
        [whole] = answers(client, {"id": "w", "service": "sparql", "request": {"query": query}})
        rows = [binding["values"] for binding in whole["response"]["bindings"]]
        assert len(rows) == 5 and whole["response"]["variables"] == ["a", "b"]
        assert [{"t": "i", "i": "urn:x"}, {"t": "l", "v": "chat", "ln": "fr"}] in rows
        assert [{"t": "t", "tr": {"s": {"t": "i", "i": "urn:x"}, "p": {"t": "i", "i": "urn:p"},
                                  "o": {"t": "l", "v": "t\tab"}}}, None] in rows
        assert [{"t": "l", "v": "1.5", "dt": "http://www.w3.org/2001/XMLSchema#double"}, None] in rows
        [blank] = [row for row in rows if row[0]["t"] == "b"]
        assert blank[1] == {"t": "l", "v": "5", "dt": "http://www.w3.org/2001/XMLSchema#integer"}
        [empty] = answers(client, {"id": "e", "service": "sparql", "request": {"query": "SELECT * WHERE {}"}})
        assert empty["response"]["variables"] == [] and empty["response"]["bindings"] == [{"values": []}]
        [none] = answers(client, {"id": "n", "service": "sparql", "request": {
            "query": "SELECT ?x WHERE { FILTER(false) }"}})
        assert none["response"]["bindings"] == [] and none["complete"]
        [no] = answers(client, {"id": "f", "service": "sparql", "request": {"query": "ASK { FILTER(false) }"}})
        assert no["response"] == {"query-type": "ask", "ask-result": False}
        rows = big_select(25_000).replace("SELECT ?v WHERE", "CONSTRUCT { ?i <urn:v> ?v } WHERE")
        graph = rows[:-1] + 'BIND(IRI(CONCAT("urn:n", ?n)) AS ?i) }'  # 25,000 triples: 10 MB of N-Triples
        [large] = answers(client, {"id": "g", "service": "sparql", "request": {"query": graph}})
        assert large["error"]["type"] == "too-large" and "LIMIT" in large["error"]["message"]
        [bad] = answers(client, {"id": "b", "service": "sparql", "request": {"query": "ASK {}", "limit": 0}})
        assert bad["error"]["type"] == "bad-request"


def test_one_socket_has_at_most_sixteen_requests_in_flight(server: ProductionServer) -> None:
    slow = big_select(20_000).replace("SELECT ?v", "SELECT (COUNT(?v) AS ?n)")
    with socket(server) as client:
        for n in range(40):  # sent before any answer is read
            client.send(json.dumps({"id": f"r{n}", "service": "sparql", "request": {"query": slow}}))
        final: dict[str, dict] = {}
        while len(final) < 40:
            frame = json.loads(client.recv(timeout=60))
            if frame["complete"]:
                assert frame["id"] not in final
                final[frame["id"]] = frame
        busy = [f for f in final.values() if "error" in f]
        assert busy and all(f["error"]["type"] == "too-many-requests" for f in busy)
        assert len(final) - len(busy) >= 16


def test_rest_forms_answer_as_the_socket_does_and_refuse_bad_requests(server: ProductionServer) -> None:
    def post(path: str, body: object, **headers: str) -> requests.Response:
        return requests.post(f"{server.url}/api/v1/{path}", json=body, headers=headers, timeout=60)

    graph = post("flow/default/service/graph-rag", {"query": "Which countries border Germany?", "streaming": True})
    assert graph.status_code == 200 and "Austria" in graph.json()["response"]  # REST is never streamed
    rows = post("flow/default/service/sparql", {
        "query": "SELECT ?o WHERE { ?s <https://trustgraph.ai/r/borders> ?o } ORDER BY ?o", "batch-size": 1}).json()
    assert rows["variables"] == ["o"] and [row["values"][0]["i"] for row in rows["bindings"]] == [
        "https://trustgraph.ai/e/austria", "https://trustgraph.ai/e/france"]  # the batches joined
    [document] = post("librarian", {"operation": "list-documents", "collection": "notes"}).json()["document-metadatas"]
    assert (document["title"], document["kind"]) == ("egypt.txt", "text/plain")
    provenance = post("flow/default/service/triples", {"s": {"t": "i", "i": document["id"]}, "g": "urn:graph:source",
                                                       "collection": "notes", "limit": 50}).json()
    assert {"t": "i", "i": "https://trustgraph.ai/ns/Document"} in [t["o"] for t in provenance]
    titled = post("flow/default/service/triples", {"s": {"t": "i", "i": document["id"]}, "g": "urn:graph:source",
                                                   "p": {"t": "i", "i": "http://purl.org/dc/terms/title"},
                                                   "collection": "notes"}).json()
    assert [(t["p"]["i"], t["o"]["v"]) for t in titled] == [("http://purl.org/dc/terms/title", "egypt.txt")]
    spaced = post("librarian", {"operation": "list-documents", "collection": "my notes"})
    assert answered_status(spaced) == 400 and "'my notes'" in spaced.json()["error"]["message"]  # the name as given
    content = post("librarian", {"operation": "get-document-content", "document-id": document["id"]}).json()
    assert content == {"content": base64.b64encode(CANAL.encode()).decode()}
    for path, body, status in (("flow/default/service/agent", {}, 404), ("flow/default/service/sparql", [], 400),
                               ("flow/default/service/sparql", {"query": 5}, 400),
                               ("flow/default/service/sparql", {"query": "SELEC"}, 400),
                               ("librarian", {"operation": "remove-document"}, 400),
                               ("librarian", {"operation": "get-document-content", "document-id": "urn:x:none"}, 404),
                               ("librarian", {"operation": "add-document", "document-metadata": {}, "content": "%%"},
                                401),  # refused for want of a token before its content is read
                               ("librarian", {"operation": "add-document", "document-metadata": {"kind": "text/plain"},
                                              "content": base64.b64encode(b"x").decode()}, 401)):  # no token
        refused = post(path, body)
        assert answered_status(refused) == status and set(refused.json()["error"]) == {"type", "message"}, (path, body)
        assert refused.status_code == (status if status in (401, 403) else 200)  # TrustGraph's client reads a 200


def test_an_anonymous_add_document_is_refused_before_its_content_is_decoded(server: ProductionServer) -> None:
    added = {"operation": "add-document", "document-metadata": {"title": "x"}, "content": "not base64 %%"}
    with socket(server) as anyone, socket(server, TOKEN) as writer:
        [refused] = answers(anyone, {"id": "a", "service": "librarian", "request": added})
        assert refused["error"]["type"] == "unauthorized", refused
        [malformed] = answers(writer, {"id": "w", "service": "librarian", "request": added})
        assert malformed["error"]["type"] == "bad-request" and "base64" in malformed["error"]["message"]
    for path in ("librarian", "flow/default/service/librarian"):
        rest = requests.post(f"{server.url}/api/v1/{path}", json=added, timeout=60)
        assert (rest.status_code, rest.json()["error"]["type"]) == (401, "unauthorized"), rest.text


@pytest.mark.skipif(not TRUSTGRAPH_CLI.is_dir(), reason="trustgraph-cli is not installed in .venv/trustgraph-cli "
                    "(the README's test command installs it)")
def test_the_real_trustgraph_cli_adds_lists_and_traces_a_library_document(server: ProductionServer,
                                                                          trustgraph_cli: TrustgraphCli,
                                                                          tmp_path: Path) -> None:
    (tmp_path / "dam.txt").write_text("The Aswan High Dam was completed in 1970.")
    added = trustgraph_cli("add_library_document", server, "-t", TOKEN, "--name", "Dam", "-k", "text/plain",
                           str(tmp_path / "dam.txt"))
    assert added.returncode == 0 and "Loaded successfully" in added.stdout, added.stderr
    listed = trustgraph_cli("show_library_documents", server)
    assert listed.returncode == 0 and "| title | Dam" in listed.stdout, listed.stderr
    iri = next(line.split("|")[2].strip() for line in listed.stdout.splitlines() if line.startswith("| id "))
    deadline = time.monotonic() + 60
    while True:  # the ingest goes on in the background
        tree = trustgraph_cli("show_extraction_provenance", server, "--show-content", iri)
        if "Chunk" in tree.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert tree.returncode == 0, tree.stderr
    assert [line.strip() for line in tree.stdout.splitlines() if line.strip()] == [
        f"Document: {iri}", 'Title: "Dam"', 'Content: "The Aswan High Dam was completed in 1970."',
        "└── Page: Page 1", 'Content: "The Aswan High Dam was completed in 1970."',
        "└── Chunk: Chunk 1", 'Content: "The Aswan High Dam was completed in 1970."']
    content = trustgraph_cli("get_document_content", server, iri)  # its /api/v1/document-stream
    assert (content.returncode, content.stdout) == (0, "The Aswan High Dam was completed in 1970.\n"), content.stderr
    (tmp_path / "canal.md").write_text("# Suez Canal\n\nThe canal opened in 1869.\n")
    named = trustgraph_cli("add_library_document", server, "-t", TOKEN, "--name", "Suez", "-k", "text/markdown",
                           str(tmp_path / "canal.md"))
    assert named.returncode == 0 and "Loaded successfully" in named.stdout, named.stderr
    listed = trustgraph_cli("show_library_documents", server).stdout
    titles = [line.split("|")[2].strip() for line in listed.splitlines() if line.startswith("| title ")]
    assert sorted(titles) == ["Dam", "Suez"]  # --name, not the Markdown's own heading
    assert "| time  | 1970" not in listed and "| time  | 20" in listed, listed  # when it was ingested


@pytest.mark.skipif(not TRUSTGRAPH_CLI.is_dir(), reason="trustgraph-cli is not installed in .venv/trustgraph-cli "
                    "(the README's test command installs it)")
def test_trustgraph_s_explain_tools_read_a_glassgraph_trace(server: ProductionServer,
                                                            trustgraph_cli: TrustgraphCli) -> None:
    explained = trustgraph_cli("invoke_graph_rag", server, "-x", "-q", "Which countries border Germany?")
    assert explained.returncode == 0 and "Austria" in explained.stdout, explained.stderr
    blocks = [line.strip() for line in explained.stderr.splitlines() if line.strip()]
    kinds = [line.split("]")[0] + "]" for line in blocks if line.startswith("[")]
    assert kinds == ["[question]", "[grounding]", "[exploration]", "[focus]", "[synthesis]"], blocks
    for shown in ("Query: Which countries border Germany?", "- Germany", "Edges explored: 2",
                  "Edge: (Germany, borders, Austria)", "Edge: (Germany, borders, France)"):
        assert shown in blocks, (shown, blocks)
    session = blocks[0].split()[1]
    listed = trustgraph_cli("list_explain_traces", server, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert {"id": session, "type": "GraphRAG", "question": "Which countries border Germany?"}.items() <= next(
        entry for entry in json.loads(listed.stdout) if entry["id"] == session).items()
    shown = trustgraph_cli("show_explain_trace", server, session)
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines() if line.strip()]
    for expected in ("Question: Which countries border Germany?", "--- Exploration ---",
                     "Retrieved 2 edges from knowledge graph", "--- Focus (Edge Selection) ---",
                     "Selected 2 edges:", "--- Synthesis ---"):
        assert expected in lines, (expected, "\n".join(lines))
    edges = sorted(line.split(". ", 1)[1] for line in lines if line[:3] in ("1. ", "2. "))
    assert edges == ["(Germany, borders, Austria)", "(Germany, borders, France)"]  # its client lists them unordered
    assert any(line.startswith("The borders of Germany are Austria and France") for line in lines), lines


def test_socket_terms_are_spelled_as_trustgraph_2_spells_them_and_read_in_either_form() -> None:
    from pyoxigraph import Literal, NamedNode, Triple

    from server.explain.wire import term_wire, wire_term
    from server.http.trustgraph_socket import trustgraph_terms

    fact = Triple(NamedNode("http://e/a"), NamedNode("http://e/p"), Literal("3", datatype=NamedNode("http://e/d")))
    spelled = trustgraph_terms({"response": [{"o": term_wire(fact)}, {"o": term_wire(Literal("x", language="de"))}]})
    assert spelled == {"response": [
        {"o": {"t": "t", "tr": {"s": {"t": "i", "i": "http://e/a"}, "p": {"t": "i", "i": "http://e/p"},
                                "o": {"t": "l", "v": "3", "dt": "http://e/d"}}}},
        {"o": {"t": "l", "v": "x", "ln": "de"}}]}
    assert wire_term(spelled["response"][0]["o"]) == wire_term(term_wire(fact)) == fact


def collection_documents(server: ProductionServer, collection: str) -> list[dict]:
    """The documents of ``collection``, once none is queued or running (the ingest goes on in the background)."""
    deadline = time.monotonic() + 60
    while True:
        listed = requests.get(f"{server.url}/api/collections/{collection}/documents", timeout=30).json()["documents"]
        if all(document["status"] not in ("queued", "running") for document in listed):
            return listed
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)


@pytest.mark.skipif(not TRUSTGRAPH_CLI.is_dir(), reason="trustgraph-cli is not installed in .venv/trustgraph-cli "
                    "(the README's test command installs it)")
def test_the_real_trustgraph_cli_starts_lists_and_stops_library_processing(server: ProductionServer,
                                                                           trustgraph_cli: TrustgraphCli) -> None:
    [egypt] = collection_documents(server, "notes")

    def start(processing_id: str, collection: str, *token: str) -> str:
        started = trustgraph_cli("start_library_processing", server, *token, "-d", egypt["iri"], "--id",
                                 processing_id, "--collection", collection, "--tags", "a,b")
        assert started.returncode == 0, started.stderr
        return started.stdout.strip()

    assert start("p1", "processed", "-t", TOKEN) == ""
    [copy] = collection_documents(server, "processed")  # the library document ingested into the record's collection
    assert (copy["status"], copy["title"], copy["sha256"]) == ("ingested", "egypt.txt", egypt["sha256"])
    assert start("p2", "processed", "-t", TOKEN) == start("p3", "notes", "-t", TOKEN) == ""  # there already
    assert [d["id"] for d in collection_documents(server, "processed")] == [copy["id"]]
    assert [d["id"] for d in collection_documents(server, "notes")] == [egypt["id"]]
    assert start("p1", "other", "-t", TOKEN) == "Exception: bad-request: processing 'p1' exists: remove it first"
    assert start("p4", "other") == "Exception: Status code 401"  # no token
    assert trustgraph_cli("stop_library_processing", server, "-t", TOKEN, "--id", "p2").returncode == 0
    shown = trustgraph_cli("show_library_processing", server)
    assert shown.returncode == 0, shown.stderr
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in shown.stdout.splitlines()
            if line.startswith("| ")]
    assert [value for key, value in rows if key == "id"] == ["p1", "p3"]
    assert [value for key, value in rows if key == "collection"] == ["processed", "notes"]
    assert {value for key, value in rows if key == "document-id"} == {egypt["iri"]}
    assert {value for key, value in rows if key == "tags"} == {"a, b"}
    for body, status in (({"operation": "add-processing"}, 400), ({"operation": "remove-processing",
                                                                   "processing-id": "p2"}, 404),
                         ({"operation": "add-processing", "processing-metadata": {
                             "id": "p5", "document-id": "urn:trustgraph:doc:none", "collection": "c"}}, 404),
                         ({"operation": "add-processing", "processing-metadata": {
                             "id": "p5", "document-id": egypt["iri"], "collection": "c", "tags": [1]}}, 400)):
        refused = requests.post(f"{server.url}/api/v1/librarian", json=body, timeout=30,
                                headers={"Authorization": f"Bearer {TOKEN}"})
        assert answered_status(refused) == status and set(refused.json()["error"]) == {"type", "message"}, body


def test_processing_records_outlive_a_restart(tmp_path: Path) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    live = ProductionServer(tmp_path / "store")
    try:
        added = requests.post(f"{live.url}/api/collections/notes/documents", params={"name": "egypt.txt"},
                              data=CANAL.encode(), headers={**auth, "Content-Type": "text/plain"}, timeout=30).json()
        [egypt] = collection_documents(live, "notes")
        record = {"operation": "add-processing", "processing-metadata": {
            "id": "kept", "document-id": egypt["iri"], "collection": "notes", "time": 0, "flow": "default"}}
        started = requests.post(f"{live.url}/api/v1/librarian", json=record, headers=auth, timeout=30)
        assert started.status_code == 200 and started.json()["status"] == "unchanged", started.text
        assert started.json()["document-id"] == f"urn:trustgraph:doc:{added['id']}"
    finally:
        live.close()
    again = ProductionServer(tmp_path / "store")
    try:
        listed = requests.post(f"{again.url}/api/v1/librarian", json={"operation": "list-processing"}, timeout=30)
        [kept] = listed.json()["processing-metadatas"]
        assert {key: kept[key] for key in ("id", "document-id", "collection", "flow", "tags")} == {
            "id": "kept", "document-id": egypt["iri"], "collection": "notes", "flow": "default", "tags": []}
        assert abs(kept["time"] - time.time()) < 120
    finally:
        again.close()


@pytest.mark.skipif(not TRUSTGRAPH_CLI.is_dir(), reason="trustgraph-cli is not installed in .venv/trustgraph-cli "
                    "(the README's test command installs it)")
def test_trustgraph_s_explain_tools_read_a_glassgraph_document_rag_trace(server: ProductionServer,
                                                                         trustgraph_cli: TrustgraphCli) -> None:
    explained = trustgraph_cli("invoke_document_rag", server, "-x", "-C", "notes", "-q",
                               "When was the Suez Canal completed?")
    assert explained.returncode == 0 and "1869" in explained.stdout, explained.stderr
    blocks = [line.strip() for line in explained.stderr.splitlines() if line.strip()]
    kinds = [line.split("]")[0] + "]" for line in blocks if line.startswith("[")]
    assert kinds == ["[question]", "[grounding]", "[exploration]", "[synthesis]"], blocks
    for shown in ("Query: When was the Suez Canal completed?", "Concept: Suez", "Chunks retrieved: 1"):
        assert shown in blocks, (shown, blocks)
    shown = trustgraph_cli("show_explain_trace", server, blocks[0].split()[1])
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines() if line.strip()]
    # its client tells a document RAG session only by "docrag" in the session's IRI, so it shows GraphRAG's view
    for expected in ("Question: When was the Suez Canal completed?", "--- Exploration ---",
                     "--- Focus (Edge Selection) ---", "--- Synthesis ---", "Answer:",
                     "The Suez Canal was completed in 1869 [1]."):
        assert expected in lines, (expected, "\n".join(lines))


def test_a_token_sent_in_a_socket_s_query_string_is_not_written_to_the_log(server: ProductionServer) -> None:
    secret = "never-log-this-7f3a"
    for path in ("/api/v1/flow/default/import/triples", "/api/v1/socket"):
        try:
            connect(f"{server.url.replace('http://', 'ws://')}{path}?workspace=default&token={secret}",
                    open_timeout=10).close()
        except Exception:  # the import socket is refused: its handshake is logged all the same
            pass
    deadline = time.monotonic() + 10
    while server.own_log().count("token=***") < 2:
        assert time.monotonic() < deadline, server.own_log()[-2000:]
        time.sleep(0.1)
    assert secret not in server.own_log()
