"""The embedded backend of the store interface (``server/store_base.py``): one pyoxigraph Store.

Code outside the store modules reads and writes through :class:`~server.store_base.StoreBackend`
(a client's query in the server, on an in-memory store, is the one use of ``raw`` outside). The one
update built here is the Graph Store Protocol's replace/merge (``write_graph``): its body's triples may
hold blank nodes, which no VALUES block can carry, so they are written as ``INSERT DATA`` with
pyoxigraph's own escaping (``render_term``) of terms pyoxigraph parsed, never from request text.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import IO

from pyoxigraph import DefaultGraph, NamedNode, Quad, RdfFormat, Store, Triple

from server import vocab
from server.errors import StoreLocked
from server.sparql_templates import Term, data_line, render_term
from server.store_base import GraphName, QueryResult, StoreBackend, Values, graph_options, insert_data, template_text

__all__ = ["GraphStore", "GraphName", "QueryResult", "graph_options", "store_directory", "insert_data_update",
           "open_snapshot"]

_OPEN_FOR_S, _OPEN_RETRY_S = 2.0, 0.01  # opens tried for this long; the n-th retry waits n times (at most 10)


def store_directory(path: str | Path | None) -> Path | None:
    """The directory of an on-disk store; None for an in-memory one (``None`` or ``":memory:"``) or a remote
    engine (an ``http(s)://`` URL)."""
    return None if path in (None, ":memory:") or str(path).startswith(("http://", "https://")) else Path(path)


def open_snapshot(path: str | Path) -> Store:
    """A read-only (frozen) instance of the on-disk store at ``path``, which a server may hold and write.

    Opening races the writer's compactions: the manifest read first can name a file deleted a moment later
    (RocksDB then says "Corruption: ... No such file or directory ... MANIFEST ... may be corrupted"; seen on
    a clean-clone CI run of ``glassgraph explain`` beside a serving server). An open failing on a missing file
    is tried again for ``_OPEN_FOR_S`` (beside a writer flushing 100 times a second, a third of opens failed, up
    to 5 in a row); that failure after the last try, or any other at once, is raised as ``OSError``.
    """
    until, attempt = time.monotonic() + _OPEN_FOR_S, 0
    while True:
        try:
            return Store.read_only(str(path))
        except (OSError, RuntimeError) as error:
            if "No such file" not in str(error) or time.monotonic() >= until:
                raise OSError(str(error)) from None
        attempt += 1
        time.sleep(_OPEN_RETRY_S * min(attempt, 10))


def _graph_clause(graph: GraphName) -> str:
    return "DEFAULT" if isinstance(graph, DefaultGraph) else f"GRAPH {render_term(graph)}"


def insert_data_update(graph: GraphName, triples: Sequence[Triple], replace: bool, dialect: str) -> str:
    """The update that replaces (or merges into) ``graph`` with ``triples``: both backends' ``write_graph``."""
    operations = [f"CLEAR SILENT {_graph_clause(graph)}"] if replace else []
    if isinstance(graph, NamedNode):
        operations.append(f"CREATE SILENT GRAPH {render_term(graph)}")
    if triples:
        body = "\n".join(data_line((t.subject, t.predicate, t.object), dialect) for t in triples)
        operations.append(insert_data(f"GRAPH {render_term(graph)} {{\n{body}\n}}" if isinstance(graph, NamedNode)
                                      else body, dialect))
    return " ;\n".join(operations)


class GraphStore(StoreBackend):
    """An on-disk (``path``) or in-memory (``path=None``) store with Glassgraph's graph layout.

    Reads run concurrently; every write goes through :meth:`writing` so that read-modify-write
    sequences from several threads do not lose data (docs/architecture.md, 'Traps of the store').
    """

    def __init__(self, path: str | Path | None = None, explain_collection: str = vocab.EXPLAIN_COLLECTION,
                 read_only: bool = False) -> None:
        """``read_only`` opens a frozen snapshot of an existing on-disk store, even one a server holds.

        Raises :class:`~server.errors.StoreLocked` when another process holds the on-disk store.
        """
        super().__init__(explain_collection)
        self.path = store_directory(path)
        self.read_only = read_only
        if self.path is not None and not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        if self.path is None:
            self.raw = Store()
        elif read_only:
            self.raw = open_snapshot(self.path)
        else:
            try:
                self.raw = Store(str(self.path))
            except OSError as exc:  # the engine names its lock file: "While lock file: {path}/LOCK: ..."
                if "LOCK:" not in str(exc):
                    raise
                raise StoreLocked(f"the store at {self.path.resolve()} is in use by another process "
                                  "(a running server?)") from exc
        self._write_lock = threading.RLock()

    # --- reading -------------------------------------------------------------------------------

    def query(self, name: str, values: Values | None = None, limit: int | None = None,
              **options: object) -> QueryResult:
        return self.run_query(template_text(name, values, limit), **options)

    def run_query(self, text: str, **options: object) -> QueryResult:
        return self.raw.query(text, **options)

    def is_empty(self) -> bool:
        return next(iter(self.raw.quads_for_pattern(None, None, None)), None) is None

    def __len__(self) -> int:
        return len(self.raw)

    def quads(self, subject: Term | None = None, predicate: NamedNode | None = None, obj: Term | None = None,
              graph: GraphName | None = None, limit: int | None = None) -> Iterator[Quad]:
        """The quads matching a pattern (None matches anything), lazily."""
        return islice(self.raw.quads_for_pattern(subject, predicate, obj, graph), limit)

    def named_graphs(self) -> list[NamedNode]:
        return [graph for graph in self.raw.named_graphs() if isinstance(graph, NamedNode)]

    def has_graph(self, graph: GraphName) -> bool:
        return isinstance(graph, DefaultGraph) or self.raw.contains_named_graph(graph)

    # --- writing ------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[Store]:
        """Hold the writers' lock; yields the raw store. Counts a write when the block ends."""
        with self._write_lock:
            try:
                yield self.raw
            finally:
                self._count_write()

    def run_update(self, text: str, base_iri: str | None = None, default_graph: bool = False) -> None:
        with self.writing() as store:
            store.update(text, base_iri=base_iri)

    def write_graph(self, graph: GraphName, triples: Sequence[Triple], replace: bool) -> bool:
        """See the module docstring for why this update is built here."""
        with self.writing() as store:
            created = not self.has_graph(graph)
            store.update(insert_data_update(graph, triples, replace, self.dialect))
        return created

    def drop_graph(self, graph: GraphName) -> bool:
        with self.writing() as store:
            if not self.has_graph(graph):
                return False
            if isinstance(graph, DefaultGraph):
                store.clear_graph(graph)
            else:
                store.remove_graph(graph)
        return True

    def extend(self, quads: Iterable[Quad]) -> None:
        with self.writing() as store:
            store.extend(quads)

    def load(self, stream: IO[bytes], fmt: RdfFormat, graph: NamedNode) -> None:
        """One transaction: a parse error or a crash leaves the store as it was."""
        with self.writing() as store:
            store.load(stream, format=fmt, to_graph=graph)

    # --- whole-store operations -----------------------------------------------------------------

    def dump(self, output: str | Path | None, fmt: RdfFormat = RdfFormat.TRIG,
             graph: GraphName | None = None) -> bytes | None:
        """Serialize the store, or one graph, to ``output`` (a path) or return bytes."""
        from_graph = graph if graph is not None else (None if fmt.supports_datasets else DefaultGraph())
        target = str(output) if output is not None else None
        return self.raw.dump(target, format=fmt, from_graph=from_graph, prefixes=vocab.PREFIXES
                             if fmt in (RdfFormat.TURTLE, RdfFormat.TRIG) else None)

    def backup(self, target: str | Path) -> None:
        """A consistent copy of the on-disk store in ``target``, which must not exist yet (ValueError)."""
        target = Path(target)
        if self.path is None:
            raise ValueError("an in-memory store cannot be backed up; dump it instead")
        if target.exists() or target.is_symlink():
            raise ValueError(f"{target} exists: a backup goes into a new directory")
        if not self.read_only:
            self.raw.flush()
            self.raw.backup(str(target))
            return
        # A snapshot's checkpoint would miss the writes it replayed from the holder's log: its quads are copied
        # into a directory of our own beside the target, renamed to it once whole; only that one is ever removed.
        building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            copy = Store(str(building))
            copy.bulk_extend(self.raw)
            copy.flush()
            del copy
            os.rename(building, target)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise

    def flush(self) -> None:
        if self.path is not None:
            self.raw.flush()
