"""The sample dataset (data/factbook.nq.gz): provenance chains, facts, and first-start bootstrap."""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Quad, Triple

from server import vocab
from server.bootstrap import open_store
from server.config import PROJECT_ROOT, SAMPLE_DATA, Config
from server.store import GraphStore
from server.vocab import ENTITY, RELATION

if str(PROJECT_ROOT) not in sys.path:
    sys.path.append(str(PROJECT_ROOT))  # data/ is not installed: it is imported from the checkout
from data import factbook  # noqa: E402

PROFILES = 261  # every <region>/<code>.json of the Factbook copy in ../shared/data/factbook
FACTBOOK_JSON = Path(os.environ.get("GLASSGRAPH_FACTBOOK", PROJECT_ROOT.parent / "shared" / "data" / "factbook"))

KG = vocab.collection_graph("default")
SRC = vocab.source_graph("default")
PREFIXES = "".join(f"PREFIX {p}: <{iri}>\n" for p, iri in vocab.PREFIXES.items())


def rows(store: GraphStore, query: str) -> list[dict[str, object]]:
    solutions = store.raw.query(PREFIXES + query.replace("<KG>", f"<{KG.value}>").replace("<SRC>", f"<{SRC.value}>")
                                .replace("<LIB>", f"<{vocab.LIBRARIAN_GRAPH.value}>"))
    names = [v.value for v in solutions.variables]
    return [{n: row[n] for n in names if row[n] is not None} for row in solutions]


def count(store: GraphStore, query: str) -> int:
    return int(rows(store, query)[0]["n"].value)


def labels_of(store: GraphStore, subject: str, relation: str) -> set[str]:
    found = rows(store, f"SELECT ?l WHERE {{ GRAPH <KG> {{ ?c rdfs:label {Literal(subject)} ; r:{relation} ?o . "
                        "?o rdfs:label ?l } }")
    return {row["l"].value for row in found}


# --- provenance chains ---------------------------------------------------------------------------

def test_every_profile_is_a_document_with_pages_chunks_and_subgraphs(sample_store: GraphStore) -> None:
    assert count(sample_store, "SELECT (COUNT(DISTINCT ?d) AS ?n) WHERE { GRAPH <SRC> { ?d a tg:Document } }") \
        == PROFILES
    chained = """SELECT (COUNT(DISTINCT ?d) AS ?n) WHERE { GRAPH <SRC> {
        ?sg a tg:Subgraph ; prov:wasDerivedFrom ?c . ?c a tg:Chunk ; prov:wasDerivedFrom ?p .
        ?p a tg:Page ; prov:wasDerivedFrom ?d . ?d a tg:Document } }"""
    assert count(sample_store, chained) == PROFILES


@pytest.mark.parametrize(("kind", "linked"), [
    ("tg:Page", "?x prov:wasDerivedFrom ?d . ?d a tg:Document"),
    ("tg:Chunk", "?x prov:wasDerivedFrom ?p . ?p a tg:Page"),
    ("tg:Subgraph", "?x prov:wasDerivedFrom ?c . ?c a tg:Chunk"),
    ("tg:Document", "?x dc:title ?title ; rdfs:label ?label"),
    ("tg:Page", "?x dc:title ?title ; rdfs:label ?label"),
    ("tg:Chunk", "?x dc:title ?title ; rdfs:label ?label"),
], ids=["page-doc", "chunk-page", "subgraph-chunk", "doc-title", "page-title", "chunk-title"])
def test_no_broken_links_in_the_chain(sample_store: GraphStore, kind: str, linked: str) -> None:
    everything = count(sample_store, f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <SRC> {{ ?x a {kind} }} }}")
    assert everything > 0
    linked_count = f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ GRAPH <SRC> {{ ?x a {kind} . {linked} }} }}"
    assert count(sample_store, linked_count) == everything


@pytest.mark.parametrize("kind", ["tg:Page", "tg:Chunk"])
def test_every_page_and_chunk_has_its_text_in_the_librarian(sample_store: GraphStore, kind: str) -> None:
    missing = f"""SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <SRC> {{ ?c a {kind} }}
                 FILTER NOT EXISTS {{ GRAPH <LIB> {{ ?c tg:content ?text ; dc:title ?t }} }} }}"""
    assert count(sample_store, missing) == 0


def test_every_fact_comes_from_a_subgraph_and_every_contained_fact_is_in_the_graph(sample_store: GraphStore) -> None:
    unsourced = """SELECT (COUNT(*) AS ?n) WHERE { GRAPH <KG> { ?s ?p ?o FILTER(?p != rdfs:label) }
                   FILTER NOT EXISTS { GRAPH <SRC> { ?sg tg:contains <<( ?s ?p ?o )>> } } }"""
    assert count(sample_store, unsourced) == 0
    dangling = """SELECT (COUNT(*) AS ?n) WHERE { GRAPH <SRC> { ?sg tg:contains <<( ?s ?p ?o )>> }
                  FILTER NOT EXISTS { GRAPH <KG> { ?s ?p ?o } } }"""
    assert count(sample_store, dangling) == 0


