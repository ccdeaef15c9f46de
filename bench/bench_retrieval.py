"""Retrieval benchmark: entity-lookup recall on MetaQA, and the non-LLM time of a question on
MetaQA and on a generated 1M-triple graph against the TrustGraph per-entity pattern traversal.

Run from the project root: ``python -m bench.bench_retrieval`` (a few minutes on 2 cores once the
stores are cached; the first run builds them) or ``--quick``. Data is cached in
``GLASSGRAPH_BENCH_DIR`` (default ``~/.cache/glassgraph-bench``).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Iterator

from pyoxigraph import Triple

from bench import metaqa_load, synthetic
from bench.baseline import PatternBaseline
from bench.storage_bounds import ObservedStore, point_reads, raw_walk
from server import vocab
from server.config import Config
from server.explain.stream import ExplainStream
from server.rag.llm import LLM
from server.rag.pipeline import GraphRag
from server.rag.providers import make_llm
from server.rag.retrieval import RetrievalLimits, Retriever
from server.stages import RETRIEVAL, EdgesRetrieved
from server.store import GraphStore
from server.vocab import LIBRARIAN_GRAPH


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def lookup_recall(retriever: Retriever, sample: int | None) -> list[list[str]]:
    """Share of MetaQA dev questions whose bracketed topic entity is among the seeds (brackets removed)."""
    rows = []
    limit = RetrievalLimits().entity_limit
    for hops in (1, 2, 3):
        questions = metaqa_load.dev_questions(hops)
        if sample is not None:
            questions = random.Random(hops).sample(questions, min(sample, len(questions)))
        found = in_kb = found_in_kb = 0
        spent = 0.0
        for question, topic in questions:
            topic_iri = metaqa_load.entity(topic)
            started = time.perf_counter()
            hit = topic_iri in retriever.index.lookup(question, metaqa_load.COLLECTION, limit)
            spent += time.perf_counter() - started
            known = next(iter(retriever.store.raw.quads_for_pattern(topic_iri, None, None)), None) is not None
            found += hit
            in_kb += known
            found_in_kb += hit and known
        per_question = spent / len(questions)
        rows.append([f"{hops}-hop", str(len(questions)), f"{100 * found / len(questions):.2f}%",
                     str(in_kb), f"{100 * found_in_kb / max(in_kb, 1):.2f}%", _ms(per_question)])
    return rows


class TimedLLM:
    """Delegates to an LLM and adds up the time spent inside it (to subtract from the pipeline's)."""

    def __init__(self, llm: LLM) -> None:
        self.llm, self.model, self.seconds = llm, llm.model, 0.0

    def __getattr__(self, name: str) -> object:  # what the selection stage reads besides (context_tokens, ...)
        return getattr(self.llm, name)

    def select(self, question: str, edges: list, aliases: dict | None = None) -> str:
        started = time.perf_counter()
        try:
            return self.llm.select(question, edges, aliases)
        finally:
            self.seconds += time.perf_counter() - started

    def answer(self, question: str, edges: list) -> Iterator[str]:
        pieces = self.llm.answer(question, edges)
        while True:
            started = time.perf_counter()
            try:
                piece = next(pieces)
            except StopIteration:
                return
            finally:
                self.seconds += time.perf_counter() - started
            yield piece


def _explain_overhead(store: GraphStore, retriever: Retriever, collection: str,
                      questions: list[str]) -> tuple[float, float, float, float]:
    """Median non-LLM pipeline time without explainability, the median of the per-question
    differences explainable minus not, the median time of the explain writes alone
    (``store.extend``) and the median number of quads they wrote. Each question runs once untimed
    first, so that both timed runs see warm caches and the difference is the explain work alone."""
    llm = TimedLLM(make_llm(Config(llm="offline")))
    timed_store = ObservedStore(store)
    rag = GraphRag(timed_store, retriever, llm, sinks=ExplainStream)
    plain: list[float] = []
    differences: list[float] = []
    writes: list[float] = []
    quads: list[int] = []

    def timed(question: str, explainable: bool) -> float:
        llm.seconds = timed_store.write_seconds = 0.0
        timed_store.quads_written = 0
        started = time.perf_counter()
        messages = list(rag.run(question, collection, explainable=explainable))
        spent = time.perf_counter() - started - llm.seconds
        errors = [m.error for m in messages if m.error]
        if errors:
            raise RuntimeError(f"pipeline failed on {question!r}: {errors[0]}")
        if explainable:
            writes.append(timed_store.write_seconds)
            quads.append(timed_store.quads_written)
        return spent

    try:
        for index, question in enumerate(questions):
            timed(question, False)  # warm-up, not counted
            order = (True, False) if index % 2 == 0 else (False, True)  # alternate which goes first
            spent = {explainable: timed(question, explainable) for explainable in order}
            plain.append(spent[False])
            differences.append(spent[True] - spent[False])
    finally:
        with store.writing() as raw:  # keep the cached bench store free of traces
            raw.clear_graph(store.explain_graph)
            raw.clear_graph(LIBRARIAN_GRAPH)
    return statistics.median(plain), statistics.median(differences), statistics.median(writes), statistics.median(quads)


def retrieval_write_cost(store: GraphStore, retriever: Retriever, collection: str,
                         questions: list[str]) -> list[str]:
    """The retrieval entity's write (one ``record_trace``) with only its edge count, as before decision 15, and
    with every retrieved edge as a triple term and the seeds: medians in ms, quads, and the ratio. The two
    writes alternate which goes first; the explain graph is cleared afterwards."""
    plain: list[float] = []
    listed: list[float] = []
    quads: list[int] = []
    try:
        for index, question in enumerate(questions):
            graph = retriever.get_labelgraph(question, collection)
            retrieved = EdgesRetrieved([(Triple(*terms), labels) for terms, labels
                                        in zip(graph.uri_map.values(), graph.labeled_edges, strict=True)], graph.seeds)
            listed_quads = RETRIEVAL.quads(store.explain_graph, f"bench-{index}-b", retrieved)
            plain_quads = [q for q in RETRIEVAL.quads(store.explain_graph, f"bench-{index}-a", retrieved)
                           if q.predicate not in (vocab.TG.retrievedEdge, vocab.TG.seed)]
            variants = {False: plain_quads, True: listed_quads}
            for with_edges in ((False, True) if index % 2 == 0 else (True, False)):
                started = time.perf_counter()
                store.record_trace(variants[with_edges])
                (listed if with_edges else plain).append(time.perf_counter() - started)
            quads.append(len(variants[True]))
    finally:
        with store.writing() as raw:
            raw.clear_graph(store.explain_graph)
    return [_ms(statistics.median(plain)), _ms(statistics.median(listed)), f"{statistics.median(quads):.0f}",
            f"{statistics.median(listed) / statistics.median(plain):.2f}x"]


def indexed(store: GraphStore, collection: str) -> tuple[Retriever, float]:
    """A retriever with the collection's label index built, and the seconds the build took."""
    retriever = Retriever(store)
    started = time.perf_counter()
    retriever.index.rebuild(collection)
    return retriever, time.perf_counter() - started


def timing(name: str, retriever: Retriever, index_build: float, collection: str, questions: list[str],
           fresh_questions: list[str]) -> tuple[list[str], list[str], list[str]]:
    """A row of each table: the retrieval entity's write; our retriever against the pattern baseline on the
    same store and questions, with the explainability overhead on ``fresh_questions`` (not asked before: no
    warm label cache); and the storage bounds of the same questions."""
    store = retriever.store
    baseline = PatternBaseline(retriever)
    limits = RetrievalLimits()
    for question in questions[:5]:  # warm up both (store blocks, sqlite pages)
        retriever.get_labelgraph(question, collection, limits)
        baseline.get_labelgraph(question, collection, limits)
    ours: list[float] = []
    theirs: list[float] = []
    executions: list[int] = []
    base_executions: list[int] = []
    edges: list[int] = []
    base_edges: list[int] = []
    reads: list[float] = []
    walks: list[float] = []
    for index, question in enumerate(questions[5:]):
        # Whoever runs second finds the store's blocks warm: alternate who goes first.
        for ours_turn in (index % 2 == 0, index % 2 == 1):
            started = time.perf_counter()
            if ours_turn:
                graph = retriever.get_labelgraph(question, collection, limits)
                ours.append(time.perf_counter() - started)
            else:
                labelled, count = baseline.get_labelgraph(question, collection, limits)
                theirs.append(time.perf_counter() - started)
        executions.append(graph.sparql_executions)
        base_executions.append(count)
        edges.append(len(graph.edge_ids))
        base_edges.append(len(labelled))
        reads.append(point_reads(retriever, question, collection, limits, list(graph.uri_map.values())))
        walks.append(raw_walk(retriever, question, collection, limits))
    overhead = _explain_overhead(store, retriever, collection, fresh_questions)
    writes = [name, *retrieval_write_cost(store, retriever, collection, fresh_questions)]
    ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
    read_median, walk_median = statistics.median(reads), statistics.median(walks)
    bounds = [name, _ms(ours_median), _ms(theirs_median), _ms(walk_median), f"{theirs_median / walk_median:.1f}x",
              _ms(read_median), f"{theirs_median / read_median:.1f}x"]
    return writes, [name, f"{len(store.raw):,}", _ms(index_build), str(len(ours)), _ms(ours_median),
            _ms(statistics.quantiles(ours, n=10)[-1]), f"{statistics.mean(executions):.2f}",
            f"{statistics.mean(edges):.0f}", _ms(theirs_median), f"{statistics.mean(base_executions):.0f}",
            f"{statistics.mean(base_edges):.0f}", f"{theirs_median / ours_median:.1f}x",
            f"{_ms(overhead[0])} + {_ms(overhead[1])}: {100 * overhead[1] / overhead[0]:+.1f}%",
            f"{_ms(overhead[2])}, {overhead[3]:.0f}: {100 * overhead[2] / overhead[0]:.1f}%"], bounds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="samples instead of every question")
    parser.add_argument("--questions", type=int, default=None, help="timed questions per dataset")
    args = parser.parse_args(argv)
    timed = args.questions or (40 if args.quick else 300)
    overhead_questions = 20 if args.quick else 100

    metaqa = metaqa_load.metaqa_store()
    recall_sample = 1000 if args.quick else None
    print(f"Entity lookup recall on MetaQA dev ({'1000 sampled' if args.quick else 'all'} questions per hop "
          f"count, brackets removed, entity_limit={RetrievalLimits().entity_limit})")
    retriever, build = indexed(metaqa, metaqa_load.COLLECTION)
    print(_table(["questions", "n", "recall", "topic in KB", "recall (topic in KB)", "ms/lookup"],
                 lookup_recall(retriever, recall_sample)))

    rng = random.Random(42)
    metaqa_questions = [q for hops in (1, 2, 3) for q, _ in metaqa_load.dev_questions(hops)]
    sample = rng.sample(metaqa_questions, timed + 5 + overhead_questions)
    results = [timing("MetaQA", retriever, build, metaqa_load.COLLECTION, sample[:timed + 5], sample[timed + 5:])]
    store, questions = synthetic.synthetic_store()
    retriever, build = indexed(store, synthetic.COLLECTION)
    sample = rng.sample(questions, timed + 5 + overhead_questions)
    results.append(timing("synthetic 1M", retriever, build, synthetic.COLLECTION, sample[:timed + 5],
                          sample[timed + 5:]))
    print(f"\nNon-LLM time per question, default limits {RetrievalLimits()}; medians in ms; "
          "baseline = TrustGraph per-entity pattern traversal (3 queries per entity per hop)")
    print(_table(["graph", "triples", "index build ms", "questions", "median", "p90", "SPARQL/q", "edges",
                  "baseline median", "baseline SPARQL/q", "baseline edges", "speedup",
                  "pipeline non-LLM ms, not explainable + explain work (paired median): overhead",
                  "of which store writes (extend), quads: share of not explainable"], [row for _, row, _ in results]))
    print("\nStorage bounds, medians in ms over the same questions: the store's own cost with no query engine. "
          "Raw walk = seed lookup + one quads_for_pattern scan (<= triple_limit rows) per direction of each "
          "entity our traversal took edges from; point reads = seed lookup + one quads_for_pattern read per "
          "returned edge. Baseline / bound = the speedup a free query engine would show.")
    print(_table(["graph", "ours", "baseline", "raw walk", "baseline / raw walk", "point reads",
                  "baseline / point reads"], [bounds for _, _, bounds in results]))
    print("\nThe retrieval entity's write (one transaction), medians in ms over the same questions as the explain "
          "overhead: edge count only (before decision 15) against every retrieved edge as a triple term and the "
          "seeds (tg:retrievedEdge, tg:seed)")
    print(_table(["graph", "edge count only", "with retrieved edges", "quads written", "ratio"],
                 [writes for writes, _, _ in results]))
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
