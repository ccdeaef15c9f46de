"""The second attacker's pass, over real servers on 127.0.0.1 and real on-disk stores: cross-origin
reads only for listed origins (Private Network Access preflights included), bounded IRI parameters,
collection names that are no path segments, a trusted public base URL, the traces' retention policy
and the rate of anonymous questions, and writes refused from their headers before their body is read.
"""
from __future__ import annotations

import gc
import json
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from live_server import LiveServer, serve
from production_server import TOKEN, ProductionServer
from pyoxigraph import NamedNode

from server import stages, vocab
from server.answering import make_graph_rag
from server.config import Config
from server.errors import Busy
from server.explain.recorder import ExplainRecorder
from server.explain.retention import Retention, prune_sessions
from server.explain.trace import list_sessions
from server.http.params import MAX_IRI
from server.store import GraphStore

QUESTION = "What is the capital of France?"
FOREIGN, FRIEND = "https://evil.example", "https://friend.example"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def live(france_store: GraphStore) -> Iterator[callable]:
    """``live(**settings)``: the app over ``france_store`` with these settings, closed after the test."""
    servers = []

    def start(**settings: object) -> LiveServer:
        servers.append(serve(france_store, **settings))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def ask(server: LiveServer, headers: dict[str, str] | None = None) -> requests.Response:
    return requests.post(server.url + "/api/graph-rag", json={"query": QUESTION, "streaming": False},
                         headers=headers or {}, timeout=60)


# --- CORS ------------------------------------------------------------------------------------------

def preflight(server: LiveServer, origin: str, private_network: bool = False) -> requests.Response:
    headers = {"Origin": origin, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "content-type"}
    if private_network:
        headers["Access-Control-Request-Private-Network"] = "true"
    return requests.options(server.url + "/sparql", headers=headers, timeout=30)


def test_a_form_post_from_a_foreign_page_gets_no_cors_header_by_default(live) -> None:
    server = live()
    response = requests.post(server.url + "/sparql", data={"query": "ASK { ?s ?p ?o }"},
                             headers={**FORM, "Origin": FOREIGN, "Accept": "application/sparql-results+json"})
    assert response.status_code == 200 and response.json()["boolean"] is True  # a SPARQL client still works
    assert "Access-Control-Allow-Origin" not in response.headers
    plain = requests.get(server.url + "/sparql", params={"query": "ASK { ?s ?p ?o }"},
                         headers={"Accept": "application/sparql-results+json"})
    assert plain.json()["boolean"] is True and "Access-Control-Allow-Origin" not in plain.headers


def test_a_listed_origin_may_read_and_others_may_not(live) -> None:
    server = live(cors_origins=(FRIEND,))
    friend = requests.post(server.url + "/sparql", data={"query": "ASK {}"}, headers={**FORM, "Origin": FRIEND})
    assert friend.headers["Access-Control-Allow-Origin"] == FRIEND
    assert "Origin" in friend.headers["Vary"] and "Link" in friend.headers["Access-Control-Expose-Headers"]
    foreign = requests.post(server.url + "/sparql", data={"query": "ASK {}"}, headers={**FORM, "Origin": FOREIGN})
    assert "Access-Control-Allow-Origin" not in foreign.headers and "Origin" in foreign.headers["Vary"]


def test_any_origin_when_the_operator_says_so(live) -> None:
    server = live(cors_origins=("*",))
    response = requests.get(server.url + "/sparql", params={"query": "ASK {}"}, headers={"Origin": FOREIGN})
    assert response.headers["Access-Control-Allow-Origin"] == "*"


