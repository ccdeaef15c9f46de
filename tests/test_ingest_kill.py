"""An ingest killed with SIGKILL leaves the whole document in the collection or none of it.

A child process ingests a document of many chunks into an on-disk store, extracting with the real
openai client from the scripted OpenAI-compatible server in this process, and is killed during
extraction (after some of its LLM calls) or after the last LLM reply, while the document's quads are
built and committed, at events the test sees, never after a delay: at once, when the store's
write-ahead log has grown by the first bytes, half or all of what the complete run's commit added,
and once the child has said its commit is done (its store listener prints "committed" right after it:
the document must then be whole). The test then reopens the store and compares it with the complete run.
"""
from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from extraction_llm import respond
from pyoxigraph import NamedNode
from scripted_llm import Recorded, Reply, ScriptedLLM
from test_load_atomic import KEEP, prepared_store  # collection 'keep', which must stay as it is
from write_ahead_log import wait_for_log, wal_bytes

from server import vocab
from server.ingest.documents import document_id
from server.store import GraphStore
from server.vocab import RDF, TG

pytestmark = pytest.mark.kill  # conftest: kill tests are slow too
COLLECTION = "docs"
PARAGRAPHS = 240
# Kill points after the last LLM reply: "reply", at once; "wal", once the write-ahead log has grown by a
# fraction of what the complete run's commit added (0: its first bytes); "committed", once the child said so.
COMMIT_POINTS = [("reply", 0.0), ("wal", 0.0), ("wal", 0.5), ("wal", 1.0), ("committed", 1.0)]

CHILD = """
import sys
from server.config import Config
from server.ingest.documents import Ingester, IngestOptions
from server.rag.label_index import LabelIndex
from server.rag.openai_llm import OpenAILLM
from server.store import GraphStore
from server.vocab import RDF, TG
store_path, document, base_url = sys.argv[1:4]
store = GraphStore(store_path)
store.add_load_listener(lambda *written: print("committed", flush=True))  # called right after the commit
llm = OpenAILLM(Config(llm="openai", llm_base_url=base_url, llm_model="scripted-model", llm_retries=0))
with open(document, "rb") as file:
    data = file.read()
options = IngestOptions(chunk_size=200, chunk_overlap=0, workers=8)
report = Ingester(store, LabelIndex(store), llm).ingest(data, "docs", name="many.txt", options=options)
print("done", report.chunks, report.facts, flush=True)
"""


def name(n: int) -> str:
    """A capitalized name of letters only (the scripted extraction's names have no digits)."""
    letters = ""
    while True:
        n, digit = divmod(n, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[digit]
        if n == 0:
            return "Zor" + letters


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kill") / "many.txt"
    paragraphs = [f"{name(n)} met {name(n + 1)} near {name(n + 2)}, and the two of them talked for an hour "
                  f"about {name(n + 3)} and the old roads of {name(n * 7 % 1000)}." for n in range(PARAGRAPHS)]
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    return path


class CountingLLM:
    """The scripted server answering extraction prompts; ``reached(n)`` is set once ``n`` requests arrived."""

    def __init__(self, server: ScriptedLLM) -> None:
        self.count, self._lock = 0, threading.Lock()
        self._waits: dict[int, threading.Event] = {}
        server.responder = self._reply

    def _reply(self, request: Recorded) -> Reply:
        reply = respond(request)
        with self._lock:
            self.count += 1
            for n, event in self._waits.items():
                if self.count >= n:
                    event.set()
        return reply

    def reached(self, n: int) -> threading.Event:
        with self._lock:
            event = self._waits.setdefault(n, threading.Event())
            if self.count >= n:
                event.set()
        return event


def run_child(path: Path, document: Path, llm: ScriptedLLM, after_requests: int,
              kill_at: tuple[str, float] | None = ("reply", 0.0), commit_bytes: int = 0) -> tuple[bool, int | None]:
    """Ingest ``document`` in a child process. Once the scripted LLM has received ``after_requests``
    requests (it answers each at once), SIGKILL the child at ``kill_at`` (``COMMIT_POINTS``; "wal" as a
    fraction of ``commit_bytes``; None: let it finish). Returns (finished, what the write-ahead log had
    grown by from that point to the "committed" line, None if the child did not get there)."""
    counting = CountingLLM(llm)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(document), llm.base_url],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # one pipe: see below
    committed, output = None, b""
    try:
        while not counting.reached(after_requests).wait(0.05):
            assert child.poll() is None, child.communicate()
        logged = wal_bytes(path)
        what, fraction = kill_at or ("committed", 1.0)
        if what == "wal":
            wait_for_log(path, logged + max(1, int(commit_bytes * fraction)), lambda: child.poll() is None)
        elif what == "committed":
            for line in iter(child.stdout.readline, b""):  # the child's output (stderr too) up to its commit
                output += line
                if line == b"committed\n":
                    committed = wal_bytes(path) - logged
                    break
        if kill_at is not None:
            child.send_signal(signal.SIGKILL)
        # The rest through the same buffered reader, to the child's end: communicate(timeout=...) reads the
        # descriptor and missed a "done" line that readline() had already buffered with "committed".
        hang_guard = threading.Timer(120, child.kill)
        hang_guard.start()
        try:
            output += child.stdout.read()
        finally:
            hang_guard.cancel()
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    finished = b"done" in output
    assert finished or child.returncode == -signal.SIGKILL, output.decode(errors="replace")
    return finished, committed


