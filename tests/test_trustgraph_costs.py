"""What an anonymous TrustGraph client can make the production server spend: a SELECT's frames stay small
whatever ``batch-size`` it asks for, a REST SELECT is not built whole in memory, and strings that are no text
(lone surrogates) are refused as bad requests, never a 500."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from production_server import ProductionServer, answered_status
from websockets.sync.client import connect

pytestmark = pytest.mark.slow  # a production server for each test or the module: seconds each


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProductionServer]:
    live = ProductionServer(tmp_path_factory.mktemp("costs") / "store")
    yield live
    live.close()


def wide_select(rows: int, width: int) -> str:
    """``rows`` rows of ``width`` small integers: a few bytes of TSV a term, some hundreds as wire terms."""
    side = int(rows ** 0.5)
    numbers = " ".join(str(n) for n in range(side))
    binds = " ".join(f"BIND(?a + {i} AS ?v{i})" for i in range(width))
    return f"SELECT * WHERE {{ VALUES ?a {{ {numbers} }} VALUES ?b {{ {numbers} }} {binds} }}"


def worker_peak_mb(live: ProductionServer) -> int:
    """The peak resident memory of the server's worker (the gunicorn master's one child), in MB."""
    children = Path(f"/proc/{live.process.pid}/task/{live.process.pid}/children").read_text().split()
    [worker] = [pid for pid in children if "gunicorn" in Path(f"/proc/{pid}/cmdline").read_text()]
    status = Path(f"/proc/{worker}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) >> 10


def test_a_select_s_frames_stay_small_whatever_batch_size_the_client_asks(server: ProductionServer) -> None:
    with connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10, max_size=None) as client:
        client.send(json.dumps({"type": "auth", "token": ""}))
        assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
        client.send(json.dumps({"id": "w", "service": "sparql", "request": {"query": wide_select(20_000, 10),
                                                                             "batch-size": 10_000_000}}))
        rows, largest, complete = 0, 0, False
        while not complete:
            text = client.recv(timeout=120)
            frame = json.loads(text)
            assert "error" not in frame, frame
            rows, largest = rows + len(frame["response"]["bindings"]), max(largest, len(text))
            complete = frame["complete"]
    assert rows == 141 * 141  # every row, in frames of a bounded size (one frame of 18 MB before)
    assert largest < 4 << 20, largest


def test_a_rest_select_is_not_built_whole_in_memory(server: ProductionServer) -> None:
    before = worker_peak_mb(server)
    answer = requests.post(f"{server.url}/api/v1/flow/default/service/sparql",
                           json={"query": wide_select(99_000, 4)}, timeout=300)
    assert answer.status_code == 200
    body = answer.json()
    assert len(body["bindings"]) == 314 * 314 and body["variables"][:2] == ["a", "b"]
    assert all(len(row["values"]) == 6 for row in body["bindings"])
    assert body["bindings"][0]["values"][2]["dt"] == "http://www.w3.org/2001/XMLSchema#integer"
    grown = worker_peak_mb(server) - before
    assert grown < 200, f"the worker's peak grew by {grown} MB for a 44 MB answer (some 350 MB before)"


def test_an_answer_s_frames_are_bounded_as_the_sparql_answer_is(server: ProductionServer) -> None:
    """4 MB of TSV (100,000 rows of 42 small integers) made 307 MB of JSON over REST, 14 s of the worker's
    CPU, where /sparql refuses an answer past GLASSGRAPH_MAX_RESULT_BYTES (64 MB): both forms stop there too."""
    query = wide_select(99_000, 40)
    refused = requests.post(f"{server.url}/api/v1/flow/default/service/sparql", json={"query": query}, timeout=300)
    assert answered_status(refused) == 422 and refused.json()["error"]["type"] == "limit-exceeded", refused.text[:300]
    with connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10, max_size=None) as client:
        client.send(json.dumps({"type": "auth", "token": ""}))
        assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
        client.send(json.dumps({"id": "w", "service": "sparql", "request": {"query": query}}))
        received = 0
        while not (frame := json.loads(text := client.recv(timeout=120)))["complete"]:
            received += len(text)
    assert frame["error"]["type"] == "limit-exceeded" and 64 << 20 < received < 66 << 20


@pytest.mark.parametrize("request_object", [
    {"operation": "list-documents", "collection": "\ud800"},
    {"operation": "get-document-content", "document-id": "urn:x:\udfff"},
    {"operation": "add-document", "document-metadata": {"kind": "text/plain", "title": "a\ud800"},
     "content": "aGVsbG8="},
])
def test_lone_surrogates_are_bad_requests_over_rest_and_the_socket(server: ProductionServer,
                                                                   request_object: dict) -> None:
    refused = requests.post(f"{server.url}/api/v1/librarian", data=json.dumps(request_object),
                            headers={"Content-Type": "application/json"}, timeout=30)
    assert answered_status(refused) == 400 and refused.json()["error"]["type"] == "bad-request", refused.text
    with connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10) as client:
        client.send(json.dumps({"type": "auth", "token": ""}))
        assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
        client.send(json.dumps({"id": 1, "service": "librarian", "request": request_object}))
        assert json.loads(client.recv(timeout=30))["error"]["type"] == "bad-request"
    assert "UnicodeEncodeError" not in server.log_path.read_text()


def test_clients_leaving_mid_answer_leave_no_traceback_and_no_bytes_held(tmp_path: Path) -> None:
    """Sockets reset while their answers are being sent: the server logs no traceback for them (each had logged
    two, one a 'Task exception was never retrieved'), and the budget they held comes back (1 MB here)."""
    import socket as sockets
    import struct
    import time

    from test_trustgraph_socket import big_select

    live = ProductionServer(tmp_path / "store", env={"GLASSGRAPH_SOCKET_MEMORY": "1", "GLASSGRAPH_QUEUE_WAIT": "2"})
    try:
        for attempt in range(6):
            client = connect(f"ws://127.0.0.1:{live.port}/api/v1/socket", open_timeout=10, max_size=None)
            client.send(json.dumps({"type": "auth", "token": ""}))
            assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
            for request_id in range(3):
                client.send(json.dumps({"id": request_id, "service": "sparql",
                                        "request": {"query": big_select(20_000), "batch-size": 50}}))
            if attempt % 2:
                client.recv(timeout=60)
            else:
                time.sleep(0.3)
            client.socket.setsockopt(sockets.SOL_SOCKET, sockets.SO_LINGER, struct.pack("ii", 1, 0))
            client.socket.close()  # a reset, no close frame
        time.sleep(3)
        with connect(f"ws://127.0.0.1:{live.port}/api/v1/socket", open_timeout=10) as client:
            client.send(json.dumps({"type": "auth", "token": ""}))
            assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
            client.send(json.dumps({"id": "after", "service": "sparql", "request": {"query": "ASK {}"}}))
            assert json.loads(client.recv(timeout=10))["response"]["ask-result"] is True
        log = live.log_path.read_text()
        assert "Traceback" not in log, log[log.index("Traceback") - 300:][:3000]
    finally:
        live.close()


def test_clients_of_many_addresses_cannot_together_pass_the_process_budget(tmp_path: Path) -> None:
    """Five addresses, each one SELECT of 23 MB never read, against a 1 MB process budget: one answer is made
    (the budget plus one answer); the others wait and are refused. All five were made before, the per-address
    budgets each empty (twelve addresses held 500 MB of the default 256 MB budget)."""
    import socket as sockets
    import time

    from test_trustgraph_socket import big_select

    live = ProductionServer(tmp_path / "store", env={"GLASSGRAPH_SOCKET_MEMORY": "1", "GLASSGRAPH_QUEUE_WAIT": "3"})
    clients = []
    try:
        for address in range(5):
            raw = sockets.socket()
            raw.setsockopt(sockets.SOL_SOCKET, sockets.SO_RCVBUF, 4096)
            raw.bind((f"127.0.0.{2 + address}", 0))
            raw.connect(("127.0.0.1", live.port))
            client = connect(f"ws://127.0.0.1:{live.port}/api/v1/socket", sock=raw, max_queue=1, max_size=None,
                             open_timeout=10)
            client.send(json.dumps({"type": "auth", "token": ""}))
            assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
            client.send(json.dumps({"id": "big", "service": "sparql", "request": {"query": big_select(60_000),
                                                                                   "batch-size": 100}}))
            clients.append(client)
        time.sleep(8)  # every request has been made, or has waited its 3 s and been refused
        for client in clients:
            client.socket.close()
        time.sleep(2)  # an answer is logged once it is closed
        made = live.log_path.read_text().count('"path": "/sparql", "status": 200')
        assert made == 1, f"{made} answers of 23 MB made against a budget of 1 MB"
    finally:
        for client in clients:
            client.socket.close()
        live.close()


def test_requests_a_client_leaves_waiting_are_bounded_in_bytes(tmp_path: Path) -> None:
    """Twenty sockets of one address, each sending 20 request frames of 1 MB that wait for the client's turn
    (its requests are admitted one at a time) and never reading: the worker held every waiting frame, some
    20 MB a socket (40 sockets: 860 MB), bounded by no budget. Past a few MB of a client's requests waiting,
    its further requests are refused."""
    import socket as sockets
    import threading
    import time

    live = ProductionServer(tmp_path / "store")
    padded = json.dumps({"id": "q", "service": "sparql", "request": {
        "query": "#" + "x" * 999_800 + "\nASK {}"}})
    clients = []
    try:
        before = worker_peak_mb(live)
        for _ in range(20):
            raw = sockets.socket()
            raw.setsockopt(sockets.SOL_SOCKET, sockets.SO_RCVBUF, 4096)
            raw.connect(("127.0.0.1", live.port))
            client = connect(f"ws://127.0.0.1:{live.port}/api/v1/socket", sock=raw, max_queue=1, max_size=None,
                             open_timeout=10, compression=None)
            client.send(json.dumps({"type": "auth", "token": ""}))
            assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
            clients.append(client)

        def send_all(client: object) -> None:
            try:
                for _ in range(20):
                    client.send(padded)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - the server may drop a client that reads nothing
                pass

        senders = [threading.Thread(target=send_all, args=(client,)) for client in clients]
        for sender in senders:
            sender.start()
        time.sleep(12)
        grown = worker_peak_mb(live) - before
        assert grown < 200, f"the worker's peak grew by {grown} MB for 400 waiting frames of 1 MB"
        assert requests.get(f"{live.url}/healthz", timeout=10).status_code == 200
    finally:
        for client in clients:
            client.socket.close()
        live.close()


@pytest.mark.parametrize(("service", "request_object"), [
    ("sparql", {"query": "SELECT * { ?s ?p ?o } LIMIT 3", "limit": 10 ** 30}),  # past sys.maxsize: a 500
    ("librarian", {"operation": {"t": "i", "i": "urn:x"}}),  # not a string, unhashable: a 500
    ("librarian", {"operation": ["list-documents"]}),
])
def test_fields_of_any_json_type_or_size_are_answered_never_a_500(server: ProductionServer, service: str,
                                                                  request_object: dict) -> None:
    answer = requests.post(f"{server.url}/api/v1/flow/default/service/{service}", json=request_object, timeout=30)
    assert answered_status(answer) < 500, answer.text
    with connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10) as client:
        client.send(json.dumps({"type": "auth", "token": ""}))
        assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
        client.send(json.dumps({"id": 1, "service": service, "request": request_object}))
        assert json.loads(client.recv(timeout=30)).get("error", {}).get("type") != "internal-error"


def test_a_token_that_is_no_text_fails_auth_and_the_socket_stays(server: ProductionServer) -> None:
    with connect(server.url.replace("http://", "ws://") + "/api/v1/socket", open_timeout=10) as client:
        client.send(json.dumps({"type": "auth", "token": "\ud800"}))  # was an ASGI exception: the socket dropped
        assert json.loads(client.recv(timeout=10))["type"] == "auth-failed"
        client.send(json.dumps({"type": "auth", "token": ""}))
        assert json.loads(client.recv(timeout=10))["type"] == "auth-ok"
    assert "Exception in ASGI application" not in server.log_path.read_text()
