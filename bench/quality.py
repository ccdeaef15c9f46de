"""Answer quality with the offline provider: MetaQA dev questions (a fixed sample of 300 per hop
count from the reporting half, ``max_path_length`` = hops, ``max_subgraph_size`` 400), the sample's
on- and off-topic questions (``bench/factbook_questions.tsv``), its list questions
(``bench/list_questions.tsv``, gold sets from SPARQL) and its paraphrased questions
(``bench/paraphrase_questions.tsv``).

MetaQA's dev questions are shuffled (seeded) and halved: the selector's thresholds were set looking
at the tuning half, the bench samples the reporting half. MetaQA is loaded three ways: labels only
under Glassgraph's IRIs (the headline), as a user loads it (``metaqa_load.metaqa_user_store``: other
IRIs, a Graph Store PUT), and with ``bench/metaqa_vocabulary.ttl``'s hand-written relation aliases.

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
from server.answering import make_graph_rag
from server.config import PROJECT_ROOT, SAMPLE_DATA, Config
from server.ingest.load import build_store
from server.rag.choice import choose_edges
from server.rag.pipeline import GraphRag
from server.rag.retrieval import RetrievalLimits, Retriever
from server.store import GraphStore
from server.vocab import collection_graph

BASELINE_REV = "27f4407"  # main before issue 15 (offline lexical selection)
QUESTIONS = Path(__file__).with_name("factbook_questions.tsv")
LIST_QUESTIONS = Path(__file__).with_name("list_questions.tsv")
PARAPHRASES = Path(__file__).with_name("paraphrase_questions.tsv")
VARIANTS = {"labels only": metaqa_load.metaqa_plain_store, "Graph Store PUT, own IRIs": metaqa_load.metaqa_user_store,
            "with vocabulary aliases": metaqa_load.metaqa_store}


def metaqa_half(hops: int, half: str) -> list[tuple[str, list[str]]]:
    """The ``"tune"`` or ``"report"`` half of the dev questions, shuffled (seeded): ``(question without
    brackets, gold answers)``."""
    rows = []
    for line in (metaqa_load.METAQA_DIR / f"qa_dev_{hops}hop.txt").read_text(encoding="utf-8").splitlines():
        question, answers = line.split("\t")
        rows.append((question.replace("[", "").replace("]", ""), answers.split("|")))
    random.Random(hops).shuffle(rows)
    return rows[:len(rows) // 2] if half == "tune" else rows[len(rows) // 2:]


def metaqa_sample(hops: int, size: int, half: str = "report") -> list[tuple[str, list[str]]]:
    """A fixed sample of ``size`` questions of one half (see :func:`metaqa_half`)."""
    return metaqa_half(hops, half)[:size]


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


def factbook_rows(rag: GraphRag) -> list[list[str]]:
    """No-answer counts on the off-topic questions and correct answers on the on-topic ones."""
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


def _tsv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8") as lines:
        return list(csv.reader((line for line in lines if not line.startswith("#")), delimiter="\t"))


def list_rows(rag: GraphRag) -> list[list[str]]:
    """Per list question: the gold members (the query's ``?member`` labels), the answer's recall of them
    (named in its text) and its precision (the selected edges' labels that the question does not name,
    counted gold or not), and whether the answer says it is complete."""
    rows = []
    graph = collection_graph("default")
    for question, query in _tsv(LIST_QUESTIONS):
        gold = {row["member"].value.casefold() for row in rag.store.raw.query(query, default_graph=graph)}
        messages = list(rag.run(question, explainable=False))
        answer = "".join(m.response for m in messages).casefold()
        limits = RetrievalLimits()
        graph_edges = rag.retriever.get_labelgraph(question, "default", limits)
        labeled = dict(zip(graph_edges.edge_ids, graph_edges.labeled_edges, strict=True))
        choice = choose_edges(rag.llm, question, labeled, graph_edges.relation_aliases)
        named = {label.casefold() for i, _, _ in choice.edges for label in (labeled[i][0], labeled[i][2])
                 if label.casefold() not in question.casefold()}
        recall = sum(member in answer for member in gold) / len(gold) if gold else 0.0
        precision = len(named & gold) / len(named) if named else 0.0
        rows.append([question, str(len(gold)), f"{recall:.2f}", f"{precision:.2f}",
                     "cut" if choice.cut else "complete" if "complete" in answer else "-"])
    recalls, precisions = [float(r[2]) for r in rows], [float(r[3]) for r in rows]
    rows.append(["mean (targets: recall >= 0.95, precision >= 0.9)", str(sum(int(r[1]) for r in rows)),
                 f"{statistics.mean(recalls):.3f}", f"{statistics.mean(precisions):.3f}", ""])
    return rows


def paraphrase_rows(rag: GraphRag) -> list[list[str]]:
    """The reworded on-topic questions: answered with the expected fact, refused, misses listed."""
    right = refused = 0
    misses = []
    questions = _tsv(PARAPHRASES)
    for question, expected in questions:
        messages = list(rag.run(question, explainable=False))
        answer = "".join(m.response for m in messages)
        refused += messages[-1].outcome == "no-answer"
        if expected.casefold() in answer.casefold():
            right += 1
        else:
            misses.append(f"  {question} -> {answer[:120]}")
    print("\n".join(["Paraphrase misses:", *misses]) if misses else "No paraphrase misses.")
    return [["paraphrased on-topic", str(len(questions)), str(refused), str(right)]]


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
    parser.add_argument("--skip-timing", action="store_true", help="no non-LLM timing against the baseline")
    args = parser.parse_args(argv)
    samples = {hops: metaqa_sample(hops, args.sample) for hops in (1, 2, 3)}
    with tempfile.TemporaryDirectory() as scratch:
        if args.skip_timing:
            base = ours = {str(hops): float("nan") for hops in samples}
        else:
            base = timings(baseline_tree(args.baseline_rev, Path(scratch)), samples)
            ours = timings(PROJECT_ROOT, samples)
        rows = []
        for variant, make_store in VARIANTS.items():
            rag = make_graph_rag(make_store(), Config(llm="offline", store_path=None))
            for hops, sample in samples.items():
                retrieval, selection, answer, edges = recall_row(rag, hops, sample)
                timing = [f"{ours[str(hops)] * 1000:.1f}", f"{base[str(hops)] * 1000:.1f}",
                          f"{ours[str(hops)] / base[str(hops)]:.2f}x"] if variant == "with vocabulary aliases" \
                    else ["", "", ""]
                rows.append([variant, f"{hops}-hop", str(len(sample)), f"{retrieval:.3f}", f"{selection:.3f}",
                             f"{answer:.3f}", f"{edges:.1f}", *timing])
        print(f"MetaQA dev (reporting half), offline provider, {args.sample} sampled questions per hop count "
              "(seeded), max_path_length = hops, max_subgraph_size = 400; targets: selection recall >= 0.97 / "
              "0.93 / 0.80 on labels only, the Graph Store load within 0.02; non-LLM time <= 2x the baseline "
              f"({args.baseline_rev}, timed on the vocabulary store)")
        print(_table(["load", "questions", "n", "retrieval recall", "selection recall", "answer recall",
                      "mean edges", "non-LLM ms (median)", "baseline ms", "ratio"], rows))
        build_store(Path(scratch) / "factbook", SAMPLE_DATA, "default", progress=False)
        rag = make_graph_rag(GraphStore(Path(scratch) / "factbook"), Config(llm="offline", store_path=None))
        print("\nFactbook sample, offline provider (bench/factbook_questions.tsv)")
        print(_table(["questions", "n", "no answer", "right", "target"], factbook_rows(rag)))
        print("\nList questions over the sample (bench/list_questions.tsv; gold: the SPARQL query's members)")
        print(_table(["question", "gold", "recall", "precision", "says"], list_rows(rag)))
        print("\nParaphrased questions over the sample (bench/paraphrase_questions.tsv, written before the first run)")
        print(_table(["questions", "n", "no answer", "right"], paraphrase_rows(rag)))
    if not args.skip_synthetic:
        print("\nLabel index build on the generated graph (bench/synthetic.py), seconds; label vectors: "
              "wordllama, 128 dimensions, float32")
        print(_table(["triples", "entity labels", "build s", "without vectors s", "vectors s", "ratio",
                      "vectors MiB", "semantic seed floor"], index_build_rows()))
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
