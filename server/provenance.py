"""Provenance walk: from an edge to the subgraphs that contain it and up to the root document, and to
the passages (chunks) that mention its entities.

One SPARQL template answers for many edges at once (``sparql/prov_sources.rq``, ``sparql/prov_mentions.rq``);
chains are assembled here from the ``prov:wasDerivedFrom`` links they return.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable

from pyoxigraph import Literal, NamedNode, Triple

from server import vocab
from server.store_base import StoreBackend, graph_options

Chain = list[dict]
Row = dict[str, vocab.Term]  # a solution of the template, unbound variables left out



def source_chains(store: StoreBackend, edge: Triple, collection: str | None = None) -> list[Chain]:
    """The chains (chunk -> page -> document) of every subgraph containing ``edge``.

    Each chain is a list of ``{"iri", "label", "type", "title"}`` from the nearest node (the chunk)
    to the root (the document); a chunk also has ``"offset"`` and ``"length"`` (its span in its page's
    text, None when not recorded) and ``"text"`` (the librarian's, or None). ``collection`` limits the
    walk to that collection's source graph.
    """
    return source_chains_many(store, [edge], collection).get(edge, [])


def source_chains_many(store: StoreBackend, edges: Iterable[Triple],
                       collection: str | None = None) -> dict[Triple, list[Chain]]:
    """:func:`source_chains` for many edges in one query; edges without a source are left out."""
    edges = list(dict.fromkeys(edges))
    if not edges:
        return {}
    rows = store.select("prov_sources", values={"edge": edges}, **_options(collection))
    return _chains(store, rows, lambda row: (row["edge"], row["sg"].value))


def mention_chains_many(store: StoreBackend, edges: Iterable[Triple],
                        collection: str | None = None) -> dict[Triple, list[Chain]]:
    """For each edge, the chains of up to 3 chunks that ``tg:mentions`` its subject or its object, in
    one query: chunks that mention both first, then the object, then the subject, by chunk IRI within
    each (``sparql/prov_mentions.rq``). Chains have :func:`source_chains`' shape; edges whose entities no
    chunk mentions are left out."""
    edges = list(dict.fromkeys(edges))
    pairs = list(dict.fromkeys((edge.subject, edge.object) for edge in edges))
    if not pairs:
        return {}
    rows = store.select("prov_mentions", values={("s", "o"): pairs}, **_options(collection))
    by_pair = _chains(store, rows, lambda row: ((row["s"], row["o"]), (-int(row["rank"].value), row["chunk"].value)))
    return {edge: by_pair[(edge.subject, edge.object)] for edge in edges if (edge.subject, edge.object) in by_pair}


def chunk_chains_many(store: StoreBackend, chunks: Iterable[NamedNode],
                      collection: str | None = None) -> dict[NamedNode, Chain]:
    """The chain (chunk -> page -> document) of each chunk, in :func:`source_chains`' shape, in one query;
    chunks the source graph does not hold are left out."""
    chunks = list(dict.fromkeys(chunks))
    if not chunks:
        return {}
    rows = store.select("prov_chunks", values={"chunk": chunks}, **_options(collection))
    found = _chains(store, rows, lambda row: (row["chunk"], row["chunk"].value))
    return {chunk: chains[0] for chunk, chains in found.items() if chains}


def _options(collection: str | None) -> dict[str, object]:
    return graph_options(vocab.source_graph(collection) if collection else None)


def _chains(store: StoreBackend, rows: list[Row],
            start_of: Callable[[Row], tuple[Hashable, Hashable]]) -> dict[Hashable, list[Chain]]:
    """Chains grouped by key from rows of ``?node`` (with its ``?parent``, type, label, titles and span):
    ``start_of(row)`` is ``(key, start)``, the rows of one start (a subgraph, a chunk) being the nodes it
    reaches; a key's chains follow the order of its starts."""
    nodes: dict[str, dict] = {}
    parents: dict[str, set[str]] = defaultdict(set)
    reached: dict[tuple[Hashable, Hashable], set[str]] = defaultdict(set)
    for row in rows:
        node = row["node"].value
        info = nodes.setdefault(node, {"iri": node, "label": None, "type": None, "title": None})
        for key, column in (("label", "label"), ("title", "title"), ("title", "libraryTitle")):
            if column in row and info[key] is None:
                info[key] = row[column].value
        for key in ("offset", "length"):
            if key in row and info.get(key) is None:
                info[key] = _integer(row[key])
        if "type" in row:
            info["type"] = vocab.SOURCE_KINDS[row["type"]]
        if "parent" in row:
            parents[node].add(row["parent"].value)
        reached[start_of(row)].add(node)
    for info in nodes.values():
        if info["type"] == "Chunk":
            info.setdefault("offset", None)
            info.setdefault("length", None)
            info["text"] = store.librarian_text(NamedNode(info["iri"]))
    result: dict[Hashable, list[Chain]] = defaultdict(list)
    for (key, _start), members in sorted(reached.items(), key=lambda item: item[0][1]):
        for chain in _walk(members, parents):
            path = [nodes[node] for node in chain]
            if path not in result[key]:
                result[key].append(path)
    return dict(result)


def _integer(term: Literal) -> int | None:
    try:
        return int(term.value)
    except ValueError:  # not an integer: the span is unknown
        return None


def _walk(members: set[str], parents: dict[str, set[str]]) -> list[list[str]]:
    """Paths from the nodes nearest the start (parents of no other member) up to a root."""
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


def chunk_span(node: dict) -> str:
    """``" (chars 120-388)"`` for a node with a recorded span (offset and length), else ``""``."""
    offset, length = node.get("offset"), node.get("length")
    return "" if offset is None or length is None else f" (chars {offset}-{offset + length})"


def format_chain(chain: Chain) -> str:
    """``'Chunk 3 (chars 120-388) → Page 2 → "Title"'``: a document's title in double quotes."""
    names = []
    for node in chain:
        name = node_name(node)
        quoted = node.get("type") == "Document" and name != node["iri"]
        names.append(f'"{name}"' if quoted else name + chunk_span(node))
    return " → ".join(names)
