"""Entity lookup: an sqlite FTS5 index over the ``rdfs:label``s of each collection graph.

The index is derived from the store (one pass of ``sparql/rag_label_index.rq`` over a
collection's labels), built lazily on the first lookup in a collection, dropped when data is
loaded into that collection (rebuilt on the next lookup) and rebuildable on demand. A lookup never
scans the graph: it is two indexed sqlite queries.

Lookup order: exact matches of the question's word n-grams against normalized labels, longest
n-gram first (then leftmost), then FTS5 token matches ranked by bm25 to fill ``limit``. Terms used
as predicates (relations) are not entities: they are never seeds. The index also keeps one display
label per labelled term, which the retriever uses to label edges without a query to the store.
"""
from __future__ import annotations

import sqlite3
import threading

from pyoxigraph import Literal, NamedNode

from server import vocab
from server.labels import label_preference
from server.rag.text import RANKING_STOPWORDS, normalize, symbols, terms, words
from server.store import GraphStore

MAX_NGRAM = 12  # the longest label, in words, that an exact n-gram match considers
MAX_TOKENS = 64  # question words the ranked (FTS) stage searches for
MAX_FOCUS = 8  # relations a question may name ("capital", "borders") that traversal reads first
_BATCH = 500  # sqlite parameters per statement


def _ngrams(folded: list[str], longest: int) -> list[str]:
    """Every n-gram of ``folded`` words up to ``longest`` words, longest first, then left to right."""
    grams: list[str] = []
    for size in range(min(longest, len(folded)), 0, -1):
        grams.extend(" ".join(folded[i:i + size]) for i in range(len(folded) - size + 1))
    return grams


class _CollectionIndex:
    """One collection's labels in an in-memory sqlite database (callers hold ``lock``).

    ``entity`` holds the normalized labels of entities (terms not used as predicates) for lookup,
    ``fts`` the same for ranked token search, ``display`` one label per labelled term (relations
    included) for showing edges.
    """

    def __init__(self, rows: list[tuple[str, Literal, bool]]) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.lock = threading.Lock()
        self.db.execute("CREATE TABLE entity(term TEXT NOT NULL, norm TEXT NOT NULL, PRIMARY KEY (norm, term)) "
                        "WITHOUT ROWID")
        self.db.execute("CREATE VIRTUAL TABLE fts USING fts5(norm, term UNINDEXED, tokenize='unicode61')")
        self.db.execute("CREATE TABLE display(term TEXT PRIMARY KEY, label TEXT NOT NULL) WITHOUT ROWID")
        self.longest, self.size = 0, 0
        self.relation_words: list[tuple[str, frozenset[str]]] = []
        self.add(rows)

    def add(self, rows: list[tuple[str, Literal, bool]]) -> None:
        """Index ``(term, label, is a relation)`` rows: the store's labels when built, then the labels a
        write adds (an ingested document's new terms), without reading the collection again. A term
        already shown by a label keeps it."""
        best: dict[str, Literal] = {}
        entities: set[tuple[str, str]] = set()
        for term, label, relation in rows:
            if term not in best or label_preference(label) < label_preference(best[term]):
                best[term] = label
            if not relation and (norm := normalize(label.value)):
                entities.add((term, norm))
        if self.size:
            entities -= set(self._rows_in("SELECT term, norm FROM entity WHERE term IN ({})",
                                          sorted({term for term, _ in entities})))
        unique = sorted(entities)
        self.db.executemany("INSERT INTO entity VALUES (?, ?)", unique)
        self.db.executemany("INSERT INTO fts(term, norm) VALUES (?, ?)", unique)
        self.db.executemany("INSERT OR IGNORE INTO display VALUES (?, ?)",
                            ((t, label.value) for t, label in best.items()))
        self.longest = min(MAX_NGRAM, max([self.longest] + [len(norm.split()) for _, norm in unique]))
        self.size += len(unique)
        known = {term for term, _ in self.relation_words}
        relations = {term for term, _, relation in rows if relation} - known
        self.relation_words = sorted(self.relation_words + [(term, frozenset(terms(best[term].value)))
                                                            for term in relations])

    def focus(self, question_words: set[str]) -> list[str]:
        """Relations whose label shares content words with the question, best overlap first."""
        scored = [(-len(question_words & words), len(words), term) for term, words in self.relation_words
                  if question_words & words]
        return [term for *_, term in sorted(scored)[:MAX_FOCUS]]

    def _rows_in(self, sql: str, keys: list[str]) -> list[tuple[str, str]]:
        """The rows of ``sql`` (``{}``: its ``IN`` list) for every key, in batches under sqlite's parameter
        limit however many keys there are."""
        rows: list[tuple[str, str]] = []
        for start in range(0, len(keys), _BATCH):
            batch = keys[start:start + _BATCH]
            rows += self.db.execute(sql.format(",".join("?" * len(batch))), batch).fetchall()
        return rows

    def labelled(self, norms: list[str]) -> list[tuple[str, str]]:
        """``(norm, term)`` of every entity whose normalized label is one of ``norms``."""
        return self._rows_in("SELECT norm, term FROM entity WHERE norm IN ({})", norms)

    def exact(self, grams: list[str]) -> list[str]:
        order = {gram: rank for rank, gram in enumerate(dict.fromkeys(grams))}
        found = self.labelled(list(order))
        found.sort(key=lambda row: (order[row[0]], row[1]))
        return [term for _, term in found]

    def ranked(self, tokens: list[str], limit: int) -> list[str]:
        if not tokens or limit <= 0:
            return []
        match = " OR ".join(f'"{token}"' for token in tokens[:MAX_TOKENS])  # tokens are [\w]+ only: no quotes inside
        rows = self.db.execute("SELECT term FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), term LIMIT ?",
                               (match, limit)).fetchall()
        return [term for (term,) in rows]

    def display(self, keys: list[str]) -> dict[str, str]:
        return dict(self._rows_in("SELECT term, label FROM display WHERE term IN ({})", keys))


