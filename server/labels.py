"""What a term is called, for people and LLMs alike: the retriever's edges and the traces.

One rule to choose among a term's several labels (:func:`label_preference`, which the retriever's
label index applies too) and one rule for a term without a label (:func:`term_name`): a trace
names an edge as the LLM saw it. Labels for display are read from the store in one batched query
per 1,000 terms (``sparql/explain_labels.rq``).
"""
from __future__ import annotations

from collections.abc import Iterable

from pyoxigraph import BlankNode, Literal, NamedNode, Triple

from server.sparql_templates import render_term
from server.store_base import StoreBackend, graph_options
from server.vocab import Term

BATCH = 1000  # terms per query


def local_name(iri: str) -> str:
    """The last segment of an IRI (after ``#``, ``/`` or ``:``): ``http://ex.org/ns#Paris`` -> ``Paris``."""
    for separator in ("#", "/", ":"):
        head, sep, tail = iri.rstrip(separator).rpartition(separator)
        if sep and tail:
            return tail
    return iri


def term_name(term: Term | BlankNode, label: str | None = None) -> str:
    """What ``term`` is called: its ``label`` if it has one, else an IRI's local name, a literal's
    lexical form, a blank node or a triple term in N-Triples (``_:b1``, ``<<( s p o )>>``)."""
    if label:
        return label
    if isinstance(term, NamedNode):
        return local_name(term.value)
    if isinstance(term, Literal):
        return term.value
    if isinstance(term, Triple):
        return render_term(term, blank_nodes=True)
    return str(term)


def label_preference(label: Literal) -> tuple[bool, str]:
    """Sort key of a term's labels: plain or English first, then alphabetical."""
    language = label.language or ""
    return (not (language == "" or language.startswith("en")), label.value)


def store_labels(store: StoreBackend, terms: Iterable[object], graph: NamedNode | None = None) -> dict[NamedNode, str]:
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
