"""Answer quality with the offline provider: MetaQA dev questions (a fixed sample of 300 per hop
count, ``max_path_length`` = hops, ``max_subgraph_size`` 400) and the sample's on- and off-topic
questions (``bench/factbook_questions.tsv``).

MetaQA, per hop count: retrieval recall (a gold answer among the labels of the retrieved edges),
selection recall (among the selected edges), answer recall (named in the answer text), mean edges
selected, and the median non-LLM time (pipeline time less the time inside the LLM's calls) of
today's code against the baseline revision's, each timed in its own process on the same questions
(``bench/pipeline_timing.py``). Factbook: off-topic questions answered "no answer", on-topic ones
answered with the expected fact. Then the label index's build on the generated 1M-triple graph,
with and without the entity label vectors.

    python -m bench.quality [--sample 300] [--baseline-rev 27f4407] [--skip-synthetic]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import metaqa_load
from bench.bench_retrieval import _table
from server.config import PROJECT_ROOT, SAMPLE_DATA, Config
from server.ingest.load import build_store
from server.rag.choice import choose_edges
from server.rag.pipeline import GraphRag, make_graph_rag
from server.rag.retrieval import RetrievalLimits, Retriever
from server.store import GraphStore

BASELINE_REV = "27f4407"  # main before issue 15 (offline lexical selection)
QUESTIONS = Path(__file__).with_name("factbook_questions.tsv")


def metaqa_sample(hops: int, size: int) -> list[tuple[str, list[str]]]:
    """A fixed sample of ``(question without brackets, gold answers)``."""
    rows = []
    for line in (metaqa_load.METAQA_DIR / f"qa_dev_{hops}hop.txt").read_text(encoding="utf-8").splitlines():
        question, answers = line.split("\t")
        rows.append((question.replace("[", "").replace("]", ""), answers.split("|")))
    return random.Random(hops).sample(rows, min(size, len(rows)))


def recall_row(rag: GraphRag, hops: int, sample: list[tuple[str, list[str]]]) -> list[float]:
    """Retrieval, selection and answer recall and mean edges selected over ``sample``."""
    limits = RetrievalLimits(max_path_length=hops, max_subgraph_size=400)
    found = [0, 0, 0]
    selected = []
    for question, answers in sample:
        gold = {a.casefold() for a in answers}
        graph = rag.retriever.get_labelgraph(question, metaqa_load.COLLECTION, limits)
        labeled = dict(zip(graph.edge_ids, graph.labeled_edges, strict=True))
        edges = [labeled[i] for i, _, _ in choose_edges(rag.llm, question, labeled, graph.relation_aliases).edges]
        answer = "".join(m.response for m in rag.run(question, metaqa_load.COLLECTION, explainable=False,
                                                      limits=limits)).casefold()
        hits = (any(s.casefold() in gold or o.casefold() in gold for s, _, o in graph.labeled_edges),
                any(s.casefold() in gold or o.casefold() in gold for s, _, o in edges),
                any(g in answer for g in gold))
        found = [f + h for f, h in zip(found, hits, strict=True)]
        selected.append(len(edges))
    return [f / len(sample) for f in found] + [statistics.mean(selected)]


def timings(tree: Path, samples: dict[int, list[tuple[str, list[str]]]]) -> dict[str, float]:
    """Median non-LLM seconds per hop count of the code in ``tree``, in a process of its own."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({str(h): [q for q, _ in sample] for h, sample in samples.items()}, handle)
    try:
        result = subprocess.run([sys.executable, str(PROJECT_ROOT / "bench" / "pipeline_timing.py"), "--tree",
                                 str(tree), "--questions", handle.name], capture_output=True, text=True, check=True,
                                env={**os.environ, "PYTHONPATH": str(tree)})
    finally:
        os.unlink(handle.name)
    return json.loads(result.stdout.strip().splitlines()[-1])


