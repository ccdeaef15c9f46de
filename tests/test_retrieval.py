"""Retrieval on real on-disk stores: label index lookup, bounded traversal, labels, edge ids."""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.ingest.load import load_file
from server.labels import store_labels
from server.rag.label_index import _CollectionIndex
from server.rag.retrieval import FRONTIER_BATCH, LabelGraph, RetrievalLimits, Retriever, edge_id
from server.rag.text import normalize, terms, words
from server.store import GraphStore
from server.vocab import ENTITY as E
from server.vocab import RDFS, RELATION, XSD
from server.vocab import RELATION as R

OTHER_CAPITAL = NamedNode("https://example.org/ns/capital")  # a second relation labelled "capital"
COUNTRIES = ["France", "Germany", "Spain", "Italy", "Portugal"]


class CountingStore(GraphStore):
    """The real store, counting the SPARQL executions that go through it."""

    executions = 0

    def query(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.executions += 1
        return super().query(*args, **kwargs)


def _label(graph: NamedNode, term: NamedNode, text: str) -> Quad:
    return Quad(term, RDFS.label, Literal(text), graph)


def factbook_quads(collection: str = "default") -> list[Quad]:
    """A small factbook-like collection, plus a fact in another collection and its source graph."""
    g = vocab.collection_graph(collection)
    quads = [_label(g, R.capital, "capital"), _label(g, OTHER_CAPITAL, "capital"),
             _label(g, R.continent, "continent"), _label(g, R.population, "population"),
             _label(g, R.motto, "motto"), _label(g, E.europe, "Europe"), _label(g, E.gert_frobe, "Gert Fröbe"),
             Quad(E.gert_frobe, R.born_in, E.germany, g)]
    for name in COUNTRIES:
        country = E[name.lower()]
        quads += [_label(g, country, name), Quad(country, R.continent, E.europe, g)]
    quads += [_label(g, E.paris, "Paris"), _label(g, E.berlin, "Berlin"),
              Quad(E.france, R.capital, E.paris, g), Quad(E.germany, R.capital, E.berlin, g),
              Quad(E.france, OTHER_CAPITAL, E.paris, g),  # same labels as the edge above, other IRI
              Quad(E.france, R.population, Literal("67000000", datatype=XSD.integer), g),
              Quad(E.france, R.motto, Literal("Liberté, égalité, fraternité", language="fr"), g),
              Quad(E.paris, R.landmark, E.eiffel_tower, g)]  # neither has a label
    # Not the collection's graph: never traversed, never labelled from.
    other = vocab.collection_graph("elsewhere")
    quads += [Quad(E.france, R.capital, E.lyon, other), _label(other, E.lyon, "Lyon"),
              Quad(E.france, R.capital, E.marseille, vocab.source_graph(collection))]
    return quads


@pytest.fixture
def factbook(tmp_path: Path) -> CountingStore:
    store = CountingStore(tmp_path / "store")
    store.extend(factbook_quads())
    return store


def _edges(graph: LabelGraph) -> set[tuple]:
    return set(graph.uri_map.values())


def test_edge_id_is_trustgraphs() -> None:
    assert edge_id("a", "b", "c") == hashlib.sha256(b"a|b|c").hexdigest()[:8]
    assert edge_id("France", "capital", "Paris") != edge_id("France", "capital", "Lyon")


def test_normalize_strips_case_accents_and_punctuation() -> None:
    assert normalize("  Gert  FRÖBE!? ") == "gert frobe"
    assert normalize("Liberté, égalité") == "liberte egalite"


def test_a_decomposed_accent_does_not_split_a_word() -> None:
    composed, decomposed = "Gert Fröbe films", "Gert Fro\u0308be films"
    assert words(composed) == words(decomposed) == ["gert", "frobe", "films"]
    assert terms(composed) == terms(decomposed) == {"gert", "frobe", "film"}


def test_capital_of_france_finds_seed_and_paris_edge(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("What is the capital of France?", "default", RetrievalLimits())
    assert graph.seeds[0] == E.france
    assert (E.france, R.capital, E.paris) in _edges(graph)
    assert ("France", "capital", "Paris") in graph.labeled_edges
    assert len(graph.edge_ids) == len(set(graph.edge_ids)) == len(graph.labeled_edges)
    for edge_id_, labels in zip(graph.edge_ids, graph.labeled_edges, strict=True):
        assert edge_id_.split("-")[0] == edge_id(*labels)


def test_identical_labels_different_iris_both_survive(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("capital of France", "default")
    pairs = zip(graph.edge_ids, graph.labeled_edges, strict=True)
    ids = [i for i, labels in pairs if labels == ("France", "capital", "Paris")]
    base = edge_id("France", "capital", "Paris")
    assert sorted(ids) == [base, base + "-2"]
    assert {graph.uri_map[i][1] for i in ids} == {R.capital, OTHER_CAPITAL}


def test_literals_keep_datatype_and_language(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("France", "default")
    objects = {p: o for s, p, o in graph.uri_map.values() if s == E.france}
    assert objects[R.population] == Literal("67000000", datatype=XSD.integer)
    assert objects[R.motto] == Literal("Liberté, égalité, fraternité", language="fr")
    assert ("France", "motto", "Liberté, égalité, fraternité") in graph.labeled_edges


def test_both_directions_and_second_hop(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("Tell me about Paris", "default")
    assert graph.seeds == [E.paris]
    edges = _edges(graph)
    assert (E.france, R.capital, E.paris) in edges  # incoming
    assert (E.paris, R.landmark, E.eiffel_tower) in edges  # outgoing
    assert (E.france, R.continent, E.europe) in edges  # second hop, from France
    one_hop = Retriever(factbook).get_labelgraph("Paris", "default", RetrievalLimits(max_path_length=1))
    assert all(E.paris in (s, o) for s, _, o in one_hop.uri_map.values())


def test_entities_without_label_show_local_name(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("Paris", "default")
    assert ("Paris", "landmark", "eiffel_tower") in graph.labeled_edges


def test_accents_and_case_do_not_matter_for_lookup(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("where was GERT FROBE born", "default")
    assert graph.seeds[0] == E.gert_frobe


def test_longest_ngram_first_then_ranked_tokens(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "store")
    g = vocab.collection_graph("c")
    store.extend([_label(g, E.new, "New"), _label(g, E.york, "York"), _label(g, E.new_york, "New York"),
                  _label(g, E.new_york_times, "The New York Times Company")])
    seeds = Retriever(store).index.lookup("who lives in new york", "c", 10)
    assert seeds[:3] == [E.new_york, E.new, E.york]
    assert seeds[3] == E.new_york_times  # a token match, ranked after the exact ones
    assert Retriever(store).index.lookup("who lives in new york", "c", 2) == [E.new_york, E.new]


def test_lookup_edge_cases(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "store")
    g = vocab.collection_graph("c")
    store.extend([_label(g, E.dollar, "$"), _label(g, E.police, "Police"), _label(g, E.and_, "AND"),
                  Quad(E.police, R.in_language, E.french, g)])
    index = Retriever(store).index
    assert index.lookup("who wrote $", "c", 5) == [E.dollar]  # a title of punctuation only
    assert index.lookup('films whose directors also directed "Police" AND NOT (x', "c", 5)[:2] == [E.police, E.and_]
    assert index.lookup(" ".join(["police"] * 5000), "c", 5) == [E.police]  # long questions stay in sqlite's limits
    assert index.lookup("", "c", 5) == [] and index.lookup("police", "c", 0) == []
    assert index.lookup("police", "no-such-collection", 5) == []


def test_concurrent_lookups_and_loads(factbook: CountingStore, tmp_path: Path) -> None:
    retriever = Retriever(factbook)
    data = tmp_path / "more.nt"
    data.write_text(f"{E.atlantis} {RDFS.label} \"Atlantis\" .\n", encoding="utf-8")

    def ask(i: int) -> list[NamedNode]:
        if i % 10 == 0:
            factbook.notify_loaded("default")  # what a load does to the index and the label cache
        return retriever.get_labelgraph("capital of France", "default").seeds

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(ask, range(80)))
    assert all(seeds[0] == E.france for seeds in results)
    load_file(factbook, data, "default", progress=False)
    assert retriever.get_labelgraph("Atlantis", "default").seeds == [E.atlantis]


def test_limits_are_respected(factbook: CountingStore) -> None:
    retriever = Retriever(factbook)
    question = "France Germany Spain Italy Portugal Europe Paris Berlin"
    assert len(retriever.get_labelgraph(question, "default", RetrievalLimits(entity_limit=3)).seeds) == 3
    small = retriever.get_labelgraph(question, "default", RetrievalLimits(max_subgraph_size=4))
    assert len(small.labeled_edges) == 4
    hub = retriever.get_labelgraph("Europe", "default", RetrievalLimits(triple_limit=2, max_path_length=1))
    assert len(hub.labeled_edges) == 2  # Europe has 5 incoming edges and none outgoing
    assert all(o == E.europe for _, _, o in hub.uri_map.values())
    per_entity = retriever.get_labelgraph("France", "default", RetrievalLimits(triple_limit=1, max_path_length=1))
    assert len(per_entity.labeled_edges) == 1  # France has only outgoing edges
    assert retriever.get_labelgraph("France", "default", RetrievalLimits(max_path_length=0)).labeled_edges == []


def test_executions_do_not_grow_with_seeds(factbook: CountingStore) -> None:
    counts = []
    for question in ["France", "France Germany Spain Italy Portugal Paris Berlin Europe"]:
        retriever = Retriever(factbook)
        retriever.index.rebuild("default")  # the one-time index build is not part of a question
        factbook.executions = 0
        graph = retriever.get_labelgraph(question, "default")
        assert graph.sparql_executions == factbook.executions
        counts.append((len(graph.seeds), factbook.executions))
    assert counts[0][0] == 1 and counts[1][0] == 8
    assert counts[0][1] == counts[1][1] == 2  # one query per hop (no focus relation named); labels from the index


def test_labels_are_batched_and_cached_across_requests(factbook: CountingStore) -> None:
    retriever = Retriever(factbook)
    terms = [E.france, R.capital, E.eiffel_tower, E.lyon, Literal("x", language="en"),
             Literal("67000000", datatype=XSD.integer)]
    expected = {E.france: "France", R.capital: "capital", E.eiffel_tower: "eiffel_tower", E.lyon: "lyon",
                Literal("x", language="en"): "x", Literal("67000000", datatype=XSD.integer): "67000000"}
    factbook.executions = 0
    assert retriever.labels(terms, "default") == expected  # Lyon's label is in another collection
    assert factbook.executions == 1  # the collection's label index, built once
    assert retriever.labels(terms, "default") == expected
    assert Retriever(factbook).labels(terms, "default") == expected
    assert factbook.executions == 2  # the second retriever built its own index; the first served from cache


def test_store_labels_prefer_plain_or_english_in_one_query_per_batch(factbook: CountingStore) -> None:
    g = vocab.collection_graph("default")
    factbook.extend([Quad(E.paris, RDFS.label, Literal("Parigi", language="it"), g),  # sorts before "Paris"
                     Quad(E.paris, RDFS.label, Literal("Paname", language="fr"), g),
                     Quad(E.berlin, RDFS.label, Literal("Berlino", language="it"), g)])
    factbook.executions = 0
    iris = [E.paris, E.berlin, E.lyon, E.eiffel_tower, Literal("x")]
    assert store_labels(factbook, iris) == {E.paris: "Paris", E.berlin: "Berlin", E.lyon: "Lyon"}
    assert store_labels(factbook, iris, g) == {E.paris: "Paris", E.berlin: "Berlin"}  # Lyon: elsewhere
    assert factbook.executions == 2
    many = [E[f"n{i}"] for i in range(2500)] + [E.paris]
    assert store_labels(factbook, many) == {E.paris: "Paris"}
    assert factbook.executions == 5  # 2,501 terms: three batches


def test_only_the_collection_graph_is_traversed(factbook: CountingStore) -> None:
    graph = Retriever(factbook).get_labelgraph("capital of France", "default")
    nodes = {t for edge in graph.uri_map.values() for t in edge}
    assert E.lyon not in nodes and E.marseille not in nodes
    assert all(label != "Lyon" for edge in graph.labeled_edges for label in edge)
    assert Retriever(factbook).get_labelgraph("Lyon", "default").seeds == []


def test_index_and_labels_follow_loads(factbook: CountingStore, tmp_path: Path) -> None:
    retriever = Retriever(factbook)
    assert retriever.get_labelgraph("Atlantis", "default").seeds == []
    before = retriever.get_labelgraph("France", "default")
    assert ("France", "capital", "Paris") in before.labeled_edges
    data = tmp_path / "more.nt"
    data.write_text(f"{E.atlantis} {RDFS.label} \"Atlantis\" .\n{E.atlantis} {R.capital} {E.poseidonia} .\n"
                    f"{E.paris} {RDFS.label} \"Paris, France\" .\n", encoding="utf-8")
    load_file(factbook, data, "default", progress=False)
    graph = retriever.get_labelgraph("What is the capital of Atlantis?", "default")
    assert graph.seeds[0] == E.atlantis
    assert (E.atlantis, R.capital, E.poseidonia) in _edges(graph)
    paris = retriever.labels([E.paris], "default")[E.paris]
    assert paris in {"Paris", "Paris, France"}
    assert retriever.index.rebuild("default") == 11  # 9 + 2 new entity labels; the 5 relations are not entities
    assert retriever.index.lookup("paris france", "default", 1) == [E.paris]


def test_new_collection_is_indexed_on_load(factbook: CountingStore, tmp_path: Path) -> None:
    retriever = Retriever(factbook)
    assert retriever.get_labelgraph("Atlantis", "myths").seeds == []
    data = tmp_path / "myths.nt"
    data.write_text(f"{E.atlantis} {RDFS.label} \"Atlantis\" .\n", encoding="utf-8")
    load_file(factbook, data, "myths", progress=False)
    assert retriever.get_labelgraph("Atlantis", "myths").seeds == [E.atlantis]
    assert retriever.get_labelgraph("Atlantis", "default").seeds == []


def test_sample_data_capital_of_france(sample_store: GraphStore) -> None:
    graph = Retriever(sample_store).get_labelgraph("What is the capital of France?", "default")
    assert E.france in graph.seeds
    assert any(s == E.france and o == E.paris for s, _, o in graph.uri_map.values())
    assert ("France", "capital", "Paris") in graph.labeled_edges
    # per seed tier (exact, ranked) and hop: the focus query ("capital") and the general hop query
    assert graph.sparql_executions <= 2 * 2 * RetrievalLimits().max_path_length
    collection = vocab.collection_graph("default")
    assert all(Quad(s, p, o, collection) in sample_store.raw for s, p, o in graph.uri_map.values())


def test_relations_the_question_names_are_read_first(sample_store: GraphStore) -> None:
    """Germany has far more edges than triple_limit; the 'borders' ones must all be retrieved."""
    graph = vocab.collection_graph("default")
    borders = RELATION.borders
    edges = [(q.subject, q.predicate, q.object)
             for q in sample_store.raw.quads_for_pattern(E.germany, borders, None, graph)]
    everything = list(sample_store.raw.quads_for_pattern(E.germany, None, None, graph))
    limits = RetrievalLimits(triple_limit=5)
    assert len(edges) >= 5 and len(everything) > 4 * limits.triple_limit  # the case worth testing
    retriever = Retriever(sample_store)
    assert retriever.index.focus_relations("Which countries border Germany?", "default")[0] == borders
    found = set(retriever.get_labelgraph("Which countries border Germany?", "default", limits).uri_map.values())
    assert set(edges) <= found
    unfocused = set(retriever.get_labelgraph("Germany", "default", limits).uri_map.values())
    assert not set(edges) <= unfocused  # without the relation named, triple_limit cuts them


def test_a_hubs_neighbours_do_not_crowd_the_others_out_of_the_next_hop(tmp_path: Path) -> None:
    """"when were the films written by the writer of Feely released": Feely's year (a hub of 60 films) and its
    writer (2 other films) are reached at the same hop; the writer's films make the next frontier, so their years
    are read, though the hub's films were found first and entity_limit is smaller than them."""
    g = vocab.collection_graph("default")
    year, writer, feely = E.y2013, E.lynn, E.feely
    quads = [_label(g, R.release_year, "release year"), _label(g, R.written_by, "written by"),
             _label(g, year, "2013"), _label(g, writer, "Lynn Shelton"), _label(g, feely, "Feely"),
             Quad(feely, R.release_year, year, g), Quad(feely, R.written_by, writer, g)]
    for number in range(60):
        quads += [_label(g, E[f"film{number}"], f"Film {number}"), Quad(E[f"film{number}"], R.release_year, year, g)]
    for name, released in (("humpday", "2009"), ("sister", "2011")):
        quads += [_label(g, E[name], name.title()), _label(g, E[released], released),
                  Quad(E[name], R.written_by, writer, g), Quad(E[name], R.release_year, E[released], g)]
    store = GraphStore(tmp_path / "store")
    store.extend(quads)
    limits = RetrievalLimits(entity_limit=20, max_path_length=3, max_subgraph_size=400)
    found = _edges(Retriever(store).get_labelgraph("when were the films written by the writer of Feely released",
                                                   "default", limits))
    assert (E.film0, R.release_year, year) in found  # the hub was read, and its films reached first
    assert {(E.humpday, R.release_year, E["2009"]), (E.sister, R.release_year, E["2011"])} <= found


def test_ranked_matches_break_ties_by_term_across_later_writes(tmp_path: Path) -> None:
    """bm25 first, then the term, however the tied labels came into the index: labels added by a later write
    (``invalidate`` with the labels, as an ingested document does) have later rows but smaller terms."""
    store = GraphStore(tmp_path / "store")
    g = vocab.collection_graph("c")
    store.extend([_label(g, E.t4, "Zeta four"), _label(g, E.t5, "Zeta five"), _label(g, E.t6, "Zeta six"),
                  _label(g, E.a0, "Zeta is longer"), _label(g, E.b0, "Omega")])
    labels = Retriever(store).index
    assert labels.lookup("omega", "c", 1) == [E.b0]  # the index is built
    labels.invalidate("c", [(term.value, Literal(text), False) for term, text in
                            [(E.t1, "Zeta one"), (E.t2, "Zeta two"), (E.t3, "Zeta three")]])
    index = labels._index("c")
    ranked = [NamedNode(term) for term in index.ranked(["zeta"], 10)]
    assert ranked == [E.t1, E.t2, E.t3, E.t4, E.t5, E.t6, E.a0]  # the longer label scores worse
    for limit in range(1, 9):  # a cut inside the tied labels keeps the smallest terms
        assert [NamedNode(term) for term in index.ranked(["zeta"], limit)] == ranked[:limit]
    assert index.ranked(["zeta", "omega"], 3) == [E.b0.value, E.t1.value, E.t2.value]
    assert index.ranked(["nothing"], 3) == []


_WORDS = ["zeta", "omega", "delta", "kappa"]
_LABELS = st.lists(st.tuples(st.integers(0, 60), st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3)),
                   max_size=30)


@settings(max_examples=60, deadline=None)
@given(first=_LABELS, later=_LABELS, tokens=st.lists(st.sampled_from(_WORDS + ["absent"]), min_size=1, max_size=4,
                                                      unique=True), limit=st.integers(1, 40))
def test_ranked_matches_are_the_best_by_bm25_then_term(first: list, later: list, tokens: list[str], limit: int) -> None:
    """The ranked stage's answer is the plain statement's (every match sorted by bm25, then term and text, cut
    at ``limit``), for labels from two writes over a vocabulary small enough for many ties, with or without the
    labels that share only relation words with the question ("omega" names a relation here)."""
    def rows(labels: list) -> list[tuple[str, Literal, bool]]:
        return [(f"https://e.example/t{number:02d}", Literal(" ".join(words)), False) for number, words in labels]
    index = _CollectionIndex(rows(first) + [("https://e.example/omega", Literal("omega"), True)])
    index.add(rows(later))
    match = " OR ".join(f'"{token}"' for token in tokens)
    expected = index.db.execute("SELECT term, norm FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), term, norm LIMIT ?",
                                (match, limit)).fetchall()
    assert index.ranked(tokens, limit) == [term for term, _ in expected]
    assert index.ranked(tokens, limit, relation_words=False) == [
        term for term, norm in expected if any(word in tokens and word != "omega" for word in norm.split())]


def test_a_large_frontier_is_asked_in_batches_sent_only_while_the_walk_reads(tmp_path: Path) -> None:
    """``FRONTIER_BATCH`` entities a hop query (an engine compiles a bounded text), in the frontier's order, and a
    walk that fills up sends none of the later batches."""
    store = CountingStore(tmp_path / "store")
    g = vocab.collection_graph("c")
    seeds = [NamedNode(f"https://e.example/s{i:03d}") for i in range(2 * FRONTIER_BATCH + 50)]
    store.extend([Quad(seed, R.next, NamedNode(f"https://e.example/o{i:03d}"), g) for i, seed in enumerate(seeds)])
    retriever = Retriever(store)
    everything = RetrievalLimits(entity_limit=1000, max_subgraph_size=10_000, max_path_length=1)
    before = store.executions
    edges, executions = retriever._traverse([seeds], [], "c", everything)
    assert executions == store.executions - before == 3
    assert [s for s, _, _ in edges] == seeds
    before = store.executions
    edges, executions = retriever._traverse([seeds], [], "c", RetrievalLimits(entity_limit=1000,
                                                                              max_subgraph_size=40,
                                                                              max_path_length=1))
    assert executions == store.executions - before == 1 and [s for s, _, _ in edges] == seeds[:40]
