"""Linked data over a real server on 127.0.0.1, tried with real clients (requests, rdflib parsing and
dereferencing what the server answers): resources and traces as HTML or RDF with Vary and Link
headers and ``?format=``, the service description as a page for browsers and RDF for machines, and
the VoID description at ``/.well-known/void``."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
import requests
from conftest import add_france, own_store
from in_process import Calling
from live_server import LiveServer, serve
from pyoxigraph import Literal as OxLiteral
from pyoxigraph import NamedNode, Quad, RdfFormat, Triple
from pyoxigraph import parse as oxigraph_parse
from rdflib import Dataset, Graph, Literal, Namespace, URIRef
from rdflib.namespace import RDF

from server import vocab
from server.dialects import ENGINE_GRAPHS
from server.store import GraphStore

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
TOKEN = "s3cret"
VOID = Namespace("http://rdfs.org/ns/void#")
SD = Namespace("http://www.w3.org/ns/sparql-service-description#")
FRANCE = vocab.ENTITY.france.value
CAPITAL = vocab.RELATION.capital.value
SUBGRAPH = vocab.subgraph_iri("fr", 4, 2).value  # holds triple terms: no JSON-LD
BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:rdflib")  # rdflib's own, inside its parsers
RDF_FORMATS = {"text/turtle": "turtle", "application/trig": "trig", "application/n-triples": "nt",
               "application/n-quads": "nquads", "application/ld+json": "json-ld", "application/rdf+xml": "xml"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, store_backend: str) -> Iterator[LiveServer]:
    """The France graph with its provenance, and one GraphRAG trace asked over HTTP."""
    with own_store(tmp_path_factory, store_backend, "linked") as store:
        live = serve(add_france(store), token=TOKEN, cors_origins=("https://else.example",))
        answered = requests.post(live.url + "/api/graph-rag", json={"query": "What is the capital of France?"})
        assert answered.status_code == 200 and answered.json()["session"], answered.text
        live.session = answered.json()["session"]
        yield live
        live.close()


def parse(response: requests.Response) -> Dataset:
    """What the server answered, parsed by rdflib in the format its Content-Type names."""
    assert response.status_code == 200, response.text
    dataset = Dataset(default_union=True)
    dataset.parse(data=response.content, format=RDF_FORMATS[response.headers["Content-Type"].split(";")[0]])
    return dataset


def alternates(response: requests.Response) -> dict[str, str]:
    """The Link header's alternates: media type -> absolute URL."""
    links = requests.utils.parse_header_links(response.headers["Link"])
    assert all(link["rel"] == "alternate" for link in links)
    return {link["type"]: urljoin(response.url, link["url"]) for link in links}


# --- /resource ----------------------------------------------------------------------------------

@pytest.mark.parametrize("accept", [None, "*/*", BROWSER, "text/html"])
def test_a_resource_is_html_unless_rdf_is_asked_for(server: LiveServer, accept: str | None) -> None:
    response = requests.get(server.url + "/resource", params={"iri": FRANCE},
                            headers={"Accept": accept} if accept else {})
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/html")
    assert "Accept" in response.headers["Vary"] and "France" in response.text


@pytest.mark.parametrize("accept", ["text/turtle", "application/trig", "application/n-triples",
                                    "application/ld+json", "application/rdf+xml", "text/turtle, text/html;q=0.9"])
def test_a_resource_is_rdf_when_asked(server: LiveServer, accept: str) -> None:
    response = requests.get(server.url + "/resource", params={"iri": FRANCE}, headers={"Accept": accept})
    assert response.headers["Content-Type"].split(";")[0] == accept.split(",")[0]
    assert "Accept" in response.headers["Vary"]
    facts = set(parse(response).triples((URIRef(FRANCE), URIRef(CAPITAL), None)))
    assert facts == {(URIRef(FRANCE), URIRef(CAPITAL), URIRef(vocab.ENTITY.paris.value))}


def test_every_alternate_in_the_link_header_answers_its_type(server: LiveServer) -> None:
    page = requests.get(server.url + "/resource", params={"iri": FRANCE}, headers={"Origin": "https://else.example"})
    assert "Link" in page.headers["Access-Control-Expose-Headers"]  # a page on another site may follow them
    offered = alternates(page)
    assert set(offered) == {"text/html", *RDF_FORMATS}
    for media, url in offered.items():
        response = requests.get(url)  # no Accept: ?format= in the URL decides
        assert response.headers["Content-Type"].split(";")[0] == media and alternates(response) == offered
        if media != "text/html":
            assert (URIRef(FRANCE), URIRef(CAPITAL), None) in parse(response)


def test_json_ld_only_where_the_data_allows(server: LiveServer) -> None:
    nested = requests.get(server.url + "/resource", params={"iri": SUBGRAPH}, headers={"Accept": "text/turtle"})
    assert "application/ld+json" not in alternates(nested) and "text/turtle" in alternates(nested)
    assert "<<(" in nested.text  # the triple term, intact
    refused = requests.get(server.url + "/resource", params={"iri": SUBGRAPH, "format": "jsonld"})
    assert refused.status_code == 406 and "triple terms" in refused.text


