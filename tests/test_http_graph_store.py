"""The Graph Store HTTP Protocol at /store, called in-process (the W3C suite tries it over sockets)."""
from __future__ import annotations

import pytest
import requests
from in_process import Calling
from live_server import Verbs
from pyoxigraph import DefaultGraph, Literal, NamedNode, Quad, RdfFormat, Triple, parse

from server.store import GraphStore

BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

EX = "http://example.org/"
G = EX + "graph"
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TURTLE = {"Content-Type": "text/turtle", **AUTH}
DATA = f"<{EX}a> <{EX}p> <<( <{EX}a> <{EX}p> \"one\" )>> .\n<{EX}a> <{EX}p> \"one\" ."


SERVER_STORE, SERVER_SETTINGS, IN_PROCESS = "store", {"token": TOKEN, "max_body_bytes": 16 * 1024}, True  # conftest's


def url(server: Verbs) -> str:
    return server.url + "/store"


def triples(server: Verbs, graph: str | None = G) -> set[Triple]:
    params = {"graph": graph} if graph else {"default": ""}
    response = server.get(url(server), params=params, headers={"Accept": "application/n-triples"})
    assert response.status_code == 200, response.text
    return {q.triple for q in parse(response.content, format=RdfFormat.N_TRIPLES)}


def test_put_creates_201_then_replaces_204(server: Verbs) -> None:
    assert server.get(url(server), params={"graph": G}).status_code == 404
    assert server.head(url(server), params={"graph": G}).status_code == 404
    assert server.put(url(server), params={"graph": G}, data=DATA, headers=TURTLE).status_code == 201
    fact = Triple(NamedNode(EX + "a"), NamedNode(EX + "p"), Literal("one"))
    assert triples(server) == {fact, Triple(fact.subject, fact.predicate, fact)}
    replaced = server.put(url(server), params={"graph": G}, data=f"<{EX}b> <{EX}p> 2 .", headers=TURTLE)
    assert replaced.status_code == 204
    assert len(triples(server)) == 1


def test_post_merges(server: Verbs) -> None:
    assert server.post(url(server), params={"graph": G}, data=DATA, headers=TURTLE).status_code == 201
    more = server.post(url(server), params={"graph": G}, data=f'<{EX}b> <{EX}p> "x"@en .',
                         headers={"Content-Type": "application/n-triples", **AUTH})
    assert more.status_code == 204
    assert len(triples(server)) == 3


def test_post_to_the_store_itself_creates_a_graph(server: Verbs) -> None:
    created = server.post(url(server), data=DATA, headers=TURTLE)
    assert created.status_code == 201
    location = requests.compat.urljoin(server.url, created.headers["Location"])
    fetched = server.get(location, headers={"Accept": "application/n-triples"})
    assert fetched.status_code == 200 and len(fetched.text.strip().splitlines()) == 2
    assert server.post(url(server), data="<broken", headers=TURTLE).status_code == 400


def test_delete_204_then_404(server: Verbs) -> None:
    server.put(url(server), params={"graph": G}, data=DATA, headers=TURTLE)
    assert server.delete(url(server), params={"graph": G}, headers=AUTH).status_code == 204
    assert server.delete(url(server), params={"graph": G}, headers=AUTH).status_code == 404
    assert server.get(url(server), params={"graph": G}).status_code == 404


def test_default_graph(server: Verbs, store: GraphStore) -> None:
    assert server.get(url(server), params={"default": ""}).status_code == 200
    posted = server.post(url(server) + "?default", data=f"<{EX}d> <{EX}p> 1 .", headers=TURTLE)
    assert posted.status_code == 204
    assert [q.graph_name for q in store.quads(graph=DefaultGraph())] == [DefaultGraph()]
    assert store.named_graphs() == []
    assert server.delete(url(server) + "?default", headers=AUTH).status_code == 204
    assert triples(server, None) == set()


