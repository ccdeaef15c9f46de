"""The production serving arrangement, run as the README runs it (gunicorn, one uvicorn worker, the
ASGI-to-WSGI bridge of ``server/http/asgi.py``): slow clients hold no thread, a body is counted
however it is framed, answers stream, and a client that leaves cancels its GraphRAG run. Then the
bridge in-process: the WSGI environ and its errors.
"""
from __future__ import annotations

import asyncio
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
from production_server import TOKEN, ProductionServer
from scripted_llm import ScriptedLLM

from server import vocab
from server.http.asgi import WsgiBridge, wsgi_environ
from server.rag.retrieval import edge_id

MAX_BODY = 64 * 1024
BODY_TIMEOUT_S = 2.0
TIMEOUT_S = 5.0  # a client's patience while slow clients are held
QUESTION = "What is the capital of France?"
SELECTION = "\n".join(json.dumps({"id": edge_id("France", rel, obj), "reasoning": "it answers"})
                      for rel, obj in (("capital", "Paris"), ("currency", "Euro")))
E, R, LABEL = "https://trustgraph.ai/e/", "https://trustgraph.ai/r/", "http://www.w3.org/2000/01/rdf-schema#label"
FRANCE = "".join([f"<{E}france> <{R}capital> <{E}paris> .\n", f"<{E}france> <{R}currency> <{E}euro> .\n",
                  *(f'<{iri}> <{LABEL}> "{label}" .\n' for iri, label in (
                      (E + "france", "France"), (E + "paris", "Paris"), (E + "euro", "Euro"),
                      (R + "capital", "capital"), (R + "currency", "currency")))])
WRITE = {"Authorization": f"Bearer {TOKEN}"}
UPDATE = {**WRITE, "Content-Type": "application/sparql-update"}


@contextmanager
def france_server(directory: Path, llm: ScriptedLLM, settings: dict[str, str]) -> Iterator[ProductionServer]:
    """A production server over a small France graph, answering with the scripted ``llm``, with ``settings``."""
    env = {"GLASSGRAPH_LLM": "openai", "GLASSGRAPH_LLM_BASE_URL": llm.base_url, "GLASSGRAPH_LLM_API_KEY": "test",
           "GLASSGRAPH_LLM_MODEL": llm.model, "GLASSGRAPH_LLM_RETRIES": "0", **settings}
    server = ProductionServer(directory / "store", env)
    try:
        put = requests.put(server.url + "/store", params={"graph": vocab.collection_graph("default").value},
                           data=FRANCE, headers={**WRITE, "Content-Type": "application/n-triples"}, timeout=30)
        assert put.status_code == 201, put.text
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory, module_llm: ScriptedLLM) -> Iterator[ProductionServer]:
    """One production server for the module, with a small France graph and the scripted LLM."""
    settings = {"GLASSGRAPH_MAX_BODY": str(MAX_BODY), "GLASSGRAPH_BODY_TIMEOUT": str(BODY_TIMEOUT_S),
                "GLASSGRAPH_SSE_KEEPALIVE": "0.1"}
    with france_server(tmp_path_factory.mktemp("production"), module_llm, settings) as server:
        assert not ask(server, f"ASK {{ <{E}nowhere> ?p ?o }}", timeout=60)  # starts the query workers
        yield server


@pytest.fixture
def scripted(module_llm: ScriptedLLM) -> ScriptedLLM:
    """The module's scripted LLM with no reply left over from another test."""
    while not module_llm.replies.empty():
        module_llm.replies.get_nowait()
    return module_llm


