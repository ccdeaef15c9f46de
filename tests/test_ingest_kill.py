"""An ingest killed with SIGKILL leaves the whole document in the collection or none of it.

A child process ingests a document of many chunks into an on-disk store, extracting with the real
openai client from the scripted OpenAI-compatible server in this process, and is killed during
extraction (after some of its LLM calls) or at several delays after the last LLM reply, while the
document's quads are built and committed: fractions of the time from the last reply to the end of the
commit in a complete run (the child's store listener prints "committed" right after it; on an idle
machine the early fractions leave nothing and the late ones the whole document). The test then
reopens the store and compares it with the complete run.
"""
from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from extraction_llm import respond
from pyoxigraph import NamedNode
from scripted_llm import Recorded, Reply, ScriptedLLM
from test_load_atomic import KEEP, prepared_store  # collection 'keep', which must stay as it is

from server import vocab
from server.ingest.documents import document_id
from server.store import GraphStore
from server.vocab import RDF, TG

COLLECTION = "docs"
PARAGRAPHS = 240

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


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM()
    yield server
    server.close()


def run_child(path: Path, document: Path, llm: ScriptedLLM, after_requests: int | None = None,
              delay: float | None = 0.0) -> tuple[bool, float | None]:
    """Ingest ``document`` in a child process. Once the scripted LLM has received ``after_requests``
    requests (it answers each at once), wait ``delay`` seconds and SIGKILL the child (``delay=None``:
    let it finish). Returns (finished, seconds from that point to the commit, None if it never came)."""
    counting = CountingLLM(llm)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(document), llm.base_url],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # one pipe: see below
    committed, output = None, b""
    try:
        if after_requests is not None:
            while not counting.reached(after_requests).wait(0.05):
                assert child.poll() is None, child.communicate()
        reached = time.monotonic()
        if delay is not None:
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
        else:
            for line in iter(child.stdout.readline, b""):  # the child's output (stderr too) up to its commit
                output += line
                if line == b"committed\n":
                    committed = time.monotonic() - reached
                    break
        # With one pipe, communicate() reads through the buffer readline() filled; with two it reads the
        # descriptors and missed a "done" line that readline() had already buffered with "committed".
        output += child.communicate(timeout=120)[0]
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
def reference(tmp_path_factory: pytest.TempPathFactory, document: Path, llm: ScriptedLLM) -> dict:
    """A complete run: what it leaves in the store, its number of LLM calls, and how long after the last
    LLM reply its commit ends (resolving names, building the document's quads, committing them)."""
    path = tmp_path_factory.mktemp("reference") / "store"
    prepared_store(path)
    requests = 2 * chunk_count(document)
    finished, to_commit = run_child(path, document, llm, requests, delay=None)
    assert finished and to_commit is not None
    doc_id = document_id(document.read_bytes(), COLLECTION)[0]
    found = contents(path, doc_id)
    assert found["mentioning"] > 0 and len(found["facts"]) > PARAGRAPHS
    assert found["types"][TG.Chunk.value] == requests // 2 and found["types"][TG.Subgraph.value] == requests // 2
    return {"id": doc_id, "contents": found, "requests": requests, "to_commit": to_commit}


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
def test_killed_during_extraction_nothing_is_written(tmp_path: Path, document: Path, llm: ScriptedLLM,
                                                     reference: dict, fraction: float) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    finished, _ = run_child(path, document, llm, int(reference["requests"] * fraction))
    assert not finished
    assert not check_all_or_nothing(path, reference, finished)


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.45, 0.6, 0.75, 0.9, 1.5])
def test_killed_around_the_commit_the_document_is_whole_or_absent(tmp_path: Path, document: Path,
                                                                  llm: ScriptedLLM, reference: dict,
                                                                  fraction: float) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    finished, _ = run_child(path, document, llm, reference["requests"],
                            delay=reference["to_commit"] * fraction)
    check_all_or_nothing(path, reference, finished)
