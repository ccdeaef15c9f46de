"""Entity lookup: an sqlite FTS5 index over the ``rdfs:label``s of each collection graph.

The index is derived from the store (one pass of ``sparql/rag_label_index.rq`` over a
collection's labels), built lazily on the first lookup in a collection, dropped when data is
loaded into that collection (rebuilt on the next lookup) and rebuildable on demand. A lookup never
scans the graph: it is two indexed sqlite queries.

Lookup order: exact matches of the question's word n-grams against normalized labels, longest
n-gram first (then leftmost), then FTS5 token matches ranked by bm25 to fill ``limit``.
"""
from __future__ import annotations

import re
import sqlite3
import threading
import unicodedata

from pyoxigraph import NamedNode

from server import vocab
from server.store import GraphStore

MAX_NGRAM = 12  # the longest label, in words, that an exact n-gram match considers
_NON_WORD = re.compile(r"[^\w]+|_")
# Tokens too common to rank with; used only by the FTS stage (exact matches still see them).
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from has have in is it of on or that the their this to "
    "was were what when where which who whom whose why with how".split())


def normalize(text: str) -> str:
    """Casefold, strip accents and punctuation, collapse spaces: ``"Gert Fröbe!"`` -> ``"gert frobe"``."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(_NON_WORD.sub(" ", stripped.casefold()).split())


def _ngrams(words: list[str], longest: int) -> list[str]:
    """Every n-gram of ``words`` up to ``longest`` words, longest first, then left to right."""
    grams: list[str] = []
    for size in range(min(longest, len(words)), 0, -1):
        grams.extend(" ".join(words[i:i + size]) for i in range(len(words) - size + 1))
    return grams


class _CollectionIndex:
    """One collection's labels in an in-memory sqlite database (callers hold the owner's lock)."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE TABLE label(term TEXT NOT NULL, norm TEXT NOT NULL)")
        self.db.execute("CREATE VIRTUAL TABLE fts USING fts5(norm, term UNINDEXED, tokenize='unicode61')")
        unique = sorted({(term, norm) for term, norm in rows if norm})
        self.db.executemany("INSERT INTO label VALUES (?, ?)", unique)
        self.db.executemany("INSERT INTO fts(term, norm) VALUES (?, ?)", unique)
        self.db.execute("CREATE INDEX label_norm ON label(norm)")
        self.longest = min(MAX_NGRAM, max((len(norm.split()) for _, norm in unique), default=0))
        self.size = len(unique)

    def exact(self, grams: list[str]) -> list[str]:
        if not grams:
            return []
        order = {gram: rank for rank, gram in enumerate(grams)}
        found = self.db.execute(
            f"SELECT norm, term FROM label WHERE norm IN ({','.join('?' * len(grams))})", grams).fetchall()
        found.sort(key=lambda row: (order[row[0]], row[1]))
        return [term for _, term in found]

    def ranked(self, tokens: list[str], limit: int) -> list[str]:
        if not tokens or limit <= 0:
            return []
        match = " OR ".join(f'"{token}"' for token in tokens)  # tokens are [\w]+ only: no quotes inside
        rows = self.db.execute("SELECT term FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), term LIMIT ?",
                               (match, limit)).fetchall()
        return [term for (term,) in rows]


class LabelIndex:
    """Label indexes of the store's collections; thread-safe, kept fresh by the store's load events."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self._indexes: dict[str, _CollectionIndex] = {}
        self._lock = threading.Lock()  # guards _indexes and every sqlite call
        self._build_locks: dict[str, threading.Lock] = {}
        self._generation: dict[str, int] = {}
        store.add_load_listener(self.invalidate)

    def invalidate(self, collection: str) -> None:
        """Forget a collection's index (data was loaded); the next lookup rebuilds it."""
        with self._lock:
            self._indexes.pop(collection, None)
            self._generation[collection] = self._generation.get(collection, 0) + 1

    def rebuild(self, collection: str) -> int:
        """Rebuild a collection's index from the store now; returns the number of labels indexed."""
        self.invalidate(collection)
        return self._index(collection).size

    def _index(self, collection: str) -> _CollectionIndex:
        with self._lock:
            index = self._indexes.get(collection)
            if index is not None:
                return index
            build_lock = self._build_locks.setdefault(collection, threading.Lock())
        with build_lock:  # one builder per collection; others wait for its result
            with self._lock:
                index = self._indexes.get(collection)
                generation = self._generation.get(collection, 0)
            if index is not None:
                return index
            solutions = self.store.query("rag_label_index", bindings={"g": vocab.collection_graph(collection)})
            rows = [(row["s"].value, normalize(row["label"].value)) for row in solutions
                    if isinstance(row["s"], NamedNode)]
            index = _CollectionIndex(rows)
            with self._lock:
                if self._generation.get(collection, 0) == generation:  # no load happened meanwhile
                    self._indexes[collection] = index
            return index

    def lookup(self, question: str, collection: str, limit: int) -> list[NamedNode]:
        """Up to ``limit`` entities named in ``question``: exact n-gram matches, then bm25 matches."""
        if limit <= 0:
            return []
        index = self._index(collection)
        words = normalize(question).split()
        tokens = list(dict.fromkeys(w for w in words if w not in _STOPWORDS))
        with self._lock:
            found = list(dict.fromkeys(index.exact(_ngrams(words, index.longest))))[:limit]
            if len(found) < limit:
                seen = set(found)
                # enough rows to fill the gap even if every exact match comes back again
                for term in index.ranked(tokens, limit + len(found)):
                    if term not in seen:
                        seen.add(term)
                        found.append(term)
        return [NamedNode(term) for term in found[:limit]]
