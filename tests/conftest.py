"""Shared fixtures: real on-disk stores in temporary directories."""
from __future__ import annotations

from pathlib import Path

import pytest

from server.config import SAMPLE_DATA
from server.ingest.load import load_file
from server.store import GraphStore


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    """An empty on-disk store of its own for one test."""
    return GraphStore(tmp_path / "store")


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """One on-disk store with the sample dataset in the `default` collection, shared by a session.

    Tests may add explain traces to it; tests that change the knowledge graph use `store`.
    """
    store = GraphStore(tmp_path_factory.mktemp("sample") / "store")
    load_file(store, SAMPLE_DATA, "default", progress=False)
    return store