def baseline_tree(rev: str, into: Path) -> Path:
    """The baseline revision's code (``git archive``), without touching the work tree."""
    archive = subprocess.run(["git", "-C", str(PROJECT_ROOT), "archive", rev, "server", "sparql", "templates",
                              "bench", "data"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def factbook_rows(store_dir: Path) -> list[list[str]]:
    """No-answer counts on the off-topic questions and correct answers on the on-topic ones."""
    build_store(store_dir, SAMPLE_DATA, "default", progress=False)
    rag = make_graph_rag(GraphStore(store_dir), Config(llm="offline", store_path=None))
    counts = {"on-topic": [0, 0, 0], "off-topic": [0, 0, 0]}  # questions, no-answer, expected fact named
    misses = []
    with open(QUESTIONS, encoding="utf-8") as lines:
        for kind, question, expected in csv.reader((line for line in lines if not line.startswith("#")),
                                                   delimiter="\t"):
            messages = list(rag.run(question, explainable=False))
            answer = "".join(m.response for m in messages)
            no_answer = messages[-1].outcome == "no-answer"
            right = no_answer if kind == "off-topic" else expected.casefold() in answer.casefold()
            counts[kind] = [counts[kind][0] + 1, counts[kind][1] + no_answer, counts[kind][2] + right]
            if not right:
                misses.append(f"  {kind}: {question} -> {answer[:120]}")
    print("\n".join(["Misses:", *misses]) if misses else "No misses.")
    return [[kind, str(n), str(none), str(right), target] for (kind, (n, none, right)), target in
            zip(counts.items(), ["answered correctly >= 47", "no answer >= 45"], strict=True)]


def index_build_rows() -> list[list[str]]:
    """The label index build on the generated 1M-triple graph, with and without label vectors."""
    from bench import synthetic
    from server.rag import label_index
    from server.rag.embeddings import LABEL_DIMENSIONS, embedder

    store, _ = synthetic.synthetic_store()
    retriever = Retriever(store)
    embedder()  # loaded once per process, not part of a build
    started = time.perf_counter()
    retriever.index.rebuild(synthetic.COLLECTION)
    total = time.perf_counter() - started
    index = retriever.index._index(synthetic.COLLECTION)
    started = time.perf_counter()
    embedder().embed(index.norms, LABEL_DIMENSIONS)
    vectors = time.perf_counter() - started
    return [[f"{len(store.raw):,}", f"{len(index.norms):,}", f"{total:.2f}", f"{total - vectors:.2f}",
             f"{vectors:.2f}", f"{total / (total - vectors):.2f}x", f"{index.vectors.nbytes / 2**20:.0f}",
             f"{label_index.SEMANTIC_SEED}"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=300, help="MetaQA questions per hop count")
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--skip-synthetic", action="store_true", help="no 1M-triple index build")
    args = parser.parse_args(argv)
    samples = {hops: metaqa_sample(hops, args.sample) for hops in (1, 2, 3)}
    with tempfile.TemporaryDirectory() as scratch:
        base = timings(baseline_tree(args.baseline_rev, Path(scratch)), samples)
        ours = timings(PROJECT_ROOT, samples)
        store = metaqa_load.metaqa_store()
        rag = make_graph_rag(store, Config(llm="offline", store_path=None))
        rows = []
        for hops, sample in samples.items():
            retrieval, selection, answer, edges = recall_row(rag, hops, sample)
            rows.append([f"{hops}-hop", str(len(sample)), f"{retrieval:.3f}", f"{selection:.3f}", f"{answer:.3f}",
                         f"{edges:.1f}", f"{ours[str(hops)] * 1000:.1f}", f"{base[str(hops)] * 1000:.1f}",
                         f"{ours[str(hops)] / base[str(hops)]:.2f}x"])
        print(f"MetaQA dev, offline provider, {args.sample} sampled questions per hop count (seeded), "
              "max_path_length = hops, max_subgraph_size = 400; targets: selection recall >= 0.98 / 0.90 / 0.75, "
              f"non-LLM time <= 2x the baseline ({args.baseline_rev})")
        print(_table(["questions", "n", "retrieval recall", "selection recall", "answer recall", "mean edges",
                      "non-LLM ms (median)", "baseline ms", "ratio"], rows))
        print("\nFactbook sample, offline provider (bench/factbook_questions.tsv)")
        print(_table(["questions", "n", "no answer", "right", "target"], factbook_rows(Path(scratch) / "factbook")))
    if not args.skip_synthetic:
        print("\nLabel index build on the generated graph (bench/synthetic.py), seconds; label vectors: "
              "wordllama, 128 dimensions, float32")
        print(_table(["triples", "entity labels", "build s", "without vectors s", "vectors s", "ratio",
                      "vectors MiB", "semantic seed floor"], index_build_rows()))
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
