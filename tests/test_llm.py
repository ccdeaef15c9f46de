"""LLM providers and selection parsing: the real openai client against the scripted server on
127.0.0.1, the tolerant JSONL parser, and the deterministic offline provider."""
from __future__ import annotations

import json

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted_llm import ScriptedLLM

from server.config import Config
from server.rag.llm import NO_ANSWER, LLMError, render_prompt, selection_reply_tokens
from server.rag.offline import OfflineLLM
from server.rag.openai_llm import OpenAILLM
from server.rag.providers import make_llm
from server.rag.retrieval import edge_id
from server.rag.selection import parse_selection

FRANCE = [
    ("France", "borders", "Spain"),
    ("France", "borders", "Belgium"),
    ("France", "borders", "Germany"),
    ("France", "languages", "French"),
    ("France", "religions", "Roman Catholic"),
    ("France", "capital", "Paris"),
    ("France", "climate", "generally cool winters and mild summers"),
    ("France", "population", "68,374,591"),
    ("Spain", "capital", "Madrid"),
    ("Belgium", "capital", "Brussels"),
    ("Paris", "located in", "France"),
    ("Andorra", "borders", "France"),
]
EDGES = [(edge_id(*edge), edge) for edge in FRANCE]
IDS = [eid for eid, _ in EDGES]
CAPITAL = edge_id("France", "capital", "Paris")


def openai_llm(server: ScriptedLLM, timeout: float = 10.0, retries: int = 0) -> OpenAILLM:
    config = Config(llm="openai", llm_base_url=server.base_url, llm_model="test-model",
                    llm_timeout_s=timeout, llm_retries=retries)
    llm = make_llm(config)
    assert isinstance(llm, OpenAILLM)
    return llm


# --- openai provider against the scripted server ---------------------------------------------