def test_preflights_and_private_network_access_only_for_listed_origins(live) -> None:
    server = live(cors_origins=(FRIEND,))
    refused = preflight(server, FOREIGN, private_network=True)
    assert refused.status_code == 403 and "GLASSGRAPH_CORS_ORIGINS" in refused.text
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert "Access-Control-Allow-Private-Network" not in refused.headers
    allowed = preflight(server, FRIEND, private_network=True)
    assert allowed.status_code == 200
    assert allowed.headers["Access-Control-Allow-Origin"] == FRIEND
    assert allowed.headers["Access-Control-Allow-Private-Network"] == "true"
    assert "POST" in allowed.headers["Access-Control-Allow-Methods"]
    assert "Content-Type" in allowed.headers["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Private-Network" not in preflight(server, FRIEND).headers
    assert preflight(live(), FOREIGN, private_network=True).status_code == 403  # the default: nobody


# --- bounded inputs --------------------------------------------------------------------------------

@pytest.mark.parametrize("path, name", [("/resource", "iri"), ("/api/explain", "id"), ("/console/trace", "id"),
                                        ("/console/neighbourhood", "iri"), ("/store", "graph"),
                                        ("/api/documents", "id")])
def test_an_iri_parameter_past_the_limit_is_a_short_400(live, path: str, name: str) -> None:
    iri = "http://example.org/" + "a" * 60_000
    response = requests.get(live().url + path, params={name: iri}, headers={"Accept": "application/json"})
    assert response.status_code == 400, (response.status_code, len(response.content))
    assert f"{MAX_IRI:,}" in response.json()["error"]["message"]
    assert len(response.content) + sum(len(k) + len(v) for k, v in response.headers.items()) < 4096


def test_an_iri_at_the_limit_is_answered(live) -> None:
    iri = "http://example.org/" + "a" * (MAX_IRI - len("http://example.org/"))
    response = requests.get(live().url + "/resource", params={"iri": iri}, headers={"Accept": "text/turtle"})
    assert response.status_code in (200, 404), response.text


@pytest.mark.parametrize("name", [".", "..", "a/b"])
def test_collection_names_that_are_path_segments_are_refused(live, name: str) -> None:
    server = live(token=TOKEN)
    rag = requests.post(server.url + "/api/graph-rag", json={"query": QUESTION, "collection": name,
                                                             "streaming": False})
    assert rag.status_code == 400 and "path segment" in rag.json()["error"]["message"]
    with pytest.raises(ValueError, match="path segment"):
        vocab.check_collection_name(name)
    if "/" not in name:  # percent-encoded, as a client that does not normalize the URL sends it
        upload = requests.post(f"{server.url}/api/collections/{name.replace('.', '%2E')}/documents",
                               data=b"Some notes.",
                               headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
        assert upload.status_code == 400 and "path segment" in upload.text, upload.text


def test_the_public_url_wins_over_the_host_header(live) -> None:
    server = live(public_url="https://kg.example.org/")
    forged = {"Host": "evil.example", "Accept": "text/turtle"}
    void = requests.get(server.url + "/.well-known/void", headers=forged).text
    assert "<https://kg.example.org/sparql>" in void and "evil.example" not in void
    description = requests.get(server.url + "/sparql", headers=forged).text
    assert "<https://kg.example.org/sparql>" in description and "evil.example" not in description
    relative = requests.get(server.url + "/sparql", params={"query": "SELECT ?x { BIND(<s> AS ?x) }"},
                            headers={"Host": "evil.example", "Accept": "application/sparql-results+json"})
    assert relative.json()["results"]["bindings"][0]["x"]["value"] == "https://kg.example.org/s"
    without = live()
    assert "evil.example" in requests.get(without.url + "/.well-known/void", headers=forged).text  # as before


def test_a_public_url_that_is_no_url_stops_the_start() -> None:
    from server.config import ConfigError

    with pytest.raises(ConfigError, match="GLASSGRAPH_PUBLIC_URL"):
        Config.from_env({"GLASSGRAPH_PUBLIC_URL": "kg.example.org"})
    assert Config.from_env({"GLASSGRAPH_PUBLIC_URL": "https://kg.example.org"}).public_url == "https://kg.example.org"


# --- retention and rate of anonymous questions ----------------------------------------------------------

def record_sessions(store: GraphStore, count: int) -> list[str]:
    rag = make_graph_rag(store, Config(store_path=None, llm="offline"))
    sessions = []
    for _ in range(count):
        messages = list(rag.run(QUESTION, "default"))
        sessions.append(next(m.explain_id for m in messages if m.explain_kind == "session"))
    return sessions


def quads_of(store: GraphStore, session: str) -> list:
    session_id = stages.session_id_of(session)
    return [q for q in store.raw if session_id in str(q)]


def test_pruning_keeps_the_newest_sessions_and_removes_the_rest_whole(france_store: GraphStore) -> None:
    sessions = record_sessions(france_store, 4)
    assert all(quads_of(france_store, s) for s in sessions)
    assert prune_sessions(france_store, Retention(max_sessions=2, max_age_days=0)) == 2
    kept = [s["session"] for s in list_sessions(france_store, limit=10)]
    assert sorted(kept) == sorted(sessions[2:])
    for gone in sessions[:2]:
        assert quads_of(france_store, gone) == []  # trace and answer text
    assert prune_sessions(france_store, Retention(max_sessions=2, max_age_days=0)) == 0


def test_pruning_removes_the_nodes_a_stage_lists(france_store: GraphStore) -> None:
    """A document RAG session's passages and cited spans go with it (every member the declaration names)."""
    recorder = ExplainRecorder(france_store)
    chunk = vocab.chunk_iri("fr", 4, 2)
    for result in (stages.SessionStarted(QUESTION, "offline", "default", "Document RAG query session"),
                   stages.PassagesRetrieved(["capital"], [(chunk, 1.0, 0.5, 0.03), (chunk, 0.5, 0.4, 0.02)]),
                   stages.PassagesSelected([1]),
                   stages.Answered("Paris [1].", "Document RAG answer", "answered", spans=[(1, chunk.value, 0, 5)])):
        recorder.record(result)
    session = stages.SESSION.iri(recorder.session_id).value
    assert {"passage", "span"} <= {stages.parse_explain_iri(q.subject.value)[0] for q in quads_of(france_store, session)
                                   if isinstance(q.subject, NamedNode) and stages.parse_explain_iri(q.subject.value)}
    assert prune_sessions(france_store, Retention(max_sessions=0, max_age_days=1),
                          now=datetime.now(timezone.utc) + timedelta(days=2)) == 1
    assert quads_of(france_store, session) == []


def test_pruning_by_age(france_store: GraphStore) -> None:
    record_sessions(france_store, 2)
    retention = Retention(max_sessions=0, max_age_days=1)
    assert prune_sessions(france_store, retention) == 0
    assert prune_sessions(france_store, retention, now=datetime.now(timezone.utc) + timedelta(days=2)) == 2
    assert list_sessions(france_store) == []
    assert not list(france_store.quads(None, None, None, france_store.explain_graph))


def test_the_server_prunes_on_its_own(live, france_store: GraphStore) -> None:
    record_sessions(france_store, 4)
    server = live(trace_max_sessions=2)
    assert ask(server).json()["error"] is None
    assert len(list_sessions(france_store, limit=10)) == 3  # pruned to 2 before the question, then its own


def test_sessions_prune_on_the_command_line(tmp_path: Path) -> None:
    from conftest import add_france
    from test_cli import GLASSGRAPH, run

    store = add_france(GraphStore(tmp_path / "store"))
    sessions = record_sessions(store, 3)
    del store
    gc.collect()  # the store's last reference goes: the command may open it
    result = run(GLASSGRAPH, "--store", str(tmp_path / "store"), "sessions", "--prune", "--trace-max-sessions", "1")
    assert result.returncode == 0 and "pruned 2 session(s)" in result.stderr, result.stderr
    listed = run(GLASSGRAPH, "--store", str(tmp_path / "store"), "sessions", "--format", "json")
    assert [s["session"] for s in json.loads(listed.stdout)] == [sessions[-1]]


def test_anonymous_questions_past_the_rate_get_429_with_retry_after(live) -> None:
    server = live(question_rate=2, token=TOKEN)
    assert [ask(server).status_code for _ in range(2)] == [200, 200]
    refused = ask(server)
    assert refused.status_code == 429 and "GLASSGRAPH_QUESTION_RATE" in refused.json()["error"]["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 30
    assert ask(server, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200  # the operator is not counted


def test_the_rate_keeps_a_bounded_number_of_clients() -> None:
    from server.http.question_rate import MAX_CLIENTS, QuestionRate

    rate = QuestionRate(1)
    for n in range(MAX_CLIENTS + 50):
        rate.take(f"10.0.{n // 256}.{n % 256}")
    assert len(rate._buckets) <= MAX_CLIENTS
    with pytest.raises(Busy, match="GLASSGRAPH_QUESTION_RATE"):
        rate.take(f"10.0.{(MAX_CLIENTS + 49) // 256}.{(MAX_CLIENTS + 49) % 256}")  # the newest is still counted


# --- writes refused from their headers, before their body --------------------------------------------------

@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProductionServer]:
    server = ProductionServer(tmp_path_factory.mktemp("round-two") / "store", {"GLASSGRAPH_BODY_TIMEOUT": "120"})
    yield server
    server.close()


def answer_to_head(server: ProductionServer | LiveServer, method: str, path: str,
                   headers: dict[str, str]) -> tuple[int, dict]:
    """Send only a request head that announces a 9.9 MB body; the status and error the server answers."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Length: 9900000", "Accept: application/json",
             *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)  # a timeout here: the server waited for the body
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)["error"]


@pytest.mark.parametrize("method, path, content_type", [
    ("PUT", "/store?graph=urn:x:g", "text/turtle"), ("POST", "/store/a", "text/turtle"),
    ("POST", "/sparql", "application/sparql-update"), ("POST", "/api/collections/notes/documents", "text/plain")])
@pytest.mark.parametrize("authorization, status", [(None, 401), ("Bearer wrong", 403)])
def test_a_write_without_the_token_is_refused_before_its_body(production: ProductionServer, method: str, path: str,
                                                               content_type: str, authorization: str | None,
                                                               status: int) -> None:
    headers = {"Content-Type": content_type, **({"Authorization": authorization} if authorization else {})}
    answered, error = answer_to_head(production, method, path, headers)
    assert answered == status and error["type"] in ("unauthorized", "forbidden")


def test_the_development_server_refuses_before_the_body_too(live) -> None:
    server = live(token=TOKEN)
    answered, error = answer_to_head(server, "PUT", "/store?graph=urn:x:g", {"Content-Type": "text/turtle"})
    assert answered == 401 and error["type"] == "unauthorized"


def test_writes_with_the_token_and_anonymous_form_queries_still_read_their_body(production: ProductionServer) -> None:
    write = requests.put(production.url + "/store", params={"graph": "urn:x:g"}, data="<urn:x:s> <urn:x:p> 1 .",
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/turtle"}, timeout=30)
    assert write.status_code == 201, write.text
    query = requests.post(production.url + "/sparql", data={"query": "ASK { <urn:x:s> ?p 1 }"},
                          headers={"Accept": "application/sparql-results+json"}, timeout=30)
    assert query.json()["boolean"] is True
