"""Whether a list answer holds every member the graph has, or retrieval stopped before reading them all.

Retrieval reads at most ``max_subgraph_size`` edges (and ``triple_limit`` rows), so a list can be cut
before the selector sees it: "Which countries border Germany?" with a subgraph of 3 edges selects 3 of
the 9 neighbours, all that was found. A *list* in the selection is two or more selected edges that share a
subject and predicate (Germany borders ...) or a predicate and object (... borders Germany); the graph is
asked how many edges that subject and predicate (or predicate and object) have in the collection, and
every one retrieval did not read is a relevant edge left out of the answer.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pyoxigraph import Triple

from server import vocab
from server.store_base import StoreBackend

COUNT_CAP = 100_000  # edges counted per list at most (a hub's list past this is cut by this much at least)


def unread_members(store: StoreBackend, collection: str, selected: Iterable[Triple],
                   retrieved: Iterable[Triple]) -> int:
    """The edges of the selection's lists that the collection holds and retrieval did not read."""
    selected = list(selected)
    read = Counter()
    for triple in retrieved:
        read[(triple.subject, triple.predicate, None)] += 1
        read[(None, triple.predicate, triple.object)] += 1
    lists = Counter()
    for triple in selected:
        lists[(triple.subject, triple.predicate, None)] += 1
        lists[(None, triple.predicate, triple.object)] += 1
    graph = vocab.collection_graph(collection)
    unread = 0
    for pattern, members in lists.items():
        if members > 1:
            held = sum(1 for _ in store.quads(*pattern, graph, limit=COUNT_CAP))
            unread += max(0, held - read[pattern])
    return unread
