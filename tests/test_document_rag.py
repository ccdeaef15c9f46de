"""Document RAG: documents ingested over HTTP, then asked through /api/document-rag (offline); the trace's
passages and cited spans read back; deleted documents never retrieved again; an embeddings server that is
down or answers vectors of another size is a clear error, at ingest with nothing written."""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from pyoxigraph import NamedNode

from server.config import Config
from server.errors import EmbeddingsFailed
from server.http.app import create_app
from server.ingest.catalog import delete_document, list_documents
from server.ingest.documents import Ingester
from server.rag.label_index import LabelIndex
from server.rag.passage_answer import best_sentences
from server.rag.passage_embedders import LocalEmbedder, OpenAIEmbedder
from server.rag.passage_index import COMMON_FLOOR, PassageIndex, PassageRow, make_passage_index
from server.store import GraphStore

TOKEN = "secret"
CANAL = ("Egypt's history is long. The Suez Canal was completed in 1869. It made Egypt a hub of trade. "
         "Britain seized control of the government in 1882.")
ALPS = "Switzerland is mostly mountains. The Alps cover the south of the country and the Jura the northwest."


@pytest.fixture
def client(tmp_path: Path) -> Iterator[FlaskClient]:
    app = create_app(Config(store_path=str(tmp_path / "store"), load_sample=False, query_workers=0, token=TOKEN))
    yield app.test_client()


