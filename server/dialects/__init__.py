"""SPARQL dialects of the remote store and the engines' quirks, read in one place.

A dialect (``GLASSGRAPH_STORE_DIALECT``) says how statements about triples are written and which template
variants run: ``rdf12`` (``<<( s p o )>>``, Oxigraph), ``rdf-star`` (``<< s p o >>``, Jena, GraphDB,
Stardog, AllegroGraph) and ``reification`` (:mod:`server.dialects.reification`: ``rdf:Statement`` nodes and
plain SPARQL 1.1 templates in ``sparql/reification/``, for Virtuoso 7 and Neptune). To add one: a module here
with its ``NAME`` and what it writes, its name in ``sparql_templates.DIALECTS``, a variant in
``sparql/{name}/`` of each template it cannot run, and the union-default-graph request below if the engine
needs one (docs/architecture.md, 'Adding a dialect').
"""
from __future__ import annotations

import io
import json
from typing import IO

from pyoxigraph import NamedNode, QueryBoolean, QueryResultsFormat, QuerySolutions, parse_query_results

# What asks an engine for the union of all graphs as its default graph: Oxigraph's own protocol parameter;
# the other engines serve the union as their default graph when the request names no dataset (Virtuoso does
# by default; Fuseki, Stardog and GraphDB are configured so: README, 'Engines and dialects').
UNION_PARAMS: dict[str, list[tuple[str, str]]] = {"rdf12": [("union-default-graph", "")]}

_VIRTUOSO_ASK = "__ASK_RETVAL"
_VIRTUOSO_SERVER = "Virtuoso/"  # how Virtuoso names itself in every answer's Server header
_VIRTUOSO_DESCRIBE = 'DEFINE sql:describe-mode "CBD"\n'
# Virtuoso labels a blank node "nodeID://b10000" in SPARQL JSON (no valid label: pyoxigraph refuses it) and
# "_:b10000" in N-Triples; written so, the label is the same in both.
_VIRTUOSO_BNODE = b'"type": "bnode", "value": "nodeID://'
_STANDARD_BNODE = b'"type": "bnode", "value": "'

# Where the default graph is kept on an engine that has none of its own: Virtuoso 7's default graph is the
# union of all graphs, and it refuses a write without GRAPH ("No plain default graph") and the Graph Store's
# ?default. There the remote store keeps the default graph in this named graph, which it lists as no named
# graph, and names it as every update's default graph (Neptune keeps its own default graph the same way).
DEFAULT_GRAPH_STAND_INS: dict[str, str] = {"reification": "urn:glassgraph:default-graph"}

# Graphs an engine keeps for itself, in every new database, never Glassgraph's: Virtuoso 7's schema, LDP and
# service description graphs. The remote store lists no such graph and counts none as data.
ENGINE_GRAPHS = frozenset({"http://www.openlinksw.com/schemas/virtrdf#", "http://www.w3.org/ns/ldp#",
                           "http://localuriqaserver/sparql"})


def client_prologue(server: str) -> str:
    """What goes in front of a client's query, by the engine's ``Server`` header: Virtuoso describes nothing
    (``DESCRIBE``) in its union default graph unless asked for concise bounded descriptions; nothing elsewhere.
    (Its pragmas that would leave its own graphs out of the union also empty every ``GRAPH <iri>`` pattern.)"""
    return _VIRTUOSO_DESCRIBE if server.startswith(_VIRTUOSO_SERVER) else ""


def union_params(dialect: str) -> list[tuple[str, str]]:
    """The protocol parameters that make the default graph the union of all graphs in ``dialect``."""
    return list(UNION_PARAMS.get(dialect, ()))


def default_graph_stand_in(dialect: str) -> NamedNode | None:
    """The named graph that holds the default graph in ``dialect`` (None: the engine has a default graph)."""
    iri = DEFAULT_GRAPH_STAND_INS.get(dialect)
    return None if iri is None else NamedNode(iri)


def standard_results(content: bytes) -> bytes:
    """An engine's SPARQL JSON answer as the standard says it: Virtuoso answers an ASK with one binding of
    ``__ASK_RETVAL`` (1 or 0) instead of ``boolean``, and labels blank nodes with a URL (``nodeID://``); every
    other answer is returned as it is."""
    content = content.replace(_VIRTUOSO_BNODE, _STANDARD_BNODE)  # inside a JSON string a quote is escaped
    if _VIRTUOSO_ASK.encode() not in content[:200]:
        return content
    answer = json.loads(content)
    if answer.get("head", {}).get("vars") != [_VIRTUOSO_ASK]:
        return content
    rows = answer.get("results", {}).get("bindings", [])
    value = rows[0].get(_VIRTUOSO_ASK, {}).get("value", "0") if rows else "0"
    return _boolean(value)


def _boolean(value: str) -> bytes:
    """The standard JSON answer of an ASK whose Virtuoso binding is ``value``."""
    return json.dumps({"head": {}, "boolean": value not in ("0", "false")}).encode()


class StandardStream(io.RawIOBase):
    """An engine's SPARQL JSON answer read as it arrives (a client's forwarded query), with Virtuoso's blank node
    labels read as :func:`standard_results` reads them. A label cut by a read is whole in the next: the last
    ``len(pattern) - 1`` bytes of each read wait for the next one, unchanged."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.pending, self.ready = raw, b"", b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:
        while not self.ready:
            data = self.raw.read(max(len(buffer), len(_VIRTUOSO_BNODE)))
            if not data:  # the end: what waited cannot start a label
                self.ready, self.pending = self.pending, b""
                break
            self.ready, self.pending = _replaced(self.pending + data, len(_VIRTUOSO_BNODE) - 1)
        size = min(len(buffer), len(self.ready))
        buffer[:size], self.ready = self.ready[:size], self.ready[size:]
        return size


def _replaced(data: bytes, keep: int) -> tuple[bytes, bytes]:
    """``data`` with Virtuoso's blank node labels made standard, up to its last ``keep`` bytes after the last
    label, which are returned as they are (they may start a label that the next read completes)."""
    parts, start = [], 0
    while (found := data.find(_VIRTUOSO_BNODE, start)) >= 0:
        parts += [data[start:found], _STANDARD_BNODE]
        start = found + len(_VIRTUOSO_BNODE)
    cut = max(start, len(data) - keep)
    return b"".join([*parts, data[start:cut]]), data[cut:]


def standard_parsed(result: object) -> object:
    """:func:`standard_results` for an answer already parsed as it arrived (a client's forwarded query)."""
    if not isinstance(result, QuerySolutions) or [v.value for v in result.variables] != [_VIRTUOSO_ASK]:
        return result
    row = next(iter(result), None)
    value = row[0].value if row is not None and row[0] is not None else "0"
    answer: QueryBoolean = parse_query_results(_boolean(value), format=QueryResultsFormat.JSON)
    return answer


def is_true(term: object) -> bool:
    """A boolean a template computes (``EXISTS``, a comparison), as an engine answers it: ``true``, or Virtuoso's
    ``1`` (it answers booleans as the integers 1 and 0)."""
    return getattr(term, "value", None) in ("true", "1")
