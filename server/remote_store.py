"""The remote backend of the store interface: any SPARQL 1.1 Protocol + Graph Store Protocol engine.

Templates are sent as they run on the embedded store, their ``VALUES`` blocks filled with escaped terms
in the configured dialect (``rdf12``: ``<<( s p o )>>``; ``rdf-star``: ``<< s p o >>``). Graph options
become the protocol's dataset: ``default_graph=g`` is ``default-graph-uri=g`` plus a ``named-graph-uri``
for each graph the template names in a constant ``GRAPH <...>`` (a dataset given by the protocol holds
only the graphs it lists); the union of all graphs is the engine's own default graph, which it must be
configured to serve (``union-default-graph`` is sent too, which ``oxigraph serve`` reads and other
engines ignore). Writes are ``INSERT DATA`` (one request each, all or nothing) or, for bulk loads,
N-Quads posted to the Graph Store endpoint in batches.

One ``requests.Session`` per store: pooled keep-alive connections, a connect timeout and a read timeout
on every request, retries for reads only (an update that may have arrived is never sent twice), and
``StoreUnavailable`` (503) naming the engine when it cannot be reached. ``requests_sent`` counts the
HTTP requests sent, for benchmarks. The writers' lock is this process's only: several app workers
share the engine, whose every request is its own transaction.
"""
from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO

import requests
from pyoxigraph import (
    DefaultGraph,
    Literal,
    NamedNode,
    Quad,
    QueryResultsFormat,
    RdfFormat,
    Triple,
    parse,
    parse_query_results,
    serialize,
)
from requests.adapters import HTTPAdapter

from server import vocab
from server.dialects import ENGINE_GRAPHS, default_graph_stand_in, reification, standard_results, union_params
from server.errors import BadRequest, RemoteFailed, StoreUnavailable
from server.sparql_templates import RDF12, REIFICATION, Term, data_line, dialect_template, render_term
from server.store import insert_data_update
from server.store_base import (
    GraphName,
    QueryResult,
    StoreBackend,
    Values,
    insert_data,
    quad_data,
    template_text,
)

_RESULTS_JSON = "application/sparql-results+json"
_READ_ATTEMPTS = 3  # a read is sent again after a failed connection, twice at most
_NO_PERMISSION = re.compile(r"no permission|permission denied|not authori[sz]ed|access denied", re.IGNORECASE)
BACKUP_FILE = "dataset.nq"
LOAD_BATCH = 50_000  # quads per Graph Store POST of a bulk load
UPDATE_LOAD_BATCH = 10_000  # quads per INSERT DATA of a bulk load in the reification dialect
# Statement nodes described per query (the reification dialect): Virtuoso 7 refused a VALUES of 4,095
# ("SP030: Too many arguments for standard built-in function"), took 4,000
STATEMENTS_PER_QUERY = 1_000
# How long a dump or backup of the whole store waits for the engine's answer: no client waits on it, and in the
# reification dialect it is one SPARQL answer (Virtuoso took 45 s for the sample's 460,000 quads)
WHOLE_STORE_WAIT_S = 600.0


@dataclass(frozen=True)
class EngineEndpoints:
    """Where the engine answers each operation, and how Glassgraph authenticates to it."""

    base: str
    query: str
    update: str
    data: str
    token: str | None = None  # bearer
    user: str | None = None  # basic, with password
    password: str | None = None

    @classmethod
    def of(cls, base: str, query: str | None = None, update: str | None = None, data: str | None = None,
           **credentials: str | None) -> EngineEndpoints:
        """Oxigraph's names (``/query``, ``/update``, ``/store``) unless given (Fuseki: ``/ds/query``, ...)."""
        root = base.rstrip("/")
        return cls(root, query or f"{root}/query", update or f"{root}/update", data or f"{root}/store", **credentials)


def _constant_graphs(text: str) -> list[str]:
    """The IRIs of the constant ``GRAPH <...>`` blocks of a template (its text, never a client's)."""
    return sorted(set(re.findall(r"GRAPH\s*<([^>\s]+)>", text)))