def ask(server: ProductionServer, query: str, timeout: float = TIMEOUT_S) -> bool:
    response = requests.get(server.url + "/sparql", params={"query": query},
                            headers={"Accept": "application/sparql-results+json"}, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()["boolean"]


def graph_rag(server: ProductionServer, streaming: bool, timeout: float = TIMEOUT_S) -> requests.Response:
    accept = "text/event-stream" if streaming else "application/json"
    return requests.post(server.url + "/api/graph-rag", json={"query": QUESTION}, headers={"Accept": accept},
                         stream=streaming, timeout=timeout)


def sse_messages(response: requests.Response) -> Iterator[dict]:
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            yield json.loads(line[len("data: "):])


def session_status(server: ProductionServer, session: str) -> dict:
    return requests.get(server.url + "/api/explain", params={"id": session}, timeout=TIMEOUT_S).json()


class SlowClients:
    """``n`` connections that send ``at_once``, then ``dripped`` one byte a second to each, until closed."""

    def __init__(self, port: int, n: int, at_once: bytes, dripped: bytes) -> None:
        self.sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
        for sock in self.sockets:
            sock.sendall(at_once)
        self._stop = threading.Event()
        self._sent, self._progress = 0, threading.Condition()
        self._thread = threading.Thread(target=self._drip, args=(dripped,), daemon=True)
        self._thread.start()

    def _drip(self, dripped: bytes) -> None:
        for i in range(len(dripped)):
            for sock in self.sockets:
                try:
                    sock.send(dripped[i:i + 1])
                except OSError:  # answered and closed by the server
                    pass
            with self._progress:
                self._sent = i + 1
                self._progress.notify_all()
            if self._stop.wait(1.0):
                return

    def wait_sent(self, count: int) -> None:
        """Until each connection has been sent ``count`` bytes of ``dripped``."""
        with self._progress:
            assert self._progress.wait_for(lambda: self._sent >= count, 60), f"sent only {self._sent} bytes"

    def held(self) -> int:
        """How many connections the server holds open without having answered (nothing to read, no EOF)."""
        readable, _, _ = select.select(self.sockets, [], [], 0)
        return len(self.sockets) - len(readable)

    def responses(self) -> list[tuple[int, bytes]]:
        return [read_response(sock) for sock in self.sockets]

    def __enter__(self) -> SlowClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.sockets:
            sock.close()


def _received(sock: socket.socket, enough: Callable[[bytes], bool] = lambda data: False) -> bytes:
    """What ``sock`` reads until ``enough`` of it has come, or the connection is closed."""
    data = b""
    while not enough(data):
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of a Content-Length response read off a raw socket."""
    data = _received(sock, lambda data: b"\r\n\r\n" in data
                     and len(data.partition(b"\r\n\r\n")[2]) >= _content_length(data))
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _content_length(data: bytes) -> int:
    for line in data.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# --- slow clients -------------------------------------------------------------------------------

def test_clients_sending_their_headers_slowly_block_nobody(production: ProductionServer,
                                                            scripted: ScriptedLLM) -> None:
    """Under gthread with 8 threads, these 20 clients held every thread: nothing below answered."""
    scripted.reply(SELECTION)
    scripted.reply("Paris is the capital.")
    head = request_head("GET", "/healthz", {"X-Padding": "x" * 100})
    with SlowClients(production.port, 20, b"", head) as slow:
        slow.wait_sent(2)  # each has sent two bytes of its request line
        health = requests.get(production.url + "/healthz", timeout=TIMEOUT_S)
        capital = ask(production, f"ASK {{ <{E}france> <{R}capital> <{E}paris> }}")
        answer = graph_rag(production, streaming=False).json()
        held = slow.held()
    assert health.status_code == 200 and health.json()["ok"] is True
    assert capital is True
    assert answer["error"] is None and answer["answer"] == "Paris is the capital."
    assert held == 20  # still waiting for the rest of their headers


def test_clients_sending_their_body_slowly_get_408_and_block_nobody(production: ProductionServer) -> None:
    body = f"INSERT DATA {{ <{E}slow> <{R}p> <{E}body> }}".encode()
    head = request_head("POST", "/sparql", {**UPDATE, "Content-Length": str(len(body))})
    started = time.monotonic()
    with SlowClients(production.port, 10, head, body) as slow:
        slow.wait_sent(1)  # each has its head and a byte of its body in
        health = requests.get(production.url + "/healthz", timeout=TIMEOUT_S)
        answered = slow.responses()
        elapsed = time.monotonic() - started
    assert health.status_code == 200
    assert BODY_TIMEOUT_S <= elapsed < BODY_TIMEOUT_S + 3
    for status, payload in answered:  # as the app answers an error, in text to a client that asks no JSON
        assert status == 408 and b"GLASSGRAPH_BODY_TIMEOUT" in payload and b"2 s" in payload, payload
    assert not ask(production, f"ASK {{ <{E}slow> ?p ?o }}")


# --- body size, however the body is framed ----------------------------------------------------------

def chunked(data: bytes, size: int = 4096) -> Iterator[bytes]:
    """A generator body: requests sends it with Transfer-Encoding: chunked."""
    for start in range(0, len(data), size):
        yield data[start:start + size]


def test_a_chunked_update_over_the_limit_is_413_and_nothing_of_it_is_applied(production: ProductionServer) -> None:
    old, new = f"<{E}chunked> <{R}state> \"old\"", f"<{E}chunked> <{R}state> \"new\""
    assert requests.post(production.url + "/sparql", data=f"INSERT DATA {{ {old} }}", headers=UPDATE,
                         timeout=TIMEOUT_S).status_code == 204
    update = f"DELETE DATA {{ {old} }} ;\n# {'x' * MAX_BODY}\nINSERT DATA {{ {new} }}".encode()
    response = requests.post(production.url + "/sparql", data=chunked(update), timeout=TIMEOUT_S,
                             headers={**UPDATE, "Accept": "application/json"})
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["type"] == "content-too-large" and "GLASSGRAPH_MAX_BODY" in error["message"]
    assert str(MAX_BODY) in error["message"]
    assert ask(production, f"ASK {{ {old} }}") and not ask(production, f"ASK {{ {new} }}")


def test_a_chunked_update_under_the_limit_is_applied(production: ProductionServer) -> None:
    triple = f"<{E}chunked> <{R}state> \"small\""
    update = f"INSERT DATA {{ {triple} }}\n# {'x' * (MAX_BODY // 2)}".encode()
    response = requests.post(production.url + "/sparql", data=chunked(update), headers=UPDATE, timeout=TIMEOUT_S)
    assert response.status_code == 204, response.text
    assert ask(production, f"ASK {{ {triple} }}")


def test_a_declared_length_over_the_limit_is_413_before_any_body_is_sent(production: ProductionServer) -> None:
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        started = time.monotonic()
        sock.sendall(request_head("POST", "/sparql", {**UPDATE, "Content-Length": str(10**9)}))
        status, payload = read_response(sock)
        elapsed = time.monotonic() - started
    assert status == 413 and b"GLASSGRAPH_MAX_BODY" in payload and not payload.startswith(b"{"), payload
    assert elapsed < BODY_TIMEOUT_S / 2  # answered at once, not when the body's time ran out


def test_a_query_of_8_kb_in_the_url_is_answered(production: ProductionServer) -> None:
    query = f"ASK {{ <{E}france> ?p ?o }} # {'x' * 8000}"
    assert ask(production, query)


def test_a_request_head_growing_past_16_kb_is_refused(production: ProductionServer) -> None:
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"x" * 10_000)
        time.sleep(0.2)
        sock.sendall(b"x" * 7_000)  # still no end of the head: 17 KB held for this client
        status, _ = read_response(sock)
    assert status == 400


def _sent_in_pieces(sock: socket.socket, data: bytes, piece: int) -> None:
    """``data`` in pieces (most often each in a read of its own), until the server has closed the connection
    (its answer stays readable)."""
    try:
        for start in range(0, len(data), piece):
            sock.sendall(data[start:start + piece])
            time.sleep(0.01)
    except (BrokenPipeError, ConnectionResetError):
        pass


@pytest.mark.parametrize("piece", [1_000, 4_096, 9_000, 30_000])
def test_a_head_over_16_kb_is_refused_however_it_is_cut(production: ProductionServer, piece: int) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
        b"X-Padding-%d: %s\r\n" % (i, b"x" * 900) for i in range(20))  # 18 KB of headers, never ended
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        _sent_in_pieces(sock, head, piece)
        status, _ = read_response(sock)
    assert status == 400


def test_the_next_request_s_head_on_a_kept_connection_is_bounded_too(production: ProductionServer) -> None:
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_head("GET", "/healthz", {}))
        first, _ = read_response(sock)
        _sent_in_pieces(sock, b"GET /healthz HTTP/1.1\r\nX-Padding: " + b"x" * 40_000, 2_000)
        second, _ = read_response(sock)
    assert (first, second) == (200, 400)


def test_a_head_after_a_request_in_the_same_read_is_counted(production: ProductionServer) -> None:
    """A request's end resets the count in the middle of a read: what follows in that read still counts, so a
    40 KB head is refused even where it would end in that read. (The refusal is written at once, so the request
    before it goes unanswered: it was pipelined with an attack.)"""
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_head("GET", "/healthz", {}) + request_head("GET", "/healthz", {"X-Padding": "x" * 40_000}))
        answers = [read_response(sock)]
        if answers[0][0] == 200:  # the first request answered before the rest of the send was read
            answers.append(read_response(sock))
        assert _closed(sock)
    assert answers[-1][0] == 400 and b"16384" in answers[-1][1]


@pytest.mark.parametrize("fields, status", [(100, 200), (101, 400)])
def test_a_request_has_at_most_100_header_fields(production: ProductionServer, fields: int, status: int) -> None:
    headers = {f"X-Field-{i}": "1" for i in range(fields - 1)}  # and Host
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_head("GET", "/healthz", headers))
        assert read_response(sock)[0] == status


def _chunked_post(headers: dict[str, str]) -> bytes:
    """The head of a chunked POST /sparql and its body's only chunk, up to the last chunk's line."""
    return request_head("POST", "/sparql", {"Transfer-Encoding": "chunked", **headers}) + b"1\r\na\r\n0\r\n"


def test_trailer_fields_without_end_are_refused(production: ProductionServer) -> None:
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(_chunked_post({}))
        _sent_in_pieces(sock, b"a:\r\n" * 10_000, 4_000)
        status, _ = read_response(sock)
    assert status == 400


def test_trailer_fields_are_not_headers(production: ProductionServer) -> None:
    """A Content-Type sent as a trailer does not make the body a form: a proxy filtering headers never saw it."""
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(_chunked_post({}) + b"Content-Type: application/x-www-form-urlencoded\r\n\r\n")
        status, _ = read_response(sock)
    assert status == 415


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:  # closed with some of the request unread
        return True


def _answers(sock: socket.socket) -> list[int]:
    """The statuses of the Content-Length answers read off ``sock`` until it is closed."""
    data, statuses = _received(sock), []
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        statuses.append(int(head.split(b" ", 2)[1]))
        data = rest[_content_length(head + b"\r\n\r\n"):]
    return statuses


@pytest.mark.parametrize("pipelined, answered", [(5, 5), (40, None)])
def test_pipelined_requests_are_answered_in_turn_up_to_a_depth(production: ProductionServer, pipelined: int,
                                                              answered: int | None) -> None:
    """uvicorn parses every request of a read ahead of the one it answers (one read of 256 KB of `GET /` queued
    14,562): past 8 waiting, the connection is dropped."""
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_head("GET", "/healthz", {}) * (pipelined - 1)
                     + request_head("GET", "/healthz", {"Connection": "close"}))
        statuses = _answers(sock)
    if answered is not None:
        assert statuses == [200] * answered
    else:
        assert set(statuses) <= {200} and len(statuses) <= 9


H2C = {"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c", "HTTP2-Settings": "AAMAAABkAAQAAP__"}


def test_a_body_behind_an_upgrade_is_a_body_not_a_request(production: ProductionServer) -> None:
    """llhttp skips the body of a request asking an upgrade: read on from there, the body's bytes at the next
    parse slice were a request of their own (one request to a proxy in front, two answers here)."""
    smuggled = request_head("GET", "/healthz", {})
    body = b"#" * (16_384 - len(smuggled)) + smuggled  # a comment, then what would be read as a request
    head = request_head("POST", "/sparql", {**H2C, "Content-Type": "application/sparql-query",
                                            "Content-Length": str(len(body)), "Connection": "Upgrade, close"})
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(head + body)
        statuses = _answers(sock)
    assert statuses == [400]  # one answer: the query's (a comment, then text that is no query)


def test_an_h2c_upgrade_is_ignored_and_the_request_answered_with_its_body(production: ProductionServer) -> None:
    """Java's HTTP client asks `Upgrade: h2c` on its first request to an http:// URL, POSTs included."""
    query = f"ASK {{ <{E}france> <{R}capital> <{E}paris> }}"
    answered = requests.post(production.url + "/sparql", data={"query": query}, timeout=TIMEOUT_S,
                             headers={**H2C, "Accept": "application/sparql-results+json"})
    assert answered.status_code == 200 and answered.json()["boolean"] is True
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_head("GET", "/healthz", H2C) + request_head("GET", "/healthz", {"Connection": "close"}))
        assert _answers(sock) == [200, 200]  # and the request after it is read from where the head ended


