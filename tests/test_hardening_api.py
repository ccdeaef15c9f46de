"""Hardening of the HTTP surface over a real server on 127.0.0.1 and real on-disk stores: what
``/api/graph-rag`` refuses (body type, question size, invalid text, names that are not user
collections), read-only GraphRAG writing nothing, configuration from the environment, and the
security headers of every response.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests
from live_server import LiveServer, Serving, serve
from pyoxigraph import Literal, NamedNode, Quad
from scripted_llm import ScriptedLLM, scripted_llm  # noqa: F401  (the fixture)

from server import vocab
from server.config import Config, ConfigError
from server.http.app import create_app
from server.store import GraphStore

QUESTION = "What is the capital of France?"
RAG = "/api/graph-rag"


def post(server: LiveServer, data: str | bytes, content_type: str | None = "application/json",
         accept: str = "application/json") -> requests.Response:
    headers = {"Accept": accept, **({"Content-Type": content_type} if content_type else {})}
    return requests.post(server.url + RAG, data=data, headers=headers, timeout=60)


def error_of(response: requests.Response) -> dict:
    return response.json()["error"]


def snapshot(store: GraphStore) -> set[Quad]:
    return set(store.raw)


# --- the body: JSON only, a bounded question, valid text --------------------------------------------

@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None,
                                          "application/jsonx", "text/json"])
def test_a_body_that_is_not_declared_json_is_415(server: LiveServer, france_store: GraphStore,
                                                  content_type: str | None) -> None:
    before = snapshot(france_store)
    response = post(server, json.dumps({"query": QUESTION, "streaming": False}), content_type)
    assert response.status_code == 415, response.text
    assert error_of(response)["type"] == "unsupported-media-type"
    assert "Content-Type: application/json" in error_of(response)["message"]
    assert snapshot(france_store) == before


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON;charset=UTF-8"])
def test_json_with_any_charset_parameter_is_answered(server: LiveServer, content_type: str) -> None:
    response = post(server, json.dumps({"query": QUESTION, "streaming": False}), content_type)
    assert response.status_code == 200, response.text
    assert "Paris" in response.json()["answer"]


def test_a_question_over_the_limit_is_413_naming_it(france_store: GraphStore, serving: Serving) -> None:
    live = serving(france_store, max_question_chars=40)
    before = snapshot(france_store)
    too_long = post(live, json.dumps({"query": "capital of France " + "x" * 23, "streaming": False}))
    assert snapshot(france_store) == before
    at_limit = post(live, json.dumps({"query": "capital of France? " + "x" * 21, "streaming": False}))
    assert too_long.status_code == 413 and error_of(too_long)["type"] == "content-too-large"
    assert "41" in error_of(too_long)["message"] and "40" in error_of(too_long)["message"]
    assert "GLASSGRAPH_MAX_QUESTION" in error_of(too_long)["message"]
    assert at_limit.status_code == 200, at_limit.text


def test_the_question_limit_defaults_to_2000_and_comes_from_the_environment(tmp_path: Path) -> None:
    assert Config().max_question_chars == 2000
    assert Config.from_env({"GLASSGRAPH_MAX_QUESTION": "300"}).max_question_chars == 300
    with pytest.raises(ConfigError, match="GLASSGRAPH_MAX_QUESTION"):
        Config.from_env({"GLASSGRAPH_MAX_QUESTION": "lots"})


@pytest.mark.parametrize("body", [
    '{"query": "What is the capital \\ud800 of France?", "streaming": false}',
    '{"query": "What is the capital of France?\\udfff", "streaming": true}',
    '{"query": "What is the capital of France?", "collection": "default\\ud800", "streaming": false}',
])
def test_a_lone_surrogate_is_400_and_records_nothing(server: LiveServer, france_store: GraphStore, body: str) -> None:
    before = snapshot(france_store)
    response = post(server, body, accept="text/event-stream, application/json")
    assert response.status_code == 400, response.text
    assert error_of(response)["type"] == "bad-request"
    assert "lone surrogate" in error_of(response)["message"]
    assert snapshot(france_store) == before


# --- read-only mode: GraphRAG answers, the store is left as it was -------------------------------------

@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "application/x-ndjson"])
def test_read_only_graph_rag_answers_and_writes_nothing(france_store: GraphStore, accept: str) -> None:
    live = serve(france_store, read_only=True)
    before = snapshot(france_store)
    try:
        response = post(live, json.dumps({"query": QUESTION, "explainable": True}), accept=accept)
        body = response.text
    finally:
        live.close()
    assert response.status_code == 200, body
    assert response.headers["Glassgraph-Trace"] == "not-recorded (read-only)"
    assert "Paris" in body and "urn:trustgraph:" not in body  # no session, no explain ids
    assert snapshot(france_store) == before
    assert len(france_store.raw) == len(before)


def test_read_only_refusals_carry_no_trace_header(france_store: GraphStore, serving: Serving) -> None:
    """The header describes an answer; a refused request has none."""
    live = serving(france_store, read_only=True)
    response = post(live, "{}")
    assert response.status_code == 400 and "Glassgraph-Trace" not in response.headers


# --- names that are not user collections ---------------------------------------------------------------

def test_graphs_that_are_not_collections_are_refused_with_the_reason(server: LiveServer,
                                                                      france_store: GraphStore) -> None:
    first = post(server, json.dumps({"query": QUESTION, "streaming": False}))
    assert first.status_code == 200  # the explainability graph now exists too
    for name in ("librarian", "default:source", "explainability"):
        assert france_store.raw.contains_named_graph(NamedNode(f"urn:trustgraph:graph:{name}"))
        before = snapshot(france_store)
        response = post(server, json.dumps({"query": QUESTION, "collection": name, "streaming": False}))
        assert response.status_code == 400, (name, response.text)
        message = error_of(response)["message"]
        assert f"{name!r} is not a user collection" in message
        assert snapshot(france_store) == before
    assert "provenance" in error_of(post(server, json.dumps({"query": QUESTION, "collection": "a:source"})))["message"]


def test_the_configured_explain_collection_is_not_a_collection(tmp_path: Path, serving: Serving) -> None:
    store = GraphStore(tmp_path / "store", explain_collection="traces")
    graph = vocab.collection_graph("default")
    store.extend([Quad(vocab.ENTITY.france, vocab.RELATION.capital, vocab.ENTITY.paris, graph),
                  Quad(vocab.ENTITY.france, vocab.RDFS.label, Literal("France"), graph),
                  Quad(vocab.ENTITY.paris, vocab.RDFS.label, Literal("Paris"), graph)])
    live = serving(store, explain_collection="traces")
    asked = post(live, json.dumps({"query": QUESTION, "streaming": False}))
    assert asked.status_code == 200 and asked.json()["explain_collection"] == "traces"
    refused = post(live, json.dumps({"query": QUESTION, "collection": "traces", "streaming": False}))
    assert refused.status_code == 400 and "explainability" in error_of(refused)["message"]
    assert [c["collection"] for c in store.collections()] == ["default"]
    with pytest.raises(ValueError, match="not a user collection"):
        store.has_collection("traces")
    assert store.collection_of(vocab.collection_graph("default")) == "default"
    assert store.collection_of(NamedNode("urn:trustgraph:graph:traces")) is None


def test_the_vocabulary_rule_decides_both_ways() -> None:
    """A name is a user collection exactly when its graph is read back as one."""
    for name in ("librarian", "explainability", "default:source"):
        with pytest.raises(ValueError, match="not a user collection"):
            vocab.check_collection_name(name)
        assert vocab.collection_of_graph(NamedNode("urn:trustgraph:graph:" + name)) is None
    for name in ("", "two words", "tab\there", "bad\ud800"):
        with pytest.raises(ValueError, match="not a user collection"):
            vocab.check_collection_name(name)
    for name in ("default", "movies", "a:b", "sources", "librarians"):
        vocab.check_collection_name(name)
        assert vocab.collection_of_graph(vocab.collection_graph(name)) == name


# --- configuration from the environment -----------------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [("s3cret\n", "s3cret"), ("  s3cret \t", "s3cret"),
                                               (" \n ", None), ("", None)])
def test_the_token_is_stripped_and_a_blank_one_is_unset(raw: str, expected: str | None) -> None:
    assert Config.from_env({"GLASSGRAPH_TOKEN": raw}).token == expected


def test_a_token_read_with_its_newline_still_matches(store: GraphStore) -> None:
    config = Config.from_env({"GLASSGRAPH_TOKEN": "s3cret\n"}, store_path=None, load_sample=False, llm="offline")
    live = LiveServer(create_app(config, store))
    try:
        response = requests.put(live.url + "/store", params={"graph": "urn:x:g"},
                                data="<urn:x:s> <urn:x:p> <urn:x:o> .\n",
                                headers={"Content-Type": "application/n-triples", "Authorization": "Bearer s3cret"})
    finally:
        live.close()
    assert response.status_code in (201, 204), response.text
    assert len(store.raw) == 1


@pytest.mark.parametrize(("variable", "raw", "kind"), [
    ("GLASSGRAPH_MAX_BODY", "abc", "an integer"), ("GLASSGRAPH_PORT", "78.5", "an integer"),
    ("GLASSGRAPH_MAX_ROWS", "-1", "at least 0"), ("GLASSGRAPH_DEADLINE", "soon", "a number"),
    ("GLASSGRAPH_DEADLINE", "nan", "a number"), ("GLASSGRAPH_SSE_KEEPALIVE", "inf", "a number"),
    ("GLASSGRAPH_LLM_TIMEOUT", "-3", "at least 0"), ("GLASSGRAPH_READ_ONLY", "ture", "true or false"),
])
def test_a_malformed_number_or_switch_names_its_variable(variable: str, raw: str, kind: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Config.from_env({variable: raw})
    message = str(raised.value)
    assert variable in message and repr(raw) in message and kind in message


def test_well_formed_settings_still_load() -> None:
    config = Config.from_env({"GLASSGRAPH_MAX_BODY": " 2048 ", "GLASSGRAPH_DEADLINE": "2.5",
                              "GLASSGRAPH_READ_ONLY": "Yes", "GLASSGRAPH_LOAD_SAMPLE": "0"})
    assert (config.max_body_bytes, config.query_deadline_s, config.read_only, config.load_sample) == \
        (2048, 2.5, True, False)


# --- security headers ------------------------------------------------------------------------------

def test_every_response_says_nosniff(server: LiveServer) -> None:
    responses = [
        requests.get(server.url + "/api/collections"),
        requests.get(server.url + "/sparql", params={"query": "ASK {}"}),
        requests.get(server.url + "/static/ask.js"),
        requests.get(server.url + "/api/explain"),  # 400
        requests.get(server.url + "/no/such/page"),  # 404
        post(server, "{}", "text/plain"),  # 415
        post(server, json.dumps({"query": QUESTION}), accept="text/event-stream"),  # streamed
        requests.get(server.url + "/", headers={"Accept": "text/html"}),
    ]
    for response in responses:
        assert response.headers.get("X-Content-Type-Options") == "nosniff", (response.url, response.status_code)


def test_html_pages_get_a_strict_content_security_policy(server: LiveServer) -> None:
    pages = [requests.get(server.url + path, headers={"Accept": "text/html"})
             for path in ("/", "/console/sparql", "/console/ask", "/console/sessions")]
    pages.append(requests.get(server.url + "/resource", params={"iri": vocab.ENTITY.france.value},
                              headers={"Accept": "text/html"}))
    for page in pages:
        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
        policy = {d.split()[0]: d.split()[1:] for d in page.headers["Content-Security-Policy"].split(";") if d.strip()}
        assert policy["default-src"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]
        assert not any("unsafe" in value for values in policy.values() for value in values)
        assert "script-src" not in policy or policy["script-src"] == ["'self'"]
        assert page.headers["X-Frame-Options"] == "DENY"
    data = requests.get(server.url + "/api/collections")
    assert "Content-Security-Policy" not in data.headers and "X-Frame-Options" not in data.headers


# --- GraphRAG answers in progress -------------------------------------------------------------------

@pytest.mark.slow  # waits out deadlines by design (seconds)
def test_answers_past_the_cap_are_429_and_a_finished_answer_frees_its_place(
        france_store: GraphStore, scripted_llm: ScriptedLLM) -> None:  # noqa: F811
    """A slow LLM holds a request thread per answer: past GLASSGRAPH_MAX_ANSWERS, new questions wait outside."""
    scripted_llm.reply('{"id": "e1", "reasoning": "r"}', delay_s=2.0)  # the first answer's selection is slow
    scripted_llm.reply("Paris.")
    live = serve(france_store, llm="openai", llm_base_url=scripted_llm.base_url, llm_api_key="test", llm_retries=0,
                 max_answers=1)
    try:
        first = requests.post(live.url + RAG, json={"query": QUESTION}, stream=True, timeout=30,
                              headers={"Accept": "text/event-stream"})
        assert first.status_code == 200
        second = requests.post(live.url + RAG, json={"query": QUESTION}, timeout=30)
        assert second.status_code == 429 and second.headers.get("Retry-After")
        assert "GLASSGRAPH_MAX_ANSWERS" in error_of(second)["message"]
        assert requests.get(live.url + "/healthz", timeout=5).status_code == 200
        assert b"end_of_session" in first.content  # the first answer ends: its place is freed when the
        scripted_llm.reply('{"id": "e1", "reasoning": "r"}')  # server closes the response, just after
        scripted_llm.reply("Paris.")
        statuses = []
        for _ in range(50):  # bounded: 5 s
            statuses.append(requests.post(live.url + RAG, json={"query": QUESTION}, timeout=30).status_code)
            if statuses[-1] != 429:
                break
            time.sleep(0.1)
        assert statuses[-1] == 200, statuses
    finally:
        live.close()


def test_deeply_nested_bodies_and_huge_page_numbers_are_400(server: LiveServer) -> None:
    nested = requests.post(server.url + RAG, data="[" * 100_000, timeout=30,
                           headers={"Content-Type": "application/json"})
    assert nested.status_code == 400
    page = requests.get(server.url + "/console/sessions", params={"page": "9" * 5000}, timeout=30)
    assert page.status_code == 400 and "page" in page.text
