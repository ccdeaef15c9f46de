"""The store: one pyoxigraph Store, its named-graph layout, templates and writers' lock."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyoxigraph import (
    DefaultGraph,
    NamedNode,
    Quad,
    QueryBoolean,
    QuerySolutions,
    QueryTriples,
    RdfFormat,
    Store,
    Variable,
)

from server import vocab
from server.sparql_templates import Term, ValuesKey, load_template, render_limit, render_values

QueryResult = QuerySolutions | QueryBoolean | QueryTriples
LoadListener = Callable[[str], None]


def store_directory(path: str | Path | None) -> Path | None:
    """The directory of an on-disk store; None for an in-memory one (``None`` or ``":memory:"``)."""
    return None if path in (None, ":memory:") else Path(path)


def graph_options(graph: NamedNode | None) -> dict[str, object]:
    """Query options that make ``graph`` the default graph, or the union of every graph if None."""
    return {"default_graph": graph} if graph is not None else {"use_default_graph_as_union": True}


def _template_text(name: str, values: dict[ValuesKey, Iterable[Sequence[Term] | Term]] | None,
                   limit: int | None = None) -> str:
    """Template ``name`` with its VALUES blocks filled and its LIMITs lowered to ``limit``."""
    text = load_template(name)
    if limit is not None:
        text = render_limit(text, limit)
    return render_values(text, values) if values else text


class GraphStore:
    """An on-disk (``path``) or in-memory (``path=None``) store with Glassgraph's graph layout.

    Reads run concurrently; every write goes through :meth:`writing` so that read-modify-write
    sequences from several threads do not lose data (DESIGN.md section 5).
    """

    def __init__(self, path: str | Path | None = None, explain_collection: str = vocab.EXPLAIN_COLLECTION,
                 read_only: bool = False) -> None:
        """``read_only`` opens a frozen snapshot of an existing on-disk store, even one a server holds."""
        self.path = store_directory(path)
        if self.path is not None and not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        if self.path is None:
            self.raw = Store()
        else:
            self.raw = Store.read_only(str(self.path)) if read_only else Store(str(self.path))
        self.explain_collection = explain_collection
        self.explain_graph = vocab.explain_graph(explain_collection)
        self._write_lock = threading.RLock()
        self.generation = 0  # writes so far: another process's snapshot older than this is stale
        self._load_listeners: list[LoadListener] = []

    # --- reading -------------------------------------------------------------------------------

    def query(self, name: str, bindings: dict[str, Term] | None = None,
              values: dict[ValuesKey, Iterable[Sequence[Term] | Term]] | None = None,
              limit: int | None = None, **options: object) -> QueryResult:
        """Run template ``sparql/{name}.rq`` with parameters bound and LIMITs lowered to ``limit``
        (see sparql_templates)."""
        text = _template_text(name, values, limit)
        substitutions = {Variable(k): v for k, v in (bindings or {}).items()}
        return self.raw.query(text, substitutions=substitutions or None, **options)

    def select(self, name: str, bindings: dict[str, Term] | None = None,
               values: dict[ValuesKey, Iterable[Sequence[Term] | Term]] | None = None,
               **options: object) -> list[dict[str, Term]]:
        """Run a SELECT template and return its rows as dicts (unbound variables left out).

        ``options`` go to pyoxigraph, e.g. ``default_graph=graph``: a graph chosen that way is used
        directly, while a substituted ``GRAPH ?g`` is joined late (100 times slower on a big store).
        """
        solutions = self.query(name, bindings, values, **options)
        names = [v.value for v in solutions.variables]
        return [{n: row[n] for n in names if row[n] is not None} for row in solutions]

    def is_empty(self) -> bool:
        return next(iter(self.raw.quads_for_pattern(None, None, None)), None) is None

    def collection_of(self, graph: NamedNode) -> str | None:
        """The collection whose knowledge graph ``graph`` is; None for provenance, librarian and
        this store's explainability graph (whatever its configured name)."""
        return None if graph == self.explain_graph else vocab.collection_of_graph(graph)

    def check_collection(self, collection: str) -> None:
        """ValueError saying why ``collection`` cannot name a user collection of this store."""
        vocab.check_collection_name(collection, self.explain_collection)

    def collections(self) -> list[dict[str, object]]:
        """Every collection with the triple counts of its knowledge and source graphs."""
        counts = {row["g"].value: int(row["n"].value) for row in self.select("graph_counts")}
        result = []
        for graph, count in sorted(counts.items()):
            name = self.collection_of(NamedNode(graph))
            if name is None:
                continue
            result.append({"collection": name, "graph": graph, "triples": count,
                           "source_triples": counts.get(vocab.source_graph(name).value, 0)})
        return result

    def has_collection(self, collection: str) -> bool:
        """Whether user collection ``collection`` holds data; ValueError for a name that is not one."""
        self.check_collection(collection)
        return self.raw.contains_named_graph(vocab.collection_graph(collection))

    # --- writing ------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[Store]:
        """Hold the writers' lock; yields the raw store. Counts a write when the block ends."""
        with self._write_lock:
            try:
                yield self.raw
            finally:
                self.generation += 1

    def update(self, name: str, values: dict[ValuesKey, Iterable[Sequence[Term] | Term]] | None = None) -> None:
        """Run update template ``sparql/{name}.ru`` atomically, parameters in its VALUES blocks."""
        text = _template_text(name, values)
        with self.writing() as store:
            store.update(text)

    def extend(self, quads: Iterable[Quad]) -> None:
        """Add quads in one transaction: all or nothing."""
        with self.writing() as store:
            store.extend(quads)

    def add_load_listener(self, listener: LoadListener) -> None:
        """``listener(collection)`` runs after data is loaded into a collection."""
        self._load_listeners.append(listener)

    def notify_loaded(self, collection: str) -> None:
        for listener in list(self._load_listeners):
            listener(collection)

    # --- whole-store operations -----------------------------------------------------------------

    def dump(self, output: str | Path | None, fmt: RdfFormat = RdfFormat.TRIG,
             graph: NamedNode | None = None) -> bytes | None:
        """Serialize the store, or one graph, to ``output`` (a path) or return bytes."""
        from_graph = graph if graph is not None else (None if fmt.supports_datasets else DefaultGraph())
        target = str(output) if output is not None else None
        return self.raw.dump(target, format=fmt, from_graph=from_graph, prefixes=vocab.PREFIXES
                             if fmt in (RdfFormat.TURTLE, RdfFormat.TRIG) else None)

    def backup(self, target: str | Path) -> None:
        """A consistent copy of the on-disk store in ``target`` (which must not exist yet)."""
        if self.path is None:
            raise ValueError("an in-memory store cannot be backed up; dump it instead")
        self.raw.flush()
        self.raw.backup(str(target))

    def flush(self) -> None:
        if self.path is not None:
            self.raw.flush()