def test_a_bad_body_writes_nothing(server: Verbs) -> None:
    server.put(url(server), params={"graph": G}, data=DATA, headers=TURTLE)
    before = triples(server)
    broken = DATA + f"\n<{EX}c> <{EX}p> \"unterminated ."
    for method in (server.put, server.post):
        response = method(url(server), params={"graph": G}, data=broken, headers=TURTLE)
        assert response.status_code == 400 and "nothing was written" in response.text
    quads = f"<{EX}c> <{EX}p> <{EX}o> <{EX}other> ."
    named = server.post(url(server), params={"graph": G}, data=quads,
                        headers={"Content-Type": "application/n-quads", **AUTH})
    assert named.status_code == 400
    assert triples(server) == before


def test_errors(server: Verbs) -> None:
    put = server.put
    png = {"Content-Type": "image/png", **AUTH}
    assert put(url(server), params={"graph": G}, data="x", headers=png).status_code == 415
    assert put(url(server), params={"graph": G}, data=DATA, headers={"Content-Type": "text/turtle"}).status_code == 401
    wrong = {"Content-Type": "text/turtle", "Authorization": "Bearer nope"}
    assert put(url(server), params={"graph": G}, data=DATA, headers=wrong).status_code == 403
    assert server.get(url(server)).status_code == 400  # neither graph nor default
    assert server.get(url(server) + f"?default&graph={G}").status_code == 400
    assert server.get(url(server), params={"graph": "not an iri"}).status_code == 400
    big = "# " + "x" * (32 * 1024)
    assert put(url(server), params={"graph": G}, data=big, headers=TURTLE).status_code == 413
    assert server.request("PATCH", url(server), params={"graph": G}, headers=AUTH).status_code == 405
    assert server.get(url(server), params={"graph": G}).status_code == 404


def test_get_negotiates_and_json_ld_steps_aside_for_triple_terms(server: Verbs, store: GraphStore) -> None:
    server.put(url(server), params={"graph": G}, data=DATA, headers=TURTLE)
    plain = EX + "plain"
    server.put(url(server), params={"graph": plain}, data=f"<{EX}a> <{EX}p> 1 .", headers=TURTLE)
    json_ld = server.get(url(server), params={"graph": plain}, headers={"Accept": "application/ld+json"})
    assert json_ld.headers["Content-Type"].startswith("application/ld+json")
    assert len(list(parse(json_ld.content, format=RdfFormat.JSON_LD))) == 1
    assert server.get(url(server), params={"graph": G}, headers={"Accept": "application/ld+json"}).status_code == 406
    turtle = server.get(url(server), params={"graph": G}, headers={"Accept": "application/ld+json, text/*;q=0.1"})
    assert turtle.headers["Content-Type"].startswith("text/turtle")
    head = server.head(url(server), params={"graph": G})
    assert head.status_code == 200 and head.content == b"" and head.headers["Content-Type"].startswith("text/turtle")
    assert Quad(NamedNode(EX + "a"), NamedNode(EX + "p"), Literal("one"), NamedNode(G)) in set(store.quads())


def test_writes_are_refused_read_only(store: GraphStore, calling: Calling) -> None:
    app = calling(store, token=TOKEN, read_only=True)
    response = app.put(url(app), params={"graph": G}, data=DATA, headers=TURTLE)
    assert response.status_code == 403 and "read-only" in response.text
    assert store.is_empty()


@pytest.mark.parametrize("graph", [{"graph": G}, {"default": ""}])
def test_get_of_a_graph_over_the_row_limit_is_422(store: GraphStore, graph: dict[str, str], calling: Calling) -> None:
    """The store counts up to one triple past GLASSGRAPH_MAX_ROWS: walking the librarian's 100,001 quads in
    Python took 1.3-7 s a request."""
    app = calling(store, token=TOKEN, max_result_rows=2)
    assert app.put(url(app), params=graph, data=DATA, headers=TURTLE).status_code in (201, 204)
    at_limit = app.get(url(app), params=graph, headers={"Accept": "application/n-triples"})
    assert at_limit.status_code == 200 and len(at_limit.content.splitlines()) == 2
    assert app.post(url(app), params=graph, data=f"<{EX}b> <{EX}p> 3 .", headers=TURTLE).status_code == 204
    over = app.get(url(app), params=graph, headers={"Accept": "application/ld+json"})
    assert over.status_code == 422 and "GLASSGRAPH_MAX_ROWS" in over.text
