"""Each explain message carries its step's triples (``explain_triples``, TrustGraph's wire shape): over HTTP on
a real server, as recorded in the store, and read by ``tg-invoke-graph-rag`` with no second request."""
from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Iterator

import pytest
import requests
from flask import request
from live_server import LiveServer, serve
from pyoxigraph import NamedNode

from server import vocab
from server.cli.display import StreamDisplay
from server.cli.tg_invoke import main as tg_invoke
from server.explain.trace import read_trace, trace_quads
from server.explain.wire import quad_wire
from server.store import GraphStore

QUESTION = "What is the capital of France?"
TG = "https://trustgraph.ai/ns/"
CAPITAL = {"s": {"t": "i", "i": vocab.ENTITY.france.value}, "p": {"t": "i", "i": vocab.RELATION.capital.value},
           "o": {"t": "i", "i": vocab.ENTITY.paris.value}}


@pytest.fixture
def counted(france_store: GraphStore) -> Iterator[tuple[LiveServer, Counter]]:
    """A live server over the France graph that counts the requests it answers, by path."""
    live = serve(france_store)
    paths: Counter = Counter()

    @live.app.before_request
    def count() -> None:
        paths[request.path] += 1

    yield live, paths
    live.close()


def stream(url: str, accept: str) -> list[dict]:
    body = {"query": QUESTION, "streaming": True}
    with requests.post(url + "/api/graph-rag", json=body, headers={"Accept": accept}, stream=True, timeout=60) as r:
        assert r.status_code == 200, r.text
        lines = [line for line in r.iter_lines(decode_unicode=True) if line]
    if accept == "text/event-stream":
        return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    return [json.loads(line) for line in lines]


def of(message: dict, subject: str, predicate: str) -> list[dict]:
    return [t["o"] for t in message["explain_triples"] if t["s"].get("i") == subject and t["p"]["i"] == predicate]


@pytest.mark.parametrize("accept", ["text/event-stream", "application/x-ndjson"])
def test_each_step_carries_its_recorded_triples(counted: tuple[LiveServer, Counter], france_store: GraphStore,
                                                accept: str) -> None:
    live, _ = counted
    messages = stream(live.url, accept)
    explains = {m["explain_kind"]: m for m in messages if m["message_type"] == "explain"}
    assert list(explains) == ["session", "retrieval", "selection", "answer"]
    trace = read_trace(france_store, explains["session"]["explain_id"])
    recorded = [quad_wire(q) for q in trace_quads(france_store, trace)]
    for message in explains.values():  # every triple of the step that is in the explain graph was recorded
        own = [t for t in message["explain_triples"] if t.get("g") == france_store.explain_graph.value]
        assert own and [t for t in own if t not in recorded] == [], message["explain_kind"]
    retrieval = explains["retrieval"]
    edges = of(retrieval, retrieval["explain_id"], TG + "retrievedEdge")
    [count] = of(retrieval, retrieval["explain_id"], TG + "edgeCount")
    assert len(edges) == int(count["v"]) == trace["edge_count"] >= 1
    assert {"t": "r", "r": CAPITAL} in edges
    assert {"t": "i", "i": vocab.ENTITY.france.value} in of(retrieval, retrieval["explain_id"], TG + "seed")
    selection = explains["selection"]
    [node] = [n["i"] for n in of(selection, selection["explain_id"], TG + "selectedEdge")
              if {"t": "r", "r": CAPITAL} in of(selection, n["i"], TG + "edge")]
    assert of(selection, node, TG + "reasoning")
    # the capital edge's source: its subgraph contains it, derived from Chunk 2, labelled in the step
    [subgraph] = [t["s"]["i"] for t in selection["explain_triples"]
                  if t["p"]["i"] == TG + "contains" and t["o"] == {"t": "r", "r": CAPITAL}]
    chunk = vocab.chunk_iri("fr", 4, 2).value
    assert of(selection, subgraph, "http://www.w3.org/ns/prov#wasDerivedFrom") == [{"t": "i", "i": chunk}]
    assert of(selection, chunk, "http://www.w3.org/2000/01/rdf-schema#label") == [{"t": "l", "v": "Chunk 2"}]
    assert of(selection, vocab.ENTITY.paris.value, "http://www.w3.org/2000/01/rdf-schema#label") == \
        [{"t": "l", "v": "Paris"}]
    motto = of(retrieval, retrieval["explain_id"], TG + "retrievedEdge")
    assert any(e["r"]["o"] == {"t": "l", "v": "Liberté, égalité, fraternité", "l": "fr"} for e in motto)


def test_the_retrieved_edges_are_in_the_store(france_store: GraphStore, counted: tuple[LiveServer, Counter]) -> None:
    live, _ = counted
    messages = stream(live.url, "application/x-ndjson")
    retrieval = NamedNode(next(m["explain_id"] for m in messages if m.get("explain_kind") == "retrieval"))
    stored = list(france_store.quads(retrieval, vocab.TG.retrievedEdge, graph=france_store.explain_graph))
    assert {vocab.RELATION.capital, vocab.RELATION.currency} <= {q.object.predicate for q in stored}


def test_tg_invoke_shows_the_selection_with_one_request(counted: tuple[LiveServer, Counter],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    live, paths = counted
    assert tg_invoke(["-u", live.url, "--explainable", "-q", QUESTION]) == 0
    out, err = capsys.readouterr()
    assert "Paris" in out
    assert "Edge: (France, capital, Paris)" in err
    assert re.search(r"Source: Chunk 2 → Page 4 → \"France\"", err), err
    assert "Chosen by: the deterministic selector\n" in err and "the model" not in err
    assert paths == Counter({"/api/graph-rag": 1})  # no /api/explain


def test_a_stream_without_the_triples_is_shown_from_the_trace(france_store: GraphStore,
                                                             counted: tuple[LiveServer, Counter]) -> None:
    """An older server sends no explain_triples: the display asks for the trace, as before."""
    live, _ = counted
    messages = [{k: v for k, v in m.items() if k != "explain_triples"} for m in stream(live.url, "text/event-stream")]
    looked_up = []
    err = io.StringIO()
    display = StreamDisplay(io.StringIO(), err, lambda iri: looked_up.append(iri) or read_trace(france_store, iri))
    display.run(messages)
    assert len(looked_up) == 1 and "Edge: (France, capital, Paris)" in err.getvalue()
