"""Loading RDF files into a collection: one transaction per file, with a progress bar."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

from pyoxigraph import RdfFormat
from tqdm import tqdm

from server import vocab
from server.store import GraphStore

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


def load_file(store: GraphStore, path: str | Path, collection: str, progress: bool = True) -> int:
    """Load one RDF file into ``collection`` atomically; returns the number of quads added.

    Triples (and quads in a file's default graph) go to the collection's knowledge graph;
    quads in named graphs keep their graph. The whole file is one transaction: a crash or a
    parse error leaves the store as it was.
    """
    path = Path(path)
    fmt = format_of(path)
    if not path.is_file():
        raise LoadError(f"{path}: no such file")
    before = len(store.raw)
    with open(path, "rb") as raw, tqdm(total=path.stat().st_size, unit="B", unit_scale=True,
                                       desc=path.name, disable=not progress, leave=False) as bar:
        stream: io.IOBase = io.BufferedReader(_ProgressReader(raw, bar), buffer_size=1 << 20)
        if path.suffix.lower() == ".gz":
            stream = gzip.GzipFile(fileobj=stream)
        try:
            with store.writing() as writer:
                writer.load(stream, format=fmt, to_graph=vocab.collection_graph(collection))
        except (SyntaxError, EOFError, gzip.BadGzipFile, OSError) as exc:
            raise LoadError(f"{path}: {exc}") from exc
    store.flush()
    store.notify_loaded(collection)
    return len(store.raw) - before
