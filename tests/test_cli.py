"""The command-line tools as a user runs them: subprocesses against a real server and real stores.

``tg-invoke-graph-rag`` talks over HTTP to a werkzeug server on 127.0.0.1 serving the shared
``sample_store``; ``glassgraph`` runs on a store of its own (loaded with ``glassgraph load``),
since one process at a time may open an on-disk store.
"""
from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import fields
from pathlib import Path
from unittest.mock import patch

import pytest
import requests
from conftest import SampleStores, skip_on_virtuoso, start_engine, start_virtuoso
from flask import Flask, request
from live_server import LiveServer
from oxigraph_server import OxigraphServer
from production_server import PROJECT_ROOT
from pyoxigraph import NamedNode, Quad
from virtuoso_server import VirtuosoServer

from server.cli import tg_invoke
from server.cli.arguments import LIMIT_FLAGS
from server.cli.tg_invoke import _sse
from server.config import SAMPLE_DATA, Config
from server.errors import StoreLocked
from server.explain.trace import read_trace
from server.http.app import create_app
from server.http.context import require_write_access
from server.rag.retrieval import RetrievalLimits
from server.remote_store import BACKUP_FILE
from server.store import GraphStore
from server.store_base import StoreBackend

BOTH_BACKENDS = True  # conftest: the store-using tests run on the embedded store and on a remote engine
VIRTUOSO = True  # conftest: and on Virtuoso 7 (the reification dialect)

QUESTION = "What is the capital of France?"
EDGE = "Edge: (France, capital, Paris)"
CHAIN_TO_FRANCE = re.compile(r'^Source: Chunk \d+ → Page \d+ → "France"$')
BLOCK = re.compile(r"^\[(\w+)\] (\S+)$")
TOKEN = "s3cret-token"


def _command(script: str, module: str) -> list[str]:
    """The installed console script next to this interpreter, else ``python -m module``."""
    found = shutil.which(script, path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", module]


TG_INVOKE = _command("tg-invoke-graph-rag", "server.cli.tg_invoke")
GLASSGRAPH = _command("glassgraph", "server.cli.glassgraph")


# What an engine needs set beside ``--store URL`` (its dialect and endpoints), by its URL (``cli_store``)
STORE_SETTINGS: dict[str, dict[str, str]] = {}


def _env(store: str | None = None) -> dict[str, str]:
    """The test environment, with the settings of ``store`` (the ``--store`` argument) where it needs some."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLASSGRAPH_", "OPENAI_"))}
    env.update(GLASSGRAPH_LLM="offline", GLASSGRAPH_LOAD_SAMPLE="0", PYTHONIOENCODING="utf-8")
    # this checkout's code, not the installed one's (a console script imports the package it was installed from)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env.update(STORE_SETTINGS.get(store or "", {}))
    return env


def run(command: list[str], *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``command args`` with the test environment (and the ``--store`` argument's settings) plus ``env``."""
    store = args[args.index("--store") + 1] if "--store" in args else None
    return subprocess.run([*command, *args], capture_output=True, text=True, encoding="utf-8",
                          env={**_env(store), **(env or {})}, timeout=120)


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """``tg-invoke-graph-rag args`` called in-process, as :func:`run` would run it: its logic is the subject
    here, not its start-up (which the tests that pipe its output still spawn)."""
    out, err = io.StringIO(), io.StringIO()
    with patch.dict(os.environ, _env(), clear=True), redirect_stdout(out), redirect_stderr(err):
        try:
            code = tg_invoke.main(list(args))
        except SystemExit as exit:  # argparse's usage errors
            code = exit.code if isinstance(exit.code, int) else 1
    return subprocess.CompletedProcess([*TG_INVOKE, *args], code, out.getvalue(), err.getvalue())


def _serve(app: Flask) -> Iterator[str]:
    live = LiveServer(app)
    try:
        yield live.url
    finally:
        live.close()


@pytest.fixture(scope="module")
def sample_store(sample_stores: SampleStores, store_backend: str) -> StoreBackend:
    """The session's sample store (conftest), for the HTTP client's tests: on the embedded store and on Oxigraph's
    engine only. On Virtuoso the glassgraph commands run (``cli_store``), and the server is test_http_api's."""
    skip_on_virtuoso(store_backend, "tg-invoke-graph-rag, an HTTP client, is tested over the embedded store and "
                     "Oxigraph's engine: the server on Virtuoso 7 is test_http_api's (time budget: 18 s to load it)")
    return sample_stores.of(store_backend)


@pytest.fixture(scope="module")
def server_url(sample_store: GraphStore) -> Iterator[str]:
    """A real HTTP server on loopback over the sample data (no token: reads and GraphRAG only)."""
    config = Config.from_env({}, store_path=None, load_sample=False, llm="offline")
    yield from _serve(create_app(config, store=sample_store))


@pytest.fixture(scope="module")
def token_server_url(sample_store: GraphStore) -> Iterator[str]:
    """The same data, deployed to require the bearer token on every API call (GraphRAG itself is open).

    The check is the server's own write-access rule, so the client meets its real 401/403 answers.
    """
    config = Config.from_env({}, store_path=None, load_sample=False, llm="offline", token=TOKEN)
    app = create_app(config, store=sample_store)

    @app.before_request
    def _token_on_every_api_call() -> None:
        if request.path.startswith("/api/"):
            require_write_access()

    yield from _serve(app)


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory, store_backend: str) -> Iterator[str]:
    """A store of the CLI's own, loaded with the sample data by ``glassgraph load``: a directory, or the URL
    of an engine of its own (Virtuoso's with its settings in ``STORE_SETTINGS``)."""
    engine: OxigraphServer | VirtuosoServer | None = None
    if store_backend == "remote":
        engine = start_engine(tmp_path_factory, "cli-engine")
    elif store_backend == "virtuoso":
        engine = start_virtuoso(tmp_path_factory, "cli-virtuoso")
        STORE_SETTINGS[engine.url] = engine.settings
    path = engine.url if engine is not None else str(tmp_path_factory.mktemp("cli") / "store")
    result = run(GLASSGRAPH, "--store", path, "load", str(SAMPLE_DATA), "-C", "default")
    assert result.returncode == 0, result.stderr
    assert re.search(r"loaded \d+ quads from 1 file\(s\); collection 'default' now holds [1-9]\d* triples",
                     result.stdout), result.stdout
    yield path
    if engine is not None:
        engine.close()


