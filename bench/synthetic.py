"""A generated knowledge graph of about a million triples (collection ``synthetic``), cached; ``scale`` 10
gives ten times the entities and edges (about ten million triples), cached under names of its own.

Entities get two- or three-word labels made of pronounceable pseudo-words; subjects are drawn with
a heavy-tailed weight (a few hubs with thousands of edges, most entities with a handful), objects
uniformly; one edge in ten has a literal object (integers, dates, language-tagged strings).
"""
from __future__ import annotations

import gzip
import random
from pathlib import Path

from pyoxigraph import Literal, NamedNode, RdfFormat

from bench.workdir import bench_dir, cached_store
from server.ingest.load import load_file
from server.store import GraphStore
from server.vocab import ENTITY, RDFS, RELATION, XSD, collection_graph

COLLECTION = "synthetic"
ENTITIES = 100_000  # at scale 1; times the scale
RELATIONS = 60
EDGES = 900_000  # at scale 1, times the scale; plus one label per entity and relation: about 1,000,060 triples
_ONSETS = "b c d f g h j k l m n p r s t v w z br dr gr kr st tr".split()
_VOWELS = "a e i o u ai ea ou".split()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3)))


def _labels(rng: random.Random, count: int, words: list[str], size: tuple[int, int]) -> list[str]:
    seen: set[str] = set()
    labels = []
    while len(labels) < count:
        label = " ".join(rng.choice(words) for _ in range(rng.randint(*size))).title()
        if label not in seen:
            seen.add(label)
            labels.append(label)
    return labels


def cache_name(scale: int) -> str:
    """The graph's cache name at ``scale``: ``synthetic`` at 1 (the names it always had), ``synthetic-10M`` at 10."""
    return COLLECTION if scale == 1 else f"{COLLECTION}-{scale}M"


def generate(target: Path, seed: int = 7, scale: int = 1) -> list[tuple[str, str]]:
    """Write the graph as gzipped N-Triples; returns ``(entity label, relation label)`` question seeds.

    At scale 10 the dedupe set holds ~9M keys: an entity object is keyed by its number (a literal by its
    text, which no number equals), which keeps the output of the text key it replaced."""
    rng = random.Random(seed)
    entity_count, edge_count = ENTITIES * scale, EDGES * scale
    words = sorted({_word(rng) for _ in range(6000)})
    entity_labels = _labels(rng, entity_count, words, (2, 3))
    relation_labels = _labels(rng, RELATIONS, words, (1, 2))
    entities = [ENTITY[f"n{i}"] for i in range(entity_count)]
    relations = [RELATION[f"r{i}"] for i in range(RELATIONS)]
    weights = [1.0 / (rank + 10) ** 0.9 for rank in range(entity_count)]
    subjects = rng.choices(range(entity_count), weights=weights, k=edge_count)
    del weights
    edges: set[tuple[int, int, int | str]] = set()
    with gzip.open(target, "wt", encoding="utf-8", compresslevel=3) as out:
        for term, label in [*zip(entities, entity_labels, strict=True), *zip(relations, relation_labels, strict=True)]:
            out.write(f"{term} {RDFS.label} {Literal(label)} .\n")
        for s in subjects:
            p = rng.randrange(RELATIONS)
            o: NamedNode | Literal
            key: int | str
            if rng.random() < 0.1:
                kind = rng.randrange(3)
                o = (Literal(str(rng.randint(1, 10**7)), datatype=XSD.integer) if kind == 0 else
                     Literal(f"{rng.randint(1900, 2025)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                             datatype=XSD.date) if kind == 1 else
                     Literal(rng.choice(words), language="en"))
                key = str(o)
            else:
                key = rng.randrange(entity_count)
                o = entities[key]
            if (s, p, key) in edges:
                continue
            edges.add((s, p, key))
            out.write(f"{entities[s]} {relations[p]} {o} .\n")
    sample = rng.sample(range(entity_count), 2000)
    return [(entity_labels[i], relation_labels[rng.randrange(RELATIONS)]) for i in sample]


def synthetic_store(scale: int = 1) -> tuple[GraphStore, list[str]]:
    """The cached store holding the generated graph at ``scale``, and questions naming one entity each."""
    data = bench_dir() / f"{cache_name(scale)}.nt.gz"
    questions = bench_dir() / f"{cache_name(scale)}.questions.txt"
    if not (data.exists() and questions.exists()):
        pairs = generate(data, scale=scale)
        questions.write_text("".join(f"what is the {r} of {e}\n" for e, r in pairs), encoding="utf-8")

    def fill(store: GraphStore) -> None:
        if scale == 1:
            load_file(store, data, COLLECTION, progress=True)
            return
        # one transaction of ten million triples would be held in memory: the bulk loader writes as it parses
        # (an interrupted fill is started over by cached_store)
        with gzip.open(data, "rb") as stream:
            store.raw.bulk_load(stream, format=RdfFormat.N_TRIPLES, to_graph=collection_graph(COLLECTION))
        store.notify_loaded(COLLECTION)

    return cached_store(cache_name(scale), fill), questions.read_text(encoding="utf-8").splitlines()
