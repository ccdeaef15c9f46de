"""Entity lookup: an sqlite FTS5 index over the ``rdfs:label``s of each collection graph.

The index is derived from the store (one pass of ``sparql/rag_label_index.rq`` over a
collection's labels), built lazily on the first lookup in a collection, dropped when data is
loaded into that collection (rebuilt on the next lookup), updated in place when a write says which
labels it added (an ingested document), and rebuildable on demand. A lookup never
scans the graph: it is two indexed sqlite queries.

Lookup order: exact matches of the question's word n-grams against normalized labels, longest
n-gram first (then leftmost), then FTS5 token matches ranked by bm25 to fill ``limit``; when nothing
matches exactly, the semantic tier first: entities whose label vector (``server.rag.embeddings``,
computed when the index is built and kept beside it) is closest to a question n-gram's. Terms used
as predicates (relations) are not entities: they are never seeds. The index also keeps one display
label per labelled term, which the retriever uses to label edges without a query to the store.
"""
from __future__ import annotations

import sqlite3
import threading
import time

import numpy
from pyoxigraph import Literal, NamedNode

from server import vocab
from server.dialects import is_true
from server.labels import label_preference
from server.rag.embeddings import LABEL_DIMENSIONS, embedder
from server.rag.relations import alias_words, mention_of, relation_lemmas, relation_matches, weak_name
from server.rag.text import RANKING_STOPWORDS, STOPWORDS, WORD, fold, lemma, normalize, symbols, words
from server.store_base import StoreBackend

MAX_NGRAM = 12  # the longest label, in words, that an exact n-gram match considers
MAX_TOKENS = 64  # question words the ranked (FTS) stage searches for
MIN_MENTION_LETTERS = 4  # the shortest one-word label a chunk mentions ("Mon" is too short)
MAX_FOCUS = 8  # relations a question may name ("capital", "borders") that traversal reads first
FOCUS_FLOOR = 0.35  # how strongly a question word must match a relation for it to be read first
SEMANTIC_SEED = 0.65  # similarity of a question n-gram and an entity label for a semantic-tier seed
SEMANTIC_LIMIT = 5  # semantic-tier seeds at most
SEMANTIC_NGRAM = 3  # the longest question n-gram compared by meaning
_BATCH = 500  # sqlite parameters per statement
VERSION_CHECK_S = 1.0  # how long an index is used before asking a shared store whether its collection changed

# The ``limit`` best labels matching ``?1`` by bm25, ties broken by term then text: ``ORDER BY bm25(fts), term,
# norm LIMIT ?2`` over the matches, but reading a label's term and text only for the matches scoring no worse
# than the ``limit``-th (ties there included). Sorting every match with its term and text reads each one's row:
# on a 10M-triple graph, where a name word is in about 430 labels, that statement took 6.3-7.0 ms a question,
# this one 3.2-3.4 ms, with the same seeds (decision 31).
_RANKED = """
WITH scored(id, score) AS (SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ?1),
     cut(score) AS (SELECT max(score) FROM (SELECT score FROM scored ORDER BY score LIMIT ?2))
SELECT fts.term, fts.norm FROM scored JOIN fts ON fts.rowid = scored.id
WHERE scored.score <= (SELECT score FROM cut)
ORDER BY scored.score, fts.term, fts.norm LIMIT ?2
"""