def test_france_page_4_is_government_and_the_capital_chunk_says_paris(sample_store: GraphStore) -> None:
    found = rows(sample_store, """SELECT ?pt ?pl ?ct ?cl ?text WHERE {
        GRAPH <SRC> { <urn:trustgraph:doc:fr/p4> dc:title ?pt ; rdfs:label ?pl .
                      ?c prov:wasDerivedFrom <urn:trustgraph:doc:fr/p4> ; dc:title "Capital" ; rdfs:label ?cl }
        GRAPH <LIB> { ?c tg:content ?text ; dc:title ?ct } }""")
    assert len(found) == 1
    row = found[0]
    assert (row["pt"].value, row["pl"].value, row["ct"].value) == ("Government", "Page 4", "Capital")
    assert row["cl"].value.startswith("Chunk ")
    assert row["text"].value.startswith("name: Paris\n")


# --- facts ---------------------------------------------------------------------------------------

def test_the_capital_of_france_through_the_knowledge_graph(sample_store: GraphStore) -> None:
    found = rows(sample_store, """SELECT ?city ?label WHERE { GRAPH <KG> {
        ?country rdfs:label "France" ; ?capital ?city . ?capital rdfs:label "capital" . ?city rdfs:label ?label } }""")
    assert [(row["city"], row["label"].value) for row in found] == [(ENTITY.paris, "Paris")]
    assert Quad(ENTITY.france, RELATION.capital, ENTITY.paris, KG) in sample_store.raw


def test_a_fact_finds_the_chunk_text_it_came_from(sample_store: GraphStore) -> None:
    found = rows(sample_store, """SELECT ?s ?p ?o ?text ?title ?doc WHERE {
        GRAPH <SRC> { ?sg tg:contains <<( ?s ?p ?o )>> ; prov:wasDerivedFrom ?chunk .
                      ?chunk prov:wasDerivedFrom ?page . ?page prov:wasDerivedFrom ?d . ?d dc:title ?doc }
        GRAPH <LIB> { ?chunk tg:content ?text ; dc:title ?title }
        VALUES (?s ?p ?o) { (e:france r:capital e:paris) } }""")
    assert len(found) == 1
    assert "Paris" in found[0]["text"].value
    assert (found[0]["title"].value, found[0]["doc"].value) == ("Capital", "France")


def test_borders_are_symmetric_and_complete_for_germany_and_france(sample_store: GraphStore) -> None:
    germany = {"Austria", "Belgium", "Czech Republic", "Denmark", "France", "Luxembourg", "Netherlands", "Poland",
               "Switzerland"}
    assert labels_of(sample_store, "Germany", "borders") == germany
    # The profile of France lists only French Guiana's borders; the neighbours' profiles give the rest.
    assert {"Andorra", "Belgium", "Germany", "Italy", "Luxembourg", "Monaco", "Spain", "Switzerland"} \
        <= labels_of(sample_store, "France", "borders")
    # the reverse edge is sourced from Germany's "Land boundaries" chunk
    found = rows(sample_store, """SELECT ?title ?doc WHERE { GRAPH <SRC> {
        ?sg tg:contains <<( e:france r:borders e:germany )>> ; prov:wasDerivedFrom ?c . ?c dc:title ?title ;
            prov:wasDerivedFrom/prov:wasDerivedFrom/dc:title ?doc } }""")
    assert ("Land boundaries", "Germany") in {(row["title"].value, row["doc"].value) for row in found}


def test_languages_religions_and_government(sample_store: GraphStore) -> None:
    assert {"German", "French", "Italian", "Romansch"} <= labels_of(sample_store, "Switzerland", "language")
    assert labels_of(sample_store, "Switzerland", "official-language") == {"German", "French", "Italian", "Romansch"}
    assert labels_of(sample_store, "France", "language") >= {"French"}
    assert labels_of(sample_store, "Germany", "religion") == {"Protestant", "Roman Catholic", "Muslim"}
    assert labels_of(sample_store, "France", "currency") == {"euro"}
    assert labels_of(sample_store, "France", "government-type") == {"republic"}
    assert labels_of(sample_store, "France", "head-of-government") == {"Manuel Valls"}
    assert labels_of(sample_store, "Japan", "highest-point") == {"Mount Fuji"}


def test_at_least_15_kinds_of_relation_between_labelled_entities(sample_store: GraphStore) -> None:
    found = rows(sample_store, """SELECT ?p ?label (COUNT(*) AS ?n) WHERE { GRAPH <KG> {
        ?s ?p ?o . ?p rdfs:label ?label . ?s rdfs:label ?sl . ?o rdfs:label ?ol FILTER(isIRI(?o)) } }
        GROUP BY ?p ?label""")
    assert all(row["p"].value.startswith(RELATION.base) for row in found)
    assert len(found) >= 15
    assert {"capital", "borders", "language", "religion", "ethnic group", "government type", "currency",
            "natural resource", "climate", "terrain", "highest point", "lowest point", "legal system",
            "chief of state", "head of government"} <= {row["label"].value for row in found}