def test_a_connect_is_refused(production: ProductionServer) -> None:
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n")
        assert _answers(sock) == [400]


def test_a_body_is_not_counted_as_head(production: ProductionServer) -> None:
    """A head of 15 KB, then a body of 50 KB in pieces: the head's bound is the head's only."""
    body = urlencode({"query": f"ASK {{ <{E}france> ?p ?o }} # " + "x" * 50_000}).encode()
    head = request_head("POST", "/sparql", {"Content-Type": "application/x-www-form-urlencoded",
                                            "Accept": "application/sparql-results+json",
                                            "Content-Length": str(len(body)), "X-Padding": "x" * 15_000})
    with socket.create_connection(("127.0.0.1", production.port), timeout=TIMEOUT_S) as sock:
        _sent_in_pieces(sock, head + body, 8_192)
        status, payload = read_response(sock)
    assert status == 200 and json.loads(payload)["boolean"] is True


# --- streaming and clients that leave ----------------------------------------------------------------

def test_an_sse_answer_arrives_incrementally(production: ProductionServer, scripted: ScriptedLLM) -> None:
    scripted.reply(SELECTION, delay_s=2.0)  # a slow selection call
    scripted.reply("Paris is the capital.", pieces=["Paris ", "is the ", "capital."])
    with graph_rag(production, streaming=True) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        messages = sse_messages(response)
        first = next(messages)
        trace_now = session_status(production, first["explain_id"])
        rest = list(messages)
    assert first["message_type"] == "explain" and first["explain_id"].startswith("urn:trustgraph:session:")
    assert trace_now["status"] == "incomplete" and trace_now["selection"] is None  # the LLM has not answered yet
    assert "".join(m["response"] for m in rest) == "Paris is the capital."
    assert rest[-1]["end_of_session"] is True and rest[-1]["error"] is None
    assert session_status(production, first["explain_id"])["status"] == "answered"


