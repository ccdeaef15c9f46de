"""How the selector reads a question's words beyond the labels: relation aliases (skos:altLabel) read
from the store, stem matches that meaning must confirm, weak names that neither anchor nor seed first,
and "no answer" when the best paths match too few of the question's words."""
from __future__ import annotations

from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.rag import chains
from server.rag.label_index import LabelIndex
from server.rag.relations import mention_of, relation_matches
from server.rag.retrieval import Retriever, edge_id
from server.store import GraphStore
from server.vocab import ENTITY, RDFS, RELATION, SKOS

FILMS = [
    ("Chill", "has genre", "Horror"),
    ("Chill", "has tags", "winter"),
    ("Chill", "directed by", "Serge Rodnunsky"),
    ("Fargo", "has tags", "winter"),
    ("Fargo", "has tags", "director"),
    ("Brownlow Film", "directed by", "Kevin Brownlow"),
]
ALIASES = {"has genre": ("kind", "type"), "has tags": ("about", "topic", "described by")}
COUNTRY = [("Mexico", "population", "121736809"), ("Mexico", "nationality", "Mexican")]


def chosen(question: str, facts: list[tuple[str, str, str]],
           aliases: dict[str, tuple[str, ...]] | None = None) -> list[tuple[str, str, str]]:
    by_id = {edge_id(*fact): fact for fact in facts}
    return [by_id[i] for i, _ in chains.choose(question, list(by_id.items()), aliases).chosen]


def test_aliases_name_a_relation_its_label_does_not() -> None:
    # "describe" is nowhere near "has tags": without the alias it asks for a description, every fact of Chill
    assert set(chosen("which words describe Chill", FILMS)) == {fact for fact in FILMS if fact[0] == "Chill"}
    assert chosen("which words describe Chill", FILMS, {"has tags": ("describe",)}) == [("Chill", "has tags", "winter")]
    # without an alias, "kind" asks for the relation clearly closest to it in meaning
    assert chosen("what kind of film is Chill", FILMS) == [("Chill", "has genre", "Horror")]
    assert chosen("what kind of film is Chill", FILMS, ALIASES) == [("Chill", "has genre", "Horror")]
    # a one-word alias that is a stopword ("about") still asks for its relation
    assert sorted(chosen("which films are about winter", FILMS, ALIASES)) == [
        ("Chill", "has tags", "winter"), ("Fargo", "has tags", "winter")]
    found = relation_matches([mention_of(0, "described")], ["has tags"], ALIASES)
    assert found == {"has tags": [1.0]}


def test_a_stem_match_needs_the_meaning_too() -> None:
    words = ["popular", "screenwriter", "directors"]
    found = relation_matches([mention_of(i, w) for i, w in enumerate(words)],
                             ["population", "written by", "directed by"])
    assert found["population"][0] < 1.0 and found["written by"][1] == 1.0 and found["directed by"][2] == 1.0


def test_a_node_named_by_a_relation_word_is_no_anchor_beside_a_name() -> None:
    """The tag "director" is a node, but "what was Kevin Brownlow the director of" asks about a relation."""
    choice = chains.choose("what was Kevin Brownlow the director of", [(edge_id(*f), f) for f in FILMS])
    assert choice.anchors == ["Kevin Brownlow"]
    assert chosen("what was Kevin Brownlow the director of", FILMS) == [
        ("Brownlow Film", "directed by", "Kevin Brownlow")]
    # with no other name the weak one still anchors
    assert chosen("which films have the tag director", FILMS, ALIASES) == [("Fargo", "has tags", "director")]


def test_too_few_words_matched_is_no_answer() -> None:
    """"people" ~ population, but "eat" and "breakfast" match nothing: the graph does not answer it."""
    assert chosen("What do people eat for breakfast in Mexico?", COUNTRY) == []
    assert chosen("How many people live in Mexico?", COUNTRY) == [("Mexico", "population", "121736809")]


def test_the_label_index_reads_relation_aliases_and_seeds_weak_names_last(store: GraphStore) -> None:
    graph = vocab.collection_graph("default")
    terms = {"Chill": ENTITY.Chill, "Horror": ENTITY.Horror, "director": ENTITY.director,
             "Kevin Brownlow": ENTITY.Kevin_Brownlow, "Brownlow Film": ENTITY.Brownlow_Film}
    quads = [Quad(term, RDFS.label, Literal(label), graph) for label, term in terms.items()]
    quads += [Quad(ENTITY.Chill, RELATION.has_genre, ENTITY.Horror, graph),
              Quad(ENTITY.Chill, RELATION.has_tags, ENTITY.director, graph),
              Quad(ENTITY.Brownlow_Film, RELATION.directed_by, ENTITY.Kevin_Brownlow, graph),
              Quad(RELATION.has_genre, RDFS.label, Literal("has genre"), graph),
              Quad(RELATION.has_tags, RDFS.label, Literal("has tags"), graph),
              Quad(RELATION.directed_by, RDFS.label, Literal("directed by"), graph),
              Quad(RELATION.has_genre, SKOS.altLabel, Literal("kind"), graph),
              Quad(RELATION.has_genre, SKOS.altLabel, Literal("type"), graph),
              Quad(ENTITY.unused, SKOS.altLabel, Literal("not a relation"), graph)]
    store.extend(quads)
    graph_of = Retriever(store).get_labelgraph("what kind of film is Chill", "default")
    assert graph_of.relation_aliases == {"has genre": ("kind", "type")}
    exact, ranked = LabelIndex(store).lookup_tiers("what was Kevin Brownlow the director of", "default", 10)
    assert exact == [NamedNode(ENTITY.Kevin_Brownlow.value)] and ranked[0] == NamedNode(ENTITY.director.value)
    exact, _ = LabelIndex(store).lookup_tiers("films tagged director", "default", 10)
    assert exact == [NamedNode(ENTITY.director.value)]  # the only name: still the first tier