def test_select_is_one_chat_completion_with_the_edges_in_the_prompt(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(json.dumps({"id": CAPITAL, "reasoning": "capital of France"}))
    llm = openai_llm(scripted_llm)
    text = llm.select("What is the capital of France?", EDGES)
    assert parse_selection(text, IDS) == [(CAPITAL, "capital of France")]
    [request] = scripted_llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "test-model" == llm.model
    assert request.body["stream"] is True  # closing a stream is how a local server learns to stop
    assert request.body["max_tokens"] == selection_reply_tokens(len(EDGES))
    assert "What is the capital of France?" in request.prompt
    for eid, (s, p, o) in EDGES:
        assert json.dumps({"id": eid, "s": s, "p": p, "o": o}) in request.prompt


def test_answer_streams_deltas_from_the_selected_edges_only(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(pieces=["The capital ", "of France ", "is Paris."])
    pieces = list(openai_llm(scripted_llm).answer("What is the capital of France?", [FRANCE[5]]))
    assert pieces == ["The capital ", "of France ", "is Paris."]
    [request] = scripted_llm.requests
    assert request.body["stream"] is True
    assert "France | capital | Paris" in request.prompt
    assert "Spain" not in request.prompt and "What is the capital of France?" in request.prompt


def test_timeout_is_an_llm_error_naming_the_timeout_and_endpoint(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.stall(30)
    with pytest.raises(LLMError) as caught:
        openai_llm(scripted_llm, timeout=0.3).select("q?", EDGES)
    assert str(caught.value) == f"LLM request timed out after 0.3 s ({scripted_llm.base_url})"


def test_stream_that_stalls_midway_is_a_timeout(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("The capital of France is Paris.", piece_delay_s=30)
    pieces = []
    with pytest.raises(LLMError, match="timed out after 0.3 s"):
        for piece in openai_llm(scripted_llm, timeout=0.3).answer("q?", [FRANCE[5]]):
            pieces.append(piece)
    assert pieces == []  # the first delta never arrived


@pytest.mark.parametrize("streaming", [False, True])
def test_http_500_is_an_llm_error_with_the_status_and_message(scripted_llm: ScriptedLLM, streaming: bool) -> None:
    scripted_llm.fail(500, "model exploded\nbadly")
    llm = openai_llm(scripted_llm)
    with pytest.raises(LLMError) as caught:
        list(llm.answer("q?", [FRANCE[5]])) if streaming else llm.select("q?", EDGES)
    assert str(caught.value) == f"LLM returned HTTP 500: model exploded badly ({scripted_llm.base_url})"
    assert "\n" not in str(caught.value)


def test_error_event_in_the_middle_of_a_stream(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(pieces=["The capital "], stream_error="context overflow")
    stream = openai_llm(scripted_llm).answer("q?", [FRANCE[5]])
    assert next(stream) == "The capital "
    with pytest.raises(LLMError, match="LLM reported an error: context overflow"):
        next(stream)


def test_retries_from_config_reach_the_client(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.fail(500)
    scripted_llm.reply(json.dumps({"id": CAPITAL, "reasoning": "second try"}))
    assert parse_selection(openai_llm(scripted_llm, retries=1).select("q?", EDGES), IDS) == [(CAPITAL, "second try")]
    assert len(scripted_llm.requests) == 2


def test_unreachable_endpoint_is_an_llm_error() -> None:
    server = ScriptedLLM()
    server.close()  # the port is free again: nothing listens there
    with pytest.raises(LLMError, match=f"cannot connect to the LLM at {server.base_url}"):
        openai_llm(server).select("q?", EDGES)


def test_broken_jsonl_reply_is_parsed_tolerantly(scripted_llm: ScriptedLLM) -> None:
    paris_located = edge_id("Paris", "located in", "France")
    scripted_llm.reply(
        "Here you go:\n```json\n"
        f'{{"id": "{CAPITAL}", "reasoning": "France\'s capital is asked for"}}\n'
        '{"id": "deadbeef", "reasoning": "not an edge"}\n'
        "this line is not JSON at all\n\n"
        f'{{"id": "{CAPITAL}", "reasoning": "repeated"}}\n'
        f'{{"id": "{paris_located}", "reasoning": "truncated reaso\n'
        "```\n"
    )
    text = openai_llm(scripted_llm).select("What is the capital of France?", EDGES)
    expected = [(CAPITAL, "France's capital is asked for"), (paris_located, "truncated reaso")]
    assert parse_selection(text, IDS) == expected


def test_models_endpoint_answers_the_openai_client(scripted_llm: ScriptedLLM) -> None:
    import openai

    client = openai.OpenAI(base_url=scripted_llm.base_url, api_key="none", max_retries=0)
    assert [m.id for m in client.models.list()] == [ScriptedLLM.model]


def test_make_llm_chooses_the_provider() -> None:
    assert make_llm(Config(llm="offline")).model == "offline"
    with pytest.raises(ValueError, match="unknown LLM provider 'gpt'"):
        make_llm(Config(llm="gpt"))
    with pytest.raises(ValueError, match="GLASSGRAPH_LLM_API_KEY"):
        make_llm(Config(llm="openai", llm_base_url=None, llm_api_key=None))


def test_prompts_refuse_missing_parameters() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_prompt("select", question="q?", edges=EDGES)  # max_edges missing
    prompt = render_prompt("synthesize", question="Où est <Paris> & co?", edges=[("Côte d'Ivoire", "capital", "A & B")])
    assert "Où est <Paris> & co?" in prompt and "Côte d'Ivoire | capital | A & B" in prompt  # no HTML escaping


# --- parse_selection ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"id": "aaaa1111", "reasoning": "r1"}\n{"id": "bbbb2222", "reasoning": "r2"}',
         [("aaaa1111", "r1"), ("bbbb2222", "r2")]),
        ('```jsonl\n{"id": "bbbb2222", "reasoning": "r2"}\n```', [("bbbb2222", "r2")]),
        ('\n\n  {"id": "aaaa1111"}  \n\n', [("aaaa1111", "")]),  # missing reasoning
        ('{"id": "aaaa1111", "reasoning": null}', [("aaaa1111", "")]),
        ('{"id": "zzzz9999", "reasoning": "x"}\n{"id": "aaaa1111", "reasoning": "y"}', [("aaaa1111", "y")]),
        ('{"id": "aaaa1111", "reasoning": "first"}\n{"id": "aaaa1111", "reasoning": "second"}',
         [("aaaa1111", "first")]),
        ('{"id": 12345678, "reasoning": "number"}', [("12345678", "number")]),
        ('{"id": 00001234, "reasoning": "leading zeros"}', [("00001234", "leading zeros")]),
        ('{"id": true}\n{"id": ["aaaa1111"]}', []),
        ('The relevant edge is {"id": "aaaa1111", "reasoning": "r"} and that is all.', [("aaaa1111", "r")]),
        ('{"id": "aaaa1111", "reasoning": "a"} {"id": "bbbb2222", "reasoning": "b"}',
         [("aaaa1111", "a"), ("bbbb2222", "b")]),
        ('{\n  "id": "bbbb2222",\n  "reasoning": "spread\\nover lines"\n}\n{\n"id": "aaaa1111"\n}',
         [("bbbb2222", "spread over lines"), ("aaaa1111", "")]),
        ('[{"id": "bbbb2222", "reasoning": "b"}, {"id": "aaaa1111", "reasoning": "a"}]',
         [("bbbb2222", "b"), ("aaaa1111", "a")]),
        ('{"selected": [{"reasoning": "wrapped", "id": "aaaa1111"}]}', [("aaaa1111", "wrapped")]),
        ('{"id": "AAAA1111 ", "reasoning": "case and space"}', [("aaaa1111", "case and space")]),
        ("{'id': 'bbbb2222', 'reasoning': 'python dict'}", [("bbbb2222", "python dict")]),
        ('{"id": "aaaa1111", "reasoning": "cut off', [("aaaa1111", "cut off")]),
        ('{"id": "bbbb2222", "reasoning": "ok"}\n{"id": "aaaa1111", "reas', [("bbbb2222", "ok"), ("aaaa1111", "")]),
        ('{"edge_id": "aaaa1111", "reasoning": "other key"}', [("aaaa1111", "other key")]),
        ('{"valid": 12345678}\nNo edges help.', []),
        ("", []),
    ],
)
def test_parse_selection(text: str, expected: list[tuple[str, str]]) -> None:
    assert parse_selection(text, ["aaaa1111", "bbbb2222", "12345678", "00001234"]) == expected


VALID = ["aaaa1111", "bbbb2222", "cccc3333", "12345678"]
_line = st.one_of(
    st.builds(lambda i, r: json.dumps({"id": i, "reasoning": r}), st.sampled_from(VALID + ["ffff0000"]), st.text()),
    st.builds(lambda i: json.dumps({"id": i}), st.sampled_from(VALID)),
    st.text(),
    st.just("```json"),
)


@given(st.lists(_line, max_size=12), st.booleans())
def test_parse_selection_only_returns_valid_ids_once(lines: list[str], crlf: bool) -> None:
    result = parse_selection(("\r\n" if crlf else "\n").join(lines), VALID)
    ids = [i for i, _ in result]
    assert set(ids) <= set(VALID)
    assert len(ids) == len(set(ids))
    assert all(isinstance(reason, str) and "\n" not in reason for _, reason in result)


@given(st.lists(st.tuples(st.sampled_from(VALID), st.text(max_size=40)), max_size=10))
def test_parse_selection_reads_well_formed_jsonl_exactly(entries: list[tuple[str, str]]) -> None:
    text = "\n".join(json.dumps({"id": i, "reasoning": r}) for i, r in entries)
    expected: dict[str, str] = {}
    for i, r in entries:
        expected.setdefault(i, " ".join(r.split()))
    assert parse_selection(text, VALID) == list(expected.items())


# --- offline provider --------------------------------------------------------------------------

def test_offline_picks_the_capital_edge_with_a_reason_and_answers_paris() -> None:
    llm = OfflineLLM()
    selection = parse_selection(llm.select("What is the capital of France?", EDGES), IDS)
    assert selection == [(CAPITAL, "Deterministic selector: the question asks about 'capital'; this edge links "
                                   "France to Paris by 'capital' (France, which the question names).")]
    by_id = dict(EDGES)
    answer = list(llm.answer("What is the capital of France?", [by_id[i] for i, _ in selection]))
    assert len(answer) > 1
    assert "".join(answer) == "The capital of France is Paris [1]."


def test_offline_matches_lemmas_and_groups_the_answer() -> None:
    llm = OfflineLLM()
    selection = parse_selection(llm.select("Which countries does France border?", EDGES), IDS)
    by_id = dict(EDGES)
    # "border" ~ "borders", in edge order; France's own borders, so not also the edge into France
    assert [by_id[i] for i, _ in selection] == [FRANCE[0], FRANCE[1], FRANCE[2]]
    assert all("asks about 'border'" in reason for _, reason in selection)
    assert "".join(llm.answer("q", [by_id[i] for i, _ in selection])) == (
        "The borders of France are Spain, Belgium and Germany [1][2][3]."
    )


def test_offline_answer_tells_a_symmetric_fact_once() -> None:
    edges = [("Germany", "borders", "Austria"), ("Germany", "borders", "Belgium"), ("Austria", "borders", "Germany"),
             ("Belgium", "borders", "Germany"), ("Andorra", "borders", "France"), ("Austria", "capital", "Vienna")]
    assert "".join(OfflineLLM().answer("Which countries border Germany?", edges)) == (
        "The borders of Germany are Austria and Belgium [1][2][3][4]. The borders of Andorra are France [5]. "
        "The capital of Austria is Vienna [6]."  # a reverse edge told once is marked with its twin
    )


def test_offline_follows_the_question_from_the_named_entity_through_two_relations() -> None:
    edges = [(edge_id(*e), e) for e in [
        ("Heat", "directed_by", "Michael Mann"),
        ("Heat", "in_language", "English"),
        ("Heat", "release_year", "1995"),
        ("Thief", "directed_by", "Michael Mann"),
        ("Thief", "in_language", "English"),
        ("Alien", "in_language", "English"),
    ]]
    text = OfflineLLM().select("what languages are the films directed by Michael Mann in", edges)
    by_id = dict(edges)
    picked = [by_id[i] for i, _ in parse_selection(text, [i for i, _ in edges])]
    assert picked == [("Heat", "directed_by", "Michael Mann"), ("Heat", "in_language", "English"),
                      ("Thief", "directed_by", "Michael Mann"), ("Thief", "in_language", "English")]
    assert "".join(OfflineLLM().answer("q", picked[:3])) == (
        "Heat and Thief were directed by Michael Mann [1][3]. The language of Heat is English [2]."
    )


def test_offline_is_deterministic_and_selects_nothing_without_overlap() -> None:
    question = "Tell me about France and its capital"
    first = OfflineLLM().select(question, EDGES)
    assert first == OfflineLLM().select(question, list(reversed(EDGES)))
    assert first == OfflineLLM().select(question, EDGES)
    assert OfflineLLM().select("Who wrote Hamlet?", EDGES) == ""
    assert OfflineLLM().select("anything", []) == ""
    assert "".join(OfflineLLM().answer("Who wrote Hamlet?", [])) == NO_ANSWER
