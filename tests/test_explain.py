"""Explainability: recorder, provenance walk and trace reader on a real on-disk store."""
from __future__ import annotations

import pytest
from pyoxigraph import Literal, NamedNode, Triple

from server import stages, vocab
from server.explain.recorder import ExplainRecorder
from server.explain.trace import list_sessions, read_trace
from server.provenance import format_chain, source_chains
from server.stages import Answered, EdgesRetrieved, EdgesSelected, SessionStarted
from server.store import GraphStore
from server.vocab import ENTITY, RELATION, TG

BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

CAPITAL = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
CURRENCY = Triple(ENTITY.france, RELATION.currency, ENTITY.euro)
MOTTO = Triple(ENTITY.france, RELATION.motto, Literal("Liberté, égalité, fraternité", language="fr"))


def _record(store: GraphStore, question: str, edges: list[tuple[Triple, str]], answer: str | None,
            session_id: str | None = None) -> ExplainRecorder:
    recorder = ExplainRecorder(store, session_id)
    recorder.record(SessionStarted(question, "offline", "default"))
    recorder.record(EdgesRetrieved([(edge, ("", "", "")) for edge, _ in edges]))
    recorder.record(EdgesSelected(edges))
    if answer is not None:
        recorder.record(Answered(answer))
    return recorder


def test_chain_of_a_triple_term_edge_reaches_the_document(france_store: GraphStore) -> None:
    [chain] = source_chains(france_store, CAPITAL)
    assert [node["iri"] for node in chain] == [vocab.chunk_iri("fr", 4, 2).value, vocab.page_iri("fr", 4).value,
                                               vocab.document_iri("fr").value]
    assert [node["type"] for node in chain] == ["Chunk", "Page", "Document"]
    assert chain[1]["title"] == "Government"
    assert format_chain(chain) == 'Chunk 2 → Page 4 → "France"'


def test_reifier_form_also_traces(france_store: GraphStore) -> None:
    assert [format_chain(chain) for chain in source_chains(france_store, CURRENCY)] == ['Chunk 1 → Page 5 → "France"']


def test_chains_are_limited_to_the_collection_and_to_the_exact_edge(france_store: GraphStore) -> None:
    assert source_chains(france_store, CAPITAL, collection="other") == []
    assert source_chains(france_store, Triple(ENTITY.france, RELATION.capital, ENTITY.lyon)) == []
    plain = Triple(MOTTO.subject, MOTTO.predicate, Literal(MOTTO.object.value))  # no language tag
    assert source_chains(france_store, plain) == []
    assert len(source_chains(france_store, MOTTO)) == 1


def test_an_edge_in_two_subgraphs_has_two_chains(france_store: GraphStore) -> None:
    france_store.extend(vocab.subgraph_quads(vocab.source_graph("default"), vocab.subgraph_iri("fr", 5, 1),
                                             vocab.chunk_iri("fr", 5, 1), [CAPITAL]))
    chains = sorted(format_chain(chain) for chain in source_chains(france_store, CAPITAL))
    assert chains == ['Chunk 1 → Page 5 → "France"', 'Chunk 2 → Page 4 → "France"']


def test_format_chain_falls_back_to_the_iri() -> None:
    assert format_chain([{"iri": "urn:x", "label": None, "type": None, "title": None},
                         {"iri": "urn:d", "label": "d.pdf", "type": "Document", "title": "Doc"}]) == 'urn:x → "Doc"'


def test_recorder_writes_the_seed_specification_entities(france_store: GraphStore) -> None:
    recorder = _record(france_store, "What is the capital of France?", [(CAPITAL, "names the capital")],
                       "Paris is the capital of France.")
    sid, graph = recorder.session_id, france_store.explain_graph
    raw = france_store
    assert raw.has_graph(graph)
    edge_node = stages.edge_selection_iri(sid, 0)
    assert list(raw.quads(edge_node, TG.edge, None, graph))[0].object == CAPITAL
    assert list(raw.quads(stages.answer_document_iri(sid), TG.content, None,
                                      vocab.LIBRARIAN_GRAPH))[0].object.value == "Paris is the capital of France."
    assert list(raw.quads(stages.SESSION.iri(sid), TG.model, None, graph))[0].object.value == "offline"
    # nothing of the answer text in the explainability graph
    assert not list(raw.quads(None, TG.content, None, graph))


