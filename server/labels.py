"""Labels read from the store for display (traces, the console's resource pages).

One batched query per 1,000 terms (``sparql/explain_labels.rq``) and one rule to choose among a
term's several labels, the rule the retriever's label index applies too: a trace names an edge as
the LLM saw it.
"""
from __future__ import annotations

from collections.abc import Iterable

from pyoxigraph import Literal, NamedNode

from server.store import GraphStore, graph_options

BATCH = 1000  # terms per query


def label_preference(label: Literal) -> tuple[bool, str]:
    """Sort key of a term's labels: plain or English first, then alphabetical."""
    language = label.language or ""
    return (not (language == "" or language.startswith("en")), label.value)


def store_labels(store: GraphStore, terms: Iterable[object], graph: NamedNode | None = None) -> dict[NamedNode, str]:
    """The preferred ``rdfs:label`` of each IRI among ``terms`` that has one, in ``graph`` (in any
    graph when None)."""
    iris = list(dict.fromkeys(t for t in terms if isinstance(t, NamedNode)))
    candidates: dict[NamedNode, list[Literal]] = {}
    for start in range(0, len(iris), BATCH):
        rows = store.select("explain_labels", values={"term": iris[start:start + BATCH]}, **graph_options(graph))
        for row in rows:
            if isinstance(row["label"], Literal):
                candidates.setdefault(row["term"], []).append(row["label"])
    return {term: min(labels, key=label_preference).value for term, labels in candidates.items()}
