"""The source viewer and the neighbourhood over HTTP, called in-process (no browser, no socket): the highlighted
span (a chunk in its page by its recorded offsets; a fact's line in its chunk), the passage as JSON, and bad
input refused with a 4xx, never a 500."""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from html import unescape

import pytest
from in_process import InProcess, in_process
from live_server import Serving
from pyoxigraph import NamedNode, Quad, Triple

from server import vocab
from server.http.neighbourhood import STEP
from server.store import GraphStore
from server.vocab import ENTITY, RELATION

CAPITAL = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
PAGE_TEXT = "Portugal lies west of Spain.\nIts capital is Lisbon, on the Tagus.\nIt uses the euro."
CHUNK = (29, 38)  # offset, length of the second line in PAGE_TEXT


@pytest.fixture
def server(france_store: GraphStore) -> Iterator[InProcess]:
    """The France graph plus an ingested-style document whose chunk records its span in its page."""
    src = vocab.source_graph("default")
    doc, page, chunk = vocab.document_iri("pt"), vocab.page_iri("pt", 1), vocab.chunk_iri("pt", 1, 2)
    offset, length = CHUNK
    france_store.extend([*vocab.document_quads(src, doc, "Portugal"), *vocab.page_quads(src, page, "Page 1", doc),
                         *vocab.content_quads(page, PAGE_TEXT),
                         *vocab.chunk_quads(src, chunk, "Chunk 2", page, (2, offset, length)),
                         *vocab.content_quads(chunk, PAGE_TEXT[offset:offset + length])])
    app = in_process(france_store)
    yield app
    app.close()


def marked(html: str) -> str:
    [span] = re.findall(r'<mark id="span"[^>]*>(.*?)</mark>', html, re.DOTALL)
    return unescape(span)


def test_a_chunk_with_a_recorded_span_is_highlighted_in_its_page(server: InProcess) -> None:
    response = server.get(server.url + "/console/source", params={"id": vocab.chunk_iri("pt", 1, 2).value})
    assert response.status_code == 200
    offset, length = CHUNK
    assert marked(response.text) == PAGE_TEXT[offset:offset + length]
    assert "Portugal</a> › <a" in response.text and "Chunk 2</span>" in response.text


def test_a_facts_line_is_highlighted_in_its_chunk_and_sent_as_json(server: InProcess) -> None:
    chunk = vocab.chunk_iri("fr", 4, 2).value
    edge = f"<<( <{CAPITAL.subject.value}> <{CAPITAL.predicate.value}> <{CAPITAL.object.value}> )>>"
    page = server.get(server.url + "/console/source", params={"id": chunk, "edge": edge})
    assert marked(page.text) == "The capital of France is Paris."
    passage = server.get(server.url + "/console/source/passage", params={"id": chunk, "edge": edge}).json()
    assert passage["text"][slice(*passage["span"])] == "The capital of France is Paris."
    other = server.get(server.url + "/console/source/passage", params={
        "id": chunk, "edge": f"<<( <{ENTITY.spain.value}> <{RELATION.capital.value}> <{ENTITY.madrid.value}> )>>"})
    assert other.json()["span"] is None  # the passage does not name the fact


def test_a_cited_sentence_is_highlighted_inside_its_chunk_in_its_page(server: InProcess) -> None:
    """``offset`` and ``length`` (a span in the chunk's text, as a document RAG trace cites it) mark the sentence,
    the rest of its chunk marked apart, the page's text around it unchanged."""
    offset, length = CHUNK
    chunk_text = PAGE_TEXT[offset:offset + length]
    at = chunk_text.index("Lisbon")
    page = server.get(server.url + "/console/source", params={"id": vocab.chunk_iri("pt", 1, 2).value,
                                                              "offset": str(at), "length": "6"})
    assert page.status_code == 200
    assert marked(page.text) == "Lisbon"
    assert re.search(r'<mark id="span" title="the cited sentence">', page.text)
    chunk_marks = [unescape(m) for m in re.findall(r'<mark class="chunk"[^>]*>(.*?)</mark>', page.text, re.DOTALL)]
    assert chunk_marks == [chunk_text[:at], chunk_text[at + 6:]]
    shown = unescape(re.sub(r"<[^>]+>", "", re.search(r'<pre class="passage[^"]*"[^>]*>(.*?)</pre>', page.text,
                                                      re.DOTALL).group(1)))
    assert shown == PAGE_TEXT