def test_every_entity_and_relation_has_exactly_one_label(sample_store: GraphStore) -> None:
    unlabelled = """SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { GRAPH <KG> {
        { ?x ?p ?o } UNION { ?s ?x ?o } UNION { ?s ?p ?x FILTER(isIRI(?x)) }
        FILTER(?x != rdfs:label) FILTER NOT EXISTS { ?x rdfs:label ?l } } }"""
    assert count(sample_store, unlabelled) == 0
    assert count(sample_store, """SELECT (COUNT(*) AS ?n) WHERE { { SELECT ?x WHERE { GRAPH <KG> {
        ?x rdfs:label ?l } } GROUP BY ?x HAVING (COUNT(?l) > 1) } }""") == 0


# --- extraction helpers --------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "name"), [
    ("President Francois HOLLANDE (since 15 May 2012)", "Francois Hollande"),
    ("President of the Swiss Confederation Simonetta SOMMARUGA (since 1 January 2015)", "Simonetta Sommaruga"),
    ("President of China XI Jinping (since 14 March 2013)", "Xi Jinping"),
    ("Queen ELIZABETH II (since 6 February 1952); represented by Governor General Sir Peter COSGROVE", "Elizabeth II"),
    ("King WILLEM-ALEXANDER of the Netherlands (since 30 April 2013)", "Willem-Alexander"),
    ("the monarchy is hereditary", None),
])
def test_person_names(text: str, name: str | None) -> None:
    assert factbook.person_name(text) == name


@pytest.mark.parametrize(("text", "items"), [
    ("Austria 801 km, Czech Republic 704 km, Russia (Kaliningrad Oblast) 227 km", ["Austria", "Czech Republic",
                                                                                    "Russia"]),
    ("Roman Catholic 38.2%, Protestant 26.9%, other Christian 5.7%, none 21.4%, unspecified 1.3% (2012 est.)",
     ["Roman Catholic", "Protestant"]),
    ("PARIS (capital) 10.843 million; Nice-Cannes 967,000; Toulouse 938,000 (2015)", ["PARIS", "Nice-Cannes",
                                                                                    "Toulouse"]),
])
def test_list_items_drop_numbers_notes_and_junk(text: str, items: list[str]) -> None:
    assert factbook.list_items(text, proper=True) == items


def test_slugs_are_ascii() -> None:
    assert factbook.slug("Côte d'Ivoire") == "cote-d-ivoire"
    assert factbook.slug("Roman Catholic") == "roman-catholic"


@pytest.mark.skipif(not FACTBOOK_JSON.is_dir(), reason="the Factbook JSON is not on this machine")
@pytest.mark.slow
def test_the_committed_sample_is_what_the_script_generates(tmp_path: Path) -> None:
    out = tmp_path / "factbook.nq.gz"
    assert factbook.main([str(FACTBOOK_JSON), str(out)]) == 0
    assert out.read_bytes() == SAMPLE_DATA.read_bytes()


# --- first start -----------------------------------------------------------------------------------

def _reopen(config: Config) -> GraphStore:
    gc.collect()  # the previous handle must be closed before the directory is opened again
    return open_store(config)


@pytest.mark.slow
def test_first_start_loads_the_sample_once(tmp_path: Path) -> None:
    config = Config(store_path=str(tmp_path / "share" / "glassgraph" / "store"))  # parents absent, as on a new machine
    store = open_store(config)
    total = len(store.raw)
    assert total > 300_000
    assert [c["collection"] for c in store.collections()] == ["default"]
    assert Quad(ENTITY.france, RELATION.capital, ENTITY.paris, KG) in store.raw
    marker = Quad(NamedNode("urn:test:marker"), RELATION.capital, Literal("kept"), KG)
    store.extend([marker])
    store.raw.remove(Quad(ENTITY.france, RELATION.capital, ENTITY.paris, KG))
    store.flush()
    del store
    again = _reopen(config)
    assert len(again.raw) == total  # one added, one removed: nothing loaded a second time
    assert marker in again.raw
    assert Quad(ENTITY.france, RELATION.capital, ENTITY.paris, KG) not in again.raw
    assert not (tmp_path / "share" / "glassgraph" / "store.loading").exists()


def test_no_sample_when_disabled(tmp_path: Path) -> None:
    store = open_store(Config(store_path=str(tmp_path / "store"), load_sample=False))
    assert store.is_empty()


def test_the_capital_fact_is_in_the_subgraph_of_chunk_3_of_page_4(sample_store: GraphStore) -> None:
    """Government is France's 4th section; Capital its 3rd field (after Country name, Government type)."""
    fact = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
    assert Quad(vocab.subgraph_iri("fr", 4, 3), vocab.TG.contains, fact, SRC) in sample_store.raw
