"""Shared fixtures: real on-disk stores in temporary directories, and the same on a real remote engine.

A test module that sets ``BOTH_BACKENDS = True`` runs each of its tests that uses a store (``store``,
``sample_store``, ``france_store``, or ``store_backend`` itself) on both backends: the embedded store and
a ``RemoteStore`` on ``oxigraph serve`` (from the ``oxigraph`` wheel) on loopback. One engine serves every
``store`` of the session and is emptied (``DROP ALL``) before each test; the sample data has an engine of
its own, loaded once. A module that also sets ``VIRTUOSO = True`` runs them on Virtuoso 7 as well (the
``reification`` dialect: no triple terms, no LATERAL), skipped with the reason when virtuoso-t is not installed.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from console_browser import browser, console_url, page, session_iri  # noqa: F401  (fixtures: the console in Chromium)
from extraction_llm import llm  # noqa: F401  (fixture: the scripted server answering extraction and GraphRAG)
from in_process import Calling, InProcess, calling  # noqa: F401  (fixture: apps called in-process, closed after the test)
from live_server import LiveServer, Serving, serving  # noqa: F401  (fixture: live servers closed after the test)
from oxigraph_server import OxigraphServer
from scripted_llm import module_llm, scripted_llm  # noqa: F401  (fixtures: scripted OpenAI-compatible server)
from virtuoso_server import DIALECT as VIRTUOSO_DIALECT
from virtuoso_server import VirtuosoServer, virtuoso_missing

from server.config import SAMPLE_DATA
from server.ingest.load import build_store, load_file
from server.remote_store import EngineEndpoints, RemoteStore
from server.store import GraphStore
from server.store_base import StoreBackend

BACKENDS = ("embedded", "remote")
VIRTUOSO_BACKENDS = (*BACKENDS, "virtuoso")  # a module with VIRTUOSO = True
ENGINE_TIMEOUT_S = 60  # oxigraph serve --timeout-s: longer than any test's own deadline


BROWSER_FIXTURES = {"page", "browser"}
REMOTE_FIXTURES = {"engine", "virtuoso"}
SLOW_FIXTURES = {"production", "impatient", "glassgraph"}  # modules' fixtures starting the production command


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by what a test uses, so that a new test is marked without naming them: ``browser`` for the
    Chromium fixtures, ``remote`` for the remote backend or the session's engine; ``browser`` and ``kill``
    tests and those on a production server are ``slow`` too (the fast command, ``-m "not slow"``, leaves
    them out)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if fixtures & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if fixtures & REMOTE_FIXTURES or params.get("store_backend") in ("remote", "virtuoso"):
            item.add_marker(pytest.mark.remote)
        if fixtures & SLOW_FIXTURES or item.get_closest_marker("browser") or item.get_closest_marker("kill"):
            item.add_marker(pytest.mark.slow)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Both backends for the store-using tests of a module with ``BOTH_BACKENDS = True``."""
    if getattr(metafunc.module, "BOTH_BACKENDS", False) and "store_backend" in metafunc.fixturenames:
        backends = VIRTUOSO_BACKENDS if getattr(metafunc.module, "VIRTUOSO", False) else BACKENDS
        metafunc.parametrize("store_backend", backends, indirect=True, scope="session")


both_backends = pytest.mark.parametrize("store_backend", BACKENDS, indirect=True, scope="session")  # one test
# one test on both backends and on Virtuoso
every_backend = pytest.mark.parametrize("store_backend", VIRTUOSO_BACKENDS, indirect=True, scope="session")


@pytest.fixture(scope="session")
def store_backend(request: pytest.FixtureRequest) -> str:
    """``embedded`` unless the module runs on both backends (``BOTH_BACKENDS``)."""
    return getattr(request, "param", "embedded")


def start_engine(tmp_path_factory: pytest.TempPathFactory, name: str,
                 timeout_s: float = ENGINE_TIMEOUT_S) -> OxigraphServer:
    """``oxigraph serve --timeout-s`` in memory on a free loopback port (its log under a temporary directory)."""
    return OxigraphServer(tmp_path_factory.mktemp(name) / "engine", "--timeout-s", str(timeout_s), memory=True)


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    """The remote stores' engine for the session (emptied before each test that uses ``store``)."""
    server = start_engine(tmp_path_factory, "engine")
    yield server
    server.close()


def remote_store(url: str) -> RemoteStore:
    return RemoteStore(EngineEndpoints.of(url))