def test_a_client_leaving_mid_stream_cancels_its_session(production: ProductionServer, scripted: ScriptedLLM) -> None:
    scripted.reply(SELECTION, delay_s=1.0)  # no answer is queued: the run must stop before asking for it
    response = graph_rag(production, streaming=True)
    session = next(sse_messages(response))["explain_id"]
    response.close()  # leave while the selection call is pending
    deadline = time.monotonic() + 10
    while (trace := session_status(production, session))["status"] == "incomplete" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert trace["status"] == "cancelled" and trace["error"]["type"] == "cancelled"
    assert trace["answer"] is None



def test_a_client_leaving_before_its_json_answer_cancels_its_session(production: ProductionServer,
                                                                     scripted: ScriptedLLM) -> None:
    question = QUESTION + " (asked by a client that leaves)"
    scripted.reply(SELECTION, delay_s=1.0)  # no answer is queued: the run must stop before asking for it
    body = json.dumps({"query": question, "streaming": False}).encode()
    with socket.create_connection(("127.0.0.1", production.port), timeout=10) as sock:
        sock.sendall(request_head("POST", "/api/graph-rag", {"Content-Type": "application/json",
                                                             "Content-Length": str(len(body))}) + body)
        session = _listed_session(production, question)  # recorded as the run began: leave during the selection
    deadline = time.monotonic() + 10
    while (trace := session_status(production, session))["status"] == "incomplete" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert trace["status"] == "cancelled" and trace["error"]["type"] == "cancelled", trace
    assert trace["answer"] is None


