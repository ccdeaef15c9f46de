"""Extraction keeps only facts grounded in their chunk: a model that echoes the prompt's examples, or
names entities its chunk never mentions, stores nothing and the report counts what was dropped."""
from __future__ import annotations

import json

from extraction_llm import chunk_text
from scripted_llm import Recorded, Reply, ScriptedLLM

from server import vocab
from server.config import Config
from server.ingest.documents import Ingester, IngestOptions
from server.ingest.extraction import ChunkFacts, Definition, Relationship, ground, reply_tokens
from server.rag.label_index import LabelIndex
from server.rag.openai_llm import OpenAILLM
from server.store import GraphStore

EXAMPLES = {  # what the prompts show as examples (templates/prompts/extract_*.j2)
    "define": [{"entity": "Paris", "definition": "Paris is the capital and largest city of France."}],
    "relate": [{"subject": "France", "predicate": "capital", "object": "Paris", "object-entity": True},
               {"subject": "France", "predicate": "area", "object": "643,801 sq km", "object-entity": False}],
}


def echo_examples(request: Recorded) -> Reply:
    """A small model's reply: the prompt's examples, then one fact about the chunk's own first word."""
    own = chunk_text(request.prompt).split()[0].strip(".")
    if "define the entities" in request.prompt:
        items = [*EXAMPLES["define"], {"entity": own, "definition": f"{own} is named in the text."}]
    else:
        own_fact = {"subject": own, "predicate": "near", "object": "Atlantis", "object-entity": True}
        items = [*EXAMPLES["relate"], own_fact]
    return Reply(text="\n".join(json.dumps(item) for item in items))


def ingest(store: GraphStore, scripted: ScriptedLLM, text: str) -> tuple[object, list[Recorded]]:
    scripted.responder = echo_examples
    llm = OpenAILLM(Config(llm="openai", llm_base_url=scripted.base_url, llm_model="scripted-model", llm_retries=0))
    report = Ingester(store, LabelIndex(store), llm).ingest(text.encode(), "docs", name="doc.txt",
                                                            options=IngestOptions(workers=1))
    return report, scripted.requests


def knowledge(store: GraphStore) -> list:
    return list(store.quads(None, None, None, vocab.collection_graph("docs")))


def test_an_extraction_that_echoes_the_prompts_examples_stores_nothing(store: GraphStore,
                                                                       scripted_llm: ScriptedLLM) -> None:
    report, requests = ingest(store, scripted_llm, "Lisbon lies on the Tagus estuary. It has many hills.")
    # kept: Lisbon's definition; dropped: both examples of each prompt and (Lisbon, near, Atlantis)
    assert report.facts == 1 and report.ungrounded == 4
    assert [q.object.value for q in knowledge(store) if q.predicate == vocab.SKOS.definition] == \
        ["Lisbon is named in the text."]
    assert not [q for q in knowledge(store) if "france" in q.subject.value.lower() or "paris" in q.subject.value]
    assert any("4 extracted fact(s) were dropped" in warning for warning in report.warnings)
    assert {r.body["max_tokens"] for r in requests} == {reply_tokens("Lisbon lies on the Tagus estuary. It has "
                                                                     "many hills.")}


def test_the_examples_are_dropped_even_from_a_chunk_that_names_france_and_paris(
        store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    report, _ = ingest(store, scripted_llm, "France has Paris and Atlantis in this story.")
    # kept: France's definition and (France, near, Atlantis): the chunk names both; the examples never
    assert report.facts == 2 and report.ungrounded == 3
    assert not [q for q in knowledge(store) if q.predicate == vocab.relation_iri("capital")]


def test_a_name_counts_by_its_words_or_by_a_label_the_chunk_mentions() -> None:
    facts = ChunkFacts(definitions=[Definition("the Tagus", "a river")],
                       relationships=[Relationship("Lisboa", "capital of", "Portugal", True),
                                      Relationship("LISBON", "founded", "before Rome", False)])
    ground(facts, "Lisbon, on the Tagus, is Portugal's capital.", mentioned=lambda name: name == "Lisboa")
    assert facts.definitions == [Definition("the Tagus", "a river")]
    assert [r.subject for r in facts.relationships] == ["Lisboa", "LISBON"] and facts.ungrounded == 0
    ground(facts, "Porto is a city.")
    assert facts.relationships == facts.definitions == [] and facts.ungrounded == 3