def start_virtuoso(tmp_path_factory: pytest.TempPathFactory, name: str) -> VirtuosoServer:
    """Virtuoso in a temporary directory, or the test skipped saying how to install it."""
    reason = virtuoso_missing()
    if reason:
        pytest.skip(reason)
    return VirtuosoServer(tmp_path_factory.mktemp(name))


@pytest.fixture(scope="session")
def virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtuosoServer]:
    """The session's Virtuoso (emptied before each test that uses ``store`` on it)."""
    server = start_virtuoso(tmp_path_factory, "virtuoso")
    yield server
    server.close()


# Engine limits for which a case is skipped on Virtuoso (decision 27 lists them)
NO_TRIPLE_TERMS = ("Virtuoso 7 holds no triple terms (the reification dialect writes a statement node), so a "
                   "client's own query cannot get one back")

ENGINE_GRAPHS_IN_UNION = ("Virtuoso 7's union default graph holds its own graphs (2,500 triples of its schema), "
                          "which a client's query over every graph counts")


def skip_on_virtuoso(store_backend: str, reason: str) -> None:
    """Skip the rest of a test on Virtuoso because of ``reason``, a limit of the engine."""
    if store_backend == "virtuoso":
        pytest.skip(reason)


def virtuoso_store(server: VirtuosoServer) -> RemoteStore:
    return RemoteStore(server.endpoints, dialect=VIRTUOSO_DIALECT)


@pytest.fixture
def store(tmp_path: Path, store_backend: str, request: pytest.FixtureRequest) -> Iterator[StoreBackend]:
    """An empty store of its own for one test: on disk, or the session's engine emptied."""
    if store_backend == "embedded":
        yield GraphStore(tmp_path / "store")
        return
    if store_backend == "virtuoso":
        server = request.getfixturevalue("virtuoso")
        server.empty()
        remote = virtuoso_store(server)
    else:
        remote = remote_store(request.getfixturevalue("engine").url)
        remote.run_update("DROP SILENT ALL")
    yield remote
    remote.close()


@contextmanager
def own_store(tmp_path_factory: pytest.TempPathFactory, store_backend: str, name: str) -> Iterator[StoreBackend]:
    """An empty store for a module's fixture: a directory of its own, or an engine of its own (the session's
    engine is emptied before every test)."""
    if store_backend == "embedded":
        yield GraphStore(tmp_path_factory.mktemp(name) / "store")
        return
    server: OxigraphServer | VirtuosoServer
    if store_backend == "virtuoso":
        server = start_virtuoso(tmp_path_factory, name)
        remote = virtuoso_store(server)
    else:
        server = start_engine(tmp_path_factory, name)
        remote = remote_store(server.url)
    try:
        yield remote
    finally:
        remote.close()
        server.close()


class SampleStores:
    """The sample dataset in the `default` collection, built once per backend for the session.

    A session fixture that depends on the parametrized ``store_backend`` is torn down at every switch of
    backend between modules and built again (up to 3 s a time, 13 s under load): this one is not.
    """

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._template: Path | None = None
        self._stores: dict[str, StoreBackend] = {}
        self._engines: list[OxigraphServer | VirtuosoServer] = []

    def of(self, backend: str) -> StoreBackend:
        if backend not in self._stores:
            self._stores[backend] = self._build(backend)
        return self._stores[backend]

    def copy(self, target: Path) -> GraphStore:
        """A store of its own at ``target`` with the sample as loaded (no traces): a copy of the directory of
        a store built once and closed, a tenth of the time of building it."""
        if self._template is None:
            self._template = self._tmp.mktemp("sample-template") / "store"
            build_store(self._template, SAMPLE_DATA, "default", progress=False)  # same content as load_file, faster
        shutil.copytree(self._template, target)
        return GraphStore(target)

    def _build(self, backend: str) -> StoreBackend:
        if backend == "embedded":
            return self.copy(self._tmp.mktemp("sample") / "store")
        if backend == "virtuoso":
            virtuoso = start_virtuoso(self._tmp, "sample-virtuoso")
            self._engines.append(virtuoso)
            remote = virtuoso_store(virtuoso)
        else:
            engine = start_engine(self._tmp, "sample-engine")
            self._engines.append(engine)
            remote = remote_store(engine.url)
        load_file(remote, SAMPLE_DATA, "default", progress=False)
        return remote

    def close(self) -> None:
        for store in self._stores.values():
            if isinstance(store, RemoteStore):
                store.close()
        for engine in self._engines:
            engine.close()