def blocks(stderr: str) -> list[tuple[str, str, list[str]]]:
    """The explain blocks of a display: (kind, iri, body lines stripped)."""
    found: list[tuple[str, str, list[str]]] = []
    for line in stderr.splitlines():
        match = BLOCK.match(line)
        if match:
            found.append((match.group(1), match.group(2), []))
        elif found and line.strip():
            found[-1][2].append(line.strip())
    return found


def edge_details(lines: list[str]) -> list[str]:
    """The Edge/Reason/Source lines of a display, in order."""
    return [line.strip() for line in lines if line.strip().startswith(("Edge:", "Reason:", "Source:"))]


def sources_of(lines: list[str], edge: str) -> list[str]:
    """The Source lines that follow ``edge`` up to the next edge."""
    details = edge_details(lines)
    start = details.index(edge)
    following = []
    for line in details[start + 1:]:
        if line.startswith("Edge:"):
            break
        if line.startswith("Source:"):
            following.append(line)
    return following


def assert_failure(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """Exit ``code``, no traceback, nothing on stdout, and a last stderr line naming the problem."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    for needle in needles:
        assert needle in last, (needle, result.stderr)
    return last


def assert_one_line_failure(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert_failure(result, code, *needles)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# --- tg-invoke-graph-rag against a real server ---------------------------------------------------------

def test_blocks_sent_into_the_answers_pipe_start_on_a_line_of_their_own(server_url: str) -> None:
    """``2>&1 | less``: the answer's last line ends before the ``[answer]`` block that follows it."""
    result = subprocess.run([*TG_INVOKE, "-u", server_url, "--explainable", "-q", QUESTION], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, encoding="utf-8", env=_env(), timeout=120)
    assert result.returncode == 0, result.stdout
    assert "Paris [1]." in result.stdout
    assert re.search(r"(?m)^\[answer\] urn:trustgraph:prov:answer:", result.stdout), result.stdout


def test_explainable_blocks_in_order_with_labels_and_sources(server_url: str, sample_store: GraphStore) -> None:
    result = invoke("-u", server_url, "--explainable", "-q", QUESTION)
    assert result.returncode == 0, result.stderr
    found = blocks(result.stderr)
    assert [kind for kind, _, _ in found] == ["session", "retrieval", "selection", "answer"]
    session = found[0][1]
    assert session.startswith("urn:trustgraph:session:")
    session_id = session.removeprefix("urn:trustgraph:session:")
    assert [iri for _, iri, _ in found[1:]] == [f"urn:trustgraph:prov:{kind}:{session_id}"
                                                for kind in ("retrieval", "selection", "answer")]
    selection = found[2][2]
    count = int(re.fullmatch(r"Selected (\d+) edge\(s\)", selection[0]).group(1))
    assert count == sum(line.startswith("Edge:") for line in selection) >= 1
    assert EDGE in selection
    chains = sources_of(selection, EDGE)
    assert chains and any(CHAIN_TO_FRANCE.match(line) for line in chains), chains
    # stdout holds the answer and nothing else: exactly the text the trace recorded
    trace = read_trace(sample_store, session)
    assert trace is not None and trace["answer_text"]
    assert result.stdout.strip() == trace["answer_text"].strip()
    assert "Paris" in result.stdout
    assert "urn:trustgraph" not in result.stdout and not re.search(BLOCK.pattern, result.stdout, re.MULTILINE)


def test_without_explainable_only_the_answer_and_the_trace_is_still_recorded(server_url: str) -> None:
    def recorded() -> int:
        listed = requests.get(server_url + "/api/sessions", params={"limit": 500}, timeout=30).json()["sessions"]
        return sum(session["question"] == QUESTION for session in listed)

    before = recorded()
    result = invoke("-u", server_url, "-q", QUESTION)
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout
    assert result.stderr == ""
    assert recorded() == before + 1  # every answer can be traced; -x only shows the trace as it is made
    printed = invoke("-u", server_url, "--format", "json", "-q", QUESTION)
    kinds = {json.loads(line)["message_type"] for line in printed.stdout.splitlines()}
    assert printed.returncode == 0 and "explain" not in kinds and "chunk" in kinds, printed.stdout[:300]



def test_a_read_only_server_s_answer_says_it_left_no_trace(sample_store: GraphStore) -> None:
    config = Config.from_env({}, store_path=None, load_sample=False, llm="offline", read_only=True)
    live = LiveServer(create_app(config, store=sample_store))
    try:
        result = invoke("-u", live.url, "-q", QUESTION)
    finally:
        live.close()
    assert result.returncode == 0 and "Paris" in result.stdout, result.stderr
    assert result.stderr == "[trace] not-recorded (read-only): this answer cannot be traced later\n"

def test_no_streaming_shows_the_same_blocks(server_url: str) -> None:
    result = invoke("-u", server_url, "-x", "--no-streaming", "-q", QUESTION)
    assert result.returncode == 0, result.stderr
    found = blocks(result.stderr)
    assert [kind for kind, _, _ in found] == ["session", "retrieval", "selection", "answer"]
    assert EDGE in found[2][2]
    assert "Paris" in result.stdout and "urn:trustgraph" not in result.stdout


def test_json_format_prints_every_message(server_url: str) -> None:
    result = invoke("-u", server_url, "-x", "--format", "json", "-q", QUESTION)
    assert result.returncode == 0, result.stderr
    messages = [json.loads(line) for line in result.stdout.splitlines()]
    explains = [m["explain_kind"] for m in messages if m["message_type"] == "explain"]
    assert explains == ["session", "retrieval", "selection", "answer"]
    assert messages[-1]["end_of_session"] is True
    assert "Paris" in "".join(m["response"] for m in messages if m["message_type"] == "chunk")


def test_sse_stream_parses_to_the_same_messages(server_url: str) -> None:
    body = {"query": QUESTION, "collection": "default", "explainable": True, "streaming": True}
    with requests.post(server_url + "/api/graph-rag", json=body, stream=True, timeout=60,
                       headers={"Accept": "text/event-stream"}) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        messages = list(_sse(line.decode("utf-8") for line in response.iter_lines()))
    assert [m["message_type"] for m in messages if m["message_type"] == "explain"] == ["explain"] * 4
    assert messages[-1]["end_of_session"] is True and not messages[-1]["error"]


def test_the_http_client_loads_neither_the_store_nor_the_retriever() -> None:
    heavy = ("pyoxigraph", "sqlite3", "server.rag.retrieval", "server.store")
    probe = f"import sys, server.cli.tg_invoke; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_limit_flags_are_the_retrieval_limits() -> None:
    assert list(LIMIT_FLAGS) == [f.name for f in fields(RetrievalLimits)]


# --- glassgraph on a store of its own -----------------------------------------------------------------

@pytest.mark.slow
def test_ask_and_explain_print_the_same_edges_and_sources(cli_store: str) -> None:
    asked = run(GLASSGRAPH, "--store", cli_store, "ask", "-x", "-q", QUESTION)
    assert asked.returncode == 0, asked.stderr
    found = blocks(asked.stderr)
    assert [kind for kind, _, _ in found] == ["session", "retrieval", "selection", "answer"]
    session = found[0][1]
    shown = edge_details(found[2][2])
    assert EDGE in shown and any(CHAIN_TO_FRANCE.match(line) for line in sources_of(shown, EDGE))
    assert "urn:trustgraph" not in asked.stdout and "Paris" in asked.stdout

    explained = run(GLASSGRAPH, "--store", cli_store, "explain", session)
    assert explained.returncode == 0, explained.stderr
    assert edge_details(explained.stdout.splitlines()) == shown
    assert f"Question: {QUESTION}" in explained.stdout
    assert explained.stdout.rstrip().endswith(asked.stdout.strip())  # the recorded answer closes the trace

    as_json = run(GLASSGRAPH, "--store", cli_store, "explain", "--format", "json", session)
    trace = json.loads(as_json.stdout)
    assert trace["session"] == session
    assert ["France", "capital", "Paris"] in [edge["labels"] for edge in trace["edges"]]

    listed = run(GLASSGRAPH, "--store", cli_store, "sessions")
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["SESSION", "TIME", "QUESTION"]
    assert any(row.startswith(session) and row.endswith(QUESTION) for row in rows)


@pytest.mark.slow
def test_serve_prints_the_console_url_and_answers_over_http(cli_store: str, tmp_path: Path) -> None:
    """``glassgraph serve`` + ``tg-invoke-graph-rag`` + ``glassgraph explain`` (on a snapshot) as a user runs them."""
    log = tmp_path / "serve.log"
    with open(log, "w") as errors:
        server = subprocess.Popen([*GLASSGRAPH, "--store", cli_store, "serve", "--port", "0"], env=_env(cli_store),
                                  stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        first = server.stdout.readline()
        match = re.match(r"Glassgraph console: (http://127\.0\.0\.1:\d+)/ ", first)
        assert match, (first, log.read_text())
        url = match.group(1)
        assert requests.get(url + "/", timeout=60).status_code == 200
        asked = run(TG_INVOKE, "-u", url, "-x", "-q", QUESTION)
        assert asked.returncode == 0, asked.stderr
        found = blocks(asked.stderr)
        explained = run(GLASSGRAPH, "--store", cli_store, "explain", found[0][1])
        assert explained.returncode == 0, explained.stderr
        remote = cli_store.startswith("http://")  # an engine serves the server and the CLI at once
        assert ("reading a snapshot" in explained.stderr) != remote  # the server holds an embedded store
        assert EDGE in edge_details(found[2][2])
        assert edge_details(explained.stdout.splitlines()) == edge_details(found[2][2])
    finally:
        server.terminate()
        server.wait(timeout=60)
        server.stdout.close()
    assert server.returncode == 0  # SIGTERM stops it like Ctrl-C
    home_lines = [line for line in log.read_text().splitlines() if '"path": "/"' in line or '"GET / ' in line]
    assert len(home_lines) == 1, log.read_text()  # each request logged once, as JSON
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("command", ["dump --format nt --graph urn:trustgraph:graph:default", "documents -C default"])
def test_output_its_reader_closes_early_ends_quietly_with_0(cli_store: str, command: str) -> None:
    """``| head -1`` under ``pipefail``: the sample's knowledge graph (megabytes) outgrows the pipe, so the writer
    meets the closed pipe; the listing stops as quietly when it does."""
    line = f"{shlex.join(GLASSGRAPH)} --store {shlex.quote(cli_store)} {command} | head -1"
    piped = subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, text=True, env=_env(cli_store),
                           timeout=120)
    assert (piped.returncode, piped.stderr) == (0, ""), piped.stderr
    assert len(piped.stdout.splitlines()) == 1


@pytest.mark.slow
def test_collections_dump_reindex_backup(cli_store: str, tmp_path: Path, store_backend: str) -> None:
    listed = run(GLASSGRAPH, "--store", cli_store, "collections")
    assert listed.returncode == 0
    assert re.search(r"^default\s+[1-9]\d*\s+[1-9]\d*\s+urn:trustgraph:graph:default$", listed.stdout, re.M)

    dumped = run(GLASSGRAPH, "--store", cli_store, "dump", "--format", "nt", "--graph", "urn:trustgraph:graph:default")
    assert dumped.returncode == 0
    assert "<https://trustgraph.ai/e/france> <https://trustgraph.ai/r/capital> <https://trustgraph.ai/e/paris> ." \
        in dumped.stdout.splitlines()

    reindexed = run(GLASSGRAPH, "--store", cli_store, "reindex", "-C", "default")
    assert reindexed.returncode == 0
    assert re.search(r"^default\s+[1-9]\d*\s+[1-9]\d*$", reindexed.stdout, re.M)  # labels, passages

    skip_on_virtuoso(store_backend, "a backup on Virtuoso 7 is one SPARQL answer (no N-Quads from its Graph "
                     "Store): 45 to 65 s for the sample data; test_remote_store backs up a small store there")
    target = tmp_path / "backup"
    assert run(GLASSGRAPH, "--store", cli_store, "backup", str(target)).returncode == 0
    if cli_store.startswith("http://"):  # an engine's backup is a dump: restored by loading it
        restored = str(tmp_path / "restored")
        assert run(GLASSGRAPH, "--store", restored, "load", str(target / BACKUP_FILE)).returncode == 0
        target = restored
    copied = run(GLASSGRAPH, "--store", str(target), "collections")
    assert copied.stdout == listed.stdout


@pytest.mark.parametrize("command", ["serve", "load", "ask", "sessions", "explain", "collections", "dump",
                                     "backup", "reindex"])
def test_every_command_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from server.cli.glassgraph import main

    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert f"usage: glassgraph {command}" in text and "example:\n  glassgraph " in text


# --- failures a user can cause: one line, a documented exit code, no traceback ------------------------

def test_no_server_exits_3_naming_the_url() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    assert_one_line_failure(invoke("-u", url, "-q", QUESTION), 3, "cannot connect to", url)


def test_wrong_collection_exits_1(server_url: str, cli_store: str) -> None:
    assert_one_line_failure(invoke("-u", server_url, "-C", "nosuch", "-q", QUESTION), 1,
                            "HTTP 404", "no collection 'nosuch'")
    assert_one_line_failure(invoke("-u", server_url, "--no-streaming", "-C", "nosuch", "-q", QUESTION), 1,
                            "no collection 'nosuch'")
    assert_one_line_failure(run(GLASSGRAPH, "--store", cli_store, "ask", "-C", "nosuch", "-q", QUESTION), 1, "nosuch")


def test_a_question_the_graph_does_not_answer_says_so_and_exits_0(server_url: str, cli_store: str) -> None:
    """A question that matches nothing: every block, the no-answer outcome on stderr, the answer says so."""
    for command in ([TG_INVOKE, "-u", server_url], [TG_INVOKE, "-u", server_url, "--no-streaming"],
                    [GLASSGRAPH, "--store", cli_store, "ask"]):
        result = run(*command, "-x", "-q", "zzqxv vvbnmq")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "The knowledge graph does not answer this question.\n"
        assert [kind for kind, _, _ in blocks(result.stderr)] == ["session", "retrieval", "selection", "answer",
                                                                   "outcome"]
        assert "Outcome: no answer (the knowledge graph does not answer this question)" in result.stderr


def test_bad_or_missing_token_exits_1(token_server_url: str) -> None:
    assert_one_line_failure(invoke("-u", token_server_url, "-t", "wrong", "-q", QUESTION), 1,
                            "HTTP 403", "wrong bearer token")
    assert_one_line_failure(invoke("-u", token_server_url, "-q", QUESTION), 1, "HTTP 401", "Bearer")
    good = invoke("-u", token_server_url, "-t", TOKEN, "-x", "-q", QUESTION)
    assert good.returncode == 0 and EDGE in good.stderr and "Paris" in good.stdout


def test_empty_question_exits_2(server_url: str, cli_store: str) -> None:
    assert_failure(invoke("-u", server_url, "-q", "   "), 2, "the question is empty")
    assert_failure(run(GLASSGRAPH, "--store", cli_store, "ask", "-q", ""), 2, "the question is empty")


def test_glassgraph_user_errors(cli_store: str, tmp_path: Path) -> None:
    assert_one_line_failure(run(GLASSGRAPH, "--store", cli_store, "explain", "urn:trustgraph:session:nope"), 1,
                            "no session")
    assert_one_line_failure(run(GLASSGRAPH, "--store", cli_store, "load", str(tmp_path / "missing.ttl")), 1,
                            "no such file")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert_one_line_failure(run(GLASSGRAPH, "--store", str(tmp_path / "empty"), "serve", "--port", port), 1,
                                f"cannot listen on 127.0.0.1:{port}: Address already in use; Port {port} is in use")



@pytest.mark.slow
def test_store_held_by_another_process(tmp_path: Path) -> None:
    """Writers exit 3; readers and backups fall back to a snapshot that sees the holder's writes, unflushed too."""
    held = tmp_path / "held"
    holder = GraphStore(held)  # this process holds the store, as a running server would
    with pytest.raises(StoreLocked):
        GraphStore(held)
    holder.extend([Quad(NamedNode("https://trustgraph.ai/e/a"), NamedNode("https://trustgraph.ai/r/b"),
                        NamedNode("https://trustgraph.ai/e/c"), NamedNode("urn:trustgraph:graph:held"))])
    source = tmp_path / "one.nt"
    source.write_text("<https://trustgraph.ai/e/x> <https://trustgraph.ai/r/y> <https://trustgraph.ai/e/z> .\n")
    in_use = f"the store at {held} is in use by another process (a running server?)"
    assert_one_line_failure(run(GLASSGRAPH, "--store", str(held), "load", str(source)), 3, in_use)
    assert_one_line_failure(run(GLASSGRAPH, "--store", str(held), "ask", "-q", QUESTION), 3, in_use,
                            "; ask that server instead: tg-invoke-graph-rag -u http://HOST:PORT -q QUESTION")
    listed = run(GLASSGRAPH, "--store", str(held), "collections")
    assert listed.returncode == 0 and "reading a snapshot" in listed.stderr
    assert re.search(r"^held\s+1\s+0\s+urn:trustgraph:graph:held$", listed.stdout, re.M), listed.stdout
    backed_up = run(GLASSGRAPH, "--store", str(held), "backup", str(tmp_path / "copy"))
    assert backed_up.returncode == 0 and "reading a snapshot" in backed_up.stderr, backed_up.stderr
    assert set(GraphStore(tmp_path / "copy").raw) == set(holder.raw)
    assert len(holder.raw) == 1  # nothing was written by the failed commands


# --- hardening: stores that are not there, numbers out of range, names that are not collections --------

@pytest.mark.parametrize("command", [["collections"], ["sessions"], ["explain", "urn:trustgraph:session:x"],
                                     ["dump"], ["reindex"], ["backup", "copy"]])
def test_commands_that_need_a_store_refuse_a_missing_one_and_create_nothing(command: list[str],
                                                                             tmp_path: Path) -> None:
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    arguments = [str(tmp_path / a) if a == "copy" else a for a in command]
    for path in (missing, empty):
        assert_one_line_failure(run(GLASSGRAPH, "--store", str(path), *arguments), 1, f"no store at {path}")
    assert not missing.exists() and not any(empty.iterdir()) and not (tmp_path / "copy").exists()


@pytest.mark.slow
def test_a_store_without_collections_lists_none(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    text = tmp_path / "text.nq"
    text.write_text('<urn:trustgraph:doc:a> <https://trustgraph.ai/ns/content> "a" '
                    '<urn:trustgraph:graph:librarian> .\n')
    assert run(GLASSGRAPH, "--store", store, "load", str(text)).returncode == 0
    listed = run(GLASSGRAPH, "--store", store, "collections")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert listed.stdout.split() == ["COLLECTION", "TRIPLES", "SOURCE", "TRIPLES", "GRAPH"]
    assert json.loads(run(GLASSGRAPH, "--store", store, "collections", "--format", "json").stdout) == []
    reindexed = run(GLASSGRAPH, "--store", store, "reindex")
    assert reindexed.returncode == 0, reindexed.stderr
    assert reindexed.stdout.split() == ["COLLECTION", "LABELS", "PASSAGES"]


@pytest.mark.parametrize("flags", [["--offset", "-5"], ["--offset", "x"], ["--offset", str(10**30)],
                                   ["--limit", "0"], ["--limit", "-3"], ["--limit", str(10**30)]])
def test_sessions_paging_out_of_range_is_a_usage_error(cli_store: str, flags: list[str]) -> None:
    result = run(GLASSGRAPH, "--store", cli_store, "sessions", *flags)
    assert_failure(result, 2, f"argument {flags[0]}")
    assert "between" in result.stderr or "not an integer" in result.stderr


def test_sessions_paging_in_range(cli_store: str) -> None:
    assert run(GLASSGRAPH, "--store", cli_store, "sessions", "--offset", "0", "--limit", "1").returncode == 0


@pytest.mark.parametrize(("variable", "raw"), [("GLASSGRAPH_MAX_BODY", "abc"), ("GLASSGRAPH_DEADLINE", "soon"),
                                               ("GLASSGRAPH_READ_ONLY", "ture")])
def test_a_malformed_setting_names_its_variable(cli_store: str, variable: str, raw: str) -> None:
    assert_one_line_failure(run(GLASSGRAPH, "--store", cli_store, "collections", env={variable: raw}), 2,
                            "bad configuration", variable, repr(raw))


@pytest.mark.parametrize(("command", "name", "reason"), [
    ("ask", "librarian", "librarian graph"), ("ask", "default:source", "provenance"),
    ("ask", "explainability", "explainability graph"), ("ask", "traces", "explainability graph"),
    ("load", "librarian", "librarian graph"), ("load", "traces", "explainability graph"),
    ("reindex", "default:source", "provenance"), ("load", "two words", "white space"),
])
def test_names_that_are_not_collections_are_usage_errors(cli_store: str, tmp_path: Path, command: str, name: str,
                                                         reason: str) -> None:
    data = tmp_path / "one.nt"
    data.write_text("<https://trustgraph.ai/e/x> <https://trustgraph.ai/r/y> <https://trustgraph.ai/e/z> .\n")
    arguments = {"ask": ["-q", QUESTION], "load": [str(data)], "reindex": []}[command]
    result = run(GLASSGRAPH, "--store", cli_store, command, "-C", name, *arguments,
                 env={"GLASSGRAPH_EXPLAIN_COLLECTION": "traces"})
    assert_failure(result, 2, f"{name!r} is not a user collection", reason)


def test_ask_refuses_a_question_over_the_limit_or_not_unicode(cli_store: str) -> None:
    long = run(GLASSGRAPH, "--store", cli_store, "ask", "-q", QUESTION, env={"GLASSGRAPH_MAX_QUESTION": "10"})
    assert_failure(long, 2, f"{len(QUESTION)} characters", "limit of 10", "GLASSGRAPH_MAX_QUESTION")
    undecodable = run(GLASSGRAPH, "--store", cli_store, "ask", "-q", "capital of Fr\udcffnce?")
    assert_failure(undecodable, 2, "not valid text")


def test_ask_refuses_limits_out_of_the_servers_range(cli_store: str) -> None:
    """The same ranges as the API (RetrievalLimits.RANGES): a usage error, before anything runs."""
    too_wide = run(GLASSGRAPH, "--store", cli_store, "ask", "-q", QUESTION, "--triple-limit", "101")
    assert_failure(too_wide, 2, "'triple_limit' must be an integer between 1 and 100")


def test_ask_and_load_default_to_the_configured_collection(cli_store: str, tmp_path: Path) -> None:
    """GLASSGRAPH_COLLECTION was ignored by the CLIs (-C defaulted to 'default')."""
    data = tmp_path / "one.nt"
    data.write_text("<https://trustgraph.ai/e/x> <https://trustgraph.ai/r/y> <https://trustgraph.ai/e/z> .\n")
    loaded = run(GLASSGRAPH, "--store", cli_store, "load", str(data), env={"GLASSGRAPH_COLLECTION": "elsewhere"})
    assert loaded.returncode == 0 and "collection 'elsewhere'" in loaded.stdout, loaded.stderr
