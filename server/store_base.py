"""The store interface: what Glassgraph reads and writes through, whichever backend holds the data.

Two backends implement it: :class:`server.store.GraphStore` (an embedded pyoxigraph store, the default)
and :class:`server.remote_store.RemoteStore` (any SPARQL 1.1 Protocol + Graph Store Protocol engine).
Both run the same templates from ``sparql/`` with the same parameters (``values``: escaped terms
rendered into ``VALUES`` blocks) and the same graph options (``default_graph=`` one graph, or
``use_default_graph_as_union=True``), and return pyoxigraph's result types. What the graph layout
means (collections, the explain graph, load listeners) is written once, here.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from pathlib import Path
from typing import IO

from pyoxigraph import DefaultGraph, NamedNode, Quad, QueryBoolean, QuerySolutions, QueryTriples, RdfFormat, Triple

from server import vocab
from server.errors import BadRequest, NotFound
from server.sparql_templates import (
    RDF12,
    REIFICATION,
    Term,
    ValuesKey,
    data_line,
    dialect_template,
    render_limit,
    render_term,
    render_values,
)

QueryResult = QuerySolutions | QueryBoolean | QueryTriples
GraphName = NamedNode | DefaultGraph
Values = dict[ValuesKey, Iterable[Sequence[Term] | Term]]
LoadListener = Callable[[str, list | None], None]  # (collection, labels added or None)
_TRACING: ContextVar[bool] = ContextVar("tracing", default=False)  # the current write is a GraphRAG trace


def graph_options(graph: NamedNode | None) -> dict[str, object]:
    """Query options that make ``graph`` the default graph, or the union of every graph if None."""
    return {"default_graph": graph} if graph is not None else {"use_default_graph_as_union": True}


def template_text(name: str, values: Values | None, limit: int | None = None, dialect: str = RDF12) -> str:
    """Template ``name`` (``dialect``'s variant if it has one) with its VALUES blocks filled and its LIMITs
    lowered to ``limit``."""
    text = dialect_template(name, dialect)
    if limit is not None:
        text = render_limit(text, limit)
    return render_values(text, values, dialect) if values else text


DATA_BLOCK_LINES = 1000


def quad_data(quads: Iterable[Quad], dialect: str = RDF12, describe: bool = True) -> str:
    """The body of an ``INSERT DATA`` or ``DELETE DATA`` holding ``quads``, grouped by graph (``describe``: with
    the reification dialect's statement descriptions, which a ``DELETE DATA`` leaves: others may share them).
    In the reification dialect a graph's block holds at most ``DATA_BLOCK_LINES`` statements: Virtuoso's
    parser ran out of memory at 4,990 triples in one block, and takes 50 blocks of 1,000 in one update."""
    by_graph: dict[GraphName, list[Quad]] = {}
    for quad in quads:
        by_graph.setdefault(quad.graph_name, []).append(quad)
    blocks = []
    for graph, members in by_graph.items():
        body = "\n".join(data_line((q.subject, q.predicate, q.object), dialect, describe) for q in members)
        if isinstance(graph, DefaultGraph):
            blocks.append(body)
            continue
        lines = body.split("\n") if dialect == REIFICATION else [body]  # a statement a line (N-Triples escapes)
        for start in range(0, len(lines), DATA_BLOCK_LINES if dialect == REIFICATION else 1):
            block = "\n".join(lines[start:start + DATA_BLOCK_LINES])
            blocks.append(f"GRAPH {render_term(graph)} {{\n{block}\n}}")
    return "\n".join(blocks)


def insert_data(data: str, dialect: str = RDF12) -> str:
    """The update adding ``data`` (a ``quad_data`` body): ``INSERT DATA``; in the reification dialect, data that
    may hold blank nodes is ``INSERT { ... } WHERE { }``, the same write, since Virtuoso refuses blank nodes in
    ``INSERT DATA`` (a ``_:`` inside a literal only costs the other form)."""
    if dialect == REIFICATION and "_:" in data:
        return f"INSERT {{\n{data}\n}} WHERE {{ }}"
    return f"INSERT DATA {{\n{data}\n}}"


class StoreBackend(ABC):
    """A store with Glassgraph's named-graph layout. Subclasses provide the primitive reads and writes."""

    path: Path | None  # the embedded store's directory; None in memory or on a remote engine
    dialect: str = RDF12  # how triple terms are spelled in what this store is sent
    shared: bool = False  # other processes write to it too (app workers on one engine): counts here miss theirs

    def __init__(self, explain_collection: str) -> None:
        self.explain_collection = explain_collection
        self.explain_graph = vocab.explain_graph(explain_collection)
        self.generation = 0  # writes by this process so far: a snapshot older than this is stale
        self.trace_writes = 0  # of those, GraphRAG explanations (record_trace)
        self.data_generation = 0  # the generation of the last write that was not a trace: queries must see it
        self._load_listeners: list[LoadListener] = []

    # --- primitives ------------------------------------------------------------------------------

    @abstractmethod
    def query(self, name: str, values: Values | None = None, limit: int | None = None,
              **options: object) -> QueryResult:
        """Run template ``sparql/{name}.rq`` with its VALUES blocks filled and LIMITs lowered to ``limit``.

        ``options``: ``default_graph=graph`` (that graph is the default graph: faster than a
        ``GRAPH ?g`` joined late) or ``use_default_graph_as_union=True``; none: the real default graph.
        """

    @abstractmethod
    def run_query(self, text: str, **options: object) -> QueryResult:
        """Run a query written by Glassgraph's own code (never a client's: see ``sparql_forward``), with the
        same ``options`` as :meth:`query`."""

    @abstractmethod
    def quads(self, subject: Term | None = None, predicate: NamedNode | None = None, obj: Term | None = None,
              graph: GraphName | None = None, limit: int | None = None) -> Iterator[Quad]:
        """The quads matching a pattern (None matches anything), at most ``limit``."""

    @abstractmethod
    def named_graphs(self) -> list[NamedNode]: ...

    @abstractmethod
    def has_graph(self, graph: GraphName) -> bool:
        """Whether ``graph`` exists (the default graph always does)."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def writing(self) -> AbstractContextManager[object]:
        """Hold this process's writers' lock (read-modify-write sequences); counts a write when it ends."""

    @abstractmethod
    def run_update(self, text: str, base_iri: str | None = None, default_graph: bool = False) -> None:
        """Run a SPARQL update atomically; relative IRIs resolve against ``base_iri`` unless it says BASE.
        ``default_graph``: what the text writes or matches outside ``GRAPH`` is the store's default graph (a
        client's update without ``USING`` or ``WITH``; Glassgraph's own name every graph)."""

    @abstractmethod
    def write_graph(self, graph: GraphName, triples: Sequence[Triple], replace: bool) -> bool:
        """Replace (or merge into) ``graph``'s content with ``triples`` in one transaction; True if new."""

    @abstractmethod
    def drop_graph(self, graph: GraphName) -> bool:
        """Drop a named graph, or empty the default graph; False if the named graph does not exist."""

    @abstractmethod
    def extend(self, quads: Iterable[Quad]) -> None:
        """Add quads in one transaction: all or nothing."""

    @abstractmethod
    def load(self, stream: IO[bytes], fmt: RdfFormat, graph: NamedNode) -> None:
        """Add an RDF stream (triples into ``graph``, quads keep theirs); see each backend for atomicity."""

    @abstractmethod
    def dump(self, output: str | Path | None, fmt: RdfFormat = RdfFormat.TRIG,
             graph: GraphName | None = None) -> bytes | None:
        """Serialize the store, or one graph, to ``output`` (a path) or return bytes."""

    @abstractmethod
    def backup(self, target: str | Path) -> None:
        """A consistent copy of the store in ``target``."""

    def placed(self, quads: Iterable[Quad]) -> Iterable[Quad]:
        """``quads`` in the graphs where this store keeps them (the remote store may keep the default graph in
        a named graph: ``RemoteStore.placed``)."""
        return quads

    def flush(self) -> None:
        """Make what was written durable for other readers (a no-op where the engine does it)."""
        return None

    def close(self) -> None:
        """Release connections (a no-op for the embedded store)."""
        return None

    @property
    def location(self) -> str:
        """Where the data is, for people: the store's directory, ``:memory:``, or the engine's URL."""
        return str(self.path or ":memory:")

    # --- built on the primitives ---------------------------------------------------------------

    def select(self, name: str, values: Values | None = None, **options: object) -> list[dict[str, Term]]:
        """Run a SELECT template and return its rows as dicts (unbound variables left out)."""
        solutions = self.query(name, values, **options)
        names = [v.value for v in solutions.variables]
        return [{n: row[n] for n in names if row[n] is not None} for row in solutions]

    def update(self, name: str, values: Values) -> None:
        """Run update template ``sparql/{name}.ru`` with its VALUES blocks filled, atomically."""
        self.run_update(template_text(name, values, dialect=self.dialect))

    def update_then_extend(self, name: str, values: Values, quads: Iterable[Quad]) -> None:
        """Update template ``name``, then add ``quads``, in one transaction (one update): all or nothing."""
        operations = [template_text(name, values, dialect=self.dialect)]
        data = quad_data(self.placed(quads), self.dialect)
        if data:
            operations.append(insert_data(data, self.dialect))
        self.run_update(" ;\n".join(operations))

    def rewrite(self, removed: Iterable[Quad], added: Iterable[Quad]) -> None:
        """Remove ``removed`` and add ``added`` in one transaction (no blank nodes in either)."""
        removing = quad_data(self.placed(removed), self.dialect, False)
        adding = quad_data(self.placed(added), self.dialect)
        operations = ([f"DELETE DATA {{\n{removing}\n}}"] if removing else []) + (
            [insert_data(adding, self.dialect)] if adding else [])
        if operations:
            self.run_update(" ;\n".join(operations))

    def record_trace(self, quads: Iterable[Quad]) -> None:
        """:meth:`extend` for GraphRAG's explanations, counted apart (``trace_writes``): anonymous questions
        write them, so what describes the data (VoID) need not be redone after each one."""
        tracing = _TRACING.set(True)
        try:
            self.extend(quads)
        finally:
            _TRACING.reset(tracing)
        self.trace_writes += 1

    def _count_write(self) -> None:
        """Count a write that has ended (under the writers' lock)."""
        self.generation += 1
        if not _TRACING.get():
            self.data_generation = self.generation

    def is_empty(self) -> bool:
        return next(iter(self.quads(limit=1)), None) is None

    def data_version(self, collection: str) -> str | None:
        """A token that changes with every write into ``collection`` by any process sharing the store; None
        where one process holds the store (its own load listeners then see every write)."""
        return None

    def collection_of(self, graph: NamedNode) -> str | None:
        """The collection whose knowledge graph ``graph`` is; None for provenance, librarian and
        this store's explainability graph (whatever its configured name)."""
        return None if graph == self.explain_graph else vocab.collection_of_graph(graph)

    def check_collection(self, collection: str) -> None:
        """ValueError saying why ``collection`` cannot name a user collection of this store."""
        vocab.check_collection_name(collection, self.explain_collection)

    def collection_names(self, graphs: Iterable[str]) -> set[str]:
        """The collections whose knowledge or source graphs are among ``graphs`` (IRIs)."""
        return {self.collection_of(NamedNode(graph.removesuffix(":source"))) for graph in graphs} - {None}

    def collections(self) -> list[dict[str, object]]:
        """Every collection with the triple counts of its knowledge and source graphs."""
        counts = {row["g"].value: int(row["n"].value) for row in self.select("graph_counts")}
        result = []
        for name in sorted(self.collection_names(counts)):
            graph = vocab.collection_graph(name).value
            result.append({"collection": name, "graph": graph, "triples": counts.get(graph, 0),
                           "source_triples": counts.get(vocab.source_graph(name).value, 0)})
        return result

    def librarian_text(self, iri: NamedNode) -> str | None:
        """The text the librarian graph holds for ``iri`` (a document, page, chunk or answer); None if none."""
        content = next(iter(self.quads(iri, vocab.TG.content, None, vocab.LIBRARIAN_GRAPH)), None)
        return None if content is None else content.object.value

    def has_collection(self, collection: str) -> bool:
        """Whether user collection ``collection`` holds data (knowledge, or only the provenance of documents
        ingested without an LLM); ValueError for a name that is not one."""
        self.check_collection(collection)
        return any(self.has_graph(graph) for graph in (vocab.collection_graph(collection),
                                                       vocab.source_graph(collection)))

    def require_collection(self, collection: str) -> None:
        """``BadRequest`` for a name that is no collection's, ``NotFound`` for a collection that holds nothing."""
        try:
            known = self.has_collection(collection)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        if not known:
            raise NotFound(f"no collection {collection!r}")

    def add_load_listener(self, listener: LoadListener) -> None:
        """``listener(collection, added_labels)`` runs after data is written into a collection."""
        self._load_listeners.append(listener)

    def notify_loaded(self, collection: str, added_labels: list | None = None) -> None:
        """Data was written into ``collection``; ``added_labels`` (``(term IRI, label Literal, is a relation)``),
        when the writer knows them, are all the ``rdfs:label``s it added: label indexes then add those
        instead of reading the collection again."""
        for listener in list(self._load_listeners):
            listener(collection, added_labels)
