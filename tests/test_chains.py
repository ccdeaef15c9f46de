"""The deterministic selector (chains from the named entities), relation matching by stem and by
meaning with the wordllama model shipped in its wheel, and the semantic tier of entity lookup."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.config import PROJECT_ROOT
from server.rag import chains
from server.rag.label_index import LabelIndex
from server.rag.relations import mention_of, relation_matches, stem_match
from server.rag.retrieval import edge_id
from server.store import GraphStore
from server.vocab import ENTITY, RDFS, RELATION

MOVIES = [
    ("Heartless", "starred actors", "Jim Sturgess"),
    ("Heartless", "has genre", "Horror"),
    ("Heartless", "written by", "Philip Ridley"),
    ("A Goofy Movie", "has tags", "movie"),
    ("The Reflecting Skin", "written by", "Philip Ridley"),
    ("The Reflecting Skin", "starred actors", "Viggo Mortensen"),
    ("Kinky Boots", "written by", "Geoff Deane"),
    ("Kinky Boots", "written by", "Tim Firth"),
    ("Calendar Girls", "written by", "Tim Firth"),
    ("Calendar Girls", "directed by", "Nigel Cole"),
]
COUNTRIES = [
    ("Portugal", "borders", "Spain"),
    ("Portugal", "capital", "Lisbon"),
    ("Portugal", "export commodity", "cars"),
    ("Spain", "capital", "Madrid"),
    ("Spain", "borders", "France"),
    ("France", "capital", "Paris"),
    ("World", "export commodity", "coal"),
    ("World", "population", "8 billion"),
]


def chosen(question: str, facts: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    by_id = {edge_id(*fact): fact for fact in facts}
    return [by_id[i] for i, _ in chains.choose(question, list(by_id.items())).chosen]


def test_a_word_matches_a_relation_by_meaning_where_letters_fail() -> None:
    """"acted" ~ "starred actors": not the genre of Heartless nor the tags of "A Goofy Movie"."""
    assert chosen("who acted in the movie Heartless", MOVIES) == [("Heartless", "starred actors", "Jim Sturgess")]
    assert chosen("who wrote Heartless", MOVIES) == [("Heartless", "written by", "Philip Ridley")]


def test_same_walks_the_relation_there_and_back() -> None:
    assert chosen("which films have the same screenwriter of Kinky Boots", MOVIES) == [
        ("Kinky Boots", "written by", "Tim Firth"), ("Calendar Girls", "written by", "Tim Firth")]
    # without a cue the shorter path wins: the screenwriters themselves
    assert chosen("who is the screenwriter of Kinky Boots", MOVIES) == [
        ("Kinky Boots", "written by", "Geoff Deane"), ("Kinky Boots", "written by", "Tim Firth")]


def test_a_two_hop_question_follows_its_relations_as_a_chain() -> None:
    picked = chosen("What is the capital of the country that borders Portugal?", COUNTRIES)
    assert picked == [("Portugal", "borders", "Spain"), ("Spain", "capital", "Madrid")]
    reasons = dict(chains.choose("What is the capital of the country that borders Portugal?",
                                 [(edge_id(*f), f) for f in COUNTRIES]).chosen)
    assert reasons[edge_id("Spain", "capital", "Madrid")].startswith("Deterministic selector: the question asks "
                                                                     "about 'capital'")
    assert "step 2 of a path from Portugal" in reasons[edge_id("Spain", "capital", "Madrid")]


def test_the_question_word_order_decides_between_equal_chains() -> None:
    """"the screenwriter of the films starred by X's actors": starred first, then written."""
    facts = [("Film X", "starred actors", "Ann Lee"), ("Film X", "written by", "Bo Day"),
             ("Film Y", "starred actors", "Ann Lee"), ("Film Y", "written by", "Cy Ray"),
             ("Film Z", "starred actors", "Bo Day")]
    assert chosen("who is the screenwriter of the films starred by the actors of Film X", facts) == [
        ("Film X", "starred actors", "Ann Lee"), ("Film Y", "starred actors", "Ann Lee"),
        ("Film Y", "written by", "Cy Ray")]


@pytest.mark.parametrize("question", ["Who won the 1998 World Cup?", "What is the national anthem of Portugal?",
                                      "Who is the best football player of Spain?", "What is 7 times 8?"])
def test_nothing_relevant_chooses_nothing(question: str) -> None:
    choice = chains.choose(question, [(edge_id(*f), f) for f in COUNTRIES])
    assert choice.chosen == [] and choice.score == 0
    assert "World" not in choice.anchors  # inside the name "World Cup", unknown to the graph


def test_ranking_puts_the_chosen_then_the_matching_relations_first() -> None:
    edges = [(edge_id(*f), f) for f in COUNTRIES]
    choice = chains.choose("What is the capital of Spain?", edges)
    assert choice.ranking[0] == edge_id("Spain", "capital", "Madrid")
    assert set(choice.ranking[1:3]) == {edge_id("Portugal", "capital", "Lisbon"), edge_id("France", "capital", "Paris")}
    assert sorted(choice.ranking) == sorted(i for i, _ in edges)


def test_a_misspelled_name_is_found_by_meaning() -> None:
    assert chosen("What is the capital of Portugual?", COUNTRIES) == [("Portugal", "capital", "Lisbon")]


@pytest.mark.parametrize(("word", "other", "expected"), [
    ("act", "actor", True), ("director", "directed", True), ("screenwriter", "written", True),
    ("border", "border", True), ("capital", "currency", False), ("won", "world", False), ("art", "area", False)])
def test_stem_match(word: str, other: str, expected: bool) -> None:
    assert stem_match(word, other) is expected


def test_relation_matches_by_meaning() -> None:
    words = ["wrote", "money", "film"]
    found = relation_matches([mention_of(i, w) for i, w in enumerate(words)], ["written by", "currency", "capital"])
    assert found["written by"][0] > 0.6 and found["currency"][1] > 0.4
    assert found["capital"] == [0.0, 0.0, 0.0]  # nothing close enough


def test_the_model_loads_from_its_wheel_without_the_network(tmp_path: object) -> None:
    """A fresh interpreter with every socket refused and an empty home still embeds text."""
    code = ("import socket\n"
            "def refuse(*args, **kwargs): raise OSError('no network in this test')\n"
            "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
            "from server.rag.embeddings import embedder\n"
            "vectors = embedder().embed(['Portugal', 'Portugual', ''])\n"
            "print(round(float(vectors[0] @ vectors[1]), 2), float(abs(vectors[2]).sum()))\n")
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(PROJECT_ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    similarity, empty = result.stdout.split()
    assert float(similarity) > 0.6 and float(empty) == 0.0
    assert not list(tmp_path.iterdir())  # nothing cached or downloaded


def test_semantic_tier_seeds_a_misspelled_entity_only_when_nothing_matches_exactly(store: GraphStore) -> None:
    graph = vocab.collection_graph("default")
    facts = [(ENTITY.portugal, "Portugal"), (ENTITY.spain, "Spain"), (ENTITY.lisbon, "Lisbon")]
    quads = [Quad(term, RDFS.label, Literal(label), graph) for term, label in facts]
    quads += [Quad(ENTITY.portugal, RELATION.capital, ENTITY.lisbon, graph),
              Quad(RELATION.capital, RDFS.label, Literal("capital"), graph)]
    store.extend(quads)
    index = LabelIndex(store)
    exact, ranked = index.lookup_tiers("What is the capital of Portugual?", "default", 10)
    assert exact == [] and ranked[0] == NamedNode(ENTITY.portugal.value)
    exact, ranked = index.lookup_tiers("What is the capital of Portugal and Spian?", "default", 10)
    assert exact == [ENTITY.portugal] and ENTITY.spain not in ranked  # an exact match: no semantic tier
    assert index.focus_relations("Which city is the seat of government of Portugal?", "default") == []
    assert index.focus_relations("What is Portugal's capital city?", "default") == [RELATION.capital]


def test_a_word_as_close_to_two_relations_does_not_pick_one_of_them() -> None:
    swiss = [("Switzerland", "language", name) for name in ("German", "French", "Italian", "Romansch", "English")]
    swiss += [("Switzerland", "official language", name) for name in ("German", "French", "Italian", "Romansch")]
    swiss += [("Switzerland", "ethnic groups", "Swiss")]
    # "spoken" is 0.33 from "official language" and 0.27 from "language": no reason to drop the languages
    found = chosen("What languages are spoken in Switzerland?", swiss)
    assert {p for _, p, _ in found} == {"language", "official language"} and len(found) == 9
    assert {p for _, p, _ in chosen("What are the official languages of Switzerland?", swiss)} == {"official language"}