def ingest(client: FlaskClient, text: str, name: str, **options: object) -> dict:
    response = client.post("/api/collections/docs/documents", data=text.encode(),
                           query_string={"name": name, **options},
                           headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
    assert response.status_code == 202, response.get_data(as_text=True)
    url = response.get_json()["url"]
    deadline = time.monotonic() + 60
    while (status := client.get(url).get_json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert status["status"] == "ingested", status
    return status


def ask(client: FlaskClient, question: str) -> dict:
    response = client.post("/api/document-rag", json={"query": question, "collection": "docs", "streaming": False})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_an_ingested_document_answers_with_the_span_it_rests_on(client: FlaskClient) -> None:
    ingest(client, CANAL, "egypt.txt")
    ingest(client, ALPS, "alps.txt")
    result = ask(client, "When was the Suez Canal completed?")
    assert result["outcome"] == "answered"
    assert result["answer"] == "The Suez Canal was completed in 1869 [1]."
    assert result["explain_kinds"] == ["session", "retrieval", "selection", "answer"]
    trace = client.get("/api/explain", query_string={"id": result["session"]}).get_json()
    assert trace["status"] == "answered" and trace["question"] == "When was the Suez Canal completed?"
    assert trace["query_terms"] == ["Canal", "Suez", "completed"]
    [span] = trace["spans"]
    assert span["mark"] == 1 and span["quote"] == "The Suez Canal was completed in 1869."
    assert span["offset"] == CANAL.index("The Suez") and span["length"] == len(span["quote"])
    assert [node["type"] for node in span["chain"]] == ["Chunk", "Page", "Document"]
    assert span["chain"][-1]["title"] == "egypt.txt"
    assert [p["rank"] for p in trace["passages"]] == [1, 2]  # both documents retrieved, ranked
    assert trace["passages"][0]["chunk"] == span["chunk"] and trace["passages"][0]["selected"]
    assert not trace["passages"][1]["selected"]
    assert trace["passages"][0]["lexical"] > 0 and trace["passages"][0]["fused"] > trace["passages"][1]["fused"]



SUEZ_MARKDOWN = ("# The Suez Canal\n\nThe Suez Canal is an artificial waterway in Egypt connecting the Mediterranean "
                 "Sea to the Red Sea. It was completed in 1869 after ten years of construction. Ships pay tolls.\n")
HOOVER_TEXT = ("The Hoover Dam\n\nThe Hoover Dam was built on the Colorado River during the Great Depression. "
               "It was dedicated in 1935 by President Roosevelt.\n")


@pytest.mark.parametrize("text, question, answer", [
    (SUEZ_MARKDOWN, "When was the Suez Canal completed?", "1869"),
    (HOOVER_TEXT, "When was the Hoover Dam dedicated?", "1935"),
])
def test_a_sentence_naming_its_subject_by_a_pronoun_answers_and_a_title_is_never_quoted(
        text: str, question: str, answer: str) -> None:
    """A newcomer's documents: the heading (a title line) held the question's names and was quoted as the answer;
    the sentence that answers says "It"."""
    sentences = best_sentences(question, [text], LocalEmbedder())
    assert any(answer in s.text for s in sentences), sentences
    assert not any(s.text.startswith("#") or "\n" in text[s.end:s.end + 2] and s.text.count(" ") < 4
                   for s in sentences), sentences
    assert [s.start for s in sentences] == sorted(s.start for s in sentences)  # one passage's, in its order

def test_a_question_the_documents_do_not_answer_is_no_answer(client: FlaskClient) -> None:
    ingest(client, CANAL, "egypt.txt")
    result = ask(client, "Who won the 1998 World Cup?")
    assert (result["outcome"], result["answer"]) == ("no-answer", "The documents do not answer this question.")


def test_a_question_naming_what_no_passage_mentions_is_no_answer_and_says_which(client: FlaskClient) -> None:
    ingest(client, CANAL + " Egypt's canal opened to trade in 1869 after ten years of work.", "egypt.txt")
    ingest(client, "The Australian colonies federated in 1901.", "australia.txt")
    result = ask(client, "When did Napoleon open the canal of Egypt to trade?")  # it shares every other word
    assert result["outcome"] == "no-answer"
    trace = client.get("/api/explain", query_string={"id": result["session"]}).get_json()
    assert trace["unmentioned"] == ["napoleon"] and not any(p["selected"] for p in trace["passages"])
    assert ask(client, "When did Egypt open the canal to trade?")["outcome"] == "answered"  # nothing unnamed
    assert ask(client, "When did the colonies of Australia federate?")["outcome"] == "answered"  # Australian


def test_a_deleted_document_is_never_retrieved_and_its_new_version_is(client: FlaskClient) -> None:
    old = ingest(client, CANAL, "egypt.txt")
    assert ask(client, "When was the Suez Canal completed?")["outcome"] == "answered"
    new = ingest(client, CANAL.replace("1869", "1870"), "egypt.txt")  # a new version, then the old one goes
    deleted = client.delete(f"/api/collections/docs/documents/{old['id']}",
                            headers={"Authorization": f"Bearer {TOKEN}"})
    assert deleted.status_code in (200, 204), deleted.get_data(as_text=True)
    result = ask(client, "When was the Suez Canal completed?")
    assert result["answer"] == "The Suez Canal was completed in 1870 [1]."
    trace = client.get("/api/explain", query_string={"id": result["session"]}).get_json()
    assert {p["chunk"].split("/p")[0] for p in trace["passages"]} == {new["iri"]}
    client.delete(f"/api/collections/docs/documents/{new['id']}", headers={"Authorization": f"Bearer {TOKEN}"})
    ingest(client, ALPS, "alps.txt")  # the collection stays, the canal goes
    trace = client.get("/api/explain", query_string={
        "id": ask(client, "When was the Suez Canal completed?")["session"]}).get_json()
    assert all("Suez" not in (p["chain"][0]["text"] or "") for p in trace["passages"])


def test_an_old_trace_quotes_no_span_its_chunk_no_longer_holds(client: FlaskClient) -> None:
    old = ingest(client, CANAL, "egypt.txt")
    result = ask(client, "When was the Suez Canal completed?")
    client.delete(f"/api/collections/docs/documents/{old['id']}", headers={"Authorization": f"Bearer {TOKEN}"})
    ingest(client, CANAL, "egypt.txt", chunk_size=30, chunk_overlap=0)  # the same IRIs, shorter chunks
    [span] = client.get("/api/explain", query_string={"id": result["session"]}).get_json()["spans"]
    assert span["quote"] is None and span["offset"] + span["length"] > 30


class _Embeddings:
    """An OpenAI-compatible /v1/embeddings server on loopback answering vectors of ``dimensions``."""

    def __init__(self) -> None:
        self.dimensions = 8
        self.inputs: list[str] = []  # every text embedded so far
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.inputs += body["input"]
                data = [{"object": "embedding", "index": i,
                         "embedding": [float(len(text) % 7 + 1)] + [0.5] * (owner.dimensions - 1)}
                        for i, text in enumerate(body["input"])]
                payload = json.dumps({"object": "list", "data": data, "model": body["model"],
                                      "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


@pytest.fixture
def embeddings() -> Iterator[_Embeddings]:
    server = _Embeddings()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _ingester(store: GraphStore, url: str, tmp_path: Path) -> tuple[Ingester, PassageIndex]:
    config = Config(embeddings="openai", embeddings_base_url=url, embeddings_model="tiny", embeddings_timeout_s=5)
    index = PassageIndex(store, OpenAIEmbedder(config), str(tmp_path / "passages.sqlite"))
    return Ingester(store, LabelIndex(store), None, index), index


def test_an_embeddings_server_that_is_down_fails_the_ingest_with_nothing_written(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "store")
    ingester, index = _ingester(store, "http://127.0.0.1:9/v1", tmp_path)  # the discard port: refused
    with pytest.raises(EmbeddingsFailed, match="the embeddings server http://127.0.0.1:9/v1 failed"):
        ingester.ingest(CANAL.encode(), "docs", name="egypt.txt")
    assert list_documents(store, "docs") == [] and index.count("docs") == 0


def test_vectors_of_another_size_fail_at_ingest_and_at_question_time(tmp_path: Path,
                                                                     embeddings: _Embeddings) -> None:
    store = GraphStore(tmp_path / "store")
    ingester, index = _ingester(store, embeddings.url, tmp_path)
    ingester.ingest(CANAL.encode(), "docs", name="egypt.txt")
    assert index.count("docs") == 1 and index.search("docs", "Suez Canal", 1)[0].chunk.endswith("/p1/c1")
    embeddings.dimensions = 4
    with pytest.raises(EmbeddingsFailed, match="vectors of 4 dimensions; the passage index holds 8"):
        ingester.ingest(ALPS.encode(), "docs", name="alps.txt")
    assert [d["title"] for d in list_documents(store, "docs")] == ["egypt.txt"] and index.count("docs") == 1
    with pytest.raises(EmbeddingsFailed, match="a vector of 4 dimensions for the question; the passage index holds 8"):
        index.search("docs", "Suez Canal", 1)


def test_the_cli_ingest_indexes_passages_beside_the_store_and_reindex_counts_them(tmp_path: Path) -> None:
    from tests.test_cli import GLASSGRAPH, run

    (tmp_path / "egypt.txt").write_text(CANAL, encoding="utf-8")
    env = {"GLASSGRAPH_STORE": str(tmp_path / "store"), "GLASSGRAPH_LOAD_SAMPLE": "0"}
    result = run(GLASSGRAPH, "ingest", str(tmp_path / "egypt.txt"), "-C", "docs", env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "store.passages.sqlite").is_file()
    reindexed = run(GLASSGRAPH, "reindex", "-C", "docs", env=env)
    assert reindexed.returncode == 0, reindexed.stderr
    assert reindexed.stdout.split()[-3:] == ["docs", "0", "1"]  # no labels (no LLM), one passage
    store = GraphStore(tmp_path / "store")
    index = PassageIndex(store, OpenAIEmbedder(Config(embeddings="openai", embeddings_base_url="http://127.0.0.1:9/v1")),
                         str(tmp_path / "store.passages.sqlite"))
    with pytest.raises(EmbeddingsFailed, match="holds vectors of wordllama/l2_supercat/256, not of the configured "
                                               "openai/text-embedding-3-small"):
        index.search("docs", "Suez", 1)


def test_glassgraph_explain_prints_the_passages_and_the_cited_sentence(client: FlaskClient) -> None:
    from server.cli.display import trace_lines

    ingest(client, CANAL, "egypt.txt")
    result = ask(client, "When was the Suez Canal completed?")
    lines = trace_lines(client.get("/api/explain", query_string={"id": result["session"]}).get_json())
    start = CANAL.index("The Suez")
    assert "    Retrieved 1 passage(s) for: Canal, Suez, completed" in lines
    assert f'    Passage [1]: Chunk 1 (chars {start}-{start + 37}) → Page 1 → "egypt.txt"' in lines
    assert "      “The Suez Canal was completed in 1869.”" in lines
    assert "    Used 1 passage(s): #1 as [1]" in lines


def test_tg_invoke_document_rag_prints_the_answer_and_the_cited_span(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from werkzeug.serving import make_server

    from server.cli.tg_invoke import main_documents

    app = create_app(Config(store_path=str(tmp_path / "store"), load_sample=False, query_workers=0, token=TOKEN))
    ingest(app.test_client(), CANAL, "egypt.txt")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert main_documents(["-u", url, "-C", "docs", "-x", "-q", "When was the Suez Canal completed?"]) == 0
        out, err = capsys.readouterr()
        assert out == "The Suez Canal was completed in 1869 [1].\n"
        start = CANAL.index("The Suez")
        assert f'    Passage [1]: Chunk 1 (chars {start}-{start + 37}) → Page 1 → "egypt.txt"' in err.splitlines()
        assert "    Used 1 passage(s): #1 as [1]" in err.splitlines()
        assert main_documents(["-u", url, "-C", "nosuch", "-q", "Anything?"]) == 1
        assert "no collection 'nosuch'" in capsys.readouterr().err
    finally:
        server.shutdown()


def test_the_trace_as_rdf_holds_the_passages_and_spans(client: FlaskClient) -> None:
    ingest(client, CANAL, "egypt.txt")
    session = ask(client, "When was the Suez Canal completed?")["session"]
    turtle = client.get("/api/explain", query_string={"id": session},
                        headers={"Accept": "application/n-triples"}).get_data(as_text=True)
    uuid = session.rsplit(":", 1)[1]
    assert f"<urn:trustgraph:prov:passage:{uuid}:1> <https://trustgraph.ai/ns/fusedScore>" in turtle
    assert f"<urn:trustgraph:prov:span:{uuid}:1> <https://trustgraph.ai/ns/charOffset>" in turtle


def test_chunks_deleted_by_a_sparql_update_are_never_retrieved_again(client: FlaskClient) -> None:
    ingest(client, CANAL, "egypt.txt")
    ingest(client, ALPS, "alps.txt")
    assert ask(client, "When was the Suez Canal completed?")["outcome"] == "answered"
    update = ("DELETE WHERE { GRAPH <urn:trustgraph:graph:docs:source> { ?c a <https://trustgraph.ai/ns/Chunk> ; "
              "<http://www.w3.org/ns/prov#wasDerivedFrom> ?p . ?p <http://www.w3.org/ns/prov#wasDerivedFrom> ?d . "
              "?d <http://purl.org/dc/elements/1.1/title> 'egypt.txt' } }")
    response = client.post("/sparql", data={"update": update}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code in (200, 204), response.get_data(as_text=True)
    trace = client.get("/api/explain", query_string={
        "id": ask(client, "When was the Suez Canal completed?")["session"]}).get_json()
    assert trace["outcome"] == "no-answer"
    assert [p["chain"][-1]["title"] for p in trace["passages"]] == ["alps.txt"]


def test_a_collection_whose_name_contains_another_s_keeps_its_passages_apart(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "store")
    index = PassageIndex(store, LocalEmbedder(), str(tmp_path / "passages.sqlite"))
    ingester = Ingester(store, LabelIndex(store), None, index)
    ingester.ingest(CANAL.encode(), "docs-b", name="egypt.txt")  # its name holds the token "docs"
    ingester.ingest(ALPS.encode(), "docs", name="alps.txt")
    found = index.search("docs", "When was the Suez Canal completed?", 5)
    assert [p.document for p in found] == [d["iri"] for d in list_documents(store, "docs")]
    assert all(p.lexical_rank is None for p in found)  # no word of the question is in the Alps text


def test_an_index_file_of_an_older_schema_is_emptied_and_rebuilt_from_the_store(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "store")
    Ingester(store, LabelIndex(store), None, None).ingest(CANAL.encode(), "docs", name="egypt.txt")
    path = tmp_path / "passages.sqlite"
    with sqlite3.connect(path) as old:  # the first release's layout: one FTS table for every collection
        old.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                          "CREATE TABLE passage(id INTEGER PRIMARY KEY, collection TEXT, chunk TEXT, document TEXT, "
                          "heading TEXT, text TEXT, vector BLOB);"
                          "CREATE VIRTUAL TABLE fts USING fts5(heading, text, collection, content='passage', "
                          "content_rowid='id');"
                          "INSERT INTO passage VALUES (1, 'docs', 'urn:gone', 'urn:gone', '', 'stale text', x'00');")
    index = PassageIndex(store, LocalEmbedder(), str(path))
    found = index.search("docs", "When was the Suez Canal completed?", 5)
    assert [p.chunk for p in found] != [] and "urn:gone" not in [p.chunk for p in found]
    assert found[0].lexical_rank == 1 and "1869" in found[0].text
    assert index.count("docs") == 1


def test_a_question_of_only_common_words_still_searches_by_the_rarest(tmp_path: Path) -> None:
    index = PassageIndex(GraphStore(None), LocalEmbedder(), str(tmp_path / "passages.sqlite"))
    index.sync("big")  # the store has no chunks: the passages added next are all the collection holds
    rows = [PassageRow(f"urn:x:c{i}", f"urn:x:d{i}", "", "river valley " + ("field" if i % 12 == 0 else "harbour"))
            for i in range(COMMON_FLOOR + 200)]
    index.add("big", rows, index.embed_rows(rows))
    found = index.search("big", "river harbour", 50)  # both words are in more passages than the floor
    lexical = [p for p in found if p.lexical_rank is not None]
    assert len(lexical) >= 20 and all("harbour" in p.text for p in lexical)  # the rarer of the two is searched

def _qdrant_store(tmp_path: Path, embeddings: _Embeddings) -> tuple[Config, GraphStore]:
    """A store and a configuration keeping its passage vectors in Qdrant's local mode (the loopback embedder's)."""
    return (Config(store_path=str(tmp_path / "store"), embeddings="openai", embeddings_base_url=embeddings.url,
                   embeddings_model="tiny", vectors="qdrant", qdrant_path=str(tmp_path / "qdrant")),
            GraphStore(tmp_path / "store"))


def test_qdrant_holds_the_vectors_shared_by_processes_each_chunk_embedded_once(tmp_path: Path,
                                                                               embeddings: _Embeddings) -> None:
    config, store = _qdrant_store(tmp_path, embeddings)
    first = make_passage_index(store, config)
    ingester = Ingester(store, LabelIndex(store), None, first)
    ingester.ingest(CANAL.encode(), "docs", name="egypt.txt")
    ingester.ingest(ALPS.encode(), "docs", name="alps.txt")
    assert len(embeddings.inputs) == 2 and first.search("docs", "When was the Suez Canal completed?", 1)[0].semantic
    first.vectors.close()  # Qdrant's local mode: one process at a time holds its directory
    second = make_passage_index(store, replace(config, passage_index=":memory:"))  # another app process
    before = len(embeddings.inputs)
    found = second.search("docs", "When was the Suez Canal completed?", 2)
    assert not [text for text in embeddings.inputs[before:] if "1869" in text or "Alps" in text]  # none again
    assert "1869" in found[0].text and found[0].lexical_rank == 1 and {p.semantic_rank for p in found} == {1, 2}
    egypt = next(d for d in list_documents(store, "docs") if d["title"] == "egypt.txt")
    assert delete_document(store, "docs", NamedNode(egypt["iri"]))
    assert all("1869" not in p.text for p in second.search("docs", "When was the Suez Canal completed?", 2))
    assert second.vectors.missing("docs", [found[0].chunk], 8) == {found[0].chunk}  # its point is gone too
    second.vectors.close()


def test_an_unknown_vector_store_or_qdrant_without_a_place_is_a_clear_error(tmp_path: Path) -> None:
    store = GraphStore(None)
    with pytest.raises(EmbeddingsFailed, match="unknown vector store 'milvus'"):
        make_passage_index(store, Config(vectors="milvus"))
    with pytest.raises(EmbeddingsFailed, match="GLASSGRAPH_QDRANT_URL"):
        make_passage_index(store, Config(vectors="qdrant"))


def test_markdown_markup_is_not_part_of_a_sentence_and_the_answer_is_one_line() -> None:
    from server.rag.passage_answer import Sentence, extractive_passage_answer, sentence_spans

    text = "Reporting\n---------\nSend the backtrace\n  to the list. Thanks.\n\n```sh\nmake\n```\n# Usage\n- run it"
    pieces = [text[a:b] for a, b in sentence_spans(text)]
    assert pieces == ["Reporting", "Send the backtrace\n  to the list.", "Thanks.", "make", "# Usage", "- run it"]
    start = text.index("Send")
    answer, spans = extractive_passage_answer([Sentence(0, start, start + 34, pieces[1], 1.0)], ["urn:c"], [0])
    assert answer == "Send the backtrace to the list [1]." and spans == [(1, "urn:c", start, 34)]


def test_qdrant_failures_are_embeddings_errors_and_a_fresh_process_still_drops_points(tmp_path: Path,
                                                                                      embeddings: _Embeddings) -> None:
    config, store = _qdrant_store(tmp_path, embeddings)
    first = make_passage_index(store, config)
    Ingester(store, LabelIndex(store), None, first).ingest(CANAL.encode(), "docs", name="egypt.txt")
    with pytest.raises(EmbeddingsFailed, match="cannot be opened: .*GLASSGRAPH_QDRANT_PATH is for one process"):
        make_passage_index(store, config)  # the local mode's directory is held by the first
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(EmbeddingsFailed, match="cannot be opened"):
        make_passage_index(store, replace(config, qdrant_path=str(tmp_path / "file")))
    chunk = first.search("docs", "Suez", 1)[0].chunk
    first.vectors.close()
    second = make_passage_index(store, config)  # a restart: the index file beside the store holds the passage
    assert delete_document(store, "docs", NamedNode(list_documents(store, "docs")[0]["iri"]))
    assert second.sync("docs") == (0, 1)  # drops its point too, though this process never used Qdrant before
    assert second.vectors.missing("docs", [chunk], 8) == {chunk}
    second.vectors.close()