def _content_ngrams(question: str) -> list[str]:
    """The question's n-grams of up to ``SEMANTIC_NGRAM`` words that neither start nor end with a stopword."""
    found = WORD.findall(question)
    return [" ".join(found[i:i + n]) for n in range(1, SEMANTIC_NGRAM + 1) for i in range(len(found) - n + 1)
            if found[i].casefold() not in STOPWORDS and found[i + n - 1].casefold() not in STOPWORDS]


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

    def __init__(self, rows: list[tuple[str, Literal, bool]], aliases: list[tuple[str, str]] = ()) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.lock = threading.Lock()
        self.db.execute("CREATE TABLE entity(term TEXT NOT NULL, norm TEXT NOT NULL, PRIMARY KEY (norm, term)) "
                        "WITHOUT ROWID")
        self.db.execute("CREATE VIRTUAL TABLE fts USING fts5(norm, term UNINDEXED, tokenize='unicode61')")
        self.db.execute("CREATE TABLE display(term TEXT PRIMARY KEY, label TEXT NOT NULL) WITHOUT ROWID")
        self.longest, self.size = 0, 0
        self.relations: list[tuple[str, str]] = []  # (term, label) of the terms used as predicates
        self._alias_rows = sorted(set(aliases))  # (relation term, skos:altLabel)
        # The semantic tier: one vector per distinct normalized entity label, computed at index time
        self.norms: list[str] = []
        self.vectors: numpy.ndarray | None = None
        self.add(rows)

    def add(self, rows: list[tuple[str, Literal, bool]]) -> None:
        """Index ``(term, label, is a relation)`` rows: the store's labels when built, then the labels a
        write adds (an ingested document's new terms), without reading the collection again or embedding
        the labels already there. A term already shown by a label keeps it."""
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
        known = {term for term, _ in self.relations}
        self.relations = sorted(self.relations + [(term, best[term].value) for term in
                                                  {term for term, _, relation in rows if relation} - known])
        names = dict(self.relations)
        self.aliases: dict[str, tuple[str, ...]] = {}  # relation label -> its skos:altLabels
        for term, alias in self._alias_rows:
            if term in names:
                self.aliases[names[term]] = (*self.aliases.get(names[term], ()), alias)
        self.relation_lemmas = relation_lemmas(sorted(names.values()), self.aliases)
        new_norms = sorted({norm for _, norm in unique} - set(self.norms))
        if new_norms:
            vectors = embedder().embed(new_norms, LABEL_DIMENSIONS)
            self.vectors = vectors if self.vectors is None else numpy.vstack((self.vectors, vectors))
            self.norms += new_norms

    def focus(self, question: str) -> list[str]:
        """Relations a question word asks for (``server.rag.relations``: by stem, or by meaning from
        ``FOCUS_FLOOR``), strongest first."""
        asked = alias_words(self.aliases)
        mentions = [mention_of(i, w) for i, w in enumerate(WORD.findall(question))
                    if w.casefold() not in STOPWORDS or w.casefold() in asked]
        labels = sorted({label for _, label in self.relations})
        found = relation_matches(mentions, labels, self.aliases, closest=False)  # a name is no relation word
        strength = {label: max(found[label], default=0.0) for label in labels}
        scored = sorted((-strength[label], label, term) for term, label in self.relations
                        if strength[label] >= FOCUS_FLOOR)
        return [term for *_, term in scored[:MAX_FOCUS]]

    def semantic(self, grams: list[str], limit: int) -> list[str]:
        """Entities whose label is closest in meaning to one of ``grams`` (from ``SEMANTIC_SEED``), best first."""
        if not grams or not self.norms or limit <= 0:
            return []
        similarity = (self.vectors @ embedder().embed(grams, LABEL_DIMENSIONS).T).max(axis=1)
        best = [i for i in similarity.argsort()[::-1][:limit] if similarity[i] >= SEMANTIC_SEED]
        return [term for term, _ in self._rows_in("SELECT term, norm FROM entity WHERE norm IN ({})",
                                                  [self.norms[i] for i in best])][:limit]

    def _rows_in(self, sql: str, keys: list[str]) -> list[tuple[str, str]]:
        """The rows of ``sql`` (``{}``: its ``IN`` list) for every key, in batches under sqlite's parameter
        limit however many keys there are."""
        rows: list[tuple[str, str]] = []
        for start in range(0, len(keys), _BATCH):
            batch = keys[start:start + _BATCH]
            rows += self.db.execute(sql.format(",".join("?" * len(batch))), batch).fetchall()
        return rows

    def weak(self, question: str, found_rows: list[tuple[str, str]]) -> list[str]:
        """Those of the exact matches (``found_rows``: norm, term) that the question names only weakly:
        inside a longer name it spells out ("death" in "Murder by Death"), or by words that more likely
        ask for something else (``relations.weak_name``: "director" for a tag, "fall" for the film "Fall")."""
        terms = list(dict.fromkeys(term for _, term in found_rows))
        found = WORD.findall(question)
        labels = self.display(terms)
        by_norm: dict[str, list[str]] = {}
        for norm, term in found_rows:
            by_norm.setdefault(norm, []).append(term)
        taken: set[int] = set()
        strong: set[str] = set()
        for size in range(min(self.longest, len(found)), 0, -1):
            for start in range(len(found) - size + 1):
                surface = " ".join(found[start:start + size])
                named = [t for t in by_norm.get(normalize(surface), [])
                         if not weak_name(surface, labels[t], self.relation_lemmas)]
                if named and not taken & set(range(start, start + size)):
                    taken.update(range(start, start + size))
                    strong.update(named)
        return [term for term in terms if term not in strong and term in labels]

    def labelled(self, norms: list[str]) -> list[tuple[str, str]]:
        """``(norm, term)`` of every entity whose normalized label is one of ``norms``."""
        return self._rows_in("SELECT norm, term FROM entity WHERE norm IN ({})", norms)

    def exact(self, grams: list[str]) -> list[tuple[str, str]]:
        """``(norm, term)`` of the entities labelled by one of ``grams``, in the grams' order."""
        order = {gram: rank for rank, gram in enumerate(dict.fromkeys(grams))}
        found = self.labelled(list(order))
        found.sort(key=lambda row: (order[row[0]], row[1]))
        return found

    def ranked(self, tokens: list[str], limit: int, relation_words: bool = True) -> list[str]:
        """Entities by bm25 over ``tokens``; without ``relation_words``, not those whose label shares
        with the question only words that name a relation ("capital goods" for "the capital of France")."""
        if not tokens or limit <= 0:
            return []
        match = " OR ".join(f'"{token}"' for token in tokens[:MAX_TOKENS])  # tokens are [\w]+ only: no quotes inside
        rows = self.db.execute(_RANKED, (match, limit)).fetchall()
        if relation_words:
            return [term for term, _ in rows]
        asked = set(tokens)
        return [term for term, norm in rows
                if any(word in asked and lemma(word) not in self.relation_lemmas for word in norm.split())]

    def display(self, keys: list[str]) -> dict[str, str]:
        return dict(self._rows_in("SELECT term, label FROM display WHERE term IN ({})", keys))


