"""Graph + passages: ``"passages": true`` on /api/graph-rag gives the answer the passages of the
collection's documents beside its edges, numbered after them; the trace records the passages retrieved,
those given to the answer and the spans its marks cite. Offline, when no edge answers, the passages'
best sentences answer; with a model (a scripted OpenAI-compatible server, the real openai client), the
prompt holds the chunks that state the selected edges and the question's best passages."""
from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from extraction_llm import graph_rag_reply
from flask.testing import FlaskClient
from scripted_llm import Recorded, Reply, ScriptedLLM

from server.config import Config
from server.http.app import create_app

TOKEN = "secret"
CANAL = ("Egypt's history is long. The Suez Canal was completed in 1869. It made Egypt a hub of trade. "
         "Britain seized control of the government in 1882.")
ALPS = "Switzerland is mostly mountains. The Alps cover the south of the country and the Jura the northwest."


def _client(tmp_path: Path, **llm: object) -> FlaskClient:
    return create_app(Config(store_path=str(tmp_path / "store"), load_sample=False, query_workers=0, token=TOKEN,
                             **llm)).test_client()


def _ingest(client: FlaskClient, text: str, name: str) -> None:
    response = client.post("/api/collections/docs/documents", data=text.encode(), query_string={"name": name},
                           headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
    assert response.status_code == 202, response.get_data(as_text=True)
    deadline = time.monotonic() + 60
    while (status := client.get(response.get_json()["url"]).get_json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert status["status"] == "ingested", status


def _ask(client: FlaskClient, question: str, **fields: object) -> dict:
    response = client.post("/api/graph-rag", json={"query": question, "collection": "docs", "streaming": False,
                                                   **fields})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _trace(client: FlaskClient, result: dict) -> dict:
    return client.get("/api/explain", query_string={"id": result["session"]}).get_json()


@pytest.fixture
def offline(tmp_path: Path) -> Iterator[FlaskClient]:
    client = _client(tmp_path)
    _ingest(client, CANAL, "egypt.txt")
    _ingest(client, ALPS, "alps.txt")
    yield client


def test_offline_passages_answer_what_no_edge_does_with_the_span_cited(offline: FlaskClient) -> None:
    question = "When was the Suez Canal completed?"
    assert _ask(offline, question)["outcome"] == "no-answer"  # the offline ingest extracts no edges
    result = _ask(offline, question, passages=True)
    assert result["outcome"] == "answered" and "1869 [1]" in result["answer"], result
    trace = _trace(offline, result)
    assert [p["selected"] for p in trace["passages"]][:1] == [True] and len(trace["passages"]) == 2
    assert trace["passages"][0]["chain"][-1]["title"] == "egypt.txt"
    [span] = trace["spans"]
    assert span["mark"] == 1 and span["quote"] == "The Suez Canal was completed in 1869."
    assert trace["edges"] == []


def test_passages_are_off_by_default_and_checked(offline: FlaskClient) -> None:
    result = _ask(offline, "When was the Suez Canal completed?", passages=False)
    assert result["outcome"] == "no-answer" and _trace(offline, result)["passages"] == []
    for bad in ("yes", -1, 51, 2.5):
        response = offline.post("/api/graph-rag", json={"query": "When?", "collection": "docs", "passages": bad})
        assert response.status_code == 400 and "passages" in response.get_json()["error"]["message"], bad
    result = _ask(offline, "When was the Suez Canal completed?", passages=1)
    assert len(_trace(offline, result)["passages"]) == 1


def test_tg_invoke_graph_rag_with_passages_prints_them_and_the_cited_span(
        offline: FlaskClient, capsys: pytest.CaptureFixture[str]) -> None:
    from werkzeug.serving import make_server

    from server.cli.tg_invoke import main

    server = make_server("127.0.0.1", 0, offline.application, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert main(["-u", url, "-C", "docs", "-n", "2", "-x", "-q", "When was the Suez Canal completed?"]) == 0
        out, err = capsys.readouterr()
    finally:
        server.shutdown()
    assert out == "The Suez Canal was completed in 1869 [1].\n"
    _assert_passage_blocks(err)


def test_each_block_shows_what_its_step_recorded_even_before_the_next_is(offline: FlaskClient) -> None:
    """The display driven by the pipeline itself, as ``glassgraph ask`` does: each block's trace is read while
    the pipeline waits at that step's event, so the answer (and the marks citing the passages) is not recorded
    when the selection block is shown. A client over HTTP may read it before or after the answer is recorded;
    either way the blocks are the same."""
    from server.cli.display import StreamDisplay
    from server.explain.trace import read_trace
    from server.rag.retrieval import RetrievalLimits

    runtime = offline.application.extensions["glassgraph.runtime"]
    messages = (m.to_dict() for m in runtime.pipeline.run("When was the Suez Canal completed?", "docs", True,
                                                           RetrievalLimits(passages=2)))
    out, err = io.StringIO(), io.StringIO()
    StreamDisplay(out, err, lambda iri: read_trace(runtime.store, iri), passages=True).run(messages)
    assert out.getvalue() == "The Suez Canal was completed in 1869 [1].\n"
    _assert_passage_blocks(err.getvalue())


def _assert_passage_blocks(err: str) -> None:
    """The explain blocks of the Suez Canal question asked with two passages: the graph's (no edges) and the
    passages retrieved, the one used (its mark under the answer, which records it) and the cited span."""
    blocks = {block.split(" ", 1)[0]: block.splitlines()[1:] for block in err.strip().split("\n\n")}
    assert list(blocks) == ["[session]", "[retrieval]", "[selection]", "[answer]"], err
    retrieved = blocks["[retrieval]"]
    assert retrieved[:2] == ["    Retrieved 0 edge(s)", "    Retrieved 2 passage(s) for: Canal, Suez, completed"], err
    assert len(retrieved) == 4 and retrieved[2].startswith("    1. Chunk 1 ") and '"egypt.txt"' in retrieved[2], err
    assert blocks["[selection]"] == ["    Selected 0 edge(s)", "    Used 1 passage(s): #1"], err
    used, passage, quote = blocks["[answer]"]
    assert used == "    Used 1 passage(s): #1 as [1]", err
    assert passage.startswith("    Passage [1]: Chunk 1 (chars ") and passage.endswith('"egypt.txt"'), err
    assert quote == "      “The Suez Canal was completed in 1869.”", err


def _answer_citing_the_canal_passage(request: Recorded) -> Reply:
    """Extraction and selection as :func:`graph_rag_reply`; the answer cites edge 1 and the passage whose
    text holds 1869 by its number in the prompt."""
    prompt = request.prompt
    if "Answer the question using only the facts" not in prompt:
        return graph_rag_reply(request)
    number = next(int(n) for n, text in re.findall(r"^\[(\d+)\] (.*)$", prompt, re.MULTILINE) if "1869" in text)
    return Reply(f"Egypt is mentioned with Britain [1]. The canal was completed in 1869 [{number}].")


def test_a_model_is_given_the_passages_after_the_edges_and_its_passage_marks_are_spans(
        tmp_path: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.responder = _answer_citing_the_canal_passage
    client = _client(tmp_path, llm="openai", llm_base_url=scripted_llm.base_url, llm_model="scripted-model",
                     llm_retries=0)
    _ingest(client, CANAL, "egypt.txt")
    _ingest(client, ALPS, "alps.txt")
    result = _ask(client, "What is Egypt mentioned with, and when was the Suez Canal completed?", passages=True)
    prompt = scripted_llm.requests[-1].prompt
    edges = re.findall(r"^\[(\d+)\] .* \| .* \| .*$", prompt, re.MULTILINE)
    passages = prompt.split("Passages:", 1)[1]
    assert edges and f"[{len(edges) + 1}] " in passages and "Britain seized control" in passages
    trace = _trace(client, result)
    assert result["outcome"] == "answered" and "1869" in result["answer"], result
    assert [s["quote"] for s in trace["spans"]] == ["The Suez Canal was completed in 1869."]
    assert trace["spans"][0]["mark"] > len(edges) and trace["spans"][0]["chain"][-1]["title"] == "egypt.txt"
    assert trace["edges"] and all(p["selected"] for p in trace["passages"] if p["rank"] <= 2)


def test_the_trace_page_of_a_graph_session_with_passages_shows_edges_passages_and_cited_sentences(
        offline: FlaskClient) -> None:
    result = _ask(offline, "When was the Suez Canal completed?", passages=True)
    page = offline.get("/console/trace", query_string={"id": result["session"]}).get_data(as_text=True)
    assert "<h2>Selected edges</h2>" in page and "<h2>Retrieved passages</h2>" in page
    assert "<h3>Cited sentences</h3>" in page and '"The Suez Canal was completed in 1869."' in page
    start = CANAL.index("The Suez")
    assert f"offset={start}&amp;length=37#span" in page
