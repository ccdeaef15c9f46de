"""The store: one pyoxigraph Store, its named-graph layout, templates and writers' lock.

Code outside this module reads and writes through these methods, the seam a remote store would
fill (a client's query in the server, on an in-memory store, is the one use of ``raw`` outside).
Every query the pipeline runs is a template in ``sparql/``, and it writes with ``extend``; the one
update built here is the Graph Store Protocol's replace/merge (``write_graph``): its body's triples may
hold blank nodes, which no VALUES block can carry, so they are written as ``INSERT DATA`` with
pyoxigraph's own escaping (``render_term``) of terms pyoxigraph parsed, never from request text.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyoxigraph import (
    BlankNode,
    DefaultGraph,
    NamedNode,
    Quad,
    QueryBoolean,
    QuerySolutions,
    QueryTriples,
    RdfFormat,
    Store,
    Triple,
    Variable,
)

from server import vocab
from server.errors import StoreLocked
from server.sparql_templates import Term, ValuesKey, load_template, render_limit, render_term, render_values

QueryResult = QuerySolutions | QueryBoolean | QueryTriples
GraphName = NamedNode | DefaultGraph
LoadListener = Callable[[str, list | None], None]  # (collection, labels added or None)


def store_directory(path: str | Path | None) -> Path | None:
    """The directory of an on-disk store; None for an in-memory one (``None`` or ``":memory:"``)."""
    return None if path in (None, ":memory:") else Path(path)


def _data(term: Term | BlankNode) -> str:
    return render_term(term, blank_nodes=True)


def _graph_clause(graph: GraphName) -> str:
    return "DEFAULT" if isinstance(graph, DefaultGraph) else f"GRAPH {render_term(graph)}"


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
    sequences from several threads do not lose data (docs/architecture.md, 'Traps of the store').
    """

    def __init__(self, path: str | Path | None = None, explain_collection: str = vocab.EXPLAIN_COLLECTION,
                 read_only: bool = False) -> None:
        """``read_only`` opens a frozen snapshot of an existing on-disk store, even one a server holds.

        Raises :class:`~server.errors.StoreLocked` when another process holds the on-disk store.
        """
        self.path = store_directory(path)
        if self.path is not None and not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        if self.path is None:
            self.raw = Store()
        elif read_only:
            self.raw = Store.read_only(str(self.path))
        else:
            try:
                self.raw = Store(str(self.path))
            except OSError as exc:  # the engine names its lock file: "While lock file: {path}/LOCK: ..."
                if "LOCK:" not in str(exc):
                    raise
                raise StoreLocked(f"the store at {self.path.resolve()} is in use by another process "
                                  "(a running server?)") from exc
        self.explain_collection = explain_collection
        self.explain_graph = vocab.explain_graph(explain_collection)
        self._write_lock = threading.RLock()
        self.generation = 0  # writes so far: another process's snapshot older than this is stale
        self.trace_writes = 0  # of those, GraphRAG explanations (record_trace)
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

    def __len__(self) -> int:
        return len(self.raw)

    def quads(self, subject: Term | None = None, predicate: NamedNode | None = None, obj: Term | None = None,
              graph: GraphName | None = None) -> Iterator[Quad]:
        """The quads matching a pattern (None matches anything), lazily."""
        return iter(self.raw.quads_for_pattern(subject, predicate, obj, graph))

    def named_graphs(self) -> list[NamedNode]:
        return [graph for graph in self.raw.named_graphs() if isinstance(graph, NamedNode)]

    def has_graph(self, graph: GraphName) -> bool:
        """Whether ``graph`` exists (the default graph always does)."""
        return isinstance(graph, DefaultGraph) or self.raw.contains_named_graph(graph)

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
        names = {self.collection_of(NamedNode(graph.removesuffix(":source"))) for graph in counts}
        for name in sorted(names - {None}):
            graph = vocab.collection_graph(name).value
            result.append({"collection": name, "graph": graph, "triples": counts.get(graph, 0),
                           "source_triples": counts.get(vocab.source_graph(name).value, 0)})
        return result

    def librarian_text(self, iri: NamedNode) -> str | None:
        """The text the librarian graph holds for ``iri`` (a document, page, chunk or answer); None if none."""
        content = next(self.raw.quads_for_pattern(iri, vocab.TG.content, None, vocab.LIBRARIAN_GRAPH), None)
        return None if content is None else content.object.value

    def has_collection(self, collection: str) -> bool:
        """Whether user collection ``collection`` holds data (knowledge, or only the provenance of documents
        ingested without an LLM); ValueError for a name that is not one."""
        self.check_collection(collection)
        return any(self.raw.contains_named_graph(graph) for graph in (vocab.collection_graph(collection),
                                                                       vocab.source_graph(collection)))

    # --- writing ------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[Store]:
        """Hold the writers' lock; yields the raw store. Counts a write when the block ends."""
        with self._write_lock:
            try:
                yield self.raw
            finally:
                self.generation += 1

    def run_update(self, text: str, base_iri: str | None = None) -> None:
        """Run a SPARQL update atomically (all of it or nothing) under the writers' lock; relative IRIs
        resolve against ``base_iri`` unless the text says BASE."""
        with self.writing() as store:
            store.update(text, base_iri=base_iri)

    def update(self, name: str, values: dict[ValuesKey, Iterable[Sequence[Term] | Term]]) -> None:
        """Run update template ``sparql/{name}.ru`` with its VALUES blocks filled, atomically."""
        self.run_update(_template_text(name, values))

    def write_graph(self, graph: GraphName, triples: Sequence[Triple], replace: bool) -> bool:
        """Replace (or merge into) ``graph``'s content with ``triples`` in one transaction; True if
        the graph is new. See the module docstring for why this update is built here."""
        operations = [f"CLEAR SILENT {_graph_clause(graph)}"] if replace else []
        if isinstance(graph, NamedNode):
            operations.append(f"CREATE SILENT GRAPH {render_term(graph)}")
        if triples:
            body = "\n".join(f"{_data(t.subject)} {_data(t.predicate)} {_data(t.object)} ." for t in triples)
            operations.append(f"INSERT DATA {{ GRAPH {render_term(graph)} {{\n{body}\n}} }}"
                              if isinstance(graph, NamedNode) else f"INSERT DATA {{\n{body}\n}}")
        with self.writing() as store:
            created = not self.has_graph(graph)
            store.update(" ;\n".join(operations))
        return created

    def drop_graph(self, graph: GraphName) -> bool:
        """Drop a named graph, or empty the default graph; False if the named graph does not exist."""
        with self.writing() as store:
            if not self.has_graph(graph):
                return False
            if isinstance(graph, DefaultGraph):
                store.clear_graph(graph)
            else:
                store.remove_graph(graph)
        return True

    def extend(self, quads: Iterable[Quad]) -> None:
        """Add quads in one transaction: all or nothing."""
        with self.writing() as store:
            store.extend(quads)

    def record_trace(self, quads: Iterable[Quad]) -> None:
        """:meth:`extend` for GraphRAG's explanations, counted apart (``trace_writes``): anonymous questions
        write them, so what describes the data (VoID) need not be redone after each one."""
        with self.writing() as store:
            store.extend(quads)
            self.trace_writes += 1

    def add_load_listener(self, listener: LoadListener) -> None:
        """``listener(collection, added_labels)`` runs after data is written into a collection."""
        self._load_listeners.append(listener)

    def notify_loaded(self, collection: str, added_labels: list | None = None) -> None:
        """Data was written into ``collection``; ``added_labels`` (``(term IRI, label Literal, is a relation)``),
        when the writer knows them, are all the ``rdfs:label``s it added: label indexes then add those
        instead of reading the collection again."""
        for listener in list(self._load_listeners):
            listener(collection, added_labels)

    # --- whole-store operations -----------------------------------------------------------------

    def dump(self, output: str | Path | None, fmt: RdfFormat = RdfFormat.TRIG,
             graph: GraphName | None = None) -> bytes | None:
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
