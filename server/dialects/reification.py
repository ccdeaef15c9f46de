"""The ``reification`` dialect: statements about triples on engines without triple terms (Virtuoso 7,
Amazon Neptune), as classic RDF reification.

Every triple term Glassgraph writes becomes a *statement node*, an IRI derived from the triple's content
(:func:`statement_iri`: the same triple has the same IRI in every graph, collection and run), described
beside each quad that names it, in the same graph::

    <urn:glassgraph:statement:HASH> a rdf:Statement ; rdf:subject s ; rdf:predicate p ; rdf:object o .

So a ``VALUES`` row holding a triple term is sent as its statement IRI (a pattern such as ``?sg tg:contains
?edge`` then matches unchanged), and a statement IRI in an engine's answer is read back as the triple term
it names (:func:`resolve_results`), before pyoxigraph parses the answer: readers see triple terms on every
backend. Templates that take triple terms apart (``SUBJECT()``, ``isTRIPLE``) or use ``LATERAL`` have a
variant in ``sparql/reification/`` written in plain SPARQL 1.1.

A statement's description is never deleted with a quad that names it: another quad (another session's trace,
another subgraph) may name the same statement, and a description is four quads whatever the number of uses.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence

from pyoxigraph import NamedNode, Triple

from server.vocab import RDF, Term

NAME = "reification"
STATEMENT_PREFIX = "urn:glassgraph:statement:"
_PREFIX_BYTES = STATEMENT_PREFIX.encode()
_RESOLVE_ROUNDS = 8  # nested triple terms resolved at most this deep


def statement_iri(triple: Triple) -> NamedNode:
    """The statement node of ``triple``: a hash of its N-Triples form (nested triple terms in RDF 1.2's)."""
    return NamedNode(STATEMENT_PREFIX + hashlib.sha256(str(triple).encode()).hexdigest()[:32])


def is_statement(term: object) -> bool:
    return isinstance(term, NamedNode) and term.value.startswith(STATEMENT_PREFIX)


def descriptions(terms: Sequence[Term]) -> Iterator[list[Term]]:
    """The four reification statements of each triple term among ``terms`` (a triple or a quad: the graph
    is kept), nested ones too; a triple term's own position is written as its statement IRI by
    ``render_term``."""
    graph = list(terms[3:])
    pending = [t for t in terms[:3] if isinstance(t, Triple)]
    while pending:
        triple = pending.pop()
        node = statement_iri(triple)
        yield [node, RDF.type, RDF.Statement, *graph]
        yield [node, RDF.subject, triple.subject, *graph]
        yield [node, RDF.predicate, triple.predicate, *graph]
        yield [node, RDF.object, triple.object, *graph]
        pending += [t for t in (triple.subject, triple.object) if isinstance(t, Triple)]


Describe = Callable[[list[str]], dict[str, dict[str, dict]]]


def resolve_results(content: bytes, describe: Describe) -> bytes:
    """An engine's SPARQL JSON answer with each statement IRI replaced by the triple term it names
    (SPARQL 1.2 JSON, which pyoxigraph reads). ``describe(iris)`` answers ``{iri: {"subject": ...,
    "predicate": ..., "object": ...}}`` in SPARQL JSON terms; an IRI it does not know is left as it is."""
    if _PREFIX_BYTES not in content:
        return content
    answer = json.loads(content)
    cells = [cell for row in answer.get("results", {}).get("bindings", ()) for cell in row.values()]
    known: dict[str, dict] = {}
    for _ in range(_RESOLVE_ROUNDS):
        wanted = sorted({c["value"] for c in _walk(cells) if _names_statement(c) and c["value"] not in known})
        if not wanted:
            break
        found = describe(wanted)
        known.update({iri: found.get(iri) for iri in wanted})
        cells = [part for parts in found.values() for part in parts.values()]
    for row in answer.get("results", {}).get("bindings", ()):
        for name, cell in row.items():
            row[name] = _replaced(cell, known, 0)
    return json.dumps(answer).encode()


def _names_statement(cell: dict) -> bool:
    return cell.get("type") == "uri" and cell.get("value", "").startswith(STATEMENT_PREFIX)


def _walk(cells: list[dict]) -> Iterator[dict]:
    for cell in cells:
        yield cell
        if cell.get("type") == "triple":
            yield from _walk(list(cell["value"].values()))


def _replaced(cell: dict, known: dict[str, dict | None], depth: int) -> dict:
    parts = known.get(cell["value"]) if _names_statement(cell) and depth < _RESOLVE_ROUNDS else None
    if parts is None:
        return cell
    return {"type": "triple", "value": {position: _replaced(parts[position], known, depth + 1)
                                        for position in ("subject", "predicate", "object")}}
