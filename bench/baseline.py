"""The TrustGraph retrieval pattern, as the benchmark's baseline: per entity and hop, three triple
pattern queries ``(e ? ?)``, ``(? e ?)``, ``(? ? e)`` of ``triple_limit`` rows each, followed
depth-first as TrustGraph's ``follow_edges`` does, then one label query per term, cached within the
question (TrustGraph's label cache lives in a GraphRag instance, created per request). Kinder than
TrustGraph: ``rdfs:label`` edges and literals are not followed. Same store, seeds and limits as ours.
"""
from __future__ import annotations

from collections.abc import Callable

from pyoxigraph import NamedNode, Variable

from server import vocab
from server.labels import local_name
from server.rag.retrieval import RetrievalLimits, Retriever
from server.sparql_templates import Term
from server.vocab import RDFS

# Bench-only queries with the default triple_limit (30); the ?e / ?g parameters are substitutions.
PATTERNS = [
    ("s", "SELECT * WHERE { GRAPH ?g { ?e ?p ?o } } LIMIT 30"),
    ("p", "SELECT * WHERE { GRAPH ?g { ?s ?e ?o } } LIMIT 30"),
    ("o", "SELECT * WHERE { GRAPH ?g { ?s ?p ?e } } LIMIT 30"),
]
LABEL = "SELECT * WHERE { GRAPH ?g { ?e <http://www.w3.org/2000/01/rdf-schema#label> ?label } } LIMIT 1"


PatternQuery = Callable[[str, Term, NamedNode], list]  # (pattern text, ?e, ?g) -> solutions


def embedded_patterns(retriever: Retriever) -> PatternQuery:
    """Pattern queries on the retriever's embedded store, ``?e`` and ``?g`` substituted."""
    raw = retriever.store.raw
    return lambda text, entity, graph: list(raw.query(text, substitutions={Variable("e"): entity,
                                                                            Variable("g"): graph}))


class PatternBaseline:
    """The traversal above over ``query`` (default: the retriever's embedded store); ``executions``
    counts the pattern and label queries sent."""

    def __init__(self, retriever: Retriever, query: PatternQuery | None = None) -> None:
        self.retriever = retriever
        self.run = query or embedded_patterns(retriever)
        self.label_cache: dict[Term, str] = {}
        self.executions = 0

    def _query(self, text: str, entity: Term, graph: NamedNode) -> list:
        self.executions += 1
        return self.run(text, entity, graph)

    def _follow(self, entity: Term, graph: NamedNode, edges: dict, depth: int, limits: RetrievalLimits) -> None:
        if depth <= 0 or len(edges) >= limits.max_subgraph_size or not isinstance(entity, NamedNode):
            return
        for position, text in PATTERNS:
            for row in self._query(text, entity, graph):
                s, p, o = (entity if position == "s" else row["s"], entity if position == "p" else row["p"],
                           entity if position == "o" else row["o"])
                if p == RDFS.label:
                    continue
                edges[(s, p, o)] = None
                if depth > 1 and position != "p":  # TrustGraph follows objects and subjects, not predicates
                    self._follow(o if position == "s" else s, graph, edges, depth - 1, limits)

    def label(self, term: Term, graph: NamedNode) -> str:
        if term not in self.label_cache:
            if isinstance(term, NamedNode):
                rows = self._query(LABEL, term, graph)
                self.label_cache[term] = rows[0]["label"].value if rows else local_name(term.value)
            else:
                self.label_cache[term] = getattr(term, "value", str(term))
        return self.label_cache[term]

    def get_labelgraph(self, question: str, collection: str,
                       limits: RetrievalLimits) -> tuple[list[tuple[str, str, str]], int]:
        """Labelled edges and the number of SPARQL executions for one question."""
        before = self.executions
        self.label_cache = {}
        graph = vocab.collection_graph(collection)
        edges: dict = {}
        for seed in self.retriever.index.lookup(question, collection, limits.entity_limit):
            self._follow(seed, graph, edges, limits.max_path_length, limits)
        labelled = [tuple(self.label(t, graph) for t in edge) for edge in list(edges)[:limits.max_subgraph_size]]
        return labelled, self.executions - before
