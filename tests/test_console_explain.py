"""The explanation in the console, in Debian's Chromium against the real server (fixtures in console_browser):
the graph view's data on the Ask and trace pages, the answer's [n] marks, the answer on top at both sizes, the
source viewer's highlighted span, breadcrumb and previous/next chunk, and the document page's Text link."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from console_browser import (
    FIRST_NODES,
    LAYOUT,
    QUESTION,
    SIZES,
    assert_context_opens,
    assert_readable,
    graph,
    requires_chromium,
    screenshot,
)
from pyoxigraph import NamedNode

from server import vocab
from server.explain.trace import read_trace
from server.provenance import node_name
from server.sparql_templates import template_limit
from server.store import GraphStore

FRANCE = vocab.ENTITY.france.value
PARIS = vocab.ENTITY.paris.value
DERIVED_FROM = vocab.PROV.wasDerivedFrom
SELECTED = "cy => cy.edges('.selected').map(e => [e.source().data('iri'), e.target().data('iri')])"

pytestmark = requires_chromium


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_ask_draws_the_selected_edges_and_links_the_answer_to_them(page: object, console_url: str,
                                                                   sample_store: GraphStore, width: int,
                                                                   height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{console_url}/console/ask?q={quote(QUESTION)}")
    page.locator("#live[data-done]").wait_for()
    trace = read_trace(sample_store, page.get_attribute("#live", "data-session"))
    selected = [[e["s"], e["o"]] for e in trace["edges"]]
    assert [FRANCE, PARIS] in selected
    assert graph(page, "ask-graph", SELECTED) == selected  # the graph's data, in selection order
    pairs, reversed_pairs = _retrieved_pairs(sample_store, trace)
    assert FRANCE in graph(page, "ask-graph", "cy => cy.nodes('.seed').map(n => n.data('iri'))")
    graph(page, "ask-graph", "cy => void GlassGraph.expandAll('ask-graph')")  # not only the path and "+N retrieved"
    assert graph(page, "ask-graph", "cy => cy.edges().length") == pairs
    assert graph(page, "ask-graph", "cy => cy.edges('.both').length") == reversed_pairs
    # the retrieval step shows its count and seeds from the stream
    assert page.inner_text(".event-retrieval .count") == str(trace["edge_count"])
    assert page.locator(".event-retrieval .seeds a", has_text="France").count() == 1
    assert re.fullmatch(r"\d+ ms", page.inner_text(".event-retrieval .step-time"))
    # the answer is on top and in view, its mark [n] leads to edge n
    answer = page.locator("#answer-card").bounding_box()
    assert answer["y"] < page.locator("#events").bounding_box()["y"]
    assert 0 <= answer["y"] < height
    mark = page.locator("#answer a.mark").first
    number = int(mark.get_attribute("data-number"))
    assert mark.get_attribute("href") == f"#edge-{number}"
    assert page.locator(f"#edge-{number}").locator(f'a[title="{PARIS}"]').count() == 1
    mark.click()
    assert graph(page, "ask-graph", "cy => cy.edges('.active').map(e => e.target().data('iri'))") == \
        [trace["edges"][number - 1]["o"]]
    assert trace["edges"][number - 1]["reasoning"] in page.inner_text("#ask-graph-panel")
    if width == SIZES[0][0]:
        screenshot(page, "ask-graph")


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_graph_reads_from_the_seeds_to_the_answer_and_its_labels_never_overlap(
        page: object, console_url: str, sample_store: GraphStore, width: int, height: int) -> None:
    """Germany's nine neighbours: the seed in the first column, the selected edges to the right of it, the 150
    retrieved edges collapsed into one "+N retrieved" node that a click opens; every label clear of every other
    and every node inside the box, at both sizes, before and after opening it."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{console_url}/console/ask?q={quote('Which countries border Germany?')}")
    page.locator("#live[data-done]").wait_for()
    trace = read_trace(sample_store, page.get_attribute("#live", "data-session"))
    drawn = graph(page, "ask-graph", LAYOUT)
    [seed] = [n for n in drawn["nodes"] if n["seed"]]
    path = [n for n in drawn["nodes"] if n["path"] and not n["seed"]]
    assert {n["iri"] for n in path} == {e["o"] for e in trace["edges"]} - {seed["iri"]}
    assert all(n["x"] > seed["x"] for n in path)  # left to right, from the seed
    [context] = [n for n in drawn["nodes"] if n["context"]]
    assert len(drawn["nodes"]) == len(path) + 2  # the path, the seed and its collapsed context: nothing else
    assert_readable(drawn)
    if width == SIZES[0][0]:  # both sizes, then back to the first
        page.locator("#graph-card").scroll_into_view_if_needed()
        screenshot(page, "ask-germany-graph")
    assert_context_opens(page, "ask-graph", drawn, context)
    page.click("#ask-graph-all")  # the button draws every retrieved edge: those between the neighbours too
    pairs, _ = _retrieved_pairs(sample_store, trace)
    assert graph(page, "ask-graph", "cy => cy.edges().length") == pairs


