"""Passage retrieval: every ingested chunk searchable by words (sqlite FTS5, bm25) and by meaning (a
vector per chunk), the two rankings fused by reciprocal rank.

The store is the source of truth (chunks in a collection's source graph, their text in the librarian
graph); the index is derived from it and kept in one sqlite file (``GLASSGRAPH_PASSAGE_INDEX``, by default
beside the store directory), so vectors computed once survive restarts. A collection is *synced* with the
store on its first search in a process, and again after a write into it: one listing of its chunks
(``sparql/passage_chunks.rq``), the chunks the index lacks embedded and added, those the store no longer
has dropped, in one sqlite transaction, so an index is never half-written (an embeddings server that
fails adds nothing). An ingest adds its own chunks, embedded before the store write (:meth:`add`); its
write still marks the collection, so the next search lists it once (and finds nothing to add). Vectors of
one model only: the index records the embedder's name and refuses another
(``glassgraph reindex`` embeds every passage again).

Search: the question's content words as an FTS5 ``OR`` query on the collection's own FTS table (porter
stems; the chunk's document and section titles count at half weight), leaving out words so common that
scoring every passage holding them costs more than they tell (:meth:`PassageIndex._searched_words`), and
the question's vector against the collection's matrix (held in memory, about 1 KB a chunk); each gives
``CANDIDATES`` passages, fused by ``1 / (RRF_K + rank)``.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pyoxigraph import NamedNode

from server import vocab
from server.config import Config
from server.errors import EmbeddingsFailed
from server.rag.passage_embedders import PassageEmbedder, make_passage_embedder
from server.rag.qdrant_vectors import QdrantVectors
from server.rag.text import term_words
from server.store_base import StoreBackend

CANDIDATES = 50  # passages each ranking contributes to the fusion
RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al.)
TITLE_WEIGHT = 0.5  # of a match in the document or section title, against one in the text
COMMON_SHARE = 0.05  # a word in more than this share of a collection's passages is left out of its search...
COMMON_FLOOR = 1000  # ... when it is in more passages than this too (below it, scoring them all is cheap)
_BATCH = 500  # chunks per text query and per sqlite statement
log = logging.getLogger(__name__)

SCHEMA_VERSION = "2"  # an index file of another version is derived data: emptied, and synced again
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS passage(id INTEGER PRIMARY KEY, collection TEXT NOT NULL, chunk TEXT NOT NULL,
    document TEXT NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL, vector BLOB NOT NULL,
    UNIQUE(collection, chunk));
CREATE INDEX IF NOT EXISTS passage_document ON passage(collection, document);
CREATE TABLE IF NOT EXISTS collection(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
"""
# One FTS5 table per collection, named by the collection's integer id (never by its name), over the shared
# passage table: a search reads its own collection's postings only, and bm25's idf is the collection's.
_FTS_TABLE = """CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(heading, text, content='passage',
    content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')"""


@dataclass(frozen=True)
class PassageRow:
    """A chunk to index: its IRI, its document's, the titles it is read under, its text."""

    chunk: str
    document: str
    heading: str
    text: str


@dataclass
class Passage:
    """A retrieved chunk with its scores: bm25 (higher is better, 0: no word matched), cosine similarity,
    and the fused score; ranks from 1 (None: not among that ranking's candidates)."""

    chunk: str
    document: str
    text: str
    lexical: float
    semantic: float
    fused: float
    lexical_rank: int | None
    semantic_rank: int | None


@dataclass(frozen=True)
class _Matrix:
    """A collection's vectors in memory, replaced whole on change (searches read it without a lock)."""

    ids: np.ndarray  # passage ids, int64
    vectors: np.ndarray  # float32 rows


def default_path(store_path: Path | None) -> str:
    """``STORE.passages.sqlite`` beside an embedded store's directory; in memory otherwise."""
    return ":memory:" if store_path is None else str(store_path.parent / f"{store_path.name}.passages.sqlite")


def _phrase(text: str) -> str:
    """``text`` as one FTS5 phrase (a string in double quotes, its own doubled): never read as syntax."""
    return '"' + text.replace('"', '""') + '"'


