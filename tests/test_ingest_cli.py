"""``glassgraph ingest`` as a user runs it: a subprocess on a store of its own, extracting with the real
openai client from a scripted OpenAI-compatible server (tests/extraction_llm.py), or offline.
"""
from __future__ import annotations

import gc
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from extraction_llm import graph_rag_reply
from scripted_llm import Reply, ScriptedLLM
from test_cli import GLASSGRAPH, _env, assert_one_line_failure, blocks, run

from server import vocab
from server.ingest.catalog import list_documents
from server.store import GraphStore
from server.vocab import TG

PORTUGAL = "Lisbon is the capital of Portugal. Porto lies on the Douro and trades with Lisbon.\n"
SPAIN = "# Spain\n\n## Cities\n\nMadrid is the capital of Spain. Seville lies on the Guadalquivir.\n"
DOCUMENT_LINE = re.compile(r'^(?P<name>\S+): (?P<iri>urn:trustgraph:doc:[0-9a-f]{20}-[0-9a-f]{8}) "(?P<title>[^"]+)" '
                           r"\((?P<media>[a-z/]+)\): (?P<pages>\d+) page\(s\), (?P<chunks>\d+) chunk\(s\), "
                           r"(?P<facts>\d+) fact\(s\), (?P<mentions>\d+) mention\(s\)$")
OFFLINE_NOTE = "note: no LLM configured (GLASSGRAPH_LLM=offline)"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "portugal.txt").write_text(PORTUGAL, encoding="utf-8")
    (folder / "spain.md").write_text(SPAIN, encoding="utf-8")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 4)
    return folder