def _retrieved_pairs(store: GraphStore, trace: dict) -> tuple[int, int]:
    """How many edges the graph view draws of a trace's retrieved edges (an edge and its reverse with the same
    predicate as one), and how many of those stand for both directions."""
    retrieved = [q.object for q in store.quads(NamedNode(trace["retrieval"]), vocab.TG.retrievedEdge)]
    assert len(retrieved) == trace["edge_count"]
    found = {(t.subject, t.predicate, t.object) for t in retrieved}
    pairs = {(frozenset((s, o)), p) for s, p, o in found}
    both = {(frozenset((s, o)), p) for s, p, o in found if s != o and (o, p, s) in found}
    return len(pairs), len(both)


def test_ask_draws_an_edge_and_its_reverse_once(page: object, console_url: str, sample_store: GraphStore) -> None:
    page.goto(f"{console_url}/console/ask?q={quote('Which countries border Germany?')}")
    page.locator("#live[data-done]").wait_for()
    trace = read_trace(sample_store, page.get_attribute("#live", "data-session"))
    pairs, reversed_pairs = _retrieved_pairs(sample_store, trace)
    assert reversed_pairs > 0  # borders are stated both ways
    graph(page, "ask-graph", "cy => void GlassGraph.expandAll('ask-graph')")
    assert graph(page, "ask-graph", "cy => cy.edges().length") == pairs < trace["edge_count"]
    assert graph(page, "ask-graph", "cy => cy.edges('.both').length") == reversed_pairs
    # each selected edge lists its own source chains, no other edge's (edges with different chains here)
    shown = page.eval_on_selector_all("#events li.edge", "items => items.map(item => Array.from("
                                      "item.querySelectorAll('ul.sources > li .chain-node.chain-chunk'), "
                                      "a => new URL(a.href).searchParams.get('id')))")
    recorded = [sorted(chain[0]["iri"] for chain in edge["sources"]) for edge in trace["edges"]]
    assert len({tuple(chunks) for chunks in recorded}) > 1
    assert [sorted(chunks) for chunks in shown] == recorded


def test_trace_graph_shows_an_edges_reason_and_passage_and_opens_nodes(page: object, console_url: str,
                                                                       session_iri: str,
                                                                       sample_store: GraphStore) -> None:
    trace = read_trace(sample_store, session_iri)
    page.goto(f"{console_url}/console/trace?id={quote(session_iri)}")
    page.locator("#trace-graph canvas").first.wait_for()
    assert graph(page, "trace-graph", SELECTED) == [[e["s"], e["o"]] for e in trace["edges"]]
    capital = next(i for i, e in enumerate(trace["edges"]) if e["o"] == PARIS)
    graph(page, "trace-graph", f"cy => void cy.edges('.selected')[{capital}].emit('tap')")
    panel = page.locator("#trace-graph-panel")
    panel.locator("blockquote mark").wait_for()
    assert trace["edges"][capital]["reasoning"] in panel.inner_text()
    chunk = trace["edges"][capital]["sources"][0][0]
    text = sample_store.librarian_text(NamedNode(chunk["iri"]))
    assert panel.inner_text().count(text.strip().splitlines()[0]) >= 1
    assert panel.locator("blockquote mark").inner_text() == _field_of(text, "Paris")
    screenshot(page, "trace-graph")
    graph(page, "trace-graph", f"cy => void cy.nodes().filter(n => n.data('iri') === {PARIS!r})[0].emit('tap')")
    page.wait_for_url(re.compile(r"/resource\?iri="))
    assert parse_qs(urlsplit(page.url).query)["iri"] == [PARIS]