@pytest.fixture(scope="session")
def sample_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleStores]:
    stores = SampleStores(tmp_path_factory)
    yield stores
    stores.close()


@pytest.fixture(scope="session")
def sample_store(sample_stores: SampleStores, store_backend: str) -> StoreBackend:
    """One store with the sample dataset in the `default` collection, shared by a session.

    Tests may add explain traces to it; tests that change the knowledge graph use `store`.
    """
    return sample_stores.of(store_backend)


@pytest.fixture
def sample_copy(tmp_path: Path, sample_stores: SampleStores) -> GraphStore:
    """An on-disk store of the test's own with the sample dataset in `default`, for a test that changes it."""
    return sample_stores.copy(tmp_path / "sample")


@pytest.fixture
def server(request: pytest.FixtureRequest, store_backend: str) -> LiveServer | InProcess:
    """The app on a live loopback server over the module's ``SERVER_STORE`` (the name of a store fixture;
    ``france_store`` if unset) with its ``SERVER_SETTINGS`` (Config fields; none if unset), or called
    in-process when the module sets ``IN_PROCESS`` (the same requests' verbs: ``live_server.Verbs``). It names
    ``store_backend`` so that a module with ``BOTH_BACKENDS`` runs its tests on both."""
    store = request.getfixturevalue(getattr(request.module, "SERVER_STORE", "france_store"))
    start: Serving | Calling = request.getfixturevalue("calling" if getattr(request.module, "IN_PROCESS", False)
                                                       else "serving")
    return start(store, **getattr(request.module, "SERVER_SETTINGS", {}))


@pytest.fixture
def france_store(store: GraphStore) -> GraphStore:
    """``store`` with :func:`add_france`."""
    return add_france(store)


def add_france(store: GraphStore) -> GraphStore:
    """A small France graph with full extraction provenance, built with the vocab builders.

    ``e:france r:capital e:paris`` is contained (triple term) in the subgraph of Chunk 2 of Page 4
    ("Government") of the document "France"; ``e:france r:currency e:euro`` is contained in Chunk 1 of
    Page 5 ("Economy") in the RDF-star reifier form; ``e:france r:motto "Liberté, égalité, fraternité"@fr``.
    """
    from pyoxigraph import BlankNode, Literal, Quad, Triple

    from server import vocab
    from server.vocab import ENTITY, RDF, RDFS, RELATION, TG

    kg, src = vocab.collection_graph("default"), vocab.source_graph("default")
    capital = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
    currency = Triple(ENTITY.france, RELATION.currency, ENTITY.euro)
    motto = Triple(ENTITY.france, RELATION.motto, Literal("Liberté, égalité, fraternité", language="fr"))
    labels = {ENTITY.france: "France", ENTITY.paris: "Paris", ENTITY.euro: "Euro", RELATION.capital: "capital",
              RELATION.currency: "currency", RELATION.motto: "motto"}
    quads = [Quad(t.subject, t.predicate, t.object, kg) for t in (capital, currency, motto)]
    quads += [Quad(iri, RDFS.label, Literal(label), kg) for iri, label in labels.items()]
    doc = vocab.document_iri("fr")
    quads += vocab.document_quads(src, doc, "France")
    quads += vocab.content_quads(doc, "France is a country in Western Europe.", title="France")
    for number, title, chunk, text in ((4, "Government", 2, "The capital of France is Paris."),
                                       (5, "Economy", 1, "France uses the euro.")):
        page_node, chunk_node = vocab.page_iri("fr", number), vocab.chunk_iri("fr", number, chunk)
        quads += vocab.page_quads(src, page_node, f"Page {number}", doc)
        quads += vocab.content_quads(page_node, text, title=title)
        quads += vocab.chunk_quads(src, chunk_node, f"Chunk {chunk}", page_node)
        quads += vocab.content_quads(chunk_node, text, title=title)
    quads += vocab.subgraph_quads(src, vocab.subgraph_iri("fr", 4, 2), vocab.chunk_iri("fr", 4, 2), [capital, motto])
    reified = vocab.subgraph_iri("fr", 5, 1)
    quads += vocab.subgraph_quads(src, reified, vocab.chunk_iri("fr", 5, 1), [])
    reifier = BlankNode()
    quads += [Quad(reified, TG.contains, reifier, src), Quad(reifier, RDF.reifies, currency, src)]
    store.extend(quads)
    store.notify_loaded("default")
    return store
