"""Loading RDF files into a collection: one transaction per file, with a progress bar."""
from __future__ import annotations

import gzip
import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyoxigraph import RdfFormat, Store
from tqdm import tqdm

from server import vocab
from server.store import store_directory
from server.store_base import StoreBackend

_FORMATS = {
    ".ttl": RdfFormat.TURTLE, ".turtle": RdfFormat.TURTLE, ".nt": RdfFormat.N_TRIPLES,
    ".nq": RdfFormat.N_QUADS, ".trig": RdfFormat.TRIG, ".rdf": RdfFormat.RDF_XML,
    ".owl": RdfFormat.RDF_XML, ".xml": RdfFormat.RDF_XML,
}


class LoadError(ValueError):
    """The file cannot be loaded: unknown format or invalid content (nothing was written)."""


def format_of(path: str | Path) -> RdfFormat:
    """The RDF format from the file name, looking through a ``.gz`` suffix."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    fmt = _FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise LoadError(f"{path}: unknown RDF format (use one of {', '.join(sorted(_FORMATS))}, optionally .gz)")
    return fmt


class _ProgressReader(io.RawIOBase):
    """Reads a binary file and advances a progress bar by the bytes read from disk."""

    def __init__(self, raw: io.BufferedReader, bar: tqdm) -> None:
        self._raw, self._bar = raw, bar

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = self._raw.readinto(buffer)
        self._bar.update(n or 0)
        return n or 0


@contextmanager
def _reading(path: Path, progress: bool) -> Iterator[io.IOBase]:
    """The file as a binary stream (decompressed if ``.gz``) that advances a progress bar."""
    if not path.is_file():
        raise LoadError(f"{path}: no such file")
    with open(path, "rb") as raw, tqdm(total=path.stat().st_size, unit="B", unit_scale=True,
                                       desc=path.name, disable=not progress, leave=False) as bar:
        stream: io.IOBase = io.BufferedReader(_ProgressReader(raw, bar), buffer_size=1 << 20)
        if path.suffix.lower() == ".gz":
            stream = gzip.GzipFile(fileobj=stream)
        try:
            yield stream
        except (SyntaxError, EOFError, gzip.BadGzipFile, OSError) as exc:
            raise LoadError(f"{path}: {exc}") from exc


def new_store_directory(store_path: str | Path | None) -> Path | None:
    """The directory for :func:`build_store` when no store is there yet (absent or empty);
    None when ``store_path`` is in memory or already holds a store."""
    path = store_directory(store_path)
    if path is None or (path.exists() and any(path.iterdir())):
        return None
    return path


def load_file(store: StoreBackend, path: str | Path, collection: str, progress: bool = True) -> int:
    """Load one RDF file into ``collection`` atomically; returns the number of quads added.

    Triples (and quads in a file's default graph) go to the collection's knowledge graph;
    quads in named graphs keep their graph. The whole file is one transaction: a crash or a
    parse error leaves the store as it was.
    """
    path = Path(path)
    fmt = format_of(path)
    before = len(store)
    with _reading(path, progress) as stream:
        store.load(stream, fmt, vocab.collection_graph(collection))
    store.flush()
    store.notify_loaded(collection)
    return len(store) - before


def build_store(target: str | Path, path: str | Path, collection: str, progress: bool = True) -> int:
    """Create the on-disk store ``target`` (absent or an empty directory) holding one RDF file.

    Several times faster than :func:`load_file`: pyoxigraph's bulk loader writes a new store in a
    sibling directory, which is then renamed into place, so a crash leaves either no store or the
    whole file (the leftover ``*.loading`` directory is discarded by the next attempt).
    Returns the number of quads.
    """
    target, path = Path(target), Path(path)
    fmt = format_of(path)
    if new_store_directory(target) is None:
        raise LoadError(f"{target}: not empty; use load_file to add to an existing store")
    staging = target.with_name(target.name + ".loading")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine has no ~/.local/share/glassgraph
    try:
        staging_store = Store(str(staging))
        with _reading(path, progress) as stream:
            staging_store.bulk_load(stream, format=fmt, to_graph=vocab.collection_graph(collection))
        staging_store.flush()
        count = len(staging_store)
        del staging_store  # closes the store and releases its lock before the rename
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        target.rmdir()
    os.replace(staging, target)
    return count