def _field_of(text: str, word: str) -> str:
    """The line of a sample chunk (one Factbook field per line) that names ``word``."""
    return next(line.strip() for line in text.splitlines() if re.search(rf"\b{word}\b", line))


def test_source_viewer_highlights_the_facts_span_and_walks_the_chunks(page: object, console_url: str,
                                                                      session_iri: str,
                                                                      sample_store: GraphStore) -> None:
    trace = read_trace(sample_store, session_iri)
    edge = next(e for e in trace["edges"] if e["o"] == PARIS)
    chain = edge["sources"][0]
    page.goto(f"{console_url}/console/trace?id={quote(session_iri)}")
    page.locator(f"#edge-{trace['edges'].index(edge) + 1} .chain-chunk a").first.click()
    page.wait_for_url(re.compile(r"/console/source\?id="))
    text = sample_store.librarian_text(NamedNode(chain[0]["iri"]))
    assert page.inner_text("#source-text") == text
    assert page.inner_text("mark#span") == _field_of(text, "Paris")
    assert page.inner_text("nav.crumbs") == " › ".join(node_name(node) for node in reversed(chain))
    screenshot(page, "source")
    following = page.locator("#next-chunk")
    following.click()
    page.wait_for_url(re.compile(r"/console/source\?id="))
    moved_to = parse_qs(urlsplit(page.url).query)["id"][0]
    assert moved_to != chain[0]["iri"]
    assert next(sample_store.quads(NamedNode(moved_to), DERIVED_FROM, NamedNode(chain[1]["iri"])),
                None) is not None  # a chunk of the same page
    assert page.inner_text("#source-text") == sample_store.librarian_text(NamedNode(moved_to))
    page.locator("#previous-chunk").click()
    page.wait_for_url(re.compile(r"/console/source\?id="))
    assert parse_qs(urlsplit(page.url).query)["id"] == [chain[0]["iri"]]


def test_a_document_page_reads_as_a_document_and_its_text_link_works(page: object, console_url: str,
                                                                     sample_store: GraphStore) -> None:
    document = vocab.document_iri("fr").value
    page.goto(f"{console_url}/resource?iri={quote(document)}")
    assert page.inner_text("p.crumbs") == "Document"
    assert page.locator("h1.source-document").count() == 1
    page.click("a:text-is('Text')")
    page.wait_for_url(re.compile(r"/console/source\?id="))
    assert sample_store.librarian_text(NamedNode(document)) is None  # the sample's text is in its pages
    assert page.locator("h1.source-document").count() == 1
    derived = {q.subject.value for q in sample_store.quads(predicate=DERIVED_FROM, obj=NamedNode(document))}
    pages = page.locator(".source-children a")
    assert pages.count() == len(derived) >= 1
    pages.first.click()
    page.wait_for_url(re.compile(r"/console/source\?id="))
    assert page.inner_text("nav.crumbs").startswith(page.locator("nav.crumbs a").first.inner_text() + " › ")


def _neighbourhood(store: GraphStore, iri: str) -> set[str]:
    """The graph view's edge ids of every edge between ``iri`` and another IRI in any graph but labels."""
    node = NamedNode(iri)
    quads = [*store.quads(subject=node), *store.quads(obj=node)]
    return {f"e:{q.subject.value} {q.predicate.value} {q.object.value}" for q in quads
            if isinstance(q.subject, NamedNode) and isinstance(q.object, NamedNode)
            and q.predicate != vocab.RDFS.label and not (q.subject == q.object == node)}


