"""GraphRAG retrieval: seed entities from the label index, a bounded traversal, labelled edges.

Per question the store runs one SPARQL query per hop of each seed tier (``sparql/rag_hop.rq``, the
whole frontier in one VALUES block, ``FRONTIER_BATCH`` entities at most, the collection graph as the query's
default graph), plus one ``sparql/rag_focus.rq`` per hop when the question names a relation: the number of
executions does not grow with the number of seeds up to ``FRONTIER_BATCH``. Seeds come from
:class:`~server.rag.label_index.LabelIndex` (sqlite, no graph scan); edge labels come from a bounded LRU
shared across requests, backed by the same index (one batched sqlite lookup for the misses, no store query);
both are refreshed when data is loaded.

Limits (TrustGraph's names and defaults):

* ``entity_limit``: at most this many seeds, and at most this many entities expanded per hop;
* ``triple_limit``: at most this many edges per entity *per direction* in each hop (as TrustGraph
  counts it), up to 100 (the template's cap);
* ``max_subgraph_size``: at most this many distinct edges in all; entities are expanded in seed
  (lookup-rank) order, so the best-matching seeds are served first;
* ``max_path_length``: hops from the seeds, outgoing and incoming edges alike; each hop's frontier takes
  the entities reached in turn from each entity they were reached from, so a hub's neighbours do not
  fill it alone.

Seeds come in two tiers, exact label matches and then ranked token matches; the whole traversal
runs from the first tier before the second gets what budget is left, and hop rows are read lazily,
so entities past the budget are never looked up. Relations the question names by a word of their
label (``borders`` for "Which countries border Germany?") are read first at every hop, by their own
query, and are not cut by ``triple_limit`` (only by the template's cap and ``max_subgraph_size``).
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, zip_longest
from typing import ClassVar

from pyoxigraph import NamedNode

from server import vocab
from server.labels import term_name
from server.rag.label_index import LabelIndex
from server.rag.passage_index import CANDIDATES
from server.sparql_templates import Term, template_limit
from server.store import GraphStore

LABEL_CACHE_SIZE = 100_000
# frontier entities per hop query: an entity_limit of up to 1,000 with 8 focus relations made one reification
# focus text of 16,000 UNION branches (1.7 MB), past what an engine compiles (Virtuoso: 10,000 lines of SQL)
FRONTIER_BATCH = 100


def edge_id(label_s: str, label_p: str, label_o: str) -> str:
    """The first 8 hex digits of sha256 over ``"s|p|o"`` (TrustGraph's edge id)."""
    return hashlib.sha256(f"{label_s}|{label_p}|{label_o}".encode()).hexdigest()[:8]


@dataclass
class RetrievalLimits:
    entity_limit: int = 50
    triple_limit: int = 30
    max_subgraph_size: int = 150
    max_path_length: int = 2
    passages: int = 0  # of the collection's documents, given to the answer beside the edges (graph + passages)

    # field -> (lowest, highest) accepted value; triple_limit's cap is the hop template's LIMIT
    RANGES: ClassVar[dict[str, tuple[int, int]]] = {
        "entity_limit": (1, 1000), "triple_limit": (1, template_limit("rag_hop")), "max_subgraph_size": (1, 10_000),
        "max_path_length": (1, 4), "passages": (0, CANDIDATES)}
    SWITCHES: ClassVar[dict[str, int]] = {"passages": 5}  # a field that may also be given true (this) or false (0)

    def check(self) -> None:
        """ValueError naming the first field outside its range."""
        for name, (low, high) in self.RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"'{name}' must be an integer between {low} and {high}, got {value!r}")


@dataclass
class LabelGraph:
    labeled_edges: list[tuple[str, str, str]]  # for the LLM
    uri_map: dict[str, tuple[Term, Term, Term]]  # edge id -> original terms (literals keep datatype/lang)
    seeds: list[NamedNode]
    sparql_executions: int
    relation_aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # of the edges' relations
    seed_reasons: list[str] = field(default_factory=list)  # "rank. label: why it was taken", per seed
    seed_names: list[str] = field(default_factory=list)  # each seed's label

    @property
    def edge_ids(self) -> list[str]:
        """The edge ids, unique, parallel to ``labeled_edges`` (``uri_map`` is filled in edge order)."""
        return list(self.uri_map)