def test_a_cited_sentence_in_a_chunk_without_its_page_is_marked_in_the_chunks_text(server: InProcess) -> None:
    chunk = vocab.chunk_iri("fr", 4, 2).value
    text = server.get(server.url + "/console/source/passage", params={"id": chunk}).json()["text"]
    page = server.get(server.url + "/console/source", params={"id": chunk, "offset": "0", "length": str(len(text))})
    assert marked(page.text) == text and '<mark class="chunk"' not in page.text


@pytest.mark.parametrize(("params", "message"), [
    ({"offset": "30", "length": "20"}, "is not inside the chunk's text (38 characters)"),
    ({"offset": "0", "length": "0"}, "is not inside the chunk's text"),
    ({"offset": "99999999999999999999", "length": "1"}, "'offset' must be a non-negative integer"),
    ({"offset": "-1", "length": "5"}, "'offset' must be a non-negative integer"),
    ({"offset": "two", "length": "5"}, "'offset' must be a non-negative integer"),
    ({"offset": "1", "length": "1.5"}, "'length' must be a non-negative integer"),
    ({"offset": "²", "length": "1"}, "'offset' must be a non-negative integer"),
    ({"offset": "1"}, "'offset' and 'length' go together"),
    ({"length": "1"}, "'offset' and 'length' go together"),
    ({"offset": "0", "length": "1", "id": vocab.page_iri("pt", 1).value}, "span in a chunk's text"),
    ({"offset": "0", "length": "1", "edge": f"<<( <{CAPITAL.subject.value}> <{CAPITAL.predicate.value}> "
                                            f"<{CAPITAL.object.value}> )>>"}, "not both"),
])
def test_a_bad_cited_span_is_a_400_that_says_why(server: InProcess, params: dict, message: str) -> None:
    response = server.get(server.url + "/console/source", params={"id": vocab.chunk_iri("pt", 1, 2).value, **params},
                          headers={"Accept": "application/json"})
    assert response.status_code == 400, response.text[:300]
    assert message in response.text


@pytest.mark.parametrize(("path", "params", "status"), [
    ("/console/source", {}, 400),
    ("/console/source", {"id": "not an iri"}, 400),
    ("/console/source", {"id": "urn:x:nothing"}, 404),
    ("/console/source", {"id": vocab.chunk_iri("fr", 4, 2).value, "edge": "<<( not a triple )>>"}, 400),
    ("/console/source", {"id": vocab.chunk_iri("fr", 4, 2).value,  # two statements smuggled in one
                         "edge": "<<( <urn:a> <urn:b> <urn:c> )>> . <urn:d> <urn:e> <urn:f>"}, 400),
    ("/console/source", {"id": vocab.chunk_iri("fr", 4, 2).value, "edge": "<urn:a> " * 2000}, 400),
    ("/console/source/passage", {"id": "urn:x:nothing"}, 404),
    ("/console/source/passage", {"id": vocab.chunk_iri("fr", 4, 2).value, "edge": '"a literal" <urn:b> <urn:c>'},
     400),
    ("/console/neighbourhood", {}, 400),
    ("/console/neighbourhood", {"iri": "not an iri"}, 400),
])
def test_bad_input_is_a_client_error(server: InProcess, path: str, params: dict, status: int) -> None:
    response = server.get(server.url + path, params=params, headers={"Accept": "text/html"})
    assert response.status_code == status, response.text[:300]


def test_the_neighbourhood_lists_iri_edges_with_labels(server: InProcess) -> None:
    body = server.get(server.url + "/console/neighbourhood", params={"iri": ENTITY.france.value}).json()
    edges = {(t["s"]["i"], t["p"]["i"], t["o"]["i"]) for t in body["triples"]
             if t["p"]["i"] not in (vocab.RDFS.label.value, vocab.RDF.type.value)}
    assert edges == {(ENTITY.france.value, RELATION.capital.value, ENTITY.paris.value),
                     (ENTITY.france.value, RELATION.currency.value, ENTITY.euro.value)}  # the motto is a literal
    labels = {t["s"]["i"]: t["o"]["v"] for t in body["triples"] if t["p"]["i"] == vocab.RDFS.label.value}
    assert labels[ENTITY.paris.value] == "Paris" and body["complete"] is True