def test_read_trace_returns_the_whole_trace(france_store: GraphStore) -> None:
    recorder = _record(france_store, "What is the capital of France?",
                       [(CAPITAL, "names the capital"), (MOTTO, "context"), (CURRENCY, "")],
                       "Paris is the capital of France.")
    sid = recorder.session_id
    trace = read_trace(france_store, stages.SESSION.iri(sid).value)
    assert trace is not None
    assert {k: trace[k] for k in ("session", "question", "model", "collection", "edge_count", "retrieval",
                                  "selection", "answer", "answer_text", "status", "error")} == {
        "session": stages.SESSION.iri(sid).value, "question": "What is the capital of France?",
        "model": "offline", "collection": "default", "edge_count": 3,
        "retrieval": stages.RETRIEVAL.iri(sid).value, "selection": stages.SELECTION.iri(sid).value,
        "answer": stages.ANSWER.iri(sid).value, "answer_text": "Paris is the capital of France.",
        "status": "answered", "error": None}
    assert trace["time"].endswith("Z")
    capital, motto, currency = trace["edges"]
    assert capital["s"] == ENTITY.france.value and capital["o"] == ENTITY.paris.value
    assert capital["labels"] == ["France", "capital", "Paris"]
    assert capital["reasoning"] == "names the capital"
    assert [format_chain(chain) for chain in capital["sources"]] == ['Chunk 2 → Page 4 → "France"']
    assert motto["o"] == "Liberté, égalité, fraternité"
    assert motto["triple"].endswith('"Liberté, égalité, fraternité"@fr )>>')
    assert motto["labels"] == ["France", "motto", "Liberté, égalité, fraternité"]
    assert [format_chain(chain) for chain in currency["sources"]] == ['Chunk 1 → Page 5 → "France"']
    assert currency["reasoning"] == ""
    # any IRI of the session finds the same trace
    assert read_trace(france_store, stages.edge_selection_iri(sid, 1).value) == trace
    assert read_trace(france_store, stages.answer_document_iri(sid).value) == trace


def test_edges_keep_selection_order_past_ten(france_store: GraphStore) -> None:
    edges = [(Triple(ENTITY.france, RELATION.neighbour, ENTITY[f"n{i}"]), f"r{i}") for i in range(12)]
    recorder = _record(france_store, "neighbours", edges, "many")
    trace = read_trace(france_store, stages.SESSION.iri(recorder.session_id).value)
    assert [edge["reasoning"] for edge in trace["edges"]] == [f"r{i}" for i in range(12)]
    assert trace["edges"][0]["labels"] == ["France", "neighbour", "n0"]  # unlabelled: local names


@pytest.mark.parametrize("iri", ["urn:trustgraph:session:nope", "https://example.org/x",
                                 "urn:trustgraph:session:bad iri", ""])
def test_read_trace_of_an_unknown_session_is_none(france_store: GraphStore, iri: str) -> None:
    assert read_trace(france_store, iri) is None


def test_failed_session_reads_as_failed(france_store: GraphStore) -> None:
    recorder = ExplainRecorder(france_store)
    recorder.record(SessionStarted("q", "gpt-test", "default"))
    recorder.error("llm-error", "selection: HTTP 500")
    trace = read_trace(france_store, stages.SESSION.iri(recorder.session_id).value)
    assert trace["status"] == "failed" and trace["error"] == {"type": "llm-error", "message": "selection: HTTP 500"}
    assert trace["retrieval"] is None and trace["edges"] == [] and trace["answer_text"] is None


def test_error_before_the_session_is_written_records_nothing(store: GraphStore) -> None:
    ExplainRecorder(store).error("store-error", "disk full")
    assert store.is_empty()


def test_list_sessions_newest_first_with_paging(store: GraphStore) -> None:
    ids = []
    for i in range(5):
        recorder = ExplainRecorder(store)
        started = Literal(f"2026-01-0{i + 1}T00:00:00Z", datatype=vocab.XSD.dateTime)
        store.extend(stages.SESSION.quads(store.explain_graph, recorder.session_id,
                                          SessionStarted(f"q{i}", "offline", "default", started=started)))
        ids.append(recorder.session_id)
    _record(store, "answered", [(CAPITAL, "x")], "Paris")  # now: newest
    sessions = list_sessions(store, limit=3)
    assert [s["question"] for s in sessions] == ["answered", "q4", "q3"]
    assert sessions[0]["status"] == "answered" and sessions[1]["status"] == "incomplete"
    assert sessions[0]["model"] == "offline" and sessions[0]["collection"] == "default"
    assert [s["question"] for s in list_sessions(store, limit=3, offset=3)] == ["q2", "q1", "q0"]
    assert list_sessions(store, limit=3, offset=6) == []
    assert list_sessions(store, limit=0) == []
    assert sessions[1]["session"] == stages.SESSION.iri(ids[4]).value
    assert sessions[1]["time"] == "2026-01-05T00:00:00Z"


def test_explain_collection_is_configurable(tmp_path) -> None:
    store = GraphStore(tmp_path / "s", explain_collection="audit")
    recorder = _record(store, "q", [(CAPITAL, "x")], "a")
    assert store.raw.contains_named_graph(NamedNode("urn:trustgraph:graph:audit"))
    assert read_trace(store, stages.SESSION.iri(recorder.session_id).value)["answer_text"] == "a"
    assert read_trace(GraphStore(None), stages.SESSION.iri(recorder.session_id).value) is None


def test_every_explain_iri_names_its_kind_and_session() -> None:
    sid = "0b7c1f8e-5d2a-4c3b-9e1f-2a6d8c4b7e90"
    minted = {"session": stages.SESSION.iri(sid), "retrieval": stages.RETRIEVAL.iri(sid),
              "selection": stages.SELECTION.iri(sid), "edge": stages.edge_selection_iri(sid, 11),
              "answer": stages.ANSWER.iri(sid), "answer-document": stages.answer_document_iri(sid)}
    for kind, iri in minted.items():
        assert stages.parse_explain_iri(iri.value) == (kind, sid)
        assert stages.session_id_of(iri.value) == sid
    for other in ("urn:trustgraph:graph:explainability", "https://example.org/session:x", ""):
        assert stages.parse_explain_iri(other) is None and stages.session_id_of(other) is None
