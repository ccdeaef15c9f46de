"""What the console's SPARQL editor asks the server (``/api/sparql/check``, ``/api/sparql/predicates``),
called in-process with its query workers, and the parser's messages as plain sentences."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from in_process import Calling, InProcess, in_process
from live_server import Verbs
from pyoxigraph import Literal, NamedNode, Quad, Store

from server.http.sparql_errors import plain_syntax_error
from server.store import GraphStore

EX = "http://example.org/"
P, Q = NamedNode(EX + "p"), NamedNode(EX + "q")
QUERY = "application/sparql-query"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    store = GraphStore(tmp_path_factory.mktemp("editor") / "store")
    store.extend([Quad(NamedNode(EX + f"s{i}"), P, Literal(i), NamedNode(EX + "g")) for i in range(3)]
                 + [Quad(NamedNode(EX + "s0"), Q, Literal("x"), NamedNode(EX + "g"))])
    app = in_process(store, max_body_bytes=64 * 1024)
    yield app
    app.close()


def check(server: Verbs, text: str) -> dict:
    response = server.post(f"{server.url}/api/sparql/check", data=text.encode(), headers={"Content-Type": QUERY})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_query_that_parses_is_valid_and_not_run(server: Verbs) -> None:
    assert check(server, "SELECT * WHERE { ?s ?p <<( ?a ?b ?c )>> }") == {"valid": True, "problem": None}
    # a check never writes: an update is not a query, and refused as one
    body = check(server, "INSERT DATA { <http://example.org/x> <http://example.org/p> 1 }")
    assert body["valid"] is False
    asked = server.post(f"{server.url}/sparql", data="ASK { <http://example.org/x> ?p ?o }",
                        headers={"Content-Type": QUERY, "Accept": "application/sparql-results+json"})
    assert asked.json()["boolean"] is False


def test_an_unknown_prefix_is_named_where_it_is_used(server: Verbs) -> None:
    body = check(server, "PREFIX e: <http://example.org/>\nSELECT * WHERE {\n  ?s r:capital ?o\n}")
    assert body["problem"] == {"message": "unknown prefix r: (no PREFIX r: <…> declares it).", "line": 3,
                               "column": 6, "sentence": "line 3, column 6: unknown prefix r: (no PREFIX r: <…> "
                                                        "declares it)."}


@pytest.mark.parametrize(("text", "line", "column", "says"), [
    ("SELECT * WHERE {\n  ?s ?p ?o .\n  FILTER(?s = ?o\n}", 4, 1, "this '}' closes a '('."),
    ("SELECT * WHERE {\n  ?s ?p ?o", 1, 16, "this '{' is never closed."),
    ('SELECT * WHERE {\n  ?s ?p "open }', 2, 9, "this string does not end"),
    ("SELEC * WHERE { ?s ?p ?o }", 1, 1, "unexpected 'SELEC' (did you mean SELECT?)"),  # not "expected CONSTRUCT"
    ("SELECT ?s WHERE { ?s ?p ?o } LIMIT x", 1, 36, "unexpected 'x': expected"),
    ("SELECT ?x WHERE { ?s ?p ?o } GROUP BY ?s", 1, 41, "The SELECT contains a variable that is unbound."),
    # the parser reads these to their end; shorter prefixes, brackets closed, find where they go wrong
    ("SELECT * WHERE { ?s ?p ?o }\nLIMT 3", 2, 1, "the query cannot be read from 'LIMT' on"),
    ("SELECT * WHERE {\n  ?s ?p\n}", 2, 3, "the query cannot be read from '?s' on"),
    ("ASK { ?s ?p }", 1, 14, "the query ends too early"),  # never reread: parsing an ASK evaluates it
])
def test_parser_errors_read_as_sentences_with_their_position(server: Verbs, text: str, line: int,
                                                             column: int, says: str) -> None:
    problem = check(server, text)["problem"]
    assert (problem["line"], problem["column"]) == (line, column), problem
    assert says in problem["message"]
    assert "['" not in problem["message"] and "error at" not in problem["message"]  # no character classes


def test_the_guard_refuses_before_the_parser(server: Verbs) -> None:
    body = check(server, "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }")
    assert body["valid"] is False and body["problem"]["line"] is None
    assert "SERVICE" in body["problem"]["message"]
    deep = "SELECT * WHERE " + "{" * 500 + "}" * 500
    assert check(server, deep)["valid"] is False  # refused by the nesting check, never parsed


def test_the_endpoint_answers_the_same_sentence(server: Verbs) -> None:
    text = "SELECT * WHERE {\n  ?s r:capital ?o\n}"
    response = server.post(f"{server.url}/sparql", data=text.encode(),
                           headers={"Content-Type": QUERY, "Accept": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "malformed query: " + check(server, text)["problem"]["sentence"]


@pytest.mark.parametrize(("body", "content_type", "status"), [
    (b"SELECT * {}", "text/plain", 415),
    (b"SELECT * { ?s ?p '\xe9' }", QUERY, 400),
    (b"#" * (65 * 1024), QUERY, 413),
])
def test_bad_check_requests(server: Verbs, body: bytes, content_type: str, status: int) -> None:
    response = server.post(f"{server.url}/api/sparql/check", data=body, headers={"Content-Type": content_type})
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"]


def test_predicates_are_listed_most_used_first(server: Verbs) -> None:
    response = server.get(f"{server.url}/api/sparql/predicates")
    assert response.status_code == 200
    assert response.json()["predicates"][:2] == [{"iri": P.value, "triples": 3}, {"iri": Q.value, "triples": 1}]


@pytest.mark.parametrize(("text", "column", "expected"), [
    ("SELEC ?x WHERE { ?x ?p ?o }", 1, "unexpected 'SELEC' (did you mean SELECT?): a query starts with SELECT, "
     "CONSTRUCT, DESCRIBE or ASK, after any PREFIX and BASE declarations."),
    ("PREFIX e: <http://example.org/>\nBASE <http://b/>\n{ ?s ?p ?o }", 1, "unexpected '{': a query starts with"),
    ("INSERT DATA { <http://example.org/a> <http://example.org/b> 1 }", 1,
     "'INSERT' starts an update, not a query: send it as an update."),
])
def test_a_query_that_starts_with_no_query_form_is_told_what_starts_one(server: Verbs, text: str, column: int,
                                                                        expected: str) -> None:
    """The parser said "expected CONSTRUCT" of "SELEC ?x WHERE ..." (the last form it tried)."""
    problem = check(server, text)["problem"]
    assert problem["message"].startswith(expected) and problem["column"] == column, problem


def test_a_long_first_word_is_quoted_short(server: Verbs) -> None:
    problem = check(server, "X" * 50_000 + " WHERE {}")["problem"]
    assert problem["message"] == f"unexpected '{'X' * 40}…': a query starts with SELECT, CONSTRUCT, DESCRIBE or ASK, " \
                                 "after any PREFIX and BASE declarations."


@pytest.mark.parametrize(("text", "expected"), [
    ("INSRT DATA { <http://example.org/a> <http://example.org/b> 1 }",
     "unexpected 'INSRT' (did you mean INSERT?): an update starts with INSERT, DELETE,"),
    ("SELECT * WHERE { ?s ?p ?o }", "'SELECT' starts a query, not an update: send it as a query."),
])
def test_an_update_that_starts_with_no_update_form_is_told_what_starts_one(tmp_path: Path, calling: Calling,
                                                                           text: str, expected: str) -> None:
    app = calling(GraphStore(tmp_path / "store"), token="t")
    response = app.post(f"{app.url}/sparql", data=text, headers={
        "Content-Type": "application/sparql-update", "Authorization": "Bearer t", "Accept": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"malformed update: line 1, column 1: {expected}")


def test_plain_syntax_error_keeps_a_message_without_position() -> None:
    try:
        Store().query("SELECT * WHERE { ?s ?p ?o }}")
    except SyntaxError as error:
        problem = plain_syntax_error(str(error), "SELECT * WHERE { ?s ?p ?o }}")
    assert problem.sentence == "line 1, column 28: this '}' closes no bracket."
    assert plain_syntax_error("something odd", "ASK {}").sentence == "something odd"


def test_a_check_that_would_run_long_is_stopped_at_the_deadline(tmp_path: Path, calling: Calling) -> None:
    """An ASK is evaluated (on an empty store) when it is parsed: the check runs in a query worker that
    is killed at the query deadline, and the next check gets a fresh worker."""
    app = calling(GraphStore(tmp_path / "store"), query_deadline_s=0.5)
    values = " ".join(f"VALUES ?v{i} {{ {' '.join(str(n) for n in range(40))} }}" for i in range(5))
    heavy = f"ASK {{ {values} FILTER(?v0 + ?v1 + ?v2 + ?v3 + ?v4 < 0) }}"
    response = app.post(f"{app.url}/api/sparql/check", data=heavy, headers={"Content-Type": QUERY})
    assert response.status_code == 422 and "deadline" in response.json()["error"]["message"]
    assert check(app, "ASK { ?s ?p ?o }") == {"valid": True, "problem": None}


def test_an_in_memory_store_checks_in_the_server(calling: Calling) -> None:
    """No worker process can open an in-memory store: the check runs in the server, on a small stack."""
    app = calling(GraphStore())
    assert check(app, "SELECT * WHERE { ?s r:p ?o }")["problem"]["column"] == 21
    assert check(app, "SELECT * WHERE " + "{" * 500 + "}" * 500)["valid"] is False
