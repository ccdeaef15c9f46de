"""Every test of the W3C SPARQL 1.1 Protocol (34) and Graph Store Protocol (13 listed, and the one
defined but not listed) manifests in ``tests/w3c/``, run over HTTP by ``w3c_runner`` against the real
server: the production command (gunicorn, ``ProductionServer``) and the development server
(werkzeug, as ``glassgraph serve`` runs it), each over an on-disk store.

The manifests' ``www.example`` is the server, ``/sparql/`` its ``/sparql`` and ``/gsp`` its
``/store``; writes need the bearer token on this server, so every request carries it.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from live_server import LiveServer, serve
from production_server import TOKEN, ProductionServer
from w3c_manifest import GRAPH_STORE_MANIFEST, PROTOCOL_MANIFEST, ManifestTest, read_manifest
from w3c_runner import Target, run_manifest_test

from server.store import GraphStore

PROTOCOL = read_manifest(PROTOCOL_MANIFEST, "ProtocolTest")
GRAPH_STORE = read_manifest(GRAPH_STORE_MANIFEST, "GraphStoreProtocolTest")
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module", params=["production", "development"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The production command or the development server, over an empty on-disk store."""
    directory = tmp_path_factory.mktemp(f"w3c-{request.param}")
    if request.param == "production":
        production = ProductionServer(directory / "store")
        yield Target(production.url, headers=AUTH)
        production.close()
    else:
        live: LiveServer = serve(GraphStore(directory / "store"), token=TOKEN)
        yield Target(live.url, headers=AUTH)
        live.close()


def test_the_manifests_list_34_protocol_and_13_graph_store_tests() -> None:
    """The counts the README states; a manifest-reading mistake must not drop tests silently."""
    assert sum(t.listed for t in PROTOCOL) == len(PROTOCOL) == 34
    assert sum(t.listed for t in GRAPH_STORE) == 13
    assert [t.name for t in GRAPH_STORE if not t.listed] == ["head_non_existing_direct"]
    assert all(t.requests for t in PROTOCOL + GRAPH_STORE)


def test_the_data_files_are_the_ones_the_manifest_names() -> None:
    used = {path for test in PROTOCOL for path, _ in test.graph_data}
    assert used == {Path(PROTOCOL_MANIFEST.parent, f"data{n}.nt") for n in (1, 2, 3)}
    assert all(path.is_file() for path in used)


@pytest.mark.parametrize("test", PROTOCOL, ids=[t.name for t in PROTOCOL])
def test_sparql_protocol(target: Target, test: ManifestTest) -> None:
    run_manifest_test(target, test)


@pytest.mark.parametrize("test", GRAPH_STORE, ids=[t.name + ("" if t.listed else " (unlisted)") for t in GRAPH_STORE])
def test_graph_store_protocol(target: Target, test: ManifestTest) -> None:
    run_manifest_test(target, test)
