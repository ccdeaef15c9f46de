"""Whether a list answer holds every member the graph has, or retrieval stopped before reading them all.

Retrieval reads at most ``max_subgraph_size`` edges (and ``triple_limit`` rows), so a list can be cut
before the selector sees it: "Which countries border Germany?" with a subgraph of 3 edges selects 3 of
the 9 neighbours, all that was found. A *list* in the selection is two or more selected edges that share a
subject and predicate (Germany borders ...) or a predicate and object (... borders Germany); the graph is
asked how many edges that subject and predicate (or predicate and object) have in the collection (the
engine counts, up to 100,000 a list: ``sparql/rag_list_size.rq``), and every one retrieval did not read is a
relevant edge left out of the answer.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pyoxigraph import Triple

from server import vocab
from server.store_base import StoreBackend


def unread_members(store: StoreBackend, collection: str, selected: Iterable[Triple],
                   retrieved: Iterable[Triple]) -> int:
    """The edges of the selection's lists that the collection holds and retrieval did not read."""
    read, lists = _lists(retrieved), _lists(selected)
    graph = vocab.collection_graph(collection)
    unread = 0
    for pattern, members in lists.items():
        if members > 1:
            subject, predicate, obj = pattern
            rows = store.select("rag_list_size", values={
                "g": [graph], ("s", "p"): [] if subject is None else [(subject, predicate)],
                ("p", "o"): [] if obj is None else [(predicate, obj)]})
            unread += max(0, int(rows[0]["n"].value) - read[pattern])
    return unread


def _lists(edges: Iterable[Triple]) -> Counter:
    """How many of ``edges`` each list holds: (subject, predicate, None) and (None, predicate, object)."""
    members = Counter()
    for triple in edges:
        members[(triple.subject, triple.predicate, None)] += 1
        members[(None, triple.predicate, triple.object)] += 1
    return members