def test_resource_neighbourhood_draws_its_edges_and_expands_a_node(page: object, console_url: str,
                                                                   sample_store: GraphStore) -> None:
    step = template_limit("console_neighbourhood")
    page.goto(f"{console_url}/resource?iri={quote(PARIS)}")
    page.locator("#neighbourhood[data-expanded='1']").wait_for()
    around_paris = _neighbourhood(sample_store, PARIS)
    drawn = set(graph(page, "neighbourhood", "cy => cy.edges().map(e => e.id())"))
    assert drawn <= around_paris and len(drawn) == min(len(around_paris), step)
    before = graph(page, "neighbourhood", LAYOUT)
    [paris] = [n for n in before["nodes"] if n["seed"]]
    assert paris["iri"] == PARIS and all(n["x"] > paris["x"] for n in before["nodes"] if n is not paris)
    assert_readable(before)
    other = graph(page, "neighbourhood", f"cy => cy.nodes().filter(n => n.data('iri') !== {PARIS!r})"
                                         ".sort((a, b) => b.degree() - a.degree())[0].data('iri')")
    graph(page, "neighbourhood", f"cy => void cy.getElementById('n:' + {other!r}).emit('tap')")
    page.locator("#neighbourhood[data-expanded='2']").wait_for()
    expanded = set(graph(page, "neighbourhood", "cy => cy.edges().map(e => e.id())"))
    around_other = _neighbourhood(sample_store, other)
    assert drawn < expanded and expanded - drawn <= around_other  # what was added is the node's
    assert len(expanded & around_other) >= min(len(around_other), step)  # a full step of it (some drawn before)
    assert page.locator("#neighbourhood-panel a").get_attribute("href") == f"/resource?iri={quote(other, safe='')}"
    after = graph(page, "neighbourhood", LAYOUT)
    x = {n["iri"]: n["x"] for n in after["nodes"]}
    new_nodes = set(x) - {n["iri"] for n in before["nodes"]}
    assert new_nodes and all(x[iri] > x[other] for iri in new_nodes)  # in the column after the node opened
    assert_readable(after)
    screenshot(page, "resource-neighbourhood")


MANY_SEEDS = """() => {
  const iri = (name) => ({t: "i", i: `https://example.org/${name}`});
  const seeds = Array.from({length: 60}, (_, i) => `seed${i}`);
  const answer = {s: iri("seed37"), p: iri("capital"), o: iri("answer")};
  const view = {seeds: seeds.map((s) => iri(s).i), name: (term) => term.i.split("/").pop(),
    retrieved: [answer, ...seeds.map((s) => ({s: iri(s), p: iri("near"), o: iri(`${s}-other`)}))],
    selected: [{edge: answer, number: 1, reasoning: "names the capital", sources: []}]};
  const box = document.createElement("div");
  box.id = "many-seeds";
  box.style.cssText = "width: 600px; height: 400px";
  document.body.append(box);
  GlassGraph.draw(box, view, null);
}"""


def test_a_question_with_many_seeds_draws_its_path_and_counts_the_other_seeds(page: object, console_url: str) -> None:
    """Sixty seeds, one selected edge at the 38th: the first drawing holds FIRST_NODES nodes, the answer's path
    first (its seed whatever its place), then the other seeds in order with their "+N retrieved", and one "+K
    seeds" node, beside the seeds, for the rest; a click on that node draws every retrieved edge."""
    page.goto(f"{console_url}/console/ask")
    page.evaluate(MANY_SEEDS)
    drawn = graph(page, "many-seeds", LAYOUT)
    labels = graph(page, "many-seeds", "cy => cy.nodes().map(n => n.data('label'))")
    assert len(drawn["nodes"]) == FIRST_NODES
    seeds = [label for label in labels if label.startswith("seed") and not label.endswith("-other")]
    assert seeds == ["seed37", *(f"seed{i}" for i in range(18))]  # the path's seed, then the first in order
    assert "answer" in labels and "+41 seeds" in labels
    x = dict(zip(labels, (n["x"] for n in drawn["nodes"]), strict=True))
    assert x["+41 seeds"] < x["answer"] and x["seed0"] < x["answer"]  # among the seeds, left of the answer
    assert_readable(drawn)
    graph(page, "many-seeds", "cy => void cy.nodes().filter(n => n.data('label').endsWith(' seeds')).emit('tap')")
    assert graph(page, "many-seeds", "cy => cy.edges().length") == 61
    assert not graph(page, "many-seeds", "cy => cy.nodes('.context').length")