def test_rdflib_dereferences_a_resource_by_content_negotiation(server: LiveServer) -> None:
    graph = Graph()
    graph.parse(f"{server.url}/resource?iri={FRANCE}")
    assert (URIRef(FRANCE), URIRef(CAPITAL), URIRef(vocab.ENTITY.paris.value)) in graph
    assert (URIRef(FRANCE), URIRef(vocab.RDFS.label.value), Literal("France")) in graph


def test_a_bad_format_or_an_unknown_resource(server: LiveServer) -> None:
    bogus = requests.get(server.url + "/resource", params={"iri": FRANCE, "format": "bogus"})
    assert bogus.status_code == 400 and "ttl" in bogus.text
    assert requests.get(server.url + "/resource", params={"iri": "urn:nothing", "format": "ttl"}).status_code == 404
    assert requests.get(server.url + "/resource", params={"iri": "urn:nothing"}).status_code == 404  # the page


# --- explain IRIs -------------------------------------------------------------------------------

def oxigraph_quads(response: requests.Response) -> set[Quad]:
    """RDF 1.2 answers (triple terms), which rdflib 7 cannot read, parsed by pyoxigraph."""
    assert response.status_code == 200, response.text
    media = response.headers["Content-Type"].split(";")[0]
    return set(oxigraph_parse(response.content, format=RdfFormat.from_media_type(media)))


def test_a_trace_is_html_for_browsers_and_rdf_when_asked(server: LiveServer) -> None:
    page = requests.get(server.url + "/console/trace", params={"id": server.session}, headers={"Accept": BROWSER})
    assert page.headers["Content-Type"].startswith("text/html") and "Accept" in page.headers["Vary"]
    offered = alternates(page)
    assert "application/ld+json" not in offered and "text/turtle" in offered  # edges are triple terms
    session = NamedNode(server.session)
    turtle = oxigraph_quads(requests.get(server.url + "/console/trace", params={"id": server.session},
                                         headers={"Accept": "text/turtle"}))
    assert Quad(session, vocab.TG.query, OxLiteral("What is the capital of France?")) in turtle
    assert any(isinstance(q.object, Triple) for q in turtle if q.predicate == vocab.TG.edge)
    trig = oxigraph_quads(requests.get(offered["application/trig"]))
    assert {q.graph_name for q in trig} == {vocab.explain_graph(), vocab.LIBRARIAN_GRAPH}
    answer = server.session.replace("session:", "prov:answer:")  # any explain IRI finds its session
    by_answer = requests.get(server.url + "/console/trace", params={"id": answer, "format": "nt"})
    assert Quad(session, vocab.RDF.type, vocab.PROV.Activity) in oxigraph_quads(by_answer)


# --- the service description --------------------------------------------------------------------

def test_a_browser_following_the_endpoint_link_gets_a_page(server: LiveServer) -> None:
    page = requests.get(server.url + "/sparql", headers={"Accept": BROWSER})
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "Content-Disposition" not in page.headers
    assert 'href="/console/sparql"' in page.text and vocab.collection_graph("default").value in page.text


@pytest.mark.parametrize("accept", [None, "*/*", "text/turtle", "application/rdf+xml"])
def test_machines_keep_getting_the_rdf_service_description(server: LiveServer, accept: str | None) -> None:
    response = requests.get(server.url + "/sparql", headers={"Accept": accept} if accept else {})
    description = parse(response)
    (service,) = description.subjects(RDF.type, SD.Service)
    assert (service, SD.endpoint, URIRef(server.url + "/sparql")) in description
    named = {description.value(node, SD.name) for node in description.objects(None, SD.namedGraph)}
    assert named == {URIRef(g.value) for g in (vocab.collection_graph("default"), vocab.source_graph("default"),
                                               vocab.LIBRARIAN_GRAPH, vocab.explain_graph())}


# --- VoID ---------------------------------------------------------------------------------------