class LabelIndex:
    """Label indexes of the store's collections; thread-safe, kept fresh by the store's load events."""

    def __init__(self, store: StoreBackend) -> None:
        self.store = store
        self._indexes: dict[str, _CollectionIndex] = {}
        self._lock = threading.Lock()  # guards the dicts; each index has its own lock for sqlite
        self._build_locks: dict[str, threading.Lock] = {}
        self._generation: dict[str, int] = {}
        self._versions: dict[str, tuple[str | None, float]] = {}  # the store's data version an index holds, when read
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
        version = self.store.data_version(collection)  # this write's own: the index holds it now
        with self._lock:
            self._indexes.setdefault(collection, index)
            self._versions[collection] = (version, time.monotonic())

    def rebuild(self, collection: str) -> int:
        """Rebuild a collection's index from the store now; returns the number of entity labels indexed."""
        self.invalidate(collection)
        return self._index(collection).size

    def _current(self, collection: str) -> _CollectionIndex | None:
        """The kept index of ``collection`` unless another process sharing the store (app workers on a remote
        engine) wrote into the collection since it was built; checked at most every ``VERSION_CHECK_S``."""
        with self._lock:
            index = self._indexes.get(collection)
            version, checked = self._versions.get(collection, (None, 0.0))
        if index is None or time.monotonic() - checked < VERSION_CHECK_S:
            return index
        latest = self.store.data_version(collection)
        with self._lock:
            if latest != version and self._indexes.get(collection) is index:
                self._indexes.pop(collection)
                self._generation[collection] = self._generation.get(collection, 0) + 1
                return None
            self._versions[collection] = (version, time.monotonic())
        return index

    def _index(self, collection: str) -> _CollectionIndex:
        index = self._current(collection)
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
            version = self.store.data_version(collection)  # read first: a write during the build is seen next time
            solutions = list(self.store.query("rag_label_index", default_graph=vocab.collection_graph(collection)))
            rows = [(row["s"].value, row["label"], is_true(row["relation"])) for row in solutions
                    if isinstance(row["s"], NamedNode) and isinstance(row["label"], Literal)]
            aliases = [(row["s"].value, row["alias"].value) for row in solutions
                       if isinstance(row["s"], NamedNode) and isinstance(row["alias"], Literal)]
            index = _CollectionIndex(rows, aliases)
            with self._lock:
                if self._generation.get(collection, 0) == generation:  # no load happened meanwhile
                    self._indexes[collection] = index
                    self._versions[collection] = (version, time.monotonic())
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

    def lookup_tiers(self, question: str, collection: str, limit: int,
                     reasons: dict[NamedNode, str] | None = None) -> tuple[list[NamedNode], list[NamedNode]]:
        """The seeds of :meth:`lookup` in two tiers: exact n-gram matches, then ranked matches filling
        up to ``limit`` in all. Traversal spends its budget on the first tier first.

        Exact matches that the question names weakly (``relations.weak_name``: "director" for a tag)
        move to the ranked tier when another one is named strongly. Ranked matches are bm25 token
        matches; when nothing matches exactly, the semantic tier (labels
        closest in meaning to the question's n-grams, ``SEMANTIC_SEED``, at most ``SEMANTIC_LIMIT``)
        comes first among them: a misspelled or translated name ("Portugual", "Deutschland"). ``reasons``,
        when given, is filled with why each seed was taken."""
        if limit <= 0:
            return [], []
        index = self._index(collection)
        folded = words(question)
        tokens = list(dict.fromkeys(w for w in folded if w not in RANKING_STOPWORDS))
        with index.lock:
            rows = index.exact(_ngrams(folded, index.longest) + symbols(question))
            named = list(dict.fromkeys(term for _, term in rows))
            weak = index.weak(question, rows) if len(named) > 1 else []  # one name: nothing to put behind
            exact = [term for term in named if term not in weak][:limit] or named[:limit]
            ranked = [term for term in weak if term not in exact][:limit - len(exact)]  # after the others
            if not named:
                ranked = list(dict.fromkeys(index.semantic(_content_ngrams(question), min(limit, SEMANTIC_LIMIT))))
            semantic = set(ranked) if not named else set()
            if len(exact) + len(ranked) < limit:
                seen = set(exact) | set(ranked)
                # enough rows to fill the gap even if every exact match comes back again
                # with a name spelled out, a label that shares only relation words is no reading of the question
                for term in index.ranked(tokens, limit + len(exact), relation_words=not exact):
                    if term not in seen:
                        seen.add(term)
                        ranked.append(term)
        exact_nodes, ranked_nodes = [NamedNode(t) for t in exact], [NamedNode(t) for t in ranked[:limit - len(exact)]]
        if reasons is not None:
            reasons.update((node, "its label is spelled out in the question") for node in exact_nodes)
            reasons.update((node, "named only weakly (a relation's word, or in lower case), so after the others")
                           for node in ranked_nodes if node.value in weak)
            reasons.update((node, "its label is close in meaning to words of the question (no label is spelled out)")
                           for node in ranked_nodes if node.value in semantic and node not in reasons)
            for node in ranked_nodes:
                reasons.setdefault(node, "its label shares words with the question (ranked by bm25)")
        return exact_nodes, ranked_nodes

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
        word n-gram), longest label first. A label of one word counts only as a name: a capitalized label
        of ``MIN_MENTION_LETTERS`` letters or more that the text capitalizes and never writes in lower case
        ("France", "Lisbon"; not the labels "software", "real", "tools", nor "Mon", nor "World" in a text that
        says "the world": an ordinary word there)."""
        index = self._index(collection)
        tokens = WORD.findall(text)
        capitalized = {fold(t) for t in tokens if t[:1].isupper()} - {fold(t) for t in tokens if t.islower()}
        grams = [gram for gram in _ngrams(words(text), index.longest)
                 if " " in gram or (len(gram) >= MIN_MENTION_LETTERS and gram in capitalized)]
        with index.lock:
            rows = index.exact(grams)
            labels = index.display(sorted({term for norm, term in rows if " " not in norm}))
        return [NamedNode(term) for term in dict.fromkeys(term for norm, term in rows
                                                          if " " in norm or labels.get(term, "")[:1].isupper())]

    def relation_aliases(self, collection: str) -> dict[str, tuple[str, ...]]:
        """The other names (``skos:altLabel``) of the collection's relations, by relation label."""
        return self._index(collection).aliases

    def focus_relations(self, question: str, collection: str) -> list[NamedNode]:
        """Relations the question names by a word of their label or by meaning ("border" for
        ``borders``, "acted" for ``starred actors``)."""
        index = self._index(collection)
        return [NamedNode(term) for term in index.focus(question)]
