"""The web console in a real headless Chromium against the real server on 127.0.0.1 (fixtures in
console_browser). Every page is saved as a screenshot at 1280x800 and 390x844 under
``test-output/screenshots/``."""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from console_browser import QUESTION, follow, refusals, requires_chromium, run_query, screenshot, set_query, wait_idle
from pyoxigraph import NamedNode

from server import vocab
from server.store import GraphStore

FRANCE = vocab.ENTITY.france.value
PARIS = vocab.ENTITY.paris.value
CAPITALS = """SELECT ?country ?capital WHERE {
  GRAPH ?g { ?country r:capital ?capital ; rdfs:label ?name }
  FILTER(STRSTARTS(?name, "F"))
}
ORDER BY ?country"""
CAPITALS_PREFIXES = "PREFIX r: <https://trustgraph.ai/r/>\nPREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"

pytestmark = requires_chromium


def test_home_lists_collections_and_example_questions(page: object, console_url: str,
                                                      sample_store: GraphStore) -> None:
    page.goto(console_url + "/")
    default = next(c for c in sample_store.collections() if c["collection"] == "default")
    row = page.locator("table.data tbody tr", has_text="default")
    assert "{:,}".format(default["triples"]) in row.inner_text()
    assert page.locator("ul.questions a", has_text=QUESTION).count() == 1
    screenshot(page, "home")


