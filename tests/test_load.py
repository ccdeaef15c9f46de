"""Loading RDF files into collections, dumping and backing up the store (real on-disk stores)."""
from __future__ import annotations

import gc
import gzip
from pathlib import Path

import pytest
from pyoxigraph import DefaultGraph, Literal, NamedNode, Quad, RdfFormat, Triple, parse, serialize

from server import stages, vocab
from server.ingest.load import LoadError, build_store, format_of, load_file
from server.store import GraphStore

EX = "http://example.org/"
NAMED = NamedNode(EX + "named")
TRIPLES = [
    Triple(NamedNode(EX + "france"), NamedNode(EX + "capital"), NamedNode(EX + "paris")),
    Triple(NamedNode(EX + "paris"), NamedNode(EX + "label"), Literal("Paris")),
    Triple(NamedNode(EX + "paris"), NamedNode(EX + "label"), Literal("París", language="es")),
    Triple(NamedNode(EX + "paris"), NamedNode(EX + "population"), Literal("2148000", datatype=vocab.XSD.integer)),
    Triple(NamedNode(EX + "paris"), NamedNode(EX + "motto"), Literal('Fluctuat "nec" mergitur\n{ } DROP ALL')),
]
FACT = Triple(NamedNode(EX + "sg"), vocab.TG.contains, TRIPLES[0])  # a triple term (RDF 1.2)
EXTENSIONS = {RdfFormat.TURTLE: ".ttl", RdfFormat.N_TRIPLES: ".nt", RdfFormat.N_QUADS: ".nq",
              RdfFormat.TRIG: ".trig", RdfFormat.RDF_XML: ".rdf"}


def write(path: Path, fmt: RdfFormat, gz: bool) -> Path:
    """The sample triples (and for datasets one quad in a named graph) serialized to ``path``."""
    if fmt.supports_datasets:
        data = [Quad(t.subject, t.predicate, t.object, DefaultGraph()) for t in TRIPLES + [FACT]]
        data.append(Quad(FACT.subject, FACT.predicate, FACT.object, NAMED))
    else:
        data = TRIPLES + ([] if fmt == RdfFormat.RDF_XML else [FACT])
    raw = serialize(data, format=fmt)
    target = path.with_suffix(EXTENSIONS[fmt] + (".gz" if gz else ""))
    target.write_bytes(gzip.compress(raw) if gz else raw)
    return target


def content(store: GraphStore) -> set[Quad]:
    return set(store.raw)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("fmt", list(EXTENSIONS), ids=[f.name for f in EXTENSIONS])
def test_each_format_loads_into_the_collection(store: GraphStore, tmp_path: Path, fmt: RdfFormat, gz: bool) -> None:
    path = write(tmp_path / "data", fmt, gz)
    loaded: list[str] = []
    store.add_load_listener(lambda collection, added_labels: loaded.append(collection))
    graph = vocab.collection_graph("docs")
    expected = {Quad(t.subject, t.predicate, t.object, graph) for t in TRIPLES}
    if fmt != RdfFormat.RDF_XML:  # RDF/XML cannot write triple terms
        expected.add(Quad(FACT.subject, FACT.predicate, FACT.object, graph))
    if fmt.supports_datasets:  # named graphs keep their name
        expected.add(Quad(FACT.subject, FACT.predicate, FACT.object, NAMED))
    assert load_file(store, path, "docs", progress=False) == len(expected)
    assert content(store) == expected
    assert loaded == ["docs"]
    assert store.has_collection("docs") and not store.has_collection("other")


def test_loading_twice_adds_nothing(store: GraphStore, tmp_path: Path) -> None:
    path = write(tmp_path / "data", RdfFormat.TURTLE, False)
    assert load_file(store, path, "docs", progress=False) == len(TRIPLES) + 1
    assert load_file(store, path, "docs", progress=False) == 0


@pytest.mark.parametrize(("name", "data"), [
    ("broken.ttl", b"<http://example.org/a> <http://example.org/b> <http://example.org/c> .\n" * 1000
     + b"<http://example.org/a> <http://example.org/b> oops ."),
    ("broken.nt", b"<http://example.org/a> <http://example.org/b> \"c\" .\n<a b c .\n"),
    ("broken.nq.gz", gzip.compress(b"<http://example.org/a> <http://example.org/b> \"c\" .\n" * 10,
                                   mtime=0)[:-12]),  # mtime=0: the same test id in every xdist worker
    ("notgzip.ttl.gz", b"<http://example.org/a> <http://example.org/b> \"c\" ."),
    ("broken.rdf", b"<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description"),
    ("data.json", b"{}"),
    ("no-extension", b""),
])
def test_a_bad_file_is_a_load_error_and_writes_nothing(store: GraphStore, tmp_path: Path, name: str,
                                                        data: bytes) -> None:
    keep = Quad(NamedNode(EX + "keep"), NamedNode(EX + "p"), Literal("kept"), vocab.collection_graph("docs"))
    store.extend([keep])
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(LoadError, match=name.split(".")[0]):
        load_file(store, path, "docs", progress=False)
    assert content(store) == {keep}


