"""The GraphRAG pipeline end to end on real on-disk stores: offline provider, and the openai
provider through the real openai client against a scripted OpenAI-compatible server on 127.0.0.1."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from production_server import free_port
from pyoxigraph import NamedNode, Quad, Store, Triple
from scripted_llm import ScriptedLLM

from server import stages, vocab
from server.answering import make_graph_rag
from server.config import SAMPLE_DATA, Config
from server.explain.trace import list_sessions, read_trace
from server.provenance import format_chain, source_chains
from server.rag.llm import NO_ANSWER
from server.rag.messages import GraphRagResponse
from server.rag.pipeline import GraphRag
from server.rag.retrieval import Retriever, edge_id
from server.store import GraphStore
from server.vocab import ENTITY, RELATION

BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

QUESTION = "What is the capital of France?"
CAPITAL_ID = edge_id("France", "capital", "Paris")
CURRENCY_ID = edge_id("France", "currency", "Euro")
OK_SELECTION = json.dumps({"id": CAPITAL_ID, "reasoning": "it names the capital"})


@pytest.fixture
def sample(request: pytest.FixtureRequest) -> GraphStore:
    """The sample dataset once it exists, else the small France graph with the same conventions."""
    return request.getfixturevalue("sample_store" if SAMPLE_DATA.exists() else "france_store")


def offline(store: GraphStore) -> GraphRag:
    return make_graph_rag(store, Config(llm="offline", store_path=None))


def scripted(store: GraphStore, server: ScriptedLLM, **options: object) -> GraphRag:
    config = Config(store_path=None, llm="openai", llm_base_url=server.base_url, llm_api_key="test",
                    llm_model="scripted-model", llm_retries=0, **options)
    return make_graph_rag(store, config)


def kinds(messages: list[GraphRagResponse]) -> list[str]:
    """``explain:session``, ``chunk``, ``final``, ``error:<type>`` ... per message."""
    out = []
    for m in messages:
        if m.error:
            out.append(f"error:{m.error['type']}")
        elif m.message_type == "explain":
            entity = m.explain_id.removeprefix("urn:trustgraph:").removeprefix("prov:")
            out.append("explain:" + entity.split(":")[0])
        else:
            out.append("final" if m.end_of_session else "chunk")
    return out


def assert_consistent(store: GraphStore) -> None:
    """No answer entity without its text, no edge node outside a selection, no entity without its session."""
    g = f"<{store.explain_graph.value}>"
    prefix = "PREFIX tg: <https://trustgraph.ai/ns/> PREFIX prov: <http://www.w3.org/ns/prov#> "
    checks = {
        "answer without text": f"ASK {{ GRAPH {g} {{ ?a tg:document ?d }} "
                               "FILTER NOT EXISTS { GRAPH <urn:trustgraph:graph:librarian> { ?d tg:content ?t } } }",
        "dangling edge node": f"ASK {{ GRAPH {g} {{ ?n tg:edge ?e "
                              "FILTER NOT EXISTS { ?sel tg:selectedEdge ?n } } }",
        "selection without retrieval": f"ASK {{ GRAPH {g} {{ ?sel tg:selectedEdge ?n "
                                       "FILTER NOT EXISTS { ?sel prov:wasDerivedFrom ?r . "
                                       "?r prov:wasGeneratedBy ?s } } }",
        "retrieval without session": f"ASK {{ GRAPH {g} {{ ?r prov:wasGeneratedBy ?s "
                                     "FILTER NOT EXISTS { ?s tg:query ?q } } }",
    }
    for name, query in checks.items():
        assert not store.run_query(prefix + query), name


def session_of(messages: list[GraphRagResponse]) -> str:
    return messages[0].explain_id


# --- the acceptance path: sample data, offline provider ----------------------------------------

def test_capital_of_france_is_answered_and_traced_to_its_chunk(sample: GraphStore) -> None:
    messages = list(offline(sample).run(QUESTION))
    assert kinds(messages) == ["explain:session", "explain:retrieval", "explain:selection"] + \
        ["chunk"] * (len(messages) - 5) + ["explain:answer", "final"]
    answer = "".join(m.response for m in messages if m.message_type == "chunk")
    assert "Paris" in answer
    trace = read_trace(sample, session_of(messages))
    assert trace["answer_text"] == answer and trace["model"] == "offline" and trace["collection"] == "default"
    assert trace["question"] == QUESTION and trace["status"] == "answered" and trace["edge_count"] >= 1
    [capital] = [e for e in trace["edges"] if e["p"] == RELATION.capital.value]
    assert capital["s"] == ENTITY.france.value and capital["o"] == ENTITY.paris.value
    assert capital["labels"] == ["France", "capital", "Paris"] and capital["reasoning"]
    [chain] = capital["sources"]
    chunk, page, document = chain
    assert (page["iri"], page["label"], page["title"], page["type"]) == (vocab.page_iri("fr", 4).value, "Page 4",
                                                                         "Government", "Page")
    assert chunk["iri"].startswith(page["iri"] + "/c") and chunk["type"] == "Chunk"
    [text] = sample.quads(NamedNode(chunk["iri"]), vocab.TG.content, None, vocab.LIBRARIAN_GRAPH)
    assert "Paris" in text.object.value  # the chunk that states it
    assert (document["iri"], document["type"]) == (vocab.document_iri("fr").value, "Document")
    assert format_chain(chain) == f'{chunk["label"]} → Page 4 → "France"'
    assert source_chains(sample, Triple(ENTITY.france, RELATION.capital, ENTITY.paris)) == capital["sources"]
    assert_consistent(sample)


def test_an_unlabelled_iri_is_named_alike_for_the_llm_and_in_the_trace(france_store: GraphStore) -> None:
    anthem = NamedNode("https://example.org/ns#anthem")  # neither it nor the song has an rdfs:label
    france_store.extend([Quad(ENTITY.france, anthem, ENTITY.la_marseillaise, vocab.collection_graph("default"))])
    france_store.notify_loaded("default")
    question = "What is the anthem of France?"
    named = ("France", "anthem", "la_marseillaise")  # the local names
    assert named in Retriever(france_store).get_labelgraph(question, "default").labeled_edges
    trace = read_trace(france_store, session_of(list(offline(france_store).run(question))))
    [edge] = [e for e in trace["edges"] if e["p"] == anthem.value]
    assert tuple(edge["labels"]) == named
    assert edge["o"] == ENTITY.la_marseillaise.value  # the term itself keeps the full IRI


def test_explain_messages_carry_the_vocab_iris(france_store: GraphStore) -> None:
    messages = list(offline(france_store).run(QUESTION))
    explains = [m for m in messages if m.message_type == "explain"]
    sid = stages.session_id_of(explains[0].explain_id)
    assert [m.explain_id for m in explains] == [stages.SESSION.iri(sid).value, stages.RETRIEVAL.iri(sid).value,
                                                stages.SELECTION.iri(sid).value, stages.ANSWER.iri(sid).value]
    assert {m.explain_collection for m in explains} == {"explainability"}
    final = messages[-1]
    assert final.to_dict() == {"message_type": "chunk", "response": "", "error": None, "end_of_stream": True,
                               "end_of_session": True, "explain_id": None, "explain_collection": None,
                               "explain_kind": None, "outcome": "answered", "explain_triples": None}
    assert not any(m.end_of_session for m in messages[:-1])
    json.dumps([m.to_dict() for m in messages])


def test_the_session_is_recorded_before_retrieval_runs(france_store: GraphStore) -> None:
    stream = offline(france_store).run(QUESTION)
    first = next(stream)
    trace = read_trace(france_store, first.explain_id)
    assert trace["question"] == QUESTION and trace["retrieval"] is None and trace["status"] == "incomplete"
    stream.close()  # the client goes away
    trace = read_trace(france_store, first.explain_id)
    assert trace["status"] == "cancelled" and trace["error"]["type"] == "cancelled"
    assert_consistent(france_store)


def test_reifier_form_provenance_traces_through_the_pipeline(france_store: GraphStore) -> None:
    messages = list(offline(france_store).run("What currency does France use?"))
    trace = read_trace(france_store, session_of(messages))
    [currency] = [e for e in trace["edges"] if e["p"] == RELATION.currency.value]
    assert [format_chain(c) for c in currency["sources"]] == ['Chunk 1 → Page 5 → "France"']


def test_not_explainable_writes_nothing_to_the_explain_graph(france_store: GraphStore) -> None:
    before = len(france_store)
    messages = list(offline(france_store).run(QUESTION, explainable=False))
    assert set(kinds(messages)) == {"chunk", "final"} and kinds(messages)[-1] == "final"
    assert "Paris" in "".join(m.response for m in messages)
    assert not france_store.has_graph(france_store.explain_graph)
    assert len(france_store) == before


@pytest.mark.parametrize(("question", "collection", "error_type"), [
    (QUESTION, "nope", "not-found"), ("  ", "default", "bad-request"), (QUESTION, "bad name", "bad-request")])
def test_bad_input_is_one_error_message_and_no_write(france_store: GraphStore, question: str, collection: str,
                                                     error_type: str) -> None:
    before = len(france_store)
    [message] = list(offline(france_store).run(question, collection=collection))
    assert message.error["type"] == error_type and message.error["message"]
    assert message.end_of_session and message.end_of_stream
    assert len(france_store) == before


@pytest.mark.parametrize("question", ["Quelle heure est-il à Tombouctou?", "What is the anthem of France?"])
def test_nothing_relevant_is_a_no_answer_outcome(france_store: GraphStore, question: str) -> None:
    """No edge retrieved (Timbuktu), or edges of France but none about an anthem: "I don't know" is an answer."""
    messages = list(offline(france_store).run(question))
    assert kinds(messages) == ["explain:session", "explain:retrieval", "explain:selection"] + \
        ["chunk"] * (len(messages) - 5) + ["explain:answer", "final"]
    answer = "".join(m.response for m in messages if m.message_type == "chunk")
    assert answer == NO_ANSWER and messages[-1].outcome == "no-answer"
    trace = read_trace(france_store, session_of(messages))
    assert trace["status"] == "no-answer" and trace["outcome"] == "no-answer" and trace["error"] is None
    assert trace["edges"] == [] and trace["answer_text"] == NO_ANSWER
    assert [s["status"] for s in list_sessions(france_store)] == ["no-answer"]
    assert_consistent(france_store)


def test_a_store_that_refuses_writes_is_a_store_error(france_store: GraphStore, store_backend: str) -> None:
    if store_backend == "embedded":
        france_store.flush()
        france_store.raw = Store.read_only(str(france_store.path))
    else:  # an update endpoint where nothing listens
        france_store.endpoints = replace(france_store.endpoints, update=f"http://127.0.0.1:{free_port()}/update")
    [message] = list(offline(france_store).run(QUESTION))
    assert message.error["type"] == "store-error" and "explainability" in message.error["message"]
    assert list_sessions(france_store) == []


# --- the openai provider against a scripted server ---------------------------------------------

def test_a_models_marks_are_asked_for_checked_and_recorded(france_store: GraphStore,
                                                          scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(OK_SELECTION)
    scripted_llm.reply("The capital of France is Paris [1]. Its currency is the euro [7].")
    messages = list(scripted(france_store, scripted_llm).run(QUESTION))
    answer_prompt = scripted_llm.requests[1].prompt
    assert "[1] France | capital | Paris" in answer_prompt and "square brackets" in answer_prompt
    trace = read_trace(france_store, session_of(messages))
    answer = NamedNode(trace["answer"])
    cited = [q.object for q in france_store.quads(answer, vocab.TG.citedEdge, graph=france_store.explain_graph)]
    assert cited == [NamedNode(trace["edges"][0]["node"])]
    invalid = [q.object.value for q in france_store.quads(answer, vocab.TG.invalidCitation,
                                                          graph=france_store.explain_graph)]
    assert invalid == ["7"]


def test_the_offline_answer_marks_each_sentence_with_its_edges(france_store: GraphStore) -> None:
    messages = list(offline(france_store).run("What is the capital and the currency of France?"))
    trace = read_trace(france_store, session_of(messages))
    numbers = {e["p"]: n for n, e in enumerate(trace["edges"], start=1)}
    sentences = re.findall(r"[^.]*\.", trace["answer_text"])
    assert sentences and all(re.search(r"\[\d+\]\.$", sentence) for sentence in sentences)
    for sentence in sentences:  # a sentence's marks name the edges whose object it states
        for number in map(int, re.findall(r"\[(\d+)\]", sentence)):
            edge = trace["edges"][number - 1]
            assert edge["labels"][2] in sentence, (sentence, edge["labels"])
    assert {vocab.RELATION.capital.value, vocab.RELATION.currency.value} <= set(numbers)

def test_scripted_llm_happy_path(france_store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("```jsonl\n" + OK_SELECTION + "\n```")
    scripted_llm.reply("Paris is the capital.", pieces=["Paris ", "is the ", "capital."])
    messages = list(scripted(france_store, scripted_llm).run(QUESTION))
    assert kinds(messages) == ["explain:session", "explain:retrieval", "explain:selection", "chunk", "chunk",
                               "chunk", "explain:answer", "final"]
    assert [m.response for m in messages[3:6]] == ["Paris ", "is the ", "capital."]
    select_prompt, answer_prompt = (r.prompt for r in scripted_llm.requests)
    assert CAPITAL_ID in select_prompt and "Euro" not in answer_prompt and "Paris" in answer_prompt
    trace = read_trace(france_store, session_of(messages))
    assert trace["model"] == "scripted-model" and trace["answer_text"] == "Paris is the capital."
    assert [(e["o"], e["reasoning"]) for e in trace["edges"]] == [(ENTITY.paris.value, "it names the capital")]
    assert_consistent(france_store)


def test_unknown_ids_are_dropped_and_known_ones_kept(france_store: GraphStore,
                                                     scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply('{"id": "deadbeef", "reasoning": "made up"}\n' + OK_SELECTION + "\n" + OK_SELECTION)
    scripted_llm.reply("Paris.")
    messages = list(scripted(france_store, scripted_llm).run(QUESTION))
    assert kinds(messages)[-2:] == ["explain:answer", "final"]
    trace = read_trace(france_store, session_of(messages))
    assert [e["o"] for e in trace["edges"]] == [ENTITY.paris.value]


def test_http_500_at_selection_falls_back_and_the_answer_follows(france_store: GraphStore,
                                                                 scripted_llm: ScriptedLLM) -> None:
    scripted_llm.fail(500, "model exploded")
    scripted_llm.reply("Paris.")
    messages = list(scripted(france_store, scripted_llm).run(QUESTION))
    assert kinds(messages)[-2:] == ["explain:answer", "final"] and messages[-1].outcome == "answered"
    trace = read_trace(france_store, session_of(messages))
    assert "HTTP 500" in trace["selection_details"]["fallbackReason"] and trace["answer_text"] == "Paris."
    assert [(e["o"], e["selected_by"]) for e in trace["edges"]] == [(ENTITY.paris.value, "fallback")]
    assert_consistent(france_store)


def test_http_500_at_synthesis_leaves_the_selection_and_no_answer(france_store: GraphStore,
                                                                  scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(OK_SELECTION)
    scripted_llm.fail(500)
    messages = list(scripted(france_store, scripted_llm).run(QUESTION))
    assert kinds(messages) == ["explain:session", "explain:retrieval", "explain:selection", "error:llm-error"]
    assert messages[-1].error["message"].startswith("synthesis: ") and "HTTP 500" in messages[-1].error["message"]
    trace = read_trace(france_store, session_of(messages))
    assert trace["status"] == "failed" and len(trace["edges"]) == 1 and trace["edges"][0]["sources"]
    assert trace["answer"] is None and trace["answer_text"] is None
    assert_consistent(france_store)


def test_failure_in_the_middle_of_the_answer_stream(france_store: GraphStore,
                                                    scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(OK_SELECTION)
    scripted_llm.reply(pieces=["Paris ", "is "], stream_error="overloaded")
    messages = list(scripted(france_store, scripted_llm, check_answers=False).run(QUESTION))
    assert kinds(messages) == ["explain:session", "explain:retrieval", "explain:selection", "chunk", "chunk",
                               "error:llm-error"]
    assert "overloaded" in messages[-1].error["message"]
    trace = read_trace(france_store, session_of(messages))
    assert trace["status"] == "failed" and trace["answer"] is None
    answer_document = stages.answer_document_iri(stages.session_id_of(trace["session"]))
    assert not list(france_store.quads(answer_document))
    assert_consistent(france_store)


def test_an_empty_answer_is_an_error_not_an_empty_answer_entity(france_store: GraphStore,
                                                                scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(OK_SELECTION)
    scripted_llm.reply(pieces=[])
    messages = list(scripted(france_store, scripted_llm).run(QUESTION))
    assert kinds(messages)[-1] == "error:llm-error" and "empty answer" in messages[-1].error["message"]
    assert read_trace(france_store, session_of(messages))["answer"] is None


def test_an_llm_that_cannot_be_reached(france_store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    rag = scripted(france_store, scripted_llm)
    scripted_llm.close()
    messages = list(rag.run(QUESTION))  # the selection falls back; the answer needs the model
    assert kinds(messages) == ["explain:session", "explain:retrieval", "explain:selection", "error:llm-error"]
    assert "cannot connect" in messages[-1].error["message"] and messages[-1].error["message"].startswith("synthesis")
    assert read_trace(france_store, session_of(messages))["error"]["message"] == messages[-1].error["message"]


def test_concurrent_sessions_each_have_a_whole_trace(france_store: GraphStore) -> None:
    from concurrent.futures import ThreadPoolExecutor

    rag = offline(france_store)
    questions = [QUESTION, "What currency does France use?", "What is the motto of France?"] * 4
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda q: list(rag.run(q)), questions))
    traces = [read_trace(france_store, session_of(messages)) for messages in runs]
    assert len({t["session"] for t in traces}) == len(questions)
    assert all(t["status"] == "answered" and t["edges"] for t in traces)
    assert [t["question"] for t in traces] == questions
    assert [t["answer_text"] for t in traces] == ["".join(m.response for m in r) for r in runs]
    assert len(list_sessions(france_store, limit=100)) == len(questions)
    assert_consistent(france_store)
