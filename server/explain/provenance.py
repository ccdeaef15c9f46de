"""Provenance walk: from an edge to the subgraphs that contain it and up to the root document.

One SPARQL template (``sparql/prov_sources.rq``) answers for many edges at once; chains are
assembled here from the ``prov:wasDerivedFrom`` links it returns.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pyoxigraph import Triple

from server import vocab
from server.store import GraphStore, graph_options

Chain = list[dict]

_TYPES = {vocab.TG.Document: "Document", vocab.TG.Page: "Page", vocab.TG.Chunk: "Chunk"}


def source_chains(store: GraphStore, edge: Triple, collection: str | None = None) -> list[Chain]:
    """The chains (chunk -> page -> document) of every subgraph containing ``edge``.

    Each chain is a list of ``{"iri", "label", "type", "title"}`` from the nearest node (the chunk)
    to the root (the document). ``collection`` limits the walk to that collection's source graph.
    """
    return source_chains_many(store, [edge], collection).get(edge, [])


def source_chains_many(store: GraphStore, edges: Iterable[Triple],
                       collection: str | None = None) -> dict[Triple, list[Chain]]:
    """:func:`source_chains` for many edges in one query; edges without a source are left out."""
    edges = list(dict.fromkeys(edges))
    if not edges:
        return {}
    graph = vocab.source_graph(collection) if collection else None
    rows = store.select("prov_sources", values={"edge": edges}, **graph_options(graph))
    nodes: dict[str, dict] = {}
    parents: dict[str, set[str]] = defaultdict(set)
    ancestors: dict[tuple[Triple, str], set[str]] = defaultdict(set)
    for row in rows:
        node = row["node"].value
        info = nodes.setdefault(node, {"iri": node, "label": None, "type": None, "title": None})
        for key, column in (("label", "label"), ("title", "title"), ("title", "libraryTitle")):
            if column in row and info[key] is None:
                info[key] = row[column].value
        if "type" in row:
            info["type"] = _TYPES[row["type"]]
        if "parent" in row:
            parents[node].add(row["parent"].value)
        ancestors[(row["edge"], row["sg"].value)].add(node)
    result: dict[Triple, list[Chain]] = defaultdict(list)
    for (edge, _subgraph), members in sorted(ancestors.items(), key=lambda item: item[0][1]):
        for chain in _walk(members, parents):
            path = [nodes[node] for node in chain]
            if path not in result[edge]:
                result[edge].append(path)
    return dict(result)


def _walk(members: set[str], parents: dict[str, set[str]]) -> list[list[str]]:
    """Paths from the nodes nearest the subgraph (parents of no other member) up to a root."""
    referenced = set().union(*(parents[node] for node in members))
    chains = []
    for start in sorted(members - referenced):
        chain, node = [start], start
        while True:
            following = sorted((parents[node] & members) - set(chain))
            if not following:
                break
            node = following[0]
            chain.append(node)
        chains.append(chain)
    return chains


def node_name(node: dict) -> str:
    """How a chain node reads: a document by its title, anything else by its label."""
    preferred = ("title", "label") if node.get("type") == "Document" else ("label", "title")
    for key in preferred:
        if node.get(key):
            return node[key]
    return node["iri"]


def format_chain(chain: Chain) -> str:
    """``"Chunk 2 → Page 4 → France"``."""
    return " → ".join(node_name(node) for node in chain)