class _LabelCache:
    """A bounded LRU of term labels per collection; a load into a collection retires its entries."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, int, Term], str] = OrderedDict()
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()

    def key(self, collection: str, term: Term) -> tuple[str, int, Term]:
        return (collection, self._generation.get(collection, 0), term)

    def get(self, collection: str, terms: Iterable[Term]) -> tuple[dict[Term, str], list[Term]]:
        found: dict[Term, str] = {}
        missing: list[Term] = []
        with self._lock:
            for term in terms:
                key = self.key(collection, term)
                if key in self._entries:
                    self._entries.move_to_end(key)
                    found[term] = self._entries[key]
                else:
                    missing.append(term)
        return found, missing

    def put(self, collection: str, labels: dict[Term, str]) -> None:
        with self._lock:
            for term, label in labels.items():
                self._entries[self.key(collection, term)] = label
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def invalidate(self, collection: str, added_labels: list | None = None) -> None:
        """Entries of ``collection`` are no longer served (whatever was added: a term's name may change)."""
        with self._lock:
            self._generation[collection] = self._generation.get(collection, 0) + 1


class _Walk:
    """The state of one traversal: edges in the order found, entities seen, and the frontier entity
    each entity was first reached from."""

    def __init__(self, limits: RetrievalLimits) -> None:
        self.limits = limits
        self.edges: dict[tuple[Term, Term, Term], None] = {}
        self.visited: set[NamedNode] = set()
        self.parent: dict[NamedNode, Term] = {}

    def full(self) -> bool:
        return len(self.edges) >= self.limits.max_subgraph_size or self.limits.triple_limit <= 0

    def visit(self, entities: list[NamedNode]) -> list[NamedNode]:
        """The entities not seen before, now marked seen."""
        fresh = [e for e in entities if e not in self.visited]
        self.visited.update(fresh)
        return fresh

    def read(self, solutions: Iterable) -> list[NamedNode]:
        """Take edges from hop rows (the query applies the per-entity limits) until
        ``max_subgraph_size``; returns the entities they reach first."""
        reached: list[NamedNode] = []
        for row in solutions:
            edge = (row["s"], row["p"], row["o"])
            if edge in self.edges:
                continue
            self.edges[edge] = None
            fresh = self.visit([node for node in (edge[0], edge[2]) if isinstance(node, NamedNode)])
            self.parent.update((node, edge[2] if node == edge[0] else edge[0]) for node in fresh)
            reached += fresh
            if self.full():
                break
        return reached

    def fair(self, reached: list[NamedNode]) -> list[NamedNode]:
        """``reached`` taken in turn from each entity it was reached from (in the order found), so
        that a hub's neighbours (a year's hundreds of films) do not crowd the others out of the next
        frontier (the two other films of a writer)."""
        groups: dict[Term, list[NamedNode]] = {}
        for node in reached:
            groups.setdefault(self.parent[node], []).append(node)
        return [node for node in chain.from_iterable(zip_longest(*groups.values())) if node is not None]


class Retriever:
    """Finds the labelled subgraph around the entities a question names."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.index = LabelIndex(store)
        self._cache = _LabelCache(LABEL_CACHE_SIZE)
        store.add_load_listener(self._cache.invalidate)

    def labels(self, terms: Iterable[Term], collection: str) -> dict[Term, str]:
        """The name of each term (:func:`~server.labels.term_name`), with its preferred ``rdfs:label``
        in ``collection``'s graph taken from the label index (no store query). Cached."""
        result, missing = self._cache.get(collection, list(dict.fromkeys(terms)))
        found = self.index.display_labels([t for t in missing if isinstance(t, NamedNode)], collection)
        fresh: dict[Term, str] = {term: term_name(term, found.get(term)) for term in missing}
        self._cache.put(collection, fresh)
        result.update(fresh)
        return result

    def _traverse(self, seed_tiers: list[list[NamedNode]], focus: list[NamedNode], collection: str,
                  limits: RetrievalLimits) -> tuple[list[tuple[Term, Term, Term]], int]:
        """Hop by hop from each tier of seeds in turn (exact matches before ranked ones), reading the
        question's focus relations first and the general hop only when they reach no new entity (a
        hub's other edges would spend the budget the question's chain needs); stops when
        ``max_subgraph_size`` is spent."""
        walk = _Walk(limits)
        graph = vocab.collection_graph(collection)
        executions = 0
        for tier in seed_tiers:
            frontier = walk.visit(tier)
            for hop in range(limits.max_path_length):
                if not frontier or walk.full():
                    break
                reached: list[NamedNode] = []
                sent: list[str] = []
                if focus:
                    reached += walk.read(self._batched("rag_focus", frontier, sent, {"p": focus}, default_graph=graph))
                if not walk.full() and not (reached and hop):
                    reached += walk.read(self._batched("rag_hop", frontier, sent, limit=limits.triple_limit,
                                                       default_graph=graph))
                executions += len(sent)
                frontier = walk.fair(reached)[:limits.entity_limit]
        return list(walk.edges), executions

    def _batched(self, name: str, frontier: list[NamedNode], sent: list[str], values: dict | None = None,
                 **options: object) -> Iterator:
        """The rows of hop template ``name`` for ``frontier``, ``FRONTIER_BATCH`` entities a query, each query
        sent (and noted in ``sent``) only once the rows before it are read: a walk that fills up sends no more."""
        for start in range(0, len(frontier), FRONTIER_BATCH):
            sent.append(name)
            yield from self.store.query(name, values={**(values or {}), "e": frontier[start:start + FRONTIER_BATCH]},
                                        **options)

    def get_labelgraph(self, question: str, collection: str, limits: RetrievalLimits | None = None) -> LabelGraph:
        """Seeds for ``question`` in ``collection``, the bounded subgraph around them, labelled."""
        limits = limits or RetrievalLimits()
        reasons: dict[NamedNode, str] = {}
        exact, ranked = self.index.lookup_tiers(question, collection, limits.entity_limit, reasons)
        focus = self.index.focus_relations(question, collection)
        edges, executions = self._traverse([exact, ranked], focus, collection, limits)
        labels = self.labels((t for edge in edges for t in edge), collection)
        labeled: list[tuple[str, str, str]] = []
        uri_map: dict[str, tuple[Term, Term, Term]] = {}
        for edge in edges:
            names = (labels[edge[0]], labels[edge[1]], labels[edge[2]])
            base = candidate = edge_id(*names)
            suffix = 1
            while candidate in uri_map:  # same labels, different terms: both edges survive
                suffix += 1
                candidate = f"{base}-{suffix}"
            uri_map[candidate] = edge
            labeled.append(names)
        aliases = self.index.relation_aliases(collection)
        seed_labels = self.labels(exact + ranked, collection)
        used = {p: aliases[p] for _, p, _ in labeled if p in aliases}
        return LabelGraph(labeled_edges=labeled, uri_map=uri_map, seeds=exact + ranked,
                          sparql_executions=executions, relation_aliases=used,
                          seed_reasons=self._seed_reasons(exact + ranked, reasons, seed_labels),
                          seed_names=[seed_labels[seed] for seed in exact + ranked])

    @staticmethod
    def _seed_reasons(seeds: list[NamedNode], reasons: dict[NamedNode, str], names: dict[NamedNode, str]) -> list[str]:
        """One line per seed, in rank order: ``"1. France: its label is spelled out in the question"``."""
        return [f"{rank}. {names[seed]}: {reasons.get(seed, 'a seed')}" for rank, seed in enumerate(seeds, start=1)]
