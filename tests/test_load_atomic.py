"""A bulk load killed with SIGKILL leaves the collection fully loaded or untouched, never half.

A child process loads a generated N-Triples file (15 MB, several seconds to load) into an on-disk
store and is killed when its progress bar (bytes read) passes a threshold, or at several points
after most of the file was read: pyoxigraph reads ahead fast, so most of a load's time comes after
that (measured by a first complete load). The test then reopens the store.
"""
from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Quad

from server import vocab
from server.ingest.load import load_file
from server.store import GraphStore

pytestmark = pytest.mark.kill  # conftest: kill tests are slow too
TRIPLES = 40_000
READ = 60  # most of the file has been read: what remains is mostly the transaction's inserts and commit
PADDING = "x" * 300  # a larger file gives the progress bar more steps without much more work
KEEP = [Quad(NamedNode(f"http://example.org/keep{i}"), NamedNode("http://example.org/p"), Literal(str(i)),
             vocab.collection_graph("keep")) for i in range(10)]

# tqdm redraws at most every 0.1 s: on an idle machine the whole file is read before the first redraw,
# the bar never shows a percentage and the kill never comes. Redraw on every read instead.
PROGRESS_EVERY_READ = {**os.environ, "TQDM_MININTERVAL": "0"}

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


def run_child(mode: str, store_path: Path, data: Path, percent: int | None = None,
              delay: float | None = 0.0) -> tuple[bool, float]:
    """Run one load. Once its progress bar shows ``percent``, wait ``delay`` seconds and SIGKILL it
    (``delay=None``: let it finish). Returns (finished, seconds from the threshold to the end)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(store_path), str(data)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=Path(__file__).resolve().parent.parent, env=PROGRESS_EVERY_READ)
    reached = time.monotonic()
    if percent is not None:
        seen = b""
        while chunk := os.read(child.stderr.fileno(), 4096):
            seen = (seen + chunk)[-200:]
            percents = [int(p) for p in re.findall(rb"(\d+)%\|", seen)]
            if percents and max(percents) >= percent:
                reached = time.monotonic()
                if delay is not None:
                    time.sleep(delay)
                    child.send_signal(signal.SIGKILL)
                break
    output, _ = child.communicate()
    return output.startswith(b"done"), time.monotonic() - reached


def collection_size(store: GraphStore, collection: str) -> int:
    return sum(1 for _ in store.raw.quads_for_pattern(None, None, None, vocab.collection_graph(collection)))


def prepared_store(path: Path) -> None:
    store = GraphStore(path)
    store.extend(KEEP)
    store.flush()
    del store
    gc.collect()


@pytest.fixture(scope="module")
def commit_seconds(tmp_path_factory: pytest.TempPathFactory, big_file: Path) -> float:
    """How long a complete load runs after most of the file was read."""
    path = tmp_path_factory.mktemp("reference") / "store"
    prepared_store(path)
    finished, seconds = run_child("load", path, big_file, READ, delay=None)
    assert finished
    assert collection_size(GraphStore(path), "big") == TRIPLES
    return seconds


def check_all_or_nothing(path: Path, big_file: Path, finished: bool) -> int:
    store = GraphStore(path)  # reopening after SIGKILL
    size = collection_size(store, "big")
    assert size in (0, TRIPLES), f"half-loaded collection: {size} triples"
    assert size == TRIPLES or not finished
    assert {q for q in store.raw if q.graph_name == vocab.collection_graph("keep")} == set(KEEP)
    if size == 0:  # the store still works: the same load now completes
        assert load_file(store, big_file, "big", progress=False) == TRIPLES
    return size


@pytest.mark.parametrize("percent", [5, 50])
def test_a_load_killed_while_reading_leaves_nothing(tmp_path: Path, big_file: Path, percent: int) -> None:
    path = tmp_path / "store"
    prepared_store(path)
    finished, _ = run_child("load", path, big_file, percent)
    assert not finished
    assert check_all_or_nothing(path, big_file, finished) == 0


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.25, 0.5, 0.95])
def test_a_load_killed_after_reading_is_all_or_nothing(tmp_path: Path, big_file: Path, commit_seconds: float,
                                                           fraction: float) -> None:
    # Killed as soon as most of the file was read, the kill must land inside the load; on a busy
    # machine the child can still win the race now and then, so that case gets three tries.
    for attempt in range(3 if fraction == 0.0 else 1):
        path = tmp_path / f"store{attempt}"
        prepared_store(path)
        finished, _ = run_child("load", path, big_file, READ, delay=commit_seconds * fraction)
        size = check_all_or_nothing(path, big_file, finished)
        if not finished:
            break
    if fraction == 0.0:
        assert not finished and size == 0


@pytest.mark.parametrize("percent", [50, READ])
def test_a_killed_first_start_build_leaves_no_store_or_a_whole_one(tmp_path: Path, big_file: Path,
                                                                 percent: int) -> None:
    path = tmp_path / "store"
    run_child("build", path, big_file, percent)
    if path.exists() and any(path.iterdir()):
        assert collection_size(GraphStore(path), "big") == TRIPLES
    else:  # nothing in place: the next start builds it, discarding the staging directory
        assert run_child("build", path, big_file, None)[0]
        assert collection_size(GraphStore(path), "big") == TRIPLES
    assert not os.path.exists(str(path) + ".loading")