class RemoteStore(StoreBackend):
    """A store on a SPARQL engine at ``endpoints``; ``timeout_s`` is each request's read timeout."""

    shared = True

    def __init__(self, endpoints: EngineEndpoints, explain_collection: str = vocab.EXPLAIN_COLLECTION,
                 dialect: str = RDF12, timeout_s: float = 60.0, connect_timeout_s: float = 5.0,
                 pool_size: int = 64) -> None:
        super().__init__(explain_collection)
        self.path = None
        self.endpoints, self.dialect = endpoints, dialect
        self.stand_in = default_graph_stand_in(dialect)  # where the default graph is kept, if in a named graph
        self.timeout = (connect_timeout_s, timeout_s)
        self.session = requests.Session()
        # The engine is reached at its configured URL with its configured credentials: never through the
        # environment's proxies or .netrc, whose lookup took 0.6 of the 3 ms a forwarded query spent in requests.
        self.session.trust_env = False
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        if endpoints.token:
            self.session.headers["Authorization"] = f"Bearer {endpoints.token}"
        elif endpoints.user is not None:
            self.session.auth = (endpoints.user, endpoints.password or "")
        self._sent_lock = threading.Lock()
        self._patience = threading.local()  # a longer read timeout for this thread's requests (whole-store reads)
        self.requests_sent = 0
        self.server: str | None = None  # the engine's Server header, from its first answer
        self._write_lock = threading.RLock()

    @property
    def location(self) -> str:
        return self.endpoints.base

    # --- HTTP ------------------------------------------------------------------------------------

    def setting(self, url: str) -> str:
        """The setting that names ``url``, for an error to say what to fix."""
        names = [name for name, endpoint in (("GLASSGRAPH_STORE_QUERY_URL", self.endpoints.query),
                                             ("GLASSGRAPH_STORE_UPDATE_URL", self.endpoints.update),
                                             ("GLASSGRAPH_STORE_DATA_URL", self.endpoints.data)) if endpoint == url]
        return f"GLASSGRAPH_STORE ({' or '.join(names)} for {url})" if names else "GLASSGRAPH_STORE"

    def send(self, method: str, url: str, read: bool, stream: bool = False,
             timeout: tuple[float, float] | None = None, **kwargs: object) -> requests.Response:
        """One request to the engine; a read is retried after a connection failure. Raises
        ``StoreUnavailable`` when the engine cannot be reached or does not answer in time, ``RemoteFailed`` when
        it answers an error (or a page that is no SPARQL answer), each naming the engine and the setting to fix."""
        engine = f"the SPARQL engine at {self.endpoints.base}"
        timeout = timeout or getattr(self._patience, "timeout", self.timeout)
        for attempt in range(_READ_ATTEMPTS if read else 1):
            with self._sent_lock:
                self.requests_sent += 1
            try:
                response = self.session.request(method, url, timeout=timeout, stream=stream, **kwargs)
            except requests.ConnectionError as exc:
                if attempt + 1 < (_READ_ATTEMPTS if read else 1):
                    continue
                raise StoreUnavailable(f"{engine} cannot be reached ({type(exc).__name__}): is it running, and does "
                                       f"{self.setting(url)} name it?") from exc
            except requests.Timeout as exc:
                raise StoreUnavailable(f"{engine} did not answer in time ({timeout[1]:g} s, "
                                       "GLASSGRAPH_DEADLINE): it is overloaded, or its own timeout is longer") from exc
            if response.status_code < 400:
                self.server = response.headers.get("Server", "")
                return response
            status, kind = response.status_code, response.headers.get("Content-Type", "").split(";")[0]
            message = response.text[:300].strip()
            response.close()
            if status == 503:
                raise StoreUnavailable(f"{engine} is unavailable (503)")
            if status in (401, 403) or _NO_PERMISSION.search(message):
                raise RemoteFailed(f"{engine} refused Glassgraph's request at {url} ({status}: no permission): give "
                                   "GLASSGRAPH_STORE_TOKEN, or GLASSGRAPH_STORE_USER and GLASSGRAPH_STORE_PASSWORD, of "
                                   "an account that may read and write, or grant the engine's anonymous SPARQL user "
                                   "updates (Virtuoso: GRANT SPARQL_UPDATE TO \"SPARQL\")")
            if status in (404, 405) or kind == "text/html":
                raise RemoteFailed(f"{engine} has no SPARQL endpoint at {url} (it answered {status} {kind or 'text'}): "
                                   f"set {self.setting(url)} (Virtuoso: {self.endpoints.base}/sparql for query and "
                                   f"update, {self.endpoints.base}/sparql-graph-crud for data)")
            if status == 400:  # the text: a client's update the engine reads otherwise than the guard
                raise BadRequest(f"{engine} refused it: {message}")
            raise RemoteFailed(f"{engine} answered {status}: {message}")
        raise AssertionError("unreachable")

    def engine_software(self) -> str:
        """The engine's ``Server`` header (``dialects.client_prologue`` reads quirks from it), asked with an empty
        ``ASK`` if nothing has been sent to it yet."""
        if self.server is None:
            self.send("POST", self.endpoints.query, read=True, data={"query": "ASK {}"},
                      headers={"Accept": _RESULTS_JSON}).close()
        return self.server or ""

    def dataset_params(self, text: str, options: dict[str, object]) -> list[tuple[str, str]]:
        """The protocol's dataset for a template run with graph ``options`` (see the module docstring)."""
        graph = options.get("default_graph")
        graph = self.graph_on_engine(graph) if isinstance(graph, DefaultGraph) else graph
        if isinstance(graph, NamedNode):
            return [("default-graph-uri", graph.value)] + [("named-graph-uri", iri) for iri in _constant_graphs(text)]
        if options.get("use_default_graph_as_union"):
            return union_params(self.dialect)
        return []

    def _answer(self, text: str, params: list[tuple[str, str]]) -> bytes:
        """The engine's SPARQL JSON answer to ``text``, as the standard says it (``standard_results``)."""
        response = self.send("POST", self.endpoints.query, read=True, data=[("query", text), *params],
                             headers={"Accept": _RESULTS_JSON})
        kind = response.headers.get("Content-Type", "").split(";")[0].strip()
        if kind and "json" not in kind:
            raise RemoteFailed(f"the SPARQL engine at {self.endpoints.base} answered {kind}, not SPARQL results: set "
                               f"{self.setting(self.endpoints.query)} to its SPARQL query endpoint")
        if not response.content.rstrip().endswith(b"}"):  # parsed lazily: a cut body would fail mid-iteration
            raise StoreUnavailable(f"the SPARQL engine at {self.endpoints.query} cut its answer short (its timeout "
                                   "stopped the query: oxigraph serve --timeout-s); try again", {"Retry-After": "5"})
        return standard_results(response.content)

    def _query_text(self, text: str, params: list[tuple[str, str]]) -> QueryResult:
        content = self._answer(text, params)
        if self.dialect == REIFICATION:
            content = reification.resolve_results(content, self._describe_statements)
        return parse_query_results(content, format=QueryResultsFormat.JSON)

    def _describe_statements(self, iris: list[str]) -> dict[str, dict[str, dict]]:
        """What each statement node names (the reification dialect), in SPARQL JSON terms
        (``STATEMENTS_PER_QUERY`` at a time)."""
        found: dict[str, dict[str, dict]] = {}
        for start in range(0, len(iris), STATEMENTS_PER_QUERY):
            batch = [NamedNode(iri) for iri in iris[start:start + STATEMENTS_PER_QUERY]]
            text = template_text("store_statements", {"st": batch}, None, self.dialect)
            rows = json.loads(self._answer(text, []))["results"]["bindings"]
            found.update({row["st"]["value"]: {"subject": row["s"], "predicate": row["p"], "object": row["o"]}
                          for row in rows})
        return found

    @contextmanager
    def _patient(self, wait_s: float) -> Iterator[None]:
        """This thread's requests wait up to ``wait_s`` for the engine's answer."""
        self._patience.timeout = (self.timeout[0], max(wait_s, self.timeout[1]))
        try:
            yield
        finally:
            del self._patience.timeout

    # --- the default graph ----------------------------------------------------------------------

    def graph_on_engine(self, graph: GraphName | None) -> GraphName | None:
        """Where ``graph`` is on the engine: the default graph is the stand-in where the dialect has one."""
        return self.stand_in if self.stand_in is not None and isinstance(graph, DefaultGraph) else graph

    def placed(self, quads: Iterable[Quad]) -> Iterable[Quad]:
        """The default graph's quads in the stand-in (where the dialect has one), the others as they are."""
        if self.stand_in is None:
            return quads
        return (Quad(q.subject, q.predicate, q.object, self.stand_in) if isinstance(q.graph_name, DefaultGraph)
                else q for q in quads)

    def _graph_read_back(self, graph: NamedNode) -> GraphName:
        return DefaultGraph() if graph == self.stand_in else graph

    # --- reading -------------------------------------------------------------------------------

    def query(self, name: str, values: Values | None = None, limit: int | None = None,
              **options: object) -> QueryResult:
        text = template_text(name, values, limit, self.dialect)
        return self._query_text(text, self.dataset_params(dialect_template(name, self.dialect), options))

    def run_query(self, text: str, **options: object) -> QueryResult:
        return self._query_text(text, self.dataset_params(text, options))

    def quads(self, subject: Term | None = None, predicate: NamedNode | None = None, obj: Term | None = None,
              graph: GraphName | None = None, limit: int | None = None) -> Iterator[Quad]:
        """Named graphs only when ``graph`` is None (and the default graph's stand-in, as the default graph);
        the default graph itself through the Graph Store."""
        if isinstance(graph, DefaultGraph) and self.stand_in is None:
            data = self.dump(None, RdfFormat.N_TRIPLES, graph)
            found = (Quad(t.subject, t.predicate, t.object, graph) for t in parse(data, format=RdfFormat.N_TRIPLES)
                     if all(want is None or want == got for want, got in
                            ((subject, t.subject), (predicate, t.predicate), (obj, t.object))))
            return islice(found, limit)
        rows = self.query("store_quads", {("s", "p", "o"): [(subject, predicate, obj)],
                                          "g": [self.graph_on_engine(graph)]}, limit)
        # a triple term as subject: a statement's own description (the reification dialect), not data
        return (Quad(row["s"], row["p"], row["o"], self._graph_read_back(row["g"])) for row in rows
                if not isinstance(row["s"], Triple) and row["g"].value not in ENGINE_GRAPHS)

    def named_graphs(self) -> list[NamedNode]:
        """The engine's named graphs but its own (``dialects.ENGINE_GRAPHS``) and the default graph's stand-in."""
        return [row["g"] for row in self.query("store_named_graphs") if isinstance(row["g"], NamedNode)
                and row["g"].value not in ENGINE_GRAPHS and row["g"] != self.stand_in]

    def has_graph(self, graph: GraphName) -> bool:
        return isinstance(graph, DefaultGraph) or bool(self.query("store_has_graph", {"g": [graph]}))

    def __len__(self) -> int:
        """The quads of the named graphs but the engine's own."""
        return sum(int(row["n"].value) for row in self.query("graph_counts") if row["g"].value not in ENGINE_GRAPHS)

    def is_empty(self) -> bool:
        """No quad in a named graph but the engine's own (nor in the default graph's stand-in)."""
        graphs = [*self.named_graphs(), *([] if self.stand_in is None else [DefaultGraph()])]
        return all(next(self.quads(graph=graph, limit=1), None) is None for graph in graphs)

    def data_version(self, collection: str) -> str | None:
        """The collection's data version, replaced by every write into it through any app worker."""
        rows = self.query("store_data_version", {"graph": [vocab.collection_graph(collection)]})
        return next((row["version"].value for row in rows), None)

    # --- writing ------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[RemoteStore]:
        """This process's writers' lock (other app workers do not share it); counts a write when it ends."""
        with self._write_lock:
            try:
                yield self
            finally:
                self._count_write()

    def run_update(self, text: str, base_iri: str | None = None, default_graph: bool = False) -> None:
        """With ``default_graph`` the update's default graph is the stand-in, where the dialect has one (only
        then: on Virtuoso a ``default-graph-uri`` joins the text's ``USING`` instead of giving way to it)."""
        if base_iri is not None:  # a BASE in the text comes later in the prologue and wins
            text = f"BASE {render_term(NamedNode(base_iri))}\n{text}"
        dataset = [("default-graph-uri", self.stand_in.value)] if self.stand_in is not None and default_graph else []
        with self.writing():
            self.send("POST", self.endpoints.update, read=False, data=[("update", text), *dataset]).close()

    def write_graph(self, graph: GraphName, triples: Sequence[Triple], replace: bool) -> bool:
        with self.writing():
            created = not self.has_graph(graph)
            self.run_update(insert_data_update(self.graph_on_engine(graph), triples, replace, self.dialect))
        return created

    def drop_graph(self, graph: GraphName) -> bool:
        with self.writing():
            if not self.has_graph(graph):
                return False
            # SILENT: Virtuoso refuses to drop a graph no CREATE made (its triples are removed all the same)
            target = self.graph_on_engine(graph)
            self.run_update("CLEAR DEFAULT" if isinstance(target, DefaultGraph)
                            else f"DROP SILENT GRAPH {render_term(target)}")
        return True

    def _data_lines(self, quads: Iterable[Quad]) -> Iterator[str]:
        for q in self.placed(quads):
            terms = [q.subject, q.predicate, q.object]
            if not isinstance(q.graph_name, DefaultGraph):
                terms.append(q.graph_name)
            yield data_line(terms, self.dialect)

    def extend(self, quads: Iterable[Quad]) -> None:
        """One ``INSERT DATA`` request: the engine applies all of it or nothing."""
        data = quad_data(self.placed(quads), self.dialect)
        if data:
            self.run_update(insert_data(data, self.dialect))

    def load(self, stream: IO[bytes], fmt: RdfFormat, graph: NamedNode) -> None:
        """N-Quads posted to the Graph Store endpoint, ``LOAD_BATCH`` quads a request (in the reification dialect
        ``INSERT DATA`` updates of ``UPDATE_LOAD_BATCH``): each batch is its own transaction (a failure leaves
        the batches before it), and blank nodes are scoped to their batch."""
        quads = (q if isinstance(q, Quad) and not isinstance(q.graph_name, DefaultGraph)
                 else Quad(q.subject, q.predicate, q.object, graph) for q in parse(stream, format=fmt))
        with self.writing():
            while batch := list(islice(quads, UPDATE_LOAD_BATCH if self.dialect == REIFICATION else LOAD_BATCH)):
                if self.dialect == REIFICATION:  # engines without triple terms take no N-Quads dataset (Virtuoso)
                    self.extend(batch)
                    continue
                body = "\n".join(self._data_lines(batch)).encode()
                self.send("POST", self.endpoints.data, read=False, data=body,
                          headers={"Content-Type": "application/n-quads"}).close()

    def notify_loaded(self, collection: str, added_labels: list | None = None) -> None:
        """Replace the collection's data version (other workers then rebuild their label index), then
        tell this process's listeners."""
        self.update("store_bump_version", {("graph", "new"): [(vocab.collection_graph(collection),
                                                                Literal(str(uuid.uuid4())))]})
        super().notify_loaded(collection, added_labels)

    # --- whole-store operations -----------------------------------------------------------------

    def dump(self, output: str | Path | None, fmt: RdfFormat = RdfFormat.TRIG,
             graph: GraphName | None = None) -> bytes | None:
        """The engine's Graph Store answer: the whole dataset (``fmt`` a dataset format) or one graph. In the
        reification dialect the quads as Glassgraph reads them (``quads``: statement nodes read back as triple
        terms, their descriptions and the engine's own graphs left out), written here: the engine's Graph Store
        would give the statement nodes (and Virtuoso's writes no N-Quads). Its answer is one SPARQL result, which
        Virtuoso cuts at its ``ResultSetMaxRows``."""
        if graph is None and not fmt.supports_datasets:
            graph = DefaultGraph()
        if self.dialect == REIFICATION:
            # the whole store (the CLI's dump and backup) waits longer; one graph is a request's (the Graph Store)
            with self._patient(WHOLE_STORE_WAIT_S) if graph is None else nullcontext():
                quads = self.quads(graph=graph)
            return serialize(quads if graph is None else (q.triple for q in quads), output, fmt)
        graph = self.graph_on_engine(graph)
        params = {} if graph is None else {"default": ""} if isinstance(graph, DefaultGraph) else {"graph": graph.value}
        response = self.send("GET", self.endpoints.data, read=True, stream=True, params=params,
                             headers={"Accept": fmt.media_type})
        with response:
            if output is None:
                return response.content
            with open(output, "wb") as target:
                for piece in response.iter_content(1 << 20):
                    target.write(piece)
        return None

    def backup(self, target: str | Path) -> None:
        """The engine's dataset as N-Quads, ``BACKUP_FILE`` in the new directory ``target`` (an engine keeps its
        own backups; a dump is what Glassgraph can take through the protocol). ``glassgraph load`` restores it."""
        Path(target).mkdir(parents=True)
        self.dump(Path(target) / BACKUP_FILE, RdfFormat.N_QUADS)

    def close(self) -> None:
        self.session.close()
