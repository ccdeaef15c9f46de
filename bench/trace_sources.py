"""What the passages of a trace cost: the mentions query (``sparql/prov_mentions.rq``) for the ten edges of
a trace, against the source-chain query (``sparql/prov_sources.rq``) for the same edges as the baseline.

    python -m bench.trace_sources [--runs N]

The sample (data/factbook.nq.gz) is built into a temporary store. It records no ``tg:mentions``, so the
mentions are measured twice: on the sample as it is, then after adding, as ingest would, ``chunk
tg:mentions`` its document's country for every chunk, and ``e:france`` for every chunk of the store (an
entity every passage names: the worst case of the capped lookups). The last row is the same query
without the caps (every mention sorted), the shape the template's header warns against. Prints the
median milliseconds of each and its ratio to the baseline measured in the same run.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

from pyoxigraph import Quad, Triple

from server import vocab
from server.config import SAMPLE_DATA
from server.ingest.load import build_store
from server.provenance import mention_chains_many, source_chains_many
from server.sparql_templates import render_values
from server.store import GraphStore

COUNTRIES = ("france", "germany", "spain", "italy", "japan", "china", "brazil", "canada", "india", "egypt")
# Bench-only: prov_mentions.rq's lookup with every mention of both entities grouped and sorted.
UNCAPPED = """PREFIX tg: <https://trustgraph.ai/ns/>
SELECT * WHERE {
  VALUES (?s ?o) { }
  LATERAL {
    SELECT ?s ?o ?chunk (MAX(?score) AS ?rank) WHERE {
      { ?chunk tg:mentions ?o . ?chunk tg:mentions ?s BIND(3 AS ?score) }
      UNION { ?chunk tg:mentions ?o BIND(2 AS ?score) } UNION { ?chunk tg:mentions ?s BIND(1 AS ?score) }
    } GROUP BY ?s ?o ?chunk ORDER BY DESC(?rank) ?chunk LIMIT 3
  }
}"""


def trace_edges(store: GraphStore) -> list[Triple]:
    """Ten edges as a trace selects them: one fact of each country (not a label)."""
    graph = vocab.collection_graph("default")
    edges = []
    for name in COUNTRIES:
        fact = next((q for q in store.quads(vocab.ENTITY[name], None, None, graph) if q.predicate != vocab.RDFS.label),
                    None)
        if fact is not None:
            edges.append(Triple(fact.subject, fact.predicate, fact.object))
    return edges


def add_mentions(store: GraphStore) -> int:
    """Every chunk mentions its document's country and France; returns the mentions added."""
    source = vocab.source_graph("default")
    documents = {q.subject.value for q in store.quads(None, vocab.RDF.type, vocab.TG.Document, source)}
    titles = {q.subject.value: q.object.value for q in store.quads(None, vocab.DC.title, None, source)
              if q.subject.value in documents}
    quads = []
    for chunk in (q.subject for q in store.quads(None, vocab.RDF.type, vocab.TG.Chunk, source)):
        country = vocab.entity_iri(titles.get(chunk.value.split("/")[0], ""))  # doc:fr/p2/c3 -> doc:fr
        for entity in {country, vocab.ENTITY.france} - {None}:
            quads.append(Quad(chunk, vocab.TG.mentions, entity, source))
    store.extend(quads)
    return len(quads)


def timed(runs: int, action: Callable[[], object]) -> float:
    """Median milliseconds of ``runs`` calls (after one warm-up)."""
    action()
    spent = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        spent.append(time.perf_counter() - started)
    return median(spent) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "store"
        build_store(path, SAMPLE_DATA, "default", progress=False)
        store = GraphStore(path)
        edges = trace_edges(store)
        chunks = sum(1 for _ in store.quads(None, vocab.RDF.type, vocab.TG.Chunk, vocab.source_graph("default")))
        pairs = [(edge.subject, edge.object) for edge in edges]
        rows = [("source chains (baseline)", timed(args.runs, lambda: source_chains_many(store, edges, "default"))),
                ("mentions, sample as it is", timed(args.runs, lambda: mention_chains_many(store, edges, "default")))]
        added = add_mentions(store)
        rows.append((f"mentions, {added} mentions added",
                     timed(args.runs, lambda: mention_chains_many(store, edges, "default"))))
        uncapped = render_values(UNCAPPED, {("s", "o"): pairs})
        rows.append(("uncapped lookups, same mentions", timed(max(args.runs // 5, 1), lambda: list(
            store.raw.query(uncapped, default_graph=vocab.source_graph("default"))))))
    print(f"{len(edges)} edges, {chunks} chunks in the sample; median of {args.runs} runs")
    baseline = rows[0][1]
    width = max(len(name) for name, _ in rows)
    print(f"{'query':<{width}} | {'ms':>8} | ratio")
    for name, ms in rows:
        print(f"{name:<{width}} | {ms:8.2f} | {ms / baseline:6.2f}")


if __name__ == "__main__":
    main()