def make_passage_index(store: StoreBackend, config: Config) -> PassageIndex:
    """The passage index of ``store`` with the configured embedder, file and vector store."""
    embedder = make_passage_embedder(config)
    if config.vectors == "local":
        return PassageIndex(store, embedder, config.passage_index)
    if config.vectors != "qdrant":
        raise EmbeddingsFailed(f"unknown vector store {config.vectors!r} (GLASSGRAPH_VECTORS): use 'local' or "
                               "'qdrant'")
    if not (config.qdrant_url or config.qdrant_path):
        raise EmbeddingsFailed("GLASSGRAPH_VECTORS=qdrant needs GLASSGRAPH_QDRANT_URL (a Qdrant server) or "
                               "GLASSGRAPH_QDRANT_PATH (its local mode)")
    vectors = QdrantVectors(embedder.name, config.qdrant_url, config.qdrant_path, config.qdrant_api_key)
    return PassageIndex(store, embedder, config.passage_index, vectors)


def query_terms(question: str) -> list[str]:
    """The question's content words as the lexical search reads them (stopwords out), in order."""
    return list(term_words(question).values())


class PassageIndex:
    """The passages of a store's collections (see the module docstring); thread-safe."""

    def __init__(self, store: StoreBackend, embedder: PassageEmbedder, path: str | None = None,
                 vectors: QdrantVectors | None = None) -> None:
        self.store, self.embedder = store, embedder
        self.vectors = vectors  # None: the vectors are kept in the sqlite file and searched in memory
        self.path = path or default_path(store.path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()  # the connection
        self._sync_locks: dict[str, threading.Lock] = {}
        self._matrices: dict[str, _Matrix] = {}
        self._synced: dict[str, object] = {}  # collection -> the store's data generation or version it holds
        self._written: dict[str, object] = {}  # collection -> the generation of a write not yet synced
        with self._lock:
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._open_schema()
        store.add_load_listener(self._mark_written)

    def _open_schema(self) -> None:
        """Create the tables, or empty a file written by another version of the schema (each collection's
        passages are then listed and embedded again at its first search)."""
        tables = self._db.execute("SELECT name, sql LIKE 'CREATE VIRTUAL%' FROM sqlite_master WHERE type = 'table' "
                                  "AND (name IN ('meta', 'passage', 'collection', 'fts') OR name GLOB 'fts_[0-9]*')"
                                  ).fetchall()
        if ("meta", 0) in tables and self._db.execute(
                "SELECT value FROM meta WHERE key = 'schema'").fetchone() != (SCHEMA_VERSION,):
            log.warning("the passage index %s has another schema: emptied, it is rebuilt from the store", self.path)
            for name, _virtual in sorted(tables, key=lambda table: not table[1]):  # an FTS table drops its own
                self._db.execute(f"DROP TABLE IF EXISTS {name}")  # names from sqlite_master, not from a user
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))

    def _fts(self, collection: str, create: bool = False) -> str | None:
        """The name of ``collection``'s FTS table, None when it has none (made when ``create``; callers hold
        the lock)."""
        found = self._db.execute("SELECT id FROM collection WHERE name = ?", (collection,)).fetchone()
        if found is None:
            if not create:
                return None
            found = self._db.execute("INSERT INTO collection(name) VALUES (?) RETURNING id", (collection,)).fetchone()
        table = f"fts_{int(found[0])}"
        if create:
            self._db.execute(_FTS_TABLE.format(table=table))
        return table

    # --- keeping it in step with the store ------------------------------------------------------

    def _mark_written(self, collection: str, _added_labels: object = None) -> None:
        self._written[collection] = self._version(collection)

    def _version(self, collection: str) -> object:
        """What says the collection changed: another process's writes (a remote engine's data version),
        else this process's own count of data writes."""
        return self.store.data_version(collection) or self.store.data_generation

    def _stale(self, collection: str) -> bool:
        if collection not in self._synced:
            return True
        latest = self.store.data_version(collection)
        if latest is not None:  # shared by processes (a remote engine): its token for the collection
            return latest != self._synced[collection]
        return self._written.get(collection, -1) > self._synced[collection]  # this process's data writes

    def sync(self, collection: str, force: bool = False) -> tuple[int, int]:
        """Bring ``collection``'s passages in step with the store when a write may have changed them (or
        ``force``); returns ``(added, dropped)``. :class:`EmbeddingsFailed`, with nothing changed, when
        the new chunks cannot be embedded."""
        lock = self._sync_locks.setdefault(collection, threading.Lock())
        with lock:
            if not force and not self._stale(collection):
                return 0, 0
            version = self._version(collection)  # read first: a write during the sync is seen next time
            self._check_embedder()
            listed = {row["chunk"].value: row["document"].value for row in self.store.select(
                "passage_chunks", default_graph=vocab.source_graph(collection))}
            held = dict(self._rows("SELECT chunk, id FROM passage WHERE collection = ?", (collection,)))
            new = sorted(set(listed) - set(held))
            rows = self._texts(collection, new, listed)
            vectors = self._vectors_of(collection, rows) if rows else None
            gone = [held[chunk] for chunk in set(held) - set(listed)]
            with self._lock:
                self._db.execute("BEGIN")
                try:
                    self._delete(collection, gone)
                    self._insert(collection, rows, vectors)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            self._load_matrix(collection)
            self._synced[collection] = version
            return len(rows), len(gone)

    def _vectors_of(self, collection: str, rows: list[PassageRow]) -> np.ndarray | None:
        """The vectors of chunks a sync adds; with Qdrant, only those it lacks are embedded (another process
        or an earlier run may have), stored there at once, and None is returned."""
        if self.vectors is None:
            return self.embed_rows(rows)
        missing = self.vectors.missing(collection, [row.chunk for row in rows], self._dimensions())
        lacking = [row for row in rows if row.chunk in missing]
        if lacking:
            self.vectors.put(collection, [row.chunk for row in lacking], self.embed_rows(lacking))
        return None

    def _dimensions(self) -> int:
        """The size of the embedder's vectors (recorded by the index; else asked of the embedder once)."""
        with self._lock:
            found = self._db.execute("SELECT value FROM meta WHERE key = 'dimensions'").fetchone()
        return int(found[0]) if found else self.embed_rows([PassageRow("", "", "", "dimensions")]).shape[1]

    def prepare(self, collection: str, rows: list[PassageRow]) -> np.ndarray | None:
        """What an ingest does before its store write (a failure then stores nothing): embed its chunks
        and, with Qdrant, store their vectors there (None is returned: :meth:`add` needs none)."""
        vectors = self.embed_rows(rows)
        if self.vectors is None:
            return vectors
        self.vectors.put(collection, [row.chunk for row in rows], vectors)
        return None

    def embed_rows(self, rows: list[PassageRow]) -> np.ndarray:
        """The vectors of chunks about to be written (an ingest embeds before it writes: a failure stores
        nothing)."""
        self._check_embedder()
        vectors = self.embedder.embed([f"{row.heading}\n{row.text}" for row in rows])
        with self._lock:
            self._check_dimensions(vectors)
        return vectors

    def add(self, collection: str, rows: list[PassageRow], vectors: np.ndarray | None,
            replaced_document: str | None = None) -> None:
        """Index an ingested document's chunks (``vectors`` from :meth:`prepare`), dropping what the index
        held of ``replaced_document``, in one transaction, right after the store write. Should the index
        refuse (a full disk), the collection is synced whole at its next search instead."""
        try:
            with self._sync_locks.setdefault(collection, threading.Lock()), self._lock:  # not beside a sync
                if self.vectors is not None and vectors is not None:  # not stored by prepare
                    self.vectors.put(collection, [row.chunk for row in rows], vectors)
                    vectors = None
                self._db.execute("BEGIN")
                try:
                    if replaced_document:
                        self._delete(collection, [row_id for (row_id,) in self._db.execute(
                            "SELECT id FROM passage WHERE collection = ? AND document = ?",
                            (collection, replaced_document))])
                    self._insert(collection, rows, vectors)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except (sqlite3.Error, EmbeddingsFailed):
            log.exception("the passage index could not add %d chunks of %s", len(rows), collection)
            self._synced.pop(collection, None)
            return
        if collection in self._synced:  # else the first search syncs the whole collection
            self._load_matrix(collection)
            self._synced[collection] = self._version(collection)

    def _check_embedder(self) -> None:
        with self._lock:
            found = self._db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
            if found is None:
                self._db.execute("INSERT INTO meta VALUES ('embedder', ?)", (self.embedder.name,))
            elif found[0] != self.embedder.name:
                raise EmbeddingsFailed(f"the passage index {self.path} holds vectors of {found[0]}, not of the "
                                       f"configured {self.embedder.name} (GLASSGRAPH_EMBEDDINGS): run "
                                       "'glassgraph reindex' to embed every passage again")

    def _texts(self, collection: str, chunks: list[str], documents: dict[str, str]) -> list[PassageRow]:
        rows = []
        for start in range(0, len(chunks), _BATCH):
            for row in self.store.select("passage_texts", values={"chunk": [NamedNode(c) for c in
                                                                           chunks[start:start + _BATCH]]},
                                         default_graph=vocab.source_graph(collection)):
                chunk = row["chunk"].value
                heading = " · ".join(row[key].value for key in ("title", "pageTitle", "chunkTitle") if key in row)
                rows.append(PassageRow(chunk, documents[chunk], heading, row["text"].value))
        return list({row.chunk: row for row in rows}.values())  # one row per chunk (a page with two titles)

    def _insert(self, collection: str, rows: list[PassageRow], vectors: np.ndarray | None) -> None:
        """Add ``rows`` with their ``vectors`` (None when Qdrant holds them: the rows keep no vector)."""
        if not rows:
            return
        if self.vectors is None:
            if vectors is None or vectors.shape[0] != len(rows):
                raise EmbeddingsFailed(f"{len(rows)} passages, {0 if vectors is None else vectors.shape[0]} vectors")
            self._check_dimensions(vectors)
            blobs = [vector.tobytes() for vector in vectors.astype(np.float32)]
        else:
            blobs = [b""] * len(rows)
        table = self._fts(collection, create=True)
        for row, blob in zip(rows, blobs, strict=True):
            cursor = self._db.execute(
                "INSERT INTO passage(collection, chunk, document, heading, text, vector) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(collection, chunk) DO NOTHING RETURNING id",
                (collection, row.chunk, row.document, row.heading, row.text, blob))
            inserted = cursor.fetchone()
            if inserted is not None:
                self._db.execute(f"INSERT INTO {table}(rowid, heading, text) VALUES (?, ?, ?)",
                                 (inserted[0], row.heading, row.text))

    def _check_dimensions(self, vectors: np.ndarray) -> None:
        """:class:`EmbeddingsFailed` for vectors of another size than the index holds (callers hold the lock)."""
        found = self._db.execute("SELECT value FROM meta WHERE key = 'dimensions'").fetchone()
        if found is None:
            self._db.execute("INSERT INTO meta VALUES ('dimensions', ?)", (str(vectors.shape[1]),))
        elif int(found[0]) != vectors.shape[1]:
            raise EmbeddingsFailed(f"the embedder {self.embedder.name} answered vectors of {vectors.shape[1]} "
                                   f"dimensions; the passage index holds {found[0]}: check "
                                   "GLASSGRAPH_EMBEDDINGS_MODEL, or run 'glassgraph reindex'")

    def _delete(self, collection: str, ids: list[int]) -> None:
        table = self._fts(collection)
        for start in range(0, len(ids), _BATCH):
            batch = ids[start:start + _BATCH]
            marks = ",".join("?" * len(batch))
            if table:
                self._db.execute(f"INSERT INTO {table}({table}, rowid, heading, text) SELECT 'delete', id, heading, "
                                 f"text FROM passage WHERE id IN ({marks})", batch)
            if self.vectors is not None:  # in the transaction: should Qdrant fail, the rows stay too
                self.vectors.drop(collection, [chunk for (chunk,) in self._db.execute(
                    f"SELECT chunk FROM passage WHERE id IN ({marks})", batch)])
            self._db.execute(f"DELETE FROM passage WHERE id IN ({marks})", batch)

    def _load_matrix(self, collection: str) -> None:
        """The collection's vectors in memory (with Qdrant, only its passage ids: their number is used)."""
        rows = self._rows("SELECT id, vector FROM passage WHERE collection = ? ORDER BY id", (collection,))
        ids = np.fromiter((row_id for row_id, _ in rows), dtype=np.int64, count=len(rows))
        vectors = (np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
                   if rows and self.vectors is None else np.zeros((len(rows), 0), dtype=np.float32))
        self._matrices[collection] = _Matrix(ids, vectors)

    def _rows(self, sql: str, parameters: tuple) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, parameters).fetchall()

    def adopt_embedder(self) -> bool:
        """Drop every passage when the index holds another model's vectors (``glassgraph reindex`` then
        embeds them again with the configured one); whether it did."""
        with self._lock:
            found = self._db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
            if found is None or found[0] == self.embedder.name:
                return False
            self._db.execute("BEGIN")
            for (collection_id,) in self._db.execute("SELECT id FROM collection").fetchall():
                self._db.execute(f"DROP TABLE IF EXISTS fts_{int(collection_id)}")
            self._db.execute("DELETE FROM collection")
            self._db.execute("DELETE FROM passage")
            self._db.execute("DELETE FROM meta WHERE key != 'schema'")
            self._db.execute("COMMIT")
        self._matrices.clear()
        self._synced.clear()
        return True

    def count(self, collection: str) -> int:
        """Passages indexed for ``collection``."""
        return self._rows("SELECT count(*) FROM passage WHERE collection = ?", (collection,))[0][0]

    # --- search ------------------------------------------------------------------------------------

    def search(self, collection: str, question: str, limit: int = 5) -> list[Passage]:
        """The ``limit`` best passages of ``collection`` for ``question``, fused best first."""
        self.sync(collection)
        lexical = self._lexical(collection, query_terms(question))
        semantic = self._semantic(collection, question)
        fused: dict[int, float] = {}
        for ranking in (lexical, semantic):
            for rank, row_id in enumerate(ranking, start=1):
                fused[row_id] = fused.get(row_id, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(fused, key=lambda row_id: (-fused[row_id], row_id))[:limit]
        lexical_rank = {row_id: rank for rank, row_id in enumerate(lexical, start=1)}
        semantic_rank = {row_id: rank for rank, row_id in enumerate(semantic, start=1)}
        details = {row_id: rest for row_id, *rest in self._rows_in(
            "SELECT id, chunk, document, text FROM passage WHERE id IN ({})", best)}
        return [Passage(details[row_id][0], details[row_id][1], details[row_id][2], lexical.get(row_id, 0.0),
                        semantic.get(row_id, 0.0), fused[row_id], lexical_rank.get(row_id),
                        semantic_rank.get(row_id)) for row_id in best if row_id in details]

    def _lexical(self, collection: str, words: list[str]) -> dict[int, float]:
        """Passage id -> bm25 score (positive), best first."""
        with self._lock:
            table = self._fts(collection)
            words = self._searched_words(table, words, len(self._matrices[collection].ids)) if table else []
            if not words:
                return {}
            return dict(self._db.execute(
                f"SELECT rowid, -bm25({table}, ?, 1.0) AS score FROM {table} WHERE {table} MATCH ? "
                "ORDER BY score DESC LIMIT ?", (TITLE_WEIGHT, " OR ".join(map(_phrase, words)), CANDIDATES)))

    def _searched_words(self, table: str, words: list[str], passages: int) -> list[str]:
        """``words`` without those in more than ``COMMON_SHARE`` of the collection's ``passages`` (and in
        more than ``COMMON_FLOOR``), the rarest kept if that leaves none. bm25 scores every passage holding
        any searched word: at 100k synthetic chunks a question's words were in 40% of them and scoring
        those took most of the search (60 ms), while such a word's idf adds little to the ranking."""
        limit = max(COMMON_FLOOR, COMMON_SHARE * passages)
        if len(words) < 2 or passages <= limit:
            return words
        counts = {word: self._db.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                         (_phrase(word),)).fetchone()[0] for word in words}
        return [word for word in words if counts[word] <= limit] or [min(words, key=counts.__getitem__)]

    def unmentioned(self, collection: str, names: list[str]) -> list[str]:
        """The ``names`` (a question's proper names and numbers, folded) that no passage of ``collection``
        mentions: a number exactly, a word by its stem or its first letters (all but its last three, at
        least four: "Australian" is mentioned by "Australia", "Italian" by "Italy")."""
        with self._lock:
            table = self._fts(collection)
            if table is None:
                return list(names)
            found = []
            for name in names:
                prefix = name if name.isdigit() or len(name) <= 4 else name[:max(4, len(name) - 3)]
                query = _phrase(name) + ("" if prefix == name else f" OR {_phrase(prefix)}*")  # porter stems the word
                if not self._db.execute(f"SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT 1", (query,)).fetchone():
                    found.append(name)
            return found

    def _semantic(self, collection: str, question: str) -> dict[int, float]:
        """Passage id -> cosine similarity, best first."""
        if self.vectors is not None:
            nearest = self.vectors.search(collection, self.embedder.embed([question])[0], CANDIDATES)
            ids = dict(self._rows(f"SELECT chunk, id FROM passage WHERE collection = ? AND chunk IN "
                                  f"({','.join('?' * len(nearest))})", (collection, *(c for c, _ in nearest))))
            return {ids[chunk]: score for chunk, score in nearest if chunk in ids}  # another process's chunk: later
        matrix = self._matrices.get(collection)
        if matrix is None or not len(matrix.ids):
            return {}
        query = self.embedder.embed([question])[0]
        if query.shape[0] != matrix.vectors.shape[1]:
            raise EmbeddingsFailed(f"the embedder {self.embedder.name} answered a vector of {query.shape[0]} "
                                   f"dimensions for the question; the passage index holds "
                                   f"{matrix.vectors.shape[1]}: check GLASSGRAPH_EMBEDDINGS_MODEL")
        scores = matrix.vectors @ query
        count = min(CANDIDATES, len(scores))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.argsort(-scores[top], kind="stable")]
        return {int(matrix.ids[i]): float(scores[i]) for i in top}

    def _rows_in(self, sql: str, ids: list[int]) -> list[tuple]:
        return self._rows(sql.format(",".join("?" * len(ids))), tuple(ids)) if ids else []