def ingest(store: Path, *args: str, llm: ScriptedLLM | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``glassgraph ingest ARGS`` on ``store`` (offline without ``llm``), sample data off."""
    return run(GLASSGRAPH, "ingest", *args, env={**ingest_env(store, llm), **env})


def ingest_env(store: Path, llm: ScriptedLLM | None) -> dict[str, str]:
    env = {"GLASSGRAPH_STORE": str(store)}
    if llm is not None:
        env.update(GLASSGRAPH_LLM="openai", GLASSGRAPH_LLM_BASE_URL=llm.base_url, GLASSGRAPH_LLM_RETRIES="0",
                   GLASSGRAPH_LLM_MODEL="scripted-model")
    return env


def quads_of(path: Path) -> list[str]:
    """Every quad of the store at ``path``, sorted; the store is closed again for the next command."""
    store = GraphStore(path)
    quads = sorted(map(str, store.quads()))
    del store
    gc.collect()
    return quads


def documents_of(path: Path, collection: str) -> list[dict]:
    store = GraphStore(path)
    found = list_documents(store, collection)
    del store
    gc.collect()
    return found


@pytest.mark.slow
def test_ingest_prints_a_line_per_document_and_the_same_files_again_are_unchanged(
        tmp_path: Path, files: Path, llm: ScriptedLLM) -> None:
    store = tmp_path / "store"
    result = ingest(store, str(files / "portugal.txt"), str(files / "spain.md"), "-C", "iberia", llm=llm)
    assert result.returncode == 0, result.stderr
    assert OFFLINE_NOTE not in result.stderr
    *lines, summary = result.stdout.splitlines()
    found = [DOCUMENT_LINE.match(line) for line in lines]
    assert all(found) and len(found) == 2, result.stdout
    portugal, spain = found
    assert (portugal["title"], portugal["media"], portugal["pages"]) == ("portugal.txt", "text/plain", "1")
    assert (spain["title"], spain["media"], spain["pages"]) == ("Spain", "text/markdown", "2")
    assert int(portugal["facts"]) > 0 and int(spain["facts"]) > 0
    facts = int(portugal["facts"]) + int(spain["facts"])
    assert summary.startswith("ingested 2 document(s) into collection 'iberia': ") and f"{facts} facts" in summary
    stored = {d["iri"]: d for d in documents_of(store, "iberia")}
    assert {iri: (d["title"], d["facts"]) for iri, d in stored.items()} == {
        m["iri"]: (m["title"], int(m["facts"])) for m in found}

    before, calls = quads_of(store), len(llm.requests)
    again = ingest(store, str(files / "portugal.txt"), "-C", "iberia", llm=llm)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        f"{files / 'portugal.txt'}: unchanged (already ingested as {portugal['iri']}; --replace extracts it again)",
        "ingested 0 document(s) into collection 'iberia': 0 chunks, 0 facts, 0 mentions; 1 unchanged"]
    assert quads_of(store) == before and len(llm.requests) == calls  # no LLM call for a known document


@pytest.mark.slow
def test_offline_ingest_says_so_in_one_line_and_links_the_samples_entities(tmp_path: Path, files: Path) -> None:
    store = tmp_path / "store"
    note = files / "note.txt"
    note.write_text("A travel note. The capital of France is Paris, a city on the Seine.\n", encoding="utf-8")
    result = ingest(store, str(note), "-C", "default", GLASSGRAPH_LOAD_SAMPLE="1")  # a first start: the sample
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("note:")] == [
        "note: no LLM configured (GLASSGRAPH_LLM=offline): documents are stored and their chunks linked to the "
        "entities they mention; no new relationships are extracted"]
    [line] = [DOCUMENT_LINE.match(line) for line in result.stdout.splitlines()[:-1]]
    assert line is not None and line["facts"] == "0" and int(line["mentions"]) >= 2, result.stdout
    [document] = [d for d in documents_of(store, "default") if d["sha256"] is not None]  # not the sample's
    assert (document["iri"], document["facts"], document["chunks"]) == (line["iri"], 0, 1)


def test_documents_lists_a_header_and_a_line_per_document_and_deletes_one(tmp_path: Path, files: Path) -> None:
    store = tmp_path / "store"
    assert ingest(store, str(files / "spain.md"), str(files / "portugal.txt"), "-C", "iberia").returncode == 0
    listed = run(GLASSGRAPH, "documents", "-C", "iberia", env={"GLASSGRAPH_STORE": str(store)})
    assert listed.returncode == 0, listed.stderr
    header, *rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert header == ["id", "title", "media type", "contents"]
    by_title = {row[1]: row for row in rows}
    assert sorted(by_title) == ["Spain", "portugal.txt"] and all(len(row) == 4 for row in rows)
    assert by_title["portugal.txt"][2:] == ["text/plain", "1 page(s), 1 chunk(s), 0 fact(s)"]
    deleted = run(GLASSGRAPH, "documents", "-C", "iberia", "--delete", by_title["Spain"][0],
                  env={"GLASSGRAPH_STORE": str(store)})
    assert deleted.returncode == 0 and deleted.stdout.startswith("deleted "), deleted.stderr
    assert [d["title"] for d in documents_of(store, "iberia")] == ["portugal.txt"]
    iri = f"urn:trustgraph:doc:{by_title['portugal.txt'][0]}"  # as ingest prints it
    by_iri = run(GLASSGRAPH, "documents", "-C", "iberia", "--delete", iri, env={"GLASSGRAPH_STORE": str(store)})
    assert by_iri.returncode == 0, by_iri.stderr
    assert documents_of(store, "iberia") == []
    unknown = run(GLASSGRAPH, "documents", "-C", "nope", env={"GLASSGRAPH_STORE": str(store)})
    assert unknown.returncode == 1 and "no collection 'nope'" in unknown.stderr, unknown  # as HTTP's 404


def test_a_bad_file_among_good_ones_ingests_nothing(tmp_path: Path, files: Path) -> None:
    store = tmp_path / "store"
    assert ingest(store, str(files / "spain.md"), "-C", "iberia").returncode == 0
    before = quads_of(store)
    result = ingest(store, str(files / "portugal.txt"), str(files / "binary.txt"), str(files / "spain.md"),
                    "-C", "iberia")
    assert_one_line_failure(result, 1, f"{files / 'binary.txt'}: the document is binary, not text",
                            "nothing was ingested")
    assert quads_of(store) == before


def test_a_document_over_the_size_limit_ingests_nothing(tmp_path: Path, files: Path) -> None:
    store = tmp_path / "store"
    big = files / "big.txt"
    with big.open("w", encoding="utf-8") as out:
        line = "Lisbon and Porto and Braga and Coimbra are cities of Portugal.\n"
        for _ in range(50 * 1024 * 1024 // len(line) + 1):
            out.write(line)
    result = ingest(store, str(files / "portugal.txt"), str(big), "-C", "notes")
    assert_one_line_failure(result, 1, f"{big}: {big.stat().st_size} bytes, over the limit of 33554432 bytes "
                                       "(GLASSGRAPH_MAX_DOCUMENT); nothing was ingested")
    assert not store.exists()  # checked before the store is opened (or built with the sample)
    smaller = ingest(store, str(files / "portugal.txt"), "-C", "notes", GLASSGRAPH_MAX_DOCUMENT="40")
    assert_one_line_failure(smaller, 1, f"{len(PORTUGAL)} bytes, over the limit of 40 bytes")


def test_a_missing_file_ingests_nothing(tmp_path: Path, files: Path) -> None:
    store = tmp_path / "store"
    result = ingest(store, str(files / "portugal.txt"), str(files / "nowhere.pdf"), "-C", "notes")
    assert_one_line_failure(result, 1, f"{files / 'nowhere.pdf'}: no such file")
    assert not store.exists()  # checked before the store is opened (or built with the sample)


@pytest.mark.parametrize("flags, point", [
    (["--title", "One title"], "--title names one document: give one file with it"),
    (["--chunk-size", "100", "--chunk-overlap", "100"], "less than the chunk size 100"),
    (["--chunk-size", "0"], "argument --chunk-size: must be between 1 and"),
    (["--workers", "0"], "argument --workers: must be between 1 and"),
])
def test_usage_errors_exit_2(tmp_path: Path, files: Path, flags: list[str], point: str) -> None:
    store = tmp_path / "store"
    result = ingest(store, str(files / "portugal.txt"), str(files / "spain.md"), "-C", "notes", *flags)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert point in result.stderr and "Traceback" not in result.stderr and result.stdout == ""
    assert not store.exists()  # checked before the store is opened (or built with the sample)


@pytest.mark.slow
def test_explain_shows_the_chunk_page_and_title_a_fact_came_from(tmp_path: Path, files: Path,
                                                                  llm: ScriptedLLM) -> None:
    store = tmp_path / "store"
    travels = files / "travels.txt"
    travels.write_text("A note written in May.\n\nZorblat visited Paris in spring. Later Zorblat met Quentaro "
                       "in Lyon.\n", encoding="utf-8")
    ingested = ingest(store, str(travels), "-C", "travel", "--title", "Travels", "--chunk-size", "80",
                      "--chunk-overlap", "0", llm=llm)
    assert ingested.returncode == 0, ingested.stderr
    asked = run(GLASSGRAPH, "ask", "-x", "-C", "travel", "-q", "What is Zorblat mentioned with?",
                env=ingest_env(store, llm))
    assert asked.returncode == 0, asked.stderr
    session = blocks(asked.stderr)[0][1]

    doc_id = DOCUMENT_LINE.match(ingested.stdout.splitlines()[0])["iri"].rsplit(":", 1)[1]
    graph_store = GraphStore(store)
    chunk = vocab.chunk_iri(doc_id, 1, 2)
    source = vocab.source_graph("travel")
    offset = int(next(graph_store.quads(chunk, TG.charOffset, None, source)).object.value)
    length = int(next(graph_store.quads(chunk, TG.charLength, None, source)).object.value)
    del graph_store
    gc.collect()
    assert travels.read_text(encoding="utf-8")[offset:offset + length].startswith("Zorblat visited Paris")

    explained = run(GLASSGRAPH, "explain", "--show-source", session, env=ingest_env(store, llm))
    assert explained.returncode == 0, explained.stderr
    lines = [line.strip() for line in explained.stdout.splitlines()]
    edge = lines.index("Edge: (Zorblat, mentioned with, Quentaro)")
    chain = f'Source: Chunk 2 (chars {offset}-{offset + length}) → Page 1 → "Travels"'
    assert chain in lines[edge:edge + 4], lines[edge:edge + 4]
    quote = lines[lines.index(chain, edge) + 1]
    assert quote.startswith("“") and quote.endswith("”") and "met Quentaro in Lyon" in quote, quote


# --- an interrupted ingest resumes -------------------------------------------------------------

def slow_extraction(llm: ScriptedLLM, seconds: float) -> None:
    def reply(request) -> Reply:
        answer = graph_rag_reply(request)
        answer.delay_s = seconds
        return answer
    llm.responder = reply


@pytest.fixture
def three_files(files: Path) -> list[Path]:
    many = files / "many.txt"
    many.write_text("\n\n".join(f"Paragraph {n} names Braga and Coimbra." for n in range(12)), encoding="utf-8")
    return [files / "portugal.txt", many, files / "spain.md"]


def sigint_as_from_a_terminal() -> None:
    """In the child before it starts: SIGINT back to its default, so that Python raises KeyboardInterrupt on
    it. A suite started as a background job inherits SIGINT ignored, and a child would too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(store: Path, paths: list[Path], llm: ScriptedLLM, sig: signal.Signals) -> tuple[int, int]:
    """Start ingesting ``paths``; once the first is committed (its line printed) and extraction of the
    second has begun, send ``sig``. Returns (exit code, LLM requests made after the signal)."""
    env = {**_env(), **ingest_env(store, llm), "PYTHONUNBUFFERED": "1"}  # each line as it is printed
    child = subprocess.Popen([*GLASSGRAPH, "ingest", *map(str, paths), "-C", "notes", "--chunk-size", "40",
                              "--chunk-overlap", "0", "--workers", "2"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_as_from_a_terminal)
    try:
        first = child.stdout.readline()
        assert DOCUMENT_LINE.match(first.strip()) and first.startswith(str(paths[0])), first
        texts = {paths[1].read_text(encoding="utf-8").split("\n\n")[0]}
        while not any(any(t in r.prompt for t in texts) for r in list(llm.requests)):
            assert child.poll() is None, child.communicate()
            time.sleep(0.01)
        sent = len(llm.requests)
        child.send_signal(sig)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, len(llm.requests) - sent


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
@pytest.mark.slow
def test_an_interrupted_ingest_resumes_with_the_files_not_yet_ingested(
        tmp_path: Path, three_files: list[Path], llm: ScriptedLLM, sig: signal.Signals) -> None:
    store = tmp_path / "store"
    slow_extraction(llm, 0.2)
    code, after = interrupted(store, three_files, llm, sig)
    assert code == (130 if sig == signal.SIGINT else -signal.SIGKILL)
    if sig == signal.SIGINT:  # Ctrl-C stops extraction: at most the calls of the chunks in progress follow
        assert after <= 2 * 2, after  # 2 workers, 2 prompts a chunk (of 12 chunks)
    [document] = documents_of(store, "notes")
    assert document["title"] == "portugal.txt"

    slow_extraction(llm, 0.0)
    start = len(llm.requests)
    result = ingest(store, *map(str, three_files), "-C", "notes", "--chunk-size", "40", "--chunk-overlap", "0",
                    llm=llm)
    assert result.returncode == 0, result.stderr
    assert "resuming: 1 of 3 file(s) are already in collection 'notes'" in result.stderr
    first, *others, summary = result.stdout.splitlines()
    assert first.startswith(f"{three_files[0]}: unchanged (already ingested as {document['iri']}")
    assert [DOCUMENT_LINE.match(line)["name"] for line in others] == [str(p) for p in three_files[1:]]
    assert summary.startswith("ingested 2 document(s)") and summary.endswith("; 1 unchanged")
    assert not any("Lisbon is the capital" in r.prompt for r in llm.requests[start:])  # the first not read again
    assert sorted(d["title"] for d in documents_of(store, "notes")) == ["Spain", "many.txt", "portugal.txt"]


def test_ctrl_c_stops_an_ingest_waiting_on_a_local_model_and_commits_nothing(
        tmp_path: Path, files: Path, scripted_llm: ScriptedLLM) -> None:
    store = tmp_path / "store"
    scripted_llm.behave_like_local_model(token_s=0.05)  # an extraction reply: 300 tokens, 15 s
    scripted_llm.responder = lambda request: Reply(text="still thinking about it")
    paths = [str(files / "portugal.txt"), str(files / "spain.md")]
    env = {**_env(), **ingest_env(store, scripted_llm), "GLASSGRAPH_LLM_TIMEOUT": "600",
           "GLASSGRAPH_LLM_DEADLINE": "600"}
    child = subprocess.Popen([*GLASSGRAPH, "ingest", *paths, "-C", "notes", "--workers", "2"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_as_from_a_terminal)
    try:
        assert scripted_llm.computing.wait(60), child.communicate()  # an extraction call is being computed
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, stderr
    assert took < 10, took  # generous against the 2 s it takes; waiting for the calls in progress: 15 s and more
    assert f"interrupted: {paths[0]} was not ingested: nothing of it was committed" in stderr
    assert f"interrupted: 2 file(s) left: {', '.join(paths)}; run the same command again to resume" in stderr
    assert "Traceback" not in stderr and "HTTP Request" not in stderr
    assert documents_of(store, "notes") == []
    assert scripted_llm.local is not None and scripted_llm.local.turn.acquire(timeout=60)  # the model is idle
    assert scripted_llm.abandoned == 0  # and computed nothing for the interrupted calls
