"""The selection stage against the scripted OpenAI-compatible server (real openai client): prompts
sized to the model's context, a context-length refusal, a reply with no valid id and a timeout each
end with an answer, from the deterministic fallback where the model's choice was unusable, and a
trace that says who chose each edge."""
from __future__ import annotations

import json

import pytest
from scripted_llm import ScriptedLLM

from server.answering import make_graph_rag
from server.cli.display import trace_lines
from server.config import Config
from server.explain.trace import read_trace
from server.rag.choice import REPLY_TOKENS, estimate_tokens
from server.rag.pipeline import GraphRag
from server.rag.retrieval import edge_id
from server.store import GraphStore
from server.vocab import ENTITY

QUESTION = "What is the capital of France?"
CAPITAL_ID = edge_id("France", "capital", "Paris")
LLAMA_CPP_REFUSAL = "the request exceeds the available context size, try increasing it"


def scripted(store: GraphStore, server: ScriptedLLM, **options: object) -> GraphRag:
    config = Config(store_path=None, llm="openai", llm_base_url=server.base_url, llm_api_key="test",
                    llm_model="scripted-model", llm_retries=0, **options)
    return make_graph_rag(store, config)


def ask(rag: GraphRag, question: str = QUESTION) -> tuple[str, dict]:
    messages = list(rag.run(question))
    assert not [m.error for m in messages if m.error]
    assert messages[-1].end_of_session
    trace = read_trace(rag.store, messages[0].explain_id)
    return "".join(m.response for m in messages if m.message_type == "chunk"), trace


def assert_fallback(trace: dict, reason: str) -> None:
    """The trace says the deterministic selector chose, why, and each edge's reasoning says it too."""
    assert trace["selection_details"]["method"] == "fallback"
    assert reason in trace["selection_details"]["fallbackReason"]
    assert trace["edges"] and {e["selected_by"] for e in trace["edges"]} == {"fallback"}
    assert all(e["reasoning"].startswith("Fallback (") and reason in e["reasoning"] for e in trace["edges"])
    assert [e["o"] for e in trace["edges"]] == [ENTITY.paris.value]
    shown = trace_lines(trace)
    assert "        Chosen by: the deterministic selector (fallback)" in shown
    assert any(line.startswith("    Fallback: ") and reason in line for line in shown)


def test_a_context_length_refusal_falls_back(france_store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.fail(400, LLAMA_CPP_REFUSAL)
    scripted_llm.reply("Paris is the capital of France.")
    answer, trace = ask(scripted(france_store, scripted_llm))
    assert answer == "Paris is the capital of France." and trace["status"] == "answered"
    assert_fallback(trace, "refused as too long")
    assert LLAMA_CPP_REFUSAL in trace["selection_details"]["fallbackReason"]
    answer_prompt = scripted_llm.requests[1].prompt
    assert "France | capital | Paris" in answer_prompt  # the fallback's edges reach the answer


@pytest.mark.parametrize("reply", ["I think the capital edge is relevant.", '{"id": "deadbeef", "reasoning": "x"}',
                                   '{"id": '])
def test_a_reply_with_no_valid_id_falls_back(france_store: GraphStore, scripted_llm: ScriptedLLM,
                                             reply: str) -> None:
    scripted_llm.reply(reply)
    scripted_llm.reply("Paris.")
    answer, trace = ask(scripted(france_store, scripted_llm))
    assert answer == "Paris." and trace["outcome"] == "answered"
    assert_fallback(trace, "the model's reply named no valid edge id")


def test_a_timeout_on_selection_falls_back(france_store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.stall(30)
    scripted_llm.reply("Paris.")
    answer, trace = ask(scripted(france_store, scripted_llm, llm_timeout_s=0.5))
    assert answer == "Paris."
    assert_fallback(trace, "timed out after 0.5 s")


def test_a_model_that_selects_nothing_is_a_no_answer(france_store: GraphStore, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("NONE")
    answer, trace = ask(scripted(france_store, scripted_llm), "What is the anthem of France?")
    assert answer == "The knowledge graph does not answer this question."
    assert trace["status"] == trace["outcome"] == "no-answer" and trace["edges"] == []
    assert trace["selection_details"]["method"] == "model" and "fallbackReason" not in trace["selection_details"]
    assert len(scripted_llm.requests) == 1  # no answer call
    assert "Outcome: no answer" in "\n".join(trace_lines(trace))


def test_prompts_fit_the_configured_context_in_ranked_batches(sample_store: GraphStore,
                                                              scripted_llm: ScriptedLLM) -> None:
    context = 1500  # the question retrieves 76 edges: four prompts of this size cannot hold them all
    for _ in range(4):
        scripted_llm.reply(json.dumps({"id": CAPITAL_ID, "reasoning": "names the capital"}))
    scripted_llm.reply("Paris.")
    answer, trace = ask(scripted(sample_store, scripted_llm, llm_context=context))
    details = trace["selection_details"]
    prompts = [r.prompt for r in scripted_llm.requests[:-1]]
    assert len(prompts) == details["promptBatches"] == 4 and details["trimmedEdges"] > 0
    assert details["promptEdges"] + details["trimmedEdges"] == trace["edge_count"]
    assert all(estimate_tokens(p) <= context - REPLY_TOKENS for p in prompts)
    assert details["promptTokens"] == max(estimate_tokens(p) for p in prompts) and details["contextTokens"] == context
    assert CAPITAL_ID in prompts[0]  # ranked first by the deterministic selector
    assert [(e["labels"], e["selected_by"]) for e in trace["edges"]] == [(["France", "capital", "Paris"], "model")]
    assert answer == "Paris."


def test_a_refused_prompt_is_halved_and_the_model_still_chooses(sample_store: GraphStore,
                                                               scripted_llm: ScriptedLLM) -> None:
    scripted_llm.fail(400, "This model's maximum context length is 4096 tokens. However, your messages resulted "
                           "in 5335 tokens.")
    for _ in range(2):
        scripted_llm.reply(json.dumps({"id": CAPITAL_ID, "reasoning": "names the capital"}))
    scripted_llm.reply("Paris.")
    answer, trace = ask(scripted(sample_store, scripted_llm))
    details = trace["selection_details"]
    edges = trace["edge_count"]
    assert details["method"] == "model" and details["promptBatches"] == 3 and details["promptEdges"] == edges
    # edges in each prompt: its JSON lines, less the reply format's example line
    first, *halves = (r.prompt.count('{"id": ') - 1 for r in scripted_llm.requests[:3])
    assert first == edges > 2 * 8 and halves == [edges // 2, edges - edges // 2]
    assert details["batches"][0].startswith(f"1: {edges} edges offered, refused as too long (LLM returned HTTP 400: "
                                            "This model's maximum context length is 4096 tokens.")
    assert details["batches"][0].endswith("; halved") and len(details["batches"]) == 3
    assert [e["selected_by"] for e in trace["edges"]] == ["model"] and answer == "Paris."


def test_the_display_names_the_model_that_chose_an_edge() -> None:
    from server.cli.display import selection_lines

    edge = {"labels": ["France", "capital", "Paris"], "reasoning": "r", "selected_by": "model", "sources": []}
    assert "        Chosen by: the model (offline)" in selection_lines({"edges": [edge], "model": "offline"})
    assert "        Chosen by: the model" in selection_lines({"edges": [edge]})
    unexplained = {**edge, "reasoning": ""}  # a model's choice with no reason still says so
    assert "        Reason: (the model gave none)" in selection_lines({"edges": [unexplained]})
