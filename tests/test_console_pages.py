"""The console's former dead ends in a real Chromium against the real server (fixtures in console_browser):
the home page (its collection link, the dataset named, a question box, a sample query), error pages in
the site's layout for browsers (API clients keep JSON or text), and resource pages whose edges are
grouped by predicate and collapse."""
from __future__ import annotations

import re

import requests
from console_browser import requires_chromium, screenshot
from pyoxigraph import NamedNode

from server import vocab
from server.store import GraphStore

pytestmark = requires_chromium

FRANCE = vocab.ENTITY.france.value
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_home_names_the_dataset_and_its_collection_link_answers(page: object, console_url: str,
                                                                sample_store: GraphStore) -> None:
    page.goto(console_url + "/")
    documents = sum(1 for _ in sample_store.quads(predicate=vocab.RDF.type, obj=vocab.TG.Document,
                                                  graph=vocab.source_graph("default")))
    row = page.locator("table.data tbody tr", has_text="default")
    assert "CIA World Factbook 2015" in row.inner_text()
    assert f"{documents:,} documents" in row.inner_text()
    link = row.locator("a.collection-link")
    response = requests.get(console_url + link.get_attribute("href"), headers={"Accept": BROWSER_ACCEPT}, timeout=30)
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/html")
    link.click()
    page.wait_for_url(re.compile(r"/\.well-known/void#collection-default$"))
    assert page.locator("#collection-default h2").inner_text() == "Collection default: knowledge graph"


def test_home_asks_a_typed_question(page: object, console_url: str) -> None:
    page.goto(console_url + "/")
    page.fill("#home-question", "Which countries border Germany?")
    page.press("#home-question", "Enter")
    page.wait_for_url(re.compile(r"/console/ask\?q=Which"))
    assert page.input_value("#question") == "Which countries border Germany?"


def test_home_sample_query_runs_in_the_console(page: object, console_url: str) -> None:
    page.goto(console_url + "/")
    sample = page.inner_text("pre.sample-query")
    page.click("#sample-query")
    page.wait_for_url(re.compile(r"/console/sparql\?query="))
    page.locator("#results tbody tr").first.wait_for()
    assert page.input_value("#query").endswith(sample)
    countries = page.locator("#results tbody tr td:first-child").all_inner_texts()
    assert "e:norway" in countries and all(c.startswith("e:") for c in countries)


def test_error_pages_have_the_layout_for_browsers_only(page: object, console_url: str) -> None:
    response = page.goto(console_url + "/resource?iri=not%20an%20iri")
    assert response.status == 400 and response.headers["content-type"].startswith("text/html")
    assert page.locator("header.site nav a").count() >= 3 and page.locator("footer.site").count() == 1
    assert page.inner_text("h1") == "Bad Request"
    assert page.inner_text(".error").startswith("'iri' is not an IRI")
    screenshot(page, "error")
    response = page.goto(console_url + "/no/such/page")
    assert response.status == 404 and page.inner_text("h1") == "Not Found"
    # clients that do not prefer HTML keep their JSON or text, and the API stays JSON
    text = requests.get(console_url + "/no/such/page", timeout=30)
    assert text.status_code == 404 and text.headers["Content-Type"].startswith("text/plain")
    json_error = requests.get(console_url + "/no/such/page", headers={"Accept": "application/json"}, timeout=30)
    assert json_error.json()["error"]["type"] == "not-found"
    api = requests.get(console_url + "/api/explain", headers={"Accept": BROWSER_ACCEPT}, timeout=30)
    assert api.status_code == 400 and api.headers["Content-Type"].startswith("application/json")


def test_error_page_shows_the_message_as_text(console_url: str) -> None:
    """The message may hold what the client sent: it is escaped, never markup."""
    response = requests.get(console_url + "/console/trace?id=%3Cscript%3Ealert(1)%3C/script%3E",
                            headers={"Accept": BROWSER_ACCEPT}, timeout=30)
    assert response.status_code == 404
    assert "<script>alert(1)" not in response.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


def test_resource_edges_are_grouped_by_predicate_and_collapse(page: object, console_url: str,
                                                              sample_store: GraphStore) -> None:
    outgoing = [q for q in sample_store.quads(subject=NamedNode(FRANCE))]
    predicates = {(q.graph_name, q.predicate) for q in outgoing}
    page.goto(f"{console_url}/resource?iri={FRANCE}")
    groups = page.locator("#outgoing details.predicate-group")
    assert groups.count() == len(predicates)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 8000, f"the France page is {height} px long"  # 16,900 px with every edge listed
    index = page.evaluate("[...document.querySelectorAll('#outgoing details.predicate-group')].findIndex(d => !d.open)")
    closed = groups.nth(index)
    rows = closed.locator("tbody tr")
    assert rows.count() > 3 and not rows.first.is_visible()
    closed.locator("summary").click()
    assert rows.first.is_visible()
    page.click("#collapse-all")
    assert page.locator("details.predicate-group[open]").count() == 0
    screenshot(page, "resource-groups")
    page.click("#expand-all")
    assert page.locator("details.predicate-group:not([open])").count() == 0