def test_a_missing_file_is_a_load_error(store: GraphStore, tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file"):
        load_file(store, tmp_path / "missing.ttl", "docs", progress=False)


def test_format_of_looks_through_gz() -> None:
    assert format_of("a/b.TTL.gz") == RdfFormat.TURTLE
    assert format_of("x.nq") == RdfFormat.N_QUADS
    with pytest.raises(LoadError):
        format_of("x.gz")


def _two_collections(store: GraphStore, tmp_path: Path) -> None:
    load_file(store, write(tmp_path / "a", RdfFormat.TURTLE, False), "alpha", progress=False)
    load_file(store, write(tmp_path / "b", RdfFormat.N_QUADS, True), "beta", progress=False)
    store.extend([Quad(NamedNode(EX + "sg"), vocab.PROV.wasDerivedFrom, NamedNode(EX + "c"),
                       vocab.source_graph("alpha"))])


def test_collections_counts(store: GraphStore, tmp_path: Path) -> None:
    assert store.collections() == []
    _two_collections(store, tmp_path)
    assert store.collections() == [
        {"collection": "alpha", "graph": vocab.collection_graph("alpha").value, "triples": len(TRIPLES) + 1,
         "source_triples": 1},
        {"collection": "beta", "graph": vocab.collection_graph("beta").value, "triples": len(TRIPLES) + 1,
         "source_triples": 0},
    ]


@pytest.mark.parametrize("fmt", [RdfFormat.TRIG, RdfFormat.N_QUADS], ids=["trig", "nquads"])
def test_dump_and_reload_roundtrip(store: GraphStore, tmp_path: Path, fmt: RdfFormat) -> None:
    _two_collections(store, tmp_path)
    out = tmp_path / ("dump" + EXTENSIONS[fmt])
    store.dump(out, fmt)
    assert set(parse(path=str(out), format=fmt)) == content(store)
    copy = GraphStore(tmp_path / "copy")
    load_file(copy, out, "ignored", progress=False)
    assert content(copy) == content(store)
    assert store.dump(None, fmt) == out.read_bytes()


def test_dump_one_graph(store: GraphStore, tmp_path: Path) -> None:
    _two_collections(store, tmp_path)
    graph = vocab.collection_graph("beta")
    for fmt in (RdfFormat.TURTLE, RdfFormat.N_TRIPLES, RdfFormat.N_QUADS):
        dumped = store.dump(None, fmt, graph=graph)
        triples = {Triple(q.subject, q.predicate, q.object) if isinstance(q, Quad) else q
                   for q in parse(dumped, format=fmt)}
        assert triples == set(TRIPLES) | {FACT}


def test_backup_roundtrip(store: GraphStore, tmp_path: Path) -> None:
    _two_collections(store, tmp_path)
    store.backup(tmp_path / "backup")
    copy = GraphStore(tmp_path / "backup")
    assert content(copy) == content(store)
    assert copy.collections() == store.collections()
    with pytest.raises(ValueError):
        GraphStore(None).backup(tmp_path / "nope")


def test_a_snapshots_backup_never_touches_a_directory_it_did_not_make(tmp_path: Path) -> None:
    """The attacker's pass: a failed copy removed its target, which was another backup in progress or a live
    store; now the copy is built in a directory of its own and renamed to the target once whole."""
    written = GraphStore(tmp_path / "store")
    _two_collections(written, tmp_path)
    before = content(written)
    del written
    gc.collect()  # closed: the snapshot below reads a store no process writes (a held one: test_cli)
    snapshot = GraphStore(tmp_path / "store", read_only=True)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    for target in (taken, tmp_path / "store"):  # an existing directory; the store itself
        with pytest.raises(ValueError, match="exists"):
            snapshot.backup(target)
    assert (taken / "keep.txt").read_text() == "mine" and content(snapshot) == before
    snapshot.backup(tmp_path / "copy")
    assert content(GraphStore(tmp_path / "copy")) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".copy")] == []  # nothing left beside it


def test_build_store_makes_a_new_store_from_one_file(tmp_path: Path) -> None:
    path = write(tmp_path / "data", RdfFormat.TRIG, True)
    assert build_store(tmp_path / "new", path, "docs", progress=False) == len(TRIPLES) + 2
    gc.collect()
    store = GraphStore(tmp_path / "new")
    assert store.collections()[0]["collection"] == "docs"
    assert store.collections()[0]["triples"] == len(TRIPLES) + 1
    assert not (tmp_path / "new.loading").exists()


def test_build_store_refuses_a_store_with_content(store: GraphStore, tmp_path: Path) -> None:
    path = write(tmp_path / "data", RdfFormat.TURTLE, False)
    load_file(store, path, "docs", progress=False)
    with pytest.raises(LoadError, match="not empty"):
        build_store(store.path, path, "docs", progress=False)


def test_build_store_of_a_bad_file_leaves_no_store(tmp_path: Path) -> None:
    path = tmp_path / "bad.ttl"
    path.write_bytes(b"<http://example.org/a> <http://example.org/b> <http://example.org/c> .\n oops")
    with pytest.raises(LoadError):
        build_store(tmp_path / "new", path, "docs", progress=False)
    assert not (tmp_path / "new").exists()
    assert not (tmp_path / "new.loading").exists()


def test_a_renamed_explain_graph_is_not_a_collection(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "store", explain_collection="traces")
    store.extend(stages.SESSION.quads(store.explain_graph, "s1",
                                      stages.SessionStarted("What is the capital of France?", "offline", "default")))
    fact = Quad(vocab.ENTITY.france, vocab.RELATION.capital, vocab.ENTITY.paris, vocab.collection_graph("geo"))
    store.extend([fact])
    assert [c["collection"] for c in store.collections()] == ["geo"]
    assert store.collection_of(store.explain_graph) is None
    assert store.collection_of(vocab.collection_graph("geo")) == "geo"