def contents(path: Path, doc_id: str) -> dict:
    """The store reopened: quads per graph, the collection's facts, the quads anywhere whose subject or
    object is the document or one of its pages, chunks, subgraphs or its activity, and collection keep."""
    store = GraphStore(path)
    try:
        quads = list(store.raw)
    finally:
        del store
        gc.collect()
    graphs: dict[str, int] = {}
    types: dict[str, int] = {}  # the collection's documents, pages, chunks, subgraphs, activities...
    for quad in quads:
        graphs[str(quad.graph_name)] = graphs.get(str(quad.graph_name), 0) + 1
        if quad.predicate == RDF.type and quad.graph_name == vocab.source_graph(COLLECTION):
            types[quad.object.value] = types.get(quad.object.value, 0) + 1
    return {"graphs": graphs, "types": types,
            "mentioning": sum(any(isinstance(term, NamedNode) and doc_id in term.value
                                  for term in (quad.subject, quad.object)) for quad in quads),
            "facts": sorted(str(q) for q in quads if q.graph_name == vocab.collection_graph(COLLECTION)),
            "keep": {q for q in quads if q.graph_name == vocab.collection_graph("keep")}}


def chunk_count(document: Path) -> int:
    from server.ingest.chunking import split

    return len(split(document.read_text(encoding="utf-8"), 200, 0))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, document: Path, module_llm: ScriptedLLM) -> dict:
    """A complete run: what it leaves in the store, its number of LLM calls, and what its commit adds to
    the write-ahead log after the last LLM reply (the document's quads, in one transaction)."""
    path = tmp_path_factory.mktemp("reference") / "store"
    prepared_store(path)
    requests = 2 * chunk_count(document)
    finished, commit_bytes = run_child(path, document, module_llm, requests, kill_at=None)
    assert finished and commit_bytes
    doc_id = document_id(document.read_bytes(), COLLECTION)[0]
    found = contents(path, doc_id)
    assert found["mentioning"] > 0 and len(found["facts"]) > PARAGRAPHS
    assert found["types"][TG.Chunk.value] == requests // 2 and found["types"][TG.Subgraph.value] == requests // 2
    return {"id": doc_id, "contents": found, "requests": requests, "commit_bytes": commit_bytes}


def check_all_or_nothing(path: Path, reference: dict, finished: bool) -> bool:
    """The store holds the whole document, as the complete run left it, or nothing of it; True if whole."""
    found = contents(path, reference["id"])
    assert found["keep"] == set(KEEP)
    if found["mentioning"] == 0:
        assert not finished
        assert found["facts"] == [], "facts without their document"
        assert found["graphs"] == {str(vocab.collection_graph("keep")): len(KEEP)}, found["graphs"]
        return False
    expected = reference["contents"]
    assert found["types"] == expected["types"], "a partial document"
    assert found["graphs"] == expected["graphs"], "a partial document"
    assert (found["mentioning"], found["facts"]) == (expected["mentioning"], expected["facts"])
    return True


@pytest.mark.parametrize("fraction", [0.1, 0.5])
def test_killed_during_extraction_nothing_is_written(tmp_path: Path, document: Path, module_llm: ScriptedLLM,
                                                     reference: dict, fraction: float) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    finished, _ = run_child(path, document, module_llm, int(reference["requests"] * fraction))
    assert not finished
    assert not check_all_or_nothing(path, reference, finished)


@pytest.mark.parametrize("point", COMMIT_POINTS, ids=[f"{what}-{fraction}" for what, fraction in COMMIT_POINTS])
def test_killed_around_the_commit_the_document_is_whole_or_absent(tmp_path: Path, document: Path,
                                                                  module_llm: ScriptedLLM, reference: dict,
                                                                  point: tuple[str, float]) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    finished, _ = run_child(path, document, module_llm, reference["requests"], point, reference["commit_bytes"])
    whole = check_all_or_nothing(path, reference, finished)
    if point[0] == "committed":  # the child said it had committed: the kill came after it
        assert whole
