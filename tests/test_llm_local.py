"""The openai provider against a serial local model (the scripted server's ``behave_like_local_model``):
bounded replies, deadlines that hold while a stream pings, no request left computing after a
timeout, queueing for the endpoint, the server's own token counts, and a trace that accounts for
every selection batch and every edge never offered."""
from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from scripted_llm import Reply, ScriptedLLM, count_tokens

from server.answering import make_graph_rag
from server.cli.display import trace_lines
from server.config import Config
from server.explain.trace import read_trace
from server.rag.choice import estimate_tokens
from server.rag.llm import LLMCancelled, LLMTimeout, selection_reply_tokens
from server.rag.llm_slots import EndpointSlots
from server.rag.openai_llm import OpenAILLM
from server.rag.pipeline import GraphRag
from server.rag.retrieval import edge_id
from server.store import GraphStore

QUESTION = "What is the capital of France?"
CAPITAL_ID = edge_id("France", "capital", "Paris")
CAPITAL_LINE = json.dumps({"id": CAPITAL_ID, "reasoning": "names the capital"})
GENEROUS_S = 60  # a bound no run should approach: the thing under test ends in a few seconds or never


def config(server: ScriptedLLM, **options: object) -> Config:
    return Config(store_path=None, llm="openai", llm_base_url=server.base_url, llm_model="scripted-model",
                  llm_retries=0, **options)


def rag(store: GraphStore, server: ScriptedLLM, **options: object) -> GraphRag:
    return make_graph_rag(store, config(server, **options))


def idle(server: ScriptedLLM) -> None:
    """Wait until the local model computes nothing (it takes its turn lock for each request it computes)."""
    assert server.local is not None and server.local.turn.acquire(timeout=GENEROUS_S)
    server.local.turn.release()