def test_void_describes_every_graph_with_counts_endpoint_vocabularies_and_examples(server: LiveServer) -> None:
    void = parse(requests.get(server.url + "/.well-known/void"))
    store_dataset = URIRef(server.url + "/.well-known/void#dataset")
    subsets = set(void.objects(store_dataset, VOID.subset))
    titles = {str(void.value(s, URIRef("http://purl.org/dc/terms/title"))) for s in subsets}
    assert {"Collection default: knowledge graph", "Collection default: extraction provenance",
            "GraphRAG explanations: sessions, retrievals, selected edges, answers",
            "Librarian: the text of documents, pages, chunks and answers"} <= titles
    count = "SELECT ?g (COUNT(*) AS ?n) { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g"
    counts = requests.post(server.url + "/sparql", data=count, headers={
        "Content-Type": "application/sparql-query", "Accept": "application/sparql-results+json"}).json()
    for row in counts["results"]["bindings"]:
        if row["g"]["value"] in ENGINE_GRAPHS:  # Virtuoso's own graphs, which a client's GRAPH ?g sees there
            continue
        (named,) = void.subjects(SD.name, URIRef(row["g"]["value"]))
        dataset = void.value(named, SD.graph)
        assert dataset in subsets and int(void.value(dataset, VOID.triples)) == int(row["n"]["value"])
        assert (dataset, VOID.sparqlEndpoint, URIRef(server.url + "/sparql")) in void
    knowledge = URIRef(server.url + "/.well-known/void#collection-default")
    assert {URIRef(vocab.RDFS.base), URIRef(vocab.RELATION.base)} <= set(void.objects(knowledge, VOID.vocabulary))
    examples = set(void.objects(knowledge, VOID.exampleResource))
    assert examples and all(requests.get(server.url + "/resource", params={"iri": str(e), "format": "ttl"}).ok
                            for e in examples)
    dump = void.value(knowledge, VOID.dataDump)
    assert (URIRef(FRANCE), URIRef(CAPITAL), None) in parse(requests.get(str(dump)))
    service = parse(requests.get(server.url + "/sparql"))
    assert set(service.objects(None, SD.graph)) == subsets  # the service description links the same datasets


def test_void_follows_writes(server: LiveServer) -> None:
    knowledge = URIRef(server.url + "/.well-known/void#collection-default")
    before = int(parse(requests.get(server.url + "/.well-known/void")).value(knowledge, VOID.triples))
    added = requests.post(server.url + "/store", params={"graph": vocab.collection_graph("default").value},
                          data=f"<{FRANCE}> <{CAPITAL}> <urn:another> .",
                          headers={"Content-Type": "text/turtle", "Authorization": f"Bearer {TOKEN}"})
    assert added.status_code == 204
    after = int(parse(requests.get(server.url + "/.well-known/void")).value(knowledge, VOID.triples))
    assert after == before + 1


def test_void_is_a_page_for_browsers(server: LiveServer) -> None:
    page = requests.get(server.url + "/.well-known/void", headers={"Accept": BROWSER})
    assert page.headers["Content-Type"].startswith("text/html")
    assert 'id="collection-default"' in page.text and "Collection default: knowledge graph" in page.text


def test_the_void_page_writes_counts_as_the_home_page_does(tmp_path: Path, calling: Calling) -> None:
    """1,500 triples, not 1500: the home page's collection counts have separators, the VoID page had none."""
    store = GraphStore(tmp_path / "store")
    graph = vocab.collection_graph("default")
    store.extend([Quad(NamedNode(f"http://example.org/s{n}"), NamedNode(CAPITAL), OxLiteral(n), graph)
                  for n in range(1500)])
    app = calling(store)
    page = app.get(app.url + "/.well-known/void", headers={"Accept": BROWSER}).text
    assert "1,500 triples in 1 graph:" in page and "<td>1,500</td>" in page and "1500" not in page


# --- HEAD and ?format= on the endpoint -----------------------------------------------------------

@pytest.mark.parametrize("path", ["/sparql", "/.well-known/void", f"/resource?iri={FRANCE}",
                                  f"/resource?iri={FRANCE}&format=ttl"])
def test_head_has_gets_headers_and_no_body(server: LiveServer, path: str) -> None:
    got, head = requests.get(server.url + path), requests.head(server.url + path)
    assert head.status_code == got.status_code == 200 and head.content == b""
    same = ("Content-Type", "Vary", "Link")
    assert {k: head.headers.get(k) for k in same} == {k: got.headers.get(k) for k in same}


def test_format_chooses_the_results_format_of_a_query(server: LiveServer) -> None:
    response = requests.get(server.url + "/sparql", params={"query": "SELECT (1 AS ?one) {}", "format": "csv"})
    assert response.headers["Content-Type"].startswith("text/csv") and response.text.split() == ["one", "1"]


def test_void_is_not_described_again_after_each_question(server: LiveServer) -> None:
    """Explanations, which any client writes by asking, renew VoID at most every TRACES_REFRESH_S; data at once."""
    explain = URIRef(server.url + "/.well-known/void#explanations")

    def explanation_triples() -> int | None:
        value = parse(requests.get(server.url + "/.well-known/void")).value(explain, VOID.triples)
        return None if value is None else int(value)

    before = explanation_triples()
    asked = requests.post(server.url + "/api/graph-rag", json={"query": "What is the capital of France?",
                                                               "streaming": False}, timeout=60)
    assert asked.status_code == 200 and asked.json()["session"]
    assert explanation_triples() == before  # the question's trace is not counted yet
    added = requests.post(server.url + "/store", params={"graph": vocab.collection_graph("default").value},
                          data=f"<{FRANCE}> <{CAPITAL}> <urn:yet-another> .",
                          headers={"Content-Type": "text/turtle", "Authorization": f"Bearer {TOKEN}"})
    assert added.status_code == 204
    assert (explanation_triples() or 0) > (before or 0)  # a write of data describes everything again