def test_a_documents_pages_are_listed_with_their_section_names(server: InProcess) -> None:
    france = server.get(server.url + "/console/source", params={"id": vocab.document_iri("fr").value}).text
    assert re.search(r">Page 4</a> <span class=\"muted\">Government</span>", france), france
    assert "France is a country in Western Europe." in france  # a document's own text, when it has one
    portugal = server.get(server.url + "/console/source", params={"id": vocab.document_iri("pt").value}).text
    assert "text is stored by page: open one below." in portugal
    assert "No text is stored" not in portugal


def test_a_label_of_many_words_over_a_table_of_numbers_is_answered_in_time(serving: Serving,
                                                                            france_store: GraphStore) -> None:
    """The attacker's reproduction: a page of number lines and an anonymous edge whose object is 4,000 zeros
    then an X. The regular expression that found the span took the text's length times the label's words
    (minutes here, holding the GIL); on a live server, the client's timeout is a hang guard, not a measure
    (the bench has those)."""
    src, doc, page = vocab.source_graph("default"), vocab.document_iri("zeros"), vocab.page_iri("zeros", 1)
    france_store.extend([*vocab.document_quads(src, doc, "Zeros"), *vocab.page_quads(src, page, "Page 1", doc),
                         *vocab.content_quads(page, ("0 " * 50 + "\n") * 10_000)])  # 1 MB
    server = serving(france_store)
    label = " ".join(["0"] * 4_000 + ["X"])
    edge = f'<<( <http://x/s> <http://x/p> "{label}" )>>'
    for path in ("/console/source", "/console/source/passage"):
        response = server.get(server.url + path, params={"id": page.value, "edge": edge}, timeout=30)
        assert response.status_code == 200, response.text[:300]
    assert response.json()["span"] is None
    found = server.get(server.url + "/console/source/passage", timeout=30, params={
        "id": page.value, "edge": f'<<( <http://x/s> <http://x/p> "{" ".join(["0"] * 4_000)}" )>>'}).json()
    assert found["span"] == [0, 80 * 101 - 2]  # from the first line to the end of the 80th, where the label ends
    line = server.get(server.url + "/console/source/passage", timeout=30, params={
        "id": page.value, "edge": '<<( <http://x/s> <http://x/p> "0 0 0" )>>'}).json()
    assert line["span"] == [0, 99]


def test_a_hubs_neighbourhood_is_one_step_of_its_edges_in_predicate_order(france_store: GraphStore) -> None:
    """A class typed by 200 resources: the view's step of edges (``STEP``), its own outgoing ones included, sorted,
    and marked incomplete (``bench/hostile_inputs.py`` shows its cost no longer grows with the hub's edges)."""
    hub, graph = NamedNode("http://example.org/Class"), vocab.collection_graph("default")
    own = [Quad(hub, NamedNode("http://example.org/broader"), NamedNode(f"http://example.org/Super{i}"), graph)
           for i in range(3)]
    typed = [Quad(NamedNode(f"http://example.org/r{i}"), vocab.RDF.type, hub, graph) for i in range(200)]
    france_store.extend(own + typed)
    with closing(in_process(france_store)) as server:
        body = server.get(server.url + "/console/neighbourhood", params={"iri": hub.value}).json()
    edges = [(t["s"]["i"], t["p"]["i"], t["o"]["i"]) for t in body["triples"]
             if t["p"]["i"] != vocab.RDFS.label.value and t["s"]["i"] in (hub.value, *(q.subject.value for q in typed))
             and hub.value in (t["s"]["i"], t["o"]["i"])]
    held = {(q.subject.value, q.predicate.value, q.object.value) for q in own + typed}
    assert len(edges) == STEP and set(edges) <= held and body["complete"] is False
    assert edges == sorted(edges, key=lambda edge: (edge[1], edge[0], edge[2]))
    assert {(q.subject.value, q.predicate.value, q.object.value) for q in own} <= set(edges)