def test_a_reply_that_never_ends_is_stopped_by_its_max_tokens(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.behave_like_local_model(token_s=0.001)
    scripted_llm.reply(CAPITAL_LINE)
    edges = [(CAPITAL_ID, ("France", "capital", "Paris"))]
    reply = OpenAILLM(config(scripted_llm)).select(QUESTION, edges)
    assert len(reply.split()) == selection_reply_tokens(1) == scripted_llm.requests[0].body["max_tokens"]


@pytest.mark.slow  # waits out deadlines by design (seconds)
def test_a_question_ends_within_its_deadline_while_the_stream_pings(france_store: GraphStore,
                                                                    scripted_llm: ScriptedLLM) -> None:
    scripted_llm.behave_like_local_model(token_s=0.001, ping_s=0.05)
    scripted_llm.reply(CAPITAL_LINE)
    scripted_llm.reply("Paris is the capital of France.")  # over and over: a million tokens at most
    started = time.monotonic()
    messages = list(rag(france_store, scripted_llm, llm_deadline_s=3, llm_answer_tokens=1_000_000).run(QUESTION))
    assert time.monotonic() - started < GENEROUS_S  # without the deadline: 1,000 s of answer
    error = messages[-1].error
    assert error and error["message"].startswith("synthesis: LLM reply outlived its deadline of 3 s")
    trace = read_trace(france_store, messages[0].explain_id)
    assert "outlived its deadline" in trace["error"]["message"]
    assert [e["selected_by"] for e in trace["edges"]] == ["model"]  # the selection ended by its max_tokens
    idle(scripted_llm)
    assert scripted_llm.abandoned == 0


@pytest.mark.slow  # waits out deadlines by design (seconds)
def test_the_server_computes_no_request_abandoned_after_a_timeout(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.behave_like_local_model(token_s=0.005)
    scripted_llm.reply("the same words again")
    # The counter works: a request that is not streamed is computed to its end after its client left.
    with pytest.raises(requests.Timeout):
        requests.post(f"{scripted_llm.base_url}/chat/completions", timeout=0.3,
                      json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 400})
    idle(scripted_llm)
    assert scripted_llm.abandoned == 1
    scripted_llm.reply("the same words again")
    llm = OpenAILLM(config(scripted_llm, llm_deadline_s=0.5))
    with pytest.raises(LLMTimeout, match="outlived its deadline of 0.5 s"):
        llm.complete("hi", max_tokens=1_000_000)
    idle(scripted_llm)
    assert scripted_llm.abandoned == 1  # the streamed request stopped when its client closed it


def test_calls_to_a_local_server_queue_for_its_one_slot(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.behave_like_local_model(token_s=0.01)
    scripted_llm.responder = lambda request: Reply(text="the same words again")
    llm = OpenAILLM(config(scripted_llm))
    assert llm.slots.size == 1  # GLASSGRAPH_LLM_CONCURRENCY's default for a loopback server
    first = threading.Thread(target=llm.complete, args=("one", 100))
    first.start()
    assert scripted_llm.computing.wait(GENEROUS_S)
    waited: list[float] = []

    def second() -> None:
        llm.complete("two", 5)
        waited.append(llm.last_call().queued_s)

    other = threading.Thread(target=second)
    other.start()
    until(lambda: llm.slots.waiting == 1, "the second call queued")
    assert len(scripted_llm.requests) == 1  # queued here, not in the server
    first.join(GENEROUS_S)
    other.join(GENEROUS_S)
    assert waited and waited[0] > 0 and len(scripted_llm.requests) == 2


def test_prompts_are_sized_by_the_servers_tokenizer(sample_store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.behave_like_local_model(token_s=0.0005)
    scripted_llm.responder = lambda request: Reply(text=CAPITAL_LINE if "selecting facts" in request.prompt
                                                                else "Paris.")
    messages = list(rag(sample_store, scripted_llm, llm_context=2000, llm_answer_tokens=3).run(QUESTION))
    details = read_trace(sample_store, messages[0].explain_id)["selection_details"]
    assert scripted_llm.tokenized >= 1
    prompts = [r.prompt for r in scripted_llm.requests if "selecting facts" in r.prompt]
    largest = max(len(count_tokens(p)) for p in prompts)
    assert largest <= details["promptTokens"] <= 2000 and details["promptTokens"] != max(map(estimate_tokens, prompts))


def test_the_trace_lists_every_batch_and_the_edges_never_offered(sample_store: GraphStore,
                                                                 scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(CAPITAL_LINE)
    scripted_llm.stall(GENEROUS_S)  # the second batch times out: the third and fourth are never sent
    scripted_llm.reply("Paris.")
    messages = list(rag(sample_store, scripted_llm, llm_context=1800, llm_timeout_s=0.5).run(QUESTION))
    trace = read_trace(sample_store, messages[0].explain_id)
    details = trace["selection_details"]
    first, second = (r.prompt.count('{"id": ') - 1 for r in scripted_llm.requests[:2])
    assert details["batches"] == [f"1: {first} edges offered, answered: 1 chosen",
                                  f"2: {second} edges offered, timed out (LLM request timed out after 0.5 s "
                                  f"({scripted_llm.base_url}))"]
    assert details["method"] == "model" and details["promptEdges"] == first
    assert details["unofferedEdges"] == trace["edge_count"] - first - second == len(details["unoffered"])
    assert details["trimmedEdges"] < details["unofferedEdges"]
    assert trace["edges"][0]["triple"] not in details["unoffered"]
    shown = trace_lines(trace)
    assert f"    Never offered to the model: {details['unofferedEdges']} edge(s)" in shown
    assert "    Batch 2: " + details["batches"][1].split(": ", 1)[1] in shown



def until(condition, what: str) -> None:  # noqa: ANN001
    """Wait for ``condition()`` (a state another thread reaches), within GENEROUS_S."""
    deadline = time.monotonic() + GENEROUS_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_slots_serve_waiters_first_come_first_and_a_cancelled_one_leaves() -> None:
    slots, never, order = EndpointSlots(1), threading.Event(), []

    def call(name: str, cancelled: threading.Event = never) -> None:
        try:
            with slots.hold(cancelled):
                order.append(name)
        except LLMCancelled:
            order.append(f"{name} cancelled")

    stop = threading.Event()
    with slots.hold(never):
        threads = []
        for number, (name, cancelled) in enumerate([("first", never), ("leaves", stop), ("second", never)], 1):
            threads.append(threading.Thread(target=call, args=(name, cancelled)))
            threads[-1].start()
            until(lambda number=number: slots.waiting == number, f"{name} queued")
        stop.set()
        until(lambda: slots.waiting == 2, "the cancelled waiter left the queue")
    for thread in threads:
        thread.join(GENEROUS_S)
    assert order == ["leaves cancelled", "first", "second"] and slots.waiting == 0


def test_a_question_goes_before_the_background_work_queued_for_the_slot() -> None:
    slots, never, order = EndpointSlots(1), threading.Event(), []

    def call(name: str, background: bool) -> None:
        with slots.hold(never, background):
            order.append(name)

    with slots.hold(never, background=True):  # a chunk's extraction in progress
        threads = []
        for number, (name, background) in enumerate([("chunk 2", True), ("chunk 3", True), ("question", False)], 1):
            threads.append(threading.Thread(target=call, args=(name, background)))
            threads[-1].start()
            until(lambda number=number: slots.waiting == number, f"{name} queued")
    for thread in threads:
        thread.join(GENEROUS_S)
    assert order == ["question", "chunk 2", "chunk 3"]
