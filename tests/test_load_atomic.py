"""A bulk load killed with SIGKILL leaves the collection fully loaded or untouched, never half.

A child process loads a generated N-Triples file (tens of MB, several seconds to load) into an
on-disk store and is killed when its progress bar (bytes parsed) passes a threshold, or right after
the whole file was read (during the commit); the test then reopens the store.
"""
from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.ingest.load import load_file
from server.store import GraphStore

TRIPLES = 40_000
PADDING = "x" * 300  # a larger file gives the progress bar more steps without much more work
KEEP = [Quad(NamedNode(f"http://example.org/keep{i}"), NamedNode("http://example.org/p"), Literal(str(i)),
             vocab.collection_graph("keep")) for i in range(10)]

CHILD = """
import sys
from server.ingest.load import build_store, load_file
from server.store import GraphStore
mode, store_path, data = sys.argv[1:4]
if mode == "load":
    count = load_file(GraphStore(store_path), data, "big", progress=True)
else:
    count = build_store(store_path, data, "big", progress=True)
print("done", count, flush=True)
"""


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.nt"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(TRIPLES):
            out.write(f'<http://example.org/s{i}> <http://example.org/p{i % 50}> "value {i} \\" {{ }} {PADDING}" .\n')
    return path


def run_child(mode: str, store_path: Path, data: Path, kill_at_percent: int | None) -> bool:
    """Run one load; SIGKILL it once its progress bar shows ``kill_at_percent``. True if it finished."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(store_path), str(data)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=Path(__file__).resolve().parent.parent)
    if kill_at_percent is not None:
        seen = b""
        while chunk := os.read(child.stderr.fileno(), 4096):
            seen = (seen + chunk)[-200:]
            percents = [int(p) for p in re.findall(rb"(\d+)%\|", seen)]
            if percents and max(percents) >= kill_at_percent:
                child.send_signal(signal.SIGKILL)
                break
    output, _ = child.communicate()
    return output.startswith(b"done")


def collection_size(store: GraphStore, collection: str) -> int:
    return sum(1 for _ in store.raw.quads_for_pattern(None, None, None, vocab.collection_graph(collection)))


def prepared_store(path: Path) -> None:
    store = GraphStore(path)
    store.extend(KEEP)
    store.flush()
    del store
    gc.collect()


def test_the_generated_file_loads_completely(tmp_path: Path, big_file: Path) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    assert run_child("load", path, big_file, None)
    assert collection_size(GraphStore(path), "big") == TRIPLES


@pytest.mark.parametrize("percent", [5, 30, 60, 90, 100])
def test_a_killed_load_is_all_or_nothing(tmp_path: Path, big_file: Path, percent: int) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    finished = run_child("load", path, big_file, percent)
    store = GraphStore(path)  # reopening after SIGKILL
    size = collection_size(store, "big")
    if percent < 100:  # killed while the file was still being read: nothing may show
        assert not finished
        assert size == 0
    assert size in (0, TRIPLES), f"half-loaded collection after a kill at {percent}%: {size} triples"
    assert size == TRIPLES or not finished
    assert {q for q in store.raw if q.graph_name == vocab.collection_graph("keep")} == set(KEEP)
    if size == 0:  # the store still works: the same load now completes
        assert load_file(store, big_file, "big", progress=False) == TRIPLES


@pytest.mark.parametrize("percent", [50, 100])
def test_a_killed_first_start_build_leaves_no_store_or_a_whole_one(tmp_path: Path, big_file: Path,
                                                                 percent: int) -> None:
    path = tmp_path / "store"
    run_child("build", path, big_file, percent)
    if path.exists() and any(path.iterdir()):
        assert collection_size(GraphStore(path), "big") == TRIPLES
    else:  # nothing in place: the next start builds it, discarding the staging directory
        assert percent == 100 or not path.exists()
        assert run_child("build", path, big_file, None)
        assert collection_size(GraphStore(path), "big") == TRIPLES
    assert not os.path.exists(str(path) + ".loading")
