"""What the on-disk store charges for a question's edges with the query engine taken away: the
bounds that ``bench_retrieval`` prints beside its timings, to show how far any speedup over the
pattern baseline can go on this store."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator

from pyoxigraph import NamedNode, Quad

from server import vocab
from server.rag.retrieval import RetrievalLimits, Retriever
from server.sparql_templates import Term
from server.store import GraphStore
from server.vocab import RDFS


class ObservedStore(GraphStore):
    """A twin of an open store (the same pyoxigraph Store and writers' lock: the path is not opened
    twice) that records the frontier (``VALUES ?e``) of each template query and adds up the time
    spent in ``extend`` and ``record_trace`` and the quads written."""

    def __init__(self, store: GraphStore) -> None:
        self.__dict__.update(store.__dict__)
        self.frontiers: list[list[Term]] = []
        self.write_seconds = 0.0
        self.quads_written = 0

    def query(self, name: str, values: dict | None = None, limit: int | None = None,
              **options: object):  # type: ignore[no-untyped-def]
        if values and "e" in values:
            self.frontiers.append(list(values["e"]))
        return super().query(name, values, limit, **options)

    def extend(self, quads: Iterable[Quad]) -> None:
        self._timed(super().extend, quads)

    def record_trace(self, quads: Iterable[Quad]) -> None:  # the explain writes
        self._timed(super().record_trace, quads)

    def _timed(self, write: Callable[[list[Quad]], None], quads: Iterable[Quad]) -> None:
        quads = list(quads)
        self.quads_written += len(quads)
        started = time.perf_counter()
        try:
            write(quads)
        finally:
            self.write_seconds += time.perf_counter() - started


def point_reads(retriever: Retriever, question: str, collection: str, limits: RetrievalLimits,
                edges: list[tuple[Term, Term, Term]]) -> float:
    """Seconds for the seed lookup plus one raw read (``quads_for_pattern``) of each returned edge:
    handing over just those edges, with no traversal, no query engine and no labels."""
    graph = vocab.collection_graph(collection)
    started = time.perf_counter()
    retriever.index.lookup_tiers(question, collection, limits.entity_limit)
    for s, p, o in edges:
        for _ in retriever.store.raw.quads_for_pattern(s, p, o, graph):
            pass
    return time.perf_counter() - started


def _scan(quads: Iterator[Quad], limit: int) -> None:
    for _ in itertools.islice((q for q in quads if q.predicate != RDFS.label), limit):
        pass


def raw_walk(retriever: Retriever, question: str, collection: str, limits: RetrievalLimits) -> float:
    """Seconds for the seed lookup plus one raw scan per direction (``quads_for_pattern``, at most
    ``triple_limit`` rows) of each entity our traversal expanded and took edges from: the storage
    work of our traversal with the query engine taken away."""
    observed = ObservedStore(retriever.store)
    retriever.store, original = observed, retriever.store
    try:
        found = retriever.get_labelgraph(question, collection, limits)
    finally:
        retriever.store = original
    ends = {term for edge in found.uri_map.values() for term in (edge[0], edge[2])}
    expanded = [e for e in dict.fromkeys(itertools.chain(*observed.frontiers)) if e in ends]
    graph = vocab.collection_graph(collection)
    raw = original.raw
    started = time.perf_counter()
    retriever.index.lookup_tiers(question, collection, limits.entity_limit)
    for entity in expanded:
        if isinstance(entity, NamedNode):
            _scan(raw.quads_for_pattern(entity, None, None, graph), limits.triple_limit)
            _scan(raw.quads_for_pattern(None, None, entity, graph), limits.triple_limit)
    return time.perf_counter() - started