def test_sparql_query_shows_rows_and_keeps_history(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    assert "PREFIX e: <https://trustgraph.ai/e/>" in page.input_value("#query")
    run_query(page, CAPITALS_PREFIXES + CAPITALS)
    rows = page.locator("#results table tbody tr")
    rows.first.wait_for()
    france = rows.filter(has=page.locator(f'a[title="{FRANCE}"]'))
    assert france.count() == 1
    assert france.locator(f'a[title="{PARIS}"]').inner_text() == "e:paris"
    count = rows.count()
    assert page.locator("#result-title").inner_text() == f"{count} {'row' if count == 1 else 'rows'}"
    assert [a.inner_text() for a in page.locator("#downloads a").all()] == ["JSON", "XML", "CSV", "TSV"]
    history = json.loads(page.evaluate("localStorage.getItem('glassgraph.sparql.history')"))
    assert history[0]["query"].endswith(CAPITALS)
    assert "query=" in page.url  # the address is the shareable link of what ran
    screenshot(page, "sparql")
    set_query(page, "")
    assert page.input_value("#query") == ""
    page.click("#history-box summary")
    page.click("#history li:first-child button")
    assert page.input_value("#query") == CAPITALS_PREFIXES + CAPITALS


def test_sparql_construct_shows_a_table_of_triples_and_the_raw_text(page: object, console_url: str,
                                                                    sample_store: GraphStore) -> None:
    """One row per triple (subject, predicate, object), counted as triples, triple terms shown as the SELECT
    table shows them; the raw tab holds the N-Triples."""
    contains = "<https://trustgraph.ai/ns/contains>"
    query = (f"CONSTRUCT {{ <{FRANCE}> ?p ?o . ?sg {contains} ?fact }} WHERE {{ {{ GRAPH ?g {{ <{FRANCE}> ?p ?o }} }}"
             f" UNION {{ GRAPH ?h {{ ?sg {contains} ?fact }}"
             f" FILTER(isTRIPLE(?fact) && SUBJECT(?fact) = <{FRANCE}>) }} }}")
    expected = len(list(sample_store.raw.query(query)))
    page.goto(console_url + "/console/sparql")
    run_query(page, query)
    rows = page.locator("#results table tbody tr")
    rows.first.wait_for()
    assert page.locator("#result-title").inner_text() == f"{expected:,} triples"
    assert [h.inner_text().split()[0] for h in page.locator("#results table thead th").all()] == [
        "?subject", "?predicate", "?object"]
    assert rows.filter(has=page.locator(f'a[title="{PARIS}"]')).count() >= 1
    page.fill("#filter", "contains")  # the subgraphs' rows: their objects are triple terms
    assert rows.first.locator(".triple").count() == 1
    page.click("#tab-raw")
    assert len(page.inner_text("#raw-view").strip().splitlines()) == expected
    assert [a.inner_text() for a in page.locator("#downloads a").all()] == ["Turtle", "N-Triples", "N-Quads",
                                                                          "RDF/XML"]


def test_the_console_reads_n_triples_as_the_server_writes_them(page: object, console_url: str) -> None:
    """Escapes, languages, datatypes, blank nodes and nested triple terms, each a term of SPARQL's JSON results."""
    text = ('<http://e/a> <http://e/p> "tab\\there \\"q\\" \\u00e9\\U0001F600"@fr-BE .\n'
            '_:b0 <http://e/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
            '<http://e/s> <http://e/q> <<( <http://e/a> <http://e/p> <<( _:b0 <http://e/p> "x" )>> )>> .\n')
    page.goto(console_url + "/console/sparql")
    rows = page.evaluate("(text) => GlassNTriples.parse(text).results.bindings", text)
    assert rows[0]["object"] == {"type": "literal", "value": 'tab\there "q" é😀', "xml:lang": "fr-BE"}
    assert rows[1]["subject"] == {"type": "bnode", "value": "b0"}
    assert rows[1]["object"]["datatype"] == "http://www.w3.org/2001/XMLSchema#integer"
    inner = rows[2]["object"]["value"]["object"]
    assert inner["type"] == "triple" and inner["value"]["object"] == {"type": "literal", "value": "x"}
    assert page.evaluate("() => { try { GlassNTriples.parse('<http://e/a> <http://e/p> .'); return 'read'; }"
                         " catch (error) { return error.message; } }").startswith("not N-Triples at character")


def test_sparql_shared_link_prefills_and_runs(page: object, console_url: str) -> None:
    query = f"ASK {{ GRAPH ?g {{ <{FRANCE}> ?p <{PARIS}> }} }}"
    page.goto(f"{console_url}/console/sparql?query={quote(query)}")
    assert page.input_value("#query") == query
    page.locator("#results .boolean", has_text="true").wait_for()


def test_sparql_download_uses_the_chosen_format(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    run_query(page, CAPITALS_PREFIXES + CAPITALS)
    page.locator("#results table").wait_for()
    with page.expect_download() as info:
        page.click("#downloads a:text('CSV')")
    text = Path(info.value.path()).read_text(encoding="utf-8")
    assert text.splitlines()[0].strip() == "country,capital"
    assert f"{FRANCE},{PARIS}" in text


def test_sparql_triple_terms_show_as_linked_triples(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    run_query(page, "PREFIX tg: <https://trustgraph.ai/ns/>\nSELECT ?sg ?fact WHERE "
                    "{ GRAPH ?g { ?sg tg:contains ?fact } } LIMIT 5")
    triple = page.locator("#results .triple").first
    triple.wait_for()
    assert triple.inner_text().startswith("<<(") and triple.inner_text().endswith(")>>")
    assert triple.locator("a.iri").count() >= 2  # subject and predicate at least link to their pages


def test_sparql_error_shows_message_and_position(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    run_query(page, "SELECT * WHERE {\n  ?s ?p\n}")
    error = page.locator("#error")
    error.wait_for()
    message = page.inner_text("#error .error-message")
    assert message.startswith("malformed query")
    line, column = re.search(r"line (\d+), column (\d+)", message).groups()  # the parser's own position
    position = page.inner_text("#error .error-position")
    assert position.startswith(f"line {line}, column {column}:\n"), position
    assert position.splitlines()[1] == "SELECT * WHERE {\n  ?s ?p\n}".splitlines()[int(line) - 1]
    screenshot(page, "sparql-error")


def test_ask_streams_selection_with_paris_edge_then_answer(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/ask")
    # Record the order in which the selection event and the first answer text reach the page.
    page.evaluate("""() => {
      window.seen = [];
      const note = (what) => { if (!seen.includes(what)) seen.push(what); };
      new MutationObserver((records) => {
        for (const record of records) {  // in DOM order, even when several land in one batch
          for (const node of record.addedNodes) {
            if (node.classList && node.classList.contains('event-selection')) note('selection');
          }
          const target = record.target.nodeType === 1 ? record.target : record.target.parentElement;
          if (target.closest('#answer') && target.closest('#answer').textContent) note('answer');
        }
      }).observe(document.getElementById('live'), {subtree: true, childList: true, characterData: true});
    }""")
    page.fill("#question", QUESTION)
    page.click("#ask-button")
    selection = page.locator(".event-selection.loaded")
    selection.wait_for()
    edge = selection.locator("li.edge", has=page.locator(f'a[title="{PARIS}"]'))
    assert edge.count() >= 1
    assert edge.first.locator(f'a[title="{FRANCE}"]').count() == 1
    assert edge.first.locator(".reasoning").inner_text().strip()
    page.locator("#trace-link:not([hidden])").wait_for()
    assert "Paris" in page.inner_text("#answer")
    assert page.evaluate("window.seen") == ["selection", "answer"]
    kinds = page.eval_on_selector_all("#events > li", "items => items.map(i => i.className.split(' ')[1])")
    assert kinds == ["event-session", "event-retrieval", "event-selection", "event-answer"]
    assert page.locator(".event-retrieval .count").inner_text().isdigit()
    screenshot(page, "ask")
    follow(page, "#trace-link a", re.compile(r"/console/trace\?id="))
    assert page.inner_text("h1") == QUESTION


def test_ask_shows_a_no_answer_outcome_and_its_trace(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/ask?q=" + quote("Zqxv wkpj ghrt?"))  # a shared link asks at once
    page.locator("#answer.no-answer").wait_for()
    assert page.inner_text("#answer") == "The knowledge graph does not answer this question."
    page.locator(".event-answer.loaded .badge-no-answer").wait_for()
    page.locator("#live[data-done]").wait_for()
    assert page.inner_text("#answer-status") == "no-answer"  # not "answered"
    assert page.locator("#ask-error").is_hidden()
    page.locator("#trace-link:not([hidden])").wait_for()
    follow(page, "#trace-link a", re.compile(r"/console/trace\?id="))
    assert page.inner_text(".badge") == "no-answer"


def test_back_to_an_answer_shows_its_trace_instead_of_asking_again(page: object, console_url: str) -> None:
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if request.url.endswith("/api/graph-rag") else None)
    page.goto(console_url + "/console/ask?q=" + quote(QUESTION))  # a shared link asks at once
    page.locator("#live[data-done]").wait_for()
    assert "session=" in page.url and len(asked) == 1
    follow(page, "#trace-link a", re.compile(r"/console/trace\?id="))
    page.go_back()
    page.wait_for_url(re.compile(r"/console/ask\?q="))
    wait_idle(page)
    page.locator("#asked-before:not([hidden])").wait_for()
    assert len(asked) == 1  # not asked again: no second session recorded
    assert page.input_value("#question") == QUESTION
    follow(page, "#asked-before a", re.compile(r"/console/trace\?id="))
    assert page.inner_text("h1") == QUESTION


def test_trace_source_link_opens_the_chunk_in_the_source_viewer(page: object, console_url: str, session_iri: str,
                                            sample_store: GraphStore) -> None:
    page.goto(f"{console_url}/console/trace?id={quote(session_iri)}")
    assert page.inner_text("h1") == QUESTION
    assert page.locator("dl.facts", has_text="offline").count() == 1
    edge = page.locator("li.edge", has=page.locator(f'a[title="{PARIS}"]')).first
    assert edge.locator(".reasoning").inner_text().strip()
    chunk_link = edge.locator(".chain-chunk a").first
    chunk_iri = chunk_link.get_attribute("title").split(": ", 1)[1]
    expected = next(sample_store.raw.quads_for_pattern(NamedNode(chunk_iri), vocab.TG.content, None,
                                                       vocab.LIBRARIAN_GRAPH)).object.value
    with page.expect_download() as info:
        page.click("a:text('Turtle')")
    turtle = Path(info.value.path()).read_text(encoding="utf-8")
    assert f"<{session_iri}>" in turtle and QUESTION in turtle and vocab.TG.selectedEdge.value in turtle
    screenshot(page, "trace")
    wait_idle(page)
    chunk_link.click()
    page.wait_for_url(re.compile(r"/console/source\?id="))
    wait_idle(page)
    assert page.inner_text("#source-text").strip() == expected.strip()


def test_trace_page_shows_data_without_javascript(browser: object, console_url: str, session_iri: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{console_url}/console/trace?id={quote(session_iri)}")
        assert page.locator("li.edge", has=page.locator(f'a[title="{PARIS}"]')).count() >= 1
        assert "Paris" in page.inner_text(".answer")
    finally:
        context.close()


def test_the_policy_is_enforced_and_refuses_inline_script(browser: object, console_url: str) -> None:
    """The console runs under its CSP (every other test fails on a refusal); an injected inline
    script or style is refused, and the refusal is what those tests would see."""
    context = browser.new_context()
    try:
        tab = context.new_page()
        refused = refusals(tab)
        response = tab.goto(console_url + "/console/ask")
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"
        tab.evaluate("""() => {
            const script = document.createElement("script");
            script.textContent = "document.body.dataset.injected = 'ran'";
            document.body.append(script);
            const style = document.createElement("style");
            style.textContent = "body { display: none }";
            document.head.append(style);
        }""")
        assert tab.evaluate("document.body.dataset.injected") is None
        assert tab.is_visible("#ask-button")
        for _ in range(100):  # console events arrive while Playwright waits (bounded)
            if len(refused) >= 2:
                break
            tab.wait_for_timeout(50)
        assert any("inline script" in text for text in refused), refused
        assert any("inline style" in text for text in refused), refused
    finally:
        context.close()


def test_sessions_list_newest_first(page: object, console_url: str) -> None:
    asked = []
    for question in ("What is the capital of Japan?", "What is the capital of Germany?"):
        response = requests.post(f"{console_url}/api/graph-rag", json={"query": question, "streaming": False},
                                 timeout=60)
        asked.append(response.json()["session"])
    page.goto(console_url + "/console/sessions")
    links = [a.get_attribute("href") for a in page.locator("a.session-question").all()]
    assert links[:2] == [f"/console/trace?id={quote(iri, safe=':')}" for iri in reversed(asked)]
    assert page.inner_text("a.session-question >> nth=0") == "What is the capital of Germany?"
    screenshot(page, "sessions")


def test_sessions_pages(page: object, console_url: str, sample_store: GraphStore) -> None:
    from server.explain.recorder import ExplainRecorder
    from server.explain.trace import list_sessions
    from server.stages import SessionStarted

    for number in range(21):  # more than one page, whatever other tests asked
        ExplainRecorder(sample_store).record(SessionStarted(f"Paging question {number}?", "offline", "default"))
    expected = [f"/console/trace?id={quote(s['session'], safe=':')}" for s in list_sessions(sample_store, 40)]
    page.goto(console_url + "/console/sessions")
    first = [a.get_attribute("href") for a in page.locator("a.session-question").all()]
    assert first == expected[:20]
    follow(page, "a[rel=next]", re.compile(r"page=2"))
    second = [a.get_attribute("href") for a in page.locator("a.session-question").all()]
    assert second == expected[20:40]
    assert page.locator("a[rel=prev]").count() == 1


def test_resource_page_from_result_link(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    run_query(page, CAPITALS_PREFIXES + CAPITALS)
    follow(page, f'#results a[title="{FRANCE}"]', re.compile(r"/resource\?iri="))
    assert page.inner_text("h1") == "France"
    capital = page.locator("#outgoing tr", has=page.locator(f'a[title="{PARIS}"]'))
    assert capital.count() >= 1
    assert capital.first.locator(".stated .chain-chunk").count() >= 1  # the chunk that states the fact
    assert capital.first.locator(".stated a.iri").first.get_attribute("title").startswith("urn:trustgraph:subgraph:")
    with page.expect_download() as info:
        page.click("a:text('N-Quads')")
    nquads = Path(info.value.path()).read_text(encoding="utf-8")
    graph = vocab.collection_graph("default").value
    assert f"<{FRANCE}> <{vocab.RELATION.capital.value}> <{PARIS}> <{graph}> ." in nquads
    screenshot(page, "resource")
    follow(page, f'a[title="{PARIS}"]', re.compile(r"/resource\?iri=.*paris"))
    assert page.locator("#incoming").locator(f'a[title="{FRANCE}"]').count() >= 1


@pytest.mark.parametrize(("path", "status"), [
    ("/console/trace", 400),
    ("/console/trace?id=urn:trustgraph:session:no-such-session", 404),
    ("/console/trace?id=not%20an%20iri", 404),
    ("/console/sessions?page=0", 400),
    ("/console/sessions?page=%C2%B2", 400),  # a digit to str.isdigit, not to int
    ("/console/sessions?page=99999999999999999999999", 400),
    ("/resource?iri=not%20an%20iri", 400),
])
def test_bad_parameters_are_client_errors(console_url: str, path: str, status: int) -> None:
    response = requests.get(console_url + path, headers={"Accept": "text/html"}, timeout=30)
    assert response.status_code == status, response.text


def test_the_endpoint_link_opens_the_service_page_not_a_download(page: object, console_url: str) -> None:
    """The footer's "SPARQL endpoint" link: the service description as a page, the console a click away,
    and the VoID description linked from it as a page too."""
    page.goto(console_url + "/")
    follow(page, "footer a:text('SPARQL endpoint')", console_url + "/sparql")
    assert page.inner_text("h1") == "SPARQL endpoint"
    assert page.locator(f'td a[title="{vocab.collection_graph("default").value}"]').count() == 1
    screenshot(page, "service")
    follow(page, "a:text('VoID')", re.compile(r"/\.well-known/void$"))
    assert page.locator("#collection-default h2").inner_text() == "Collection default: knowledge graph"
    screenshot(page, "void")
    page.go_back()
    follow(page, "a:text('Open the SPARQL console')", console_url + "/console/sparql")