def _listed_session(server: ProductionServer, question: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = requests.get(server.url + "/api/sessions", timeout=TIMEOUT_S).json()["sessions"]
        found = [s["session"] for s in listed if s["question"] == question]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no session of {question!r} was recorded")

# --- clients that read nothing -----------------------------------------------------------------------

SEND_TIMEOUT_S = 1.0
ROWS = 10_000  # of a SPARQL answer far larger than what the kernel buffers for a client that reads nothing
BIG_QUERY = ("SELECT ?a ?b ?padded WHERE { VALUES ?a { " + " ".join(map(str, range(100))) + " } VALUES ?b { "
             + " ".join(map(str, range(ROWS // 100))) + f' }} BIND(CONCAT(STR(?a), "{"x" * 800}") AS ?padded) }}')


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory, module_llm: ScriptedLLM) -> Iterator[ProductionServer]:
    """A server that drops a response after ``SEND_TIMEOUT_S`` without progress, with one GraphRAG answer slot."""
    settings = {"GLASSGRAPH_SEND_TIMEOUT": str(SEND_TIMEOUT_S), "GLASSGRAPH_MAX_ANSWERS": "1"}
    with france_server(tmp_path_factory.mktemp("impatient"), module_llm, settings) as server:
        yield server


def never_reading(port: int, head: bytes, body: bytes) -> socket.socket:
    """A connection with a 4 KB receive buffer that sends a request and reads none of its answer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(head + body)
    return sock


def wait_for_log(server: ProductionServer, text: str, patience_s: float = 60.0) -> None:
    deadline = time.monotonic() + patience_s
    while text not in server.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"the server never logged {text!r}:\n{server.log_tail()}"
        time.sleep(0.1)


def received_until_closed(sock: socket.socket) -> int:
    received = 0
    try:
        while chunk := sock.recv(65536):
            received += len(chunk)
    except ConnectionResetError:
        pass
    return received


def test_a_large_answer_read_as_it_comes_arrives_whole(impatient: ProductionServer) -> None:
    response = requests.post(impatient.url + "/sparql", data={"query": BIG_QUERY},
                             headers={"Accept": "text/tab-separated-values"}, timeout=60)
    assert response.status_code == 200, response.text
    lines = response.text.splitlines()
    assert lines[0] == "?a\t?b\t?padded" and len(lines) == ROWS + 1
    assert len(response.content) == int(response.headers["Content-Length"]) > 8_000_000


def test_a_client_reading_no_answer_is_dropped_after_the_send_timeout(impatient: ProductionServer) -> None:
    """The issue's client: 10 of these held 84 MB each, until they closed."""
    body = urlencode({"query": BIG_QUERY}).encode()
    head = request_head("POST", "/sparql", {"Accept": "text/tab-separated-values", "Content-Length": str(len(body)),
                                            "Content-Type": "application/x-www-form-urlencoded"})
    with never_reading(impatient.port, head, body) as sock:
        wait_for_log(impatient, "dropped the response to POST /sparql")
        received = received_until_closed(sock)
    assert 0 < received < 8_000_000  # what the kernels buffered before the server stopped sending, then the end
    assert ask(impatient, f"ASK {{ <{E}france> <{R}capital> <{E}paris> }}")


def test_a_question_whose_client_reads_nothing_frees_its_answer_slot(impatient: ProductionServer,
                                                                      scripted: ScriptedLLM) -> None:
    """Eight of these blocked every other question (GLASSGRAPH_MAX_ANSWERS) until they closed; here one does."""
    scripted.reply(SELECTION)
    scripted.reply(pieces=["Paris " * 10_000] * 150)  # 9 MB of SSE, past what the kernels buffer
    body = json.dumps({"query": QUESTION}).encode()
    head = request_head("POST", "/api/graph-rag", {"Accept": "text/event-stream", "Content-Length": str(len(body)),
                                                   "Content-Type": "application/json"})
    with never_reading(impatient.port, head, body):
        wait_for_log(impatient, "dropped the response to POST /api/graph-rag")
        scripted.reply(SELECTION)
        scripted.reply("Paris is the capital.")
        answer = graph_rag(impatient, streaming=False)
    assert answer.status_code == 200, answer.text
    assert answer.json()["answer"] == "Paris is the capital."


# --- the bridge in-process ---------------------------------------------------------------------------

def test_the_environ_follows_pep_3333() -> None:
    scope = {"type": "http", "method": "POST", "http_version": "1.1", "scheme": "https", "root_path": "/gg",
             "path": "/gg/resource/café", "query_string": b"iri=urn%3Ax&n=1", "server": ("example.org", 8443),
             "client": ("10.0.0.7", 50123),
             "headers": [(b"host", b"example.org"), (b"content-type", b"application/sparql-update"),
                         (b"transfer-encoding", b"chunked"), (b"accept", b"text/csv"), (b"accept", b"*/*"),
                         (b"x_forwarded_for", b"1.2.3.4")]}
    environ = wsgi_environ(scope, b"INSERT DATA {}")
    assert environ["SCRIPT_NAME"] == "/gg" and environ["PATH_INFO"] == "/resource/caf\u00c3\u00a9"  # latin-1 of UTF-8
    assert environ["QUERY_STRING"] == "iri=urn%3Ax&n=1" and environ["REQUEST_METHOD"] == "POST"
    assert environ["CONTENT_LENGTH"] == "14" and environ["wsgi.input"].read() == b"INSERT DATA {}"
    assert environ["CONTENT_TYPE"] == "application/sparql-update" and environ["HTTP_ACCEPT"] == "text/csv,*/*"
    assert "HTTP_TRANSFER_ENCODING" not in environ and "HTTP_X_FORWARDED_FOR" not in environ
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"], environ["wsgi.url_scheme"]) == ("example.org", "8443",
                                                                                            "https")
    assert environ["REMOTE_ADDR"] == "10.0.0.7" and environ["SERVER_PROTOCOL"] == "HTTP/1.1"


def run_bridge(app: object, path: str = "/", headers: list[tuple[bytes, bytes]] | None = None) -> list[dict]:
    """The ASGI messages the bridge sends for a GET of ``path`` to ``app``; the client stays connected."""
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": headers or []}

    async def main() -> list[dict]:
        sent: list[dict] = []
        incoming = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive() -> dict:
            if incoming:
                return incoming.pop()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict) -> None:
            sent.append(message)

        await WsgiBridge(app, max_body_bytes=MAX_BODY, body_timeout_s=BODY_TIMEOUT_S, threads=2)(scope, receive, send)
        return sent

    return asyncio.run(main())


@pytest.mark.parametrize("path, headers, media", [
    ("/api/sessions", [], b"application/json"), ("/sparql", [(b"accept", b"application/json")], b"application/json"),
    ("/sparql", [], b"text/plain; charset=utf-8")])
def test_an_error_before_the_headers_is_a_500_in_the_app_s_shape_without_a_trace(
        path: str, headers: list[tuple[bytes, bytes]], media: bytes) -> None:
    def failing(environ: dict, start_response: object) -> list[bytes]:
        raise KeyError("secret detail")

    sent = run_bridge(failing, path, headers)
    assert sent[0]["status"] == 500 and sent[-1]["more_body"] is False
    assert dict(sent[0]["headers"])[b"content-type"] == media
    body = b"".join(m.get("body", b"") for m in sent)
    message = json.loads(body)["error"]["message"] if media == b"application/json" else body.decode()
    assert message.startswith("internal error; see the server log") and b"secret" not in body


def test_an_error_mid_stream_leaves_the_response_unfinished_and_closes_the_iterable() -> None:
    class Body:
        closed = False

        def __iter__(self) -> Iterator[bytes]:
            yield b"first"
            raise RuntimeError("broken stream")

        def close(self) -> None:
            Body.closed = True

    def streaming(environ: dict, start_response: object) -> Body:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return Body()

    sent = run_bridge(streaming)
    assert sent[0]["status"] == 200 and [m["body"] for m in sent[1:]] == [b"first"]
    assert sent[-1]["more_body"] is True  # never finished: uvicorn closes the connection, the client sees it cut
    assert Body.closed


class _CountedBody:
    """A WSGI body of ``pieces`` that counts its ``close`` calls."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces, self.closes = pieces, 0

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.pieces)

    def close(self) -> None:
        self.closes += 1


@pytest.mark.parametrize("length", [True, False], ids=["declared-length", "streamed"])
def test_a_body_arrives_whole_and_its_iterable_is_closed_once(length: bool) -> None:
    body = _CountedBody([b"one ", b"", b"two ", b"three"])

    def app(environ: dict, start_response: object) -> _CountedBody:
        start_response("200 OK", [("Content-Type", "text/plain")] + ([("Content-Length", "13")] if length else []))
        return body

    sent = run_bridge(app)
    assert sent[0]["status"] == 200 and b"".join(m["body"] for m in sent[1:]) == b"one two three"
    assert sent[-1]["more_body"] is False and body.closes == 1
    if length:  # known to be short: sent as the end at once, the whole body in one message
        assert [m["body"] for m in sent[1:]] == [b"one two three"]


# Eight patterns over the France graph's ten triples: 10^8 rows to count, far past any deadline.
COUNT_FOREVER = ("SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n ?o . ?p ?q ?r . "
                 "?s ?t ?u . ?v ?w ?x }")


def test_a_client_that_leaves_stops_its_running_query(production: ProductionServer) -> None:
    idle = production.query_worker_cpu()
    body = urlencode({"query": COUNT_FOREVER}).encode()
    with socket.create_connection(("127.0.0.1", production.port), timeout=10) as sock:
        sock.sendall(request_head("POST", "/sparql", {"Content-Type": "application/x-www-form-urlencoded",
                                                      "Content-Length": str(len(body))}) + body)
        running = _busy_worker(production, idle)
    # the client has gone: its query is stopped well before the deadline (GLASSGRAPH_DEADLINE, 30 s) would stop it
    patience = time.monotonic() + 15
    while running in production.query_worker_cpu() and time.monotonic() < patience:
        time.sleep(0.05)
    assert running not in production.query_worker_cpu(), production.log_tail()
    assert '"status": 499' in production.own_log()  # logged as the client's leaving, not as a failure
    assert ask(production, f"ASK {{ <{E}france> ?p ?o }}")


def _busy_worker(server: ProductionServer, before: dict[int, float]) -> int:
    """The query worker that has used a second of CPU more than ``before`` (the query running long)."""
    patience = time.monotonic() + 60
    while time.monotonic() < patience:
        now = server.query_worker_cpu()
        busy = [pid for pid, cpu in now.items() if cpu - before.get(pid, 0.0) >= 1.0]
        if busy:
            return busy[0]
        time.sleep(0.05)
    raise AssertionError(f"no query worker ran the query: {server.query_worker_cpu()}")


@pytest.mark.slow  # starts the production command
@pytest.mark.parametrize("trusted", ["", "127.0.0.1"], ids=["by-default", "from-a-trusted-proxy"])
def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(tmp_path: Path, trusted: str) -> None:
    """Three anonymous questions a minute at most, each claiming another address: by default the connection's
    address counts (the third is refused), from a trusted proxy the forwarded one (each its own client)."""
    env = {"GLASSGRAPH_QUESTION_RATE": "2", **({"GLASSGRAPH_TRUSTED_PROXIES": trusted} if trusted else {})}
    server = ProductionServer(tmp_path / "store", env)
    try:
        put = requests.put(server.url + "/store", params={"graph": vocab.collection_graph("default").value},
                           data=FRANCE, headers={**WRITE, "Content-Type": "application/n-triples"}, timeout=30)
        assert put.status_code == 201, put.text
        statuses = [requests.post(server.url + "/api/graph-rag", json={"query": QUESTION, "streaming": False},
                                  headers={"X-Forwarded-For": f"203.0.113.{n}"}, timeout=60).status_code
                    for n in range(3)]
    finally:
        server.close()
    assert statuses == ([200, 200, 200] if trusted else [200, 200, 429])


def test_a_client_that_leaves_stops_its_query_asked_through_trustgraphs_rest_form(production: ProductionServer) -> None:
    """The REST form runs the query as a nested request: the client's leaving must reach it too."""
    idle = production.query_worker_cpu()
    body = json.dumps({"query": COUNT_FOREVER}).encode()
    with socket.create_connection(("127.0.0.1", production.port), timeout=10) as sock:
        sock.sendall(request_head("POST", "/api/v1/flow/default/service/sparql",
                                  {"Content-Type": "application/json", "Content-Length": str(len(body))}) + body)
        running = _busy_worker(production, idle)
    patience = time.monotonic() + 15  # well before the 30 s deadline would stop it
    while running in production.query_worker_cpu() and time.monotonic() < patience:
        time.sleep(0.05)
    assert running not in production.query_worker_cpu(), production.log_tail()