class LabelIndex:
    """Label indexes of the store's collections; thread-safe, kept fresh by the store's load events."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self._indexes: dict[str, _CollectionIndex] = {}
        self._lock = threading.Lock()  # guards the dicts; each index has its own lock for sqlite
        self._build_locks: dict[str, threading.Lock] = {}
        self._generation: dict[str, int] = {}
        store.add_load_listener(self.invalidate)

    def invalidate(self, collection: str, added_labels: list[tuple[str, Literal, bool]] | None = None) -> None:
        """Data was written into a collection: forget its index (the next lookup rebuilds it), or, when
        the write says which labels it added (``(term, label, is a relation)``; none for a write of no
        labels), add just those to the index (a rebuild of the sample's took 70-166 ms, once per
        ingested document)."""
        with self._lock:
            index = self._indexes.pop(collection, None)
            self._generation[collection] = self._generation.get(collection, 0) + 1  # a build under way is stale
        if index is None or added_labels is None:
            return
        with index.lock:
            index.add(added_labels)
        with self._lock:
            self._indexes.setdefault(collection, index)

    def rebuild(self, collection: str) -> int:
        """Rebuild a collection's index from the store now; returns the number of entity labels indexed."""
        self.invalidate(collection)
        return self._index(collection).size

    def _index(self, collection: str) -> _CollectionIndex:
        with self._lock:
            index = self._indexes.get(collection)
            if index is not None:
                return index
        if not self.store.has_collection(collection):
            return _CollectionIndex([])  # not kept: unknown names must not pile up
        with self._lock:
            build_lock = self._build_locks.setdefault(collection, threading.Lock())
        with build_lock:  # one builder per collection; others wait for its result
            with self._lock:
                index = self._indexes.get(collection)
                generation = self._generation.get(collection, 0)
            if index is not None:
                return index
            solutions = self.store.query("rag_label_index", bindings={"g": vocab.collection_graph(collection)})
            rows = [(row["s"].value, row["label"], row["relation"].value == "true") for row in solutions
                    if isinstance(row["s"], NamedNode) and isinstance(row["label"], Literal)]
            index = _CollectionIndex(rows)
            with self._lock:
                if self._generation.get(collection, 0) == generation:  # no load happened meanwhile
                    self._indexes[collection] = index
            return index

    def display_labels(self, terms: list[NamedNode], collection: str) -> dict[NamedNode, str]:
        """The preferred ``rdfs:label`` of each term that has one in the collection graph."""
        index = self._index(collection)
        with index.lock:
            found = index.display([term.value for term in terms])
        return {term: found[term.value] for term in terms if term.value in found}

    def lookup(self, question: str, collection: str, limit: int) -> list[NamedNode]:
        """Up to ``limit`` entities named in ``question``: exact n-gram matches, then bm25 matches."""
        exact, ranked = self.lookup_tiers(question, collection, limit)
        return exact + ranked

    def lookup_tiers(self, question: str, collection: str, limit: int) -> tuple[list[NamedNode], list[NamedNode]]:
        """The seeds of :meth:`lookup` in two tiers: exact n-gram matches, then bm25 matches filling
        up to ``limit`` in all. Traversal spends its budget on the first tier first."""
        if limit <= 0:
            return [], []
        index = self._index(collection)
        folded = words(question)
        tokens = list(dict.fromkeys(w for w in folded if w not in RANKING_STOPWORDS))
        with index.lock:
            exact = list(dict.fromkeys(index.exact(_ngrams(folded, index.longest) + symbols(question))))[:limit]
            ranked: list[str] = []
            if len(exact) < limit:
                seen = set(exact)
                # enough rows to fill the gap even if every exact match comes back again
                for term in index.ranked(tokens, limit + len(exact)):
                    if term not in seen:
                        seen.add(term)
                        ranked.append(term)
        return [NamedNode(t) for t in exact], [NamedNode(t) for t in ranked[:limit - len(exact)]]

    def entities_named(self, names: list[str], collection: str) -> dict[str, list[NamedNode]]:
        """The entities whose normalized label is each name's normalized form (names without a match
        are left out): how extraction links a name to a node the collection already has."""
        keys = {name: normalize(name) for name in names}
        index = self._index(collection)
        with index.lock:
            rows = index.labelled(sorted(set(keys.values())))
        found: dict[str, list[NamedNode]] = {}
        for norm, term in sorted(rows):
            found.setdefault(norm, []).append(NamedNode(term))
        return {name: found[key] for name, key in keys.items() if key in found}

    def mentioned(self, text: str, collection: str) -> list[NamedNode]:
        """Every entity whose whole label occurs in ``text`` as a run of words (an exact match of a
        word n-gram), longest label first; single stopwords and one- or two-letter words are
        too common to count as mentions."""
        index = self._index(collection)
        grams = [gram for gram in _ngrams(words(text), index.longest)
                 if " " in gram or (len(gram) > 2 and gram not in RANKING_STOPWORDS)]
        with index.lock:
            return [NamedNode(term) for term in dict.fromkeys(index.exact(grams))]

    def focus_relations(self, question: str, collection: str) -> list[NamedNode]:
        """Relations the question names by a word of their label ("border" for ``borders``)."""
        index = self._index(collection)
        return [NamedNode(term) for term in index.focus(terms(question))]
