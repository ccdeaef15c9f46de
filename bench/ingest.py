"""What document ingestion costs: chunks per second of the work around the LLM, and how ``--workers``
hides the LLM's latency.

    python -m bench.ingest [--chunks N] [--slow-chunks N] [--latency-ms MS]

The documents are Factbook countries as plain text (a country's pages, each its title and text, read
from the librarian graph of the sample built from data/factbook.nq.gz into a temporary store): 10 to 20
chunks of 2,000 characters each, the first ones by document IRI until ``--chunks``. Every row ingests
them one after another, as ``glassgraph ingest`` does, into the ``default`` collection of its own copy
of that sample store (so mentions and extracted names link to the sample's entities), with
``Ingester.ingest`` and the default chunking. The LLM is the real openai client talking to
tests/scripted_llm.py, answering both extraction prompts from the chunk's text (tests/extraction_llm.py);
the scripted server runs in this process, so its work counts in the end-to-end rows.

Table 1, baseline the offline ingest (no LLM: reading, chunking, mentions, quads, commit): an instant
scripted LLM with one worker end to end, and without the time spent in the LLM calls (the rest of the
ingest, which is what a faster LLM cannot speed up), then with the default four workers. Quads per
chunk: the quads the store gained, per chunk.

Table 2, baseline one worker: a scripted LLM of ``--latency-ms`` (default 200) per call, two calls per
chunk, on the first documents until ``--slow-chunks``, with 1, 4 and 8 workers; first as separate
documents, then the same text as one document. Workers share the chunks of one document, so a document
of n chunks takes at least ceil(n / workers) rounds of calls: the ``bound`` column is the speedup
those rounds allow. The machine is shared: its load average is printed too.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from pyoxigraph import NamedNode

from bench.bench_retrieval import _table
from server import vocab
from server.config import PROJECT_ROOT, SAMPLE_DATA, Config
from server.ingest.chunking import split
from server.ingest.documents import Ingester, IngestOptions
from server.ingest.extraction import Completer
from server.ingest.load import build_store
from server.rag.label_index import LabelIndex
from server.rag.openai_llm import OpenAILLM
from server.store import GraphStore

sys.path.append(str(PROJECT_ROOT / "tests"))  # the scripted LLM lives with the tests that use it
from extraction_llm import respond  # noqa: E402
from scripted_llm import Recorded, Reply, ScriptedLLM  # noqa: E402

COLLECTION = "default"
DEFAULTS = IngestOptions()
Text = tuple[str, str]  # (country, document text)


class TimedLLM:
    """A completer that adds up the seconds its calls to ``llm`` take (wall time: exact with one worker)."""

    def __init__(self, llm: Completer) -> None:
        self.llm, self.model, self.seconds = llm, llm.model, 0.0
        self._lock = threading.Lock()

    def complete(self, prompt: str, max_tokens: int | None = None) -> str:
        started = time.perf_counter()
        try:
            return self.llm.complete(prompt, max_tokens)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - started


@dataclass
class Run:
    documents: int
    chunks: int
    seconds: float
    llm_seconds: float
    quads: int
    facts: int


def country_texts(store: GraphStore) -> list[Text]:
    """Every country of the sample as one plain text (its name, then each page's title and text), by IRI."""
    source = vocab.source_graph(COLLECTION)
    pages: dict[str, list[tuple[int, str, str]]] = {}
    for quad in store.quads(None, vocab.RDF.type, vocab.TG.Page, source):
        doc, _, number = quad.subject.value.rpartition("/p")  # urn:trustgraph:doc:fr/p2
        title = next(store.quads(quad.subject, vocab.DC.title, None, source)).object.value
        pages.setdefault(doc, []).append((int(number), title, store.librarian_text(quad.subject) or ""))
    texts = []
    for doc in sorted(pages):
        name = next(store.quads(NamedNode(doc), vocab.DC.title, None, source)).object.value
        texts.append((name, "\n\n".join([name] + [f"{title}\n\n{text}" for _, title, text in sorted(pages[doc])])))
    return texts


def first_chunks(texts: list[Text], chunks: int) -> list[Text]:
    """The first texts that hold at least ``chunks`` chunks between them."""
    chosen, total = [], 0
    for name, text in texts:
        if total >= chunks:
            break
        chosen.append((name, text))
        total += chunk_count(text)
    return chosen


def chunk_count(text: str) -> int:
    """The chunks of a one-page text with the default chunking."""
    return len(split(text, DEFAULTS.chunk_size, DEFAULTS.chunk_overlap))


def index_rebuild_seconds(store: GraphStore) -> float:
    """The time of one rebuild of the collection's label index (the median of five)."""
    index = LabelIndex(store)
    spent = []
    for _ in range(5):
        started = time.perf_counter()
        index.rebuild(COLLECTION)
        spent.append(time.perf_counter() - started)
    return median(spent)


def ingest(sample: GraphStore, path: Path, texts: list[Text], llm: Completer | None, workers: int) -> Run:
    """Ingest ``texts`` into a fresh copy (``path``) of the sample store, one document after another."""
    sample.backup(path)
    store = GraphStore(path)
    index = LabelIndex(store)
    index.rebuild(COLLECTION)  # built already in a running server
    timed = TimedLLM(llm) if llm is not None else None
    ingester = Ingester(store, index, timed)
    before = len(store)
    options = IngestOptions(workers=workers)
    started = time.perf_counter()
    reports = [ingester.ingest(text.encode(), COLLECTION, name=f"{name}.txt", options=options) for name, text in texts]
    seconds = time.perf_counter() - started
    if any(report.unchanged for report in reports):
        raise SystemExit(f"{path}: a document was already in the store; the bench needs new ones")
    return Run(len(reports), sum(r.chunks for r in reports), seconds,
               timed.seconds if timed is not None else 0.0, len(store) - before,
               sum(r.facts for r in reports))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=300, help="chunks of the instant rows (at least)")
    parser.add_argument("--slow-chunks", type=int, default=40, help="chunks of the slow-LLM rows (at least)")
    parser.add_argument("--latency-ms", type=float, default=200, help="the slow LLM's latency per call")
    args = parser.parse_args()
    scripted = ScriptedLLM()
    llm = OpenAILLM(Config(llm="openai", llm_base_url=scripted.base_url, llm_model=scripted.model, llm_retries=0))
    try:
        with tempfile.TemporaryDirectory() as workdir:
            build_store(Path(workdir) / "sample", SAMPLE_DATA, COLLECTION, progress=False)
            sample = GraphStore(Path(workdir) / "sample")
            texts = country_texts(sample)
            rebuild = index_rebuild_seconds(sample)
            runs = (Path(workdir) / f"run{n}" for n in itertools.count())  # a fresh copy of the sample each

            fast = first_chunks(texts, args.chunks)
            scripted.responder = respond
            offline = ingest(sample, next(runs), fast, None, 1)
            instant = ingest(sample, next(runs), fast, llm, 1)
            instant4 = ingest(sample, next(runs), fast, llm, 4)

            latency = args.latency_ms / 1000
            scripted.responder = lambda request: slow_reply(request, latency)
            slow = first_chunks(texts, args.slow_chunks)
            together = [(" + ".join(name for name, _ in slow), "\n\n".join(text for _, text in slow))]
            slow_runs = {(label, workers): ingest(sample, next(runs), documents, llm, workers)
                         for label, documents in (("separate", slow), ("one", together))
                         for workers in (1, 4, 8)}
    finally:
        scripted.close()

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; Factbook countries as plain text, "
          f"chunk size {DEFAULTS.chunk_size}, into a copy of the sample store")
    print(f"one rebuild of the collection's label index: {rebuild * 1000:.0f} ms (an ingest adds its labels to the "
          "index instead)")
    print()
    print(_table(["instant scripted LLM", "docs", "chunks", "s", "chunks/s", "ratio", "quads/chunk", "facts"], [
        row("offline: no LLM (baseline)", offline, offline),
        row("LLM, 1 worker, end to end", instant, offline),
        row("LLM, 1 worker, without the LLM calls", instant, offline, without_llm=True),
        row("LLM, 4 workers, end to end", instant4, offline),
    ]))
    print()
    rows = []
    for label, documents in (("separate", slow), ("one", together)):
        base = slow_runs[(label, 1)]
        name = f"{len(documents)} documents" if label == "separate" else "the same text as 1 document"
        counts = [chunk_count(text) for _, text in documents]
        for workers in (1, 4, 8):
            run = slow_runs[(label, workers)]
            rounds = sum(math.ceil(count / workers) for count in counts)
            rows.append([f"{name}, {workers} worker{'s' * (workers > 1)}", str(run.chunks), f"{run.seconds:.2f}",
                         f"{run.chunks / run.seconds:.1f}", f"{base.seconds / run.seconds:.2f}x",
                         f"{sum(counts) / rounds:.2f}x", str(run.facts)])
    print(_table([f"{args.latency_ms:g} ms scripted LLM", "chunks", "s", "chunks/s", "speedup", "bound", "facts"],
                 rows))


def slow_reply(request: Recorded, latency: float) -> Reply:
    return dataclasses.replace(respond(request), delay_s=latency)


def row(name: str, run: Run, baseline: Run, without_llm: bool = False) -> list[str]:
    seconds = run.seconds - run.llm_seconds if without_llm else run.seconds
    rate, base = run.chunks / seconds, baseline.chunks / baseline.seconds
    return [name, str(run.documents), str(run.chunks), f"{seconds:.2f}", f"{rate:.1f}", f"{rate / base:.2f}",
            f"{run.quads / run.chunks:.1f}", str(run.facts)]


if __name__ == "__main__":
    main()
