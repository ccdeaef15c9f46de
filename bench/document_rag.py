"""Document RAG, offline: passage recall and extractive answers over the 20 Factbook Background texts
(``bench/document_rag_backgrounds.tsv``) and a three-page PDF, asked the 60 questions of
``bench/document_rag_questions.tsv`` (written from the texts, each with its verbatim evidence and answer,
before the bench first ran); then the search's p50 as the index grows (synthetic chunks), as a ratio to
the 1k-chunk time in the same run.

A question's gold passage is the chunk holding its evidence. Printed: recall@1 and @5 of the lexical
ranking alone, the semantic ranking alone and the fused one; the share of extractive answers that
contain the gold answer; the off-topic questions of ``bench/factbook_questions.tsv`` answered "no answer".

    python -m bench.document_rag [--sizes 1000,10000,100000]
"""
from __future__ import annotations

import argparse
import csv
import random
import statistics
import tempfile
import time
from pathlib import Path

from fpdf import FPDF

from server.ingest.documents import Ingester
from server.rag.document_rag import DocumentRag
from server.rag.label_index import LabelIndex
from server.rag.offline import OfflineLLM
from server.rag.passage_embedders import LocalEmbedder
from server.rag.passage_index import PassageIndex, PassageRow
from server.store import GraphStore

HERE = Path(__file__).parent
PDF_PAGES = ["Portugal borders Spain. Lisbon is the capital of Portugal.",
             "Spain borders France and Portugal. Madrid is the capital of Spain.",
             "Andorra lies between France and Spain."]  # the ingest tests' PDF


def _tsv(name: str) -> list[dict]:
    with open(HERE / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def _pdf() -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in PDF_PAGES:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def _recall(ranked: list[str], gold: str, k: int) -> float:
    return 1.0 if gold in ranked[:k] else 0.0


def quality(store: GraphStore, index: PassageIndex) -> None:
    ingester = Ingester(store, LabelIndex(store), None, index)
    for row in _tsv("document_rag_backgrounds.tsv"):
        ingester.ingest(row["text"].encode(), "backgrounds", name=f"{row['code']}.txt", declared="text/plain")
    ingester.ingest(_pdf(), "backgrounds", name="iberia.pdf")
    texts = {chunk: text for chunk, text in index._rows(  # noqa: SLF001 - the bench reads the index's own table
        "SELECT chunk, text FROM passage WHERE collection = ?", ("backgrounds",))}
    rag = DocumentRag(store, index, OfflineLLM(), sinks=None)  # never explainable here
    questions = _tsv("document_rag_questions.tsv")
    scores = {name: {1: [], 5: []} for name in ("lexical", "semantic", "fused")}
    hits = []
    for q in questions:
        gold = next(chunk for chunk, text in texts.items() if q["evidence"] in text)
        found = index.search("backgrounds", q["question"], 50)
        rankings = {"fused": [p.chunk for p in found],
                    "lexical": [p.chunk for p in sorted(found, key=lambda p: p.lexical_rank or 999)
                                if p.lexical_rank],
                    "semantic": [p.chunk for p in sorted(found, key=lambda p: p.semantic_rank or 999)
                                 if p.semantic_rank]}
        for name, ranked in rankings.items():
            for k in (1, 5):
                scores[name][k].append(_recall(ranked, gold, k))
        answer = "".join(m.response for m in rag.run(q["question"], "backgrounds", explainable=False))
        hits.append(q["answer"].casefold() in answer.casefold())
    lines = (HERE / "factbook_questions.tsv").read_text(encoding="utf-8").splitlines()
    off_topic = [line.split("\t")[1] for line in lines if line.startswith("off-topic\t")]
    refused = sum(next(m.outcome for m in rag.run(q, "backgrounds", explainable=False) if m.end_of_session)
                  == "no-answer" for q in off_topic)
    print(f"{len(questions)} questions, {len(texts)} chunks (20 Background texts and a 3-page PDF)\n")
    print(f"{'ranking':<10} {'recall@1':>9} {'recall@5':>9}")
    for name, by_k in scores.items():
        print(f"{name:<10} {statistics.mean(by_k[1]):>9.3f} {statistics.mean(by_k[5]):>9.3f}")
    print(f"\nextractive answers holding the gold answer: {sum(hits)}/{len(hits)} = {sum(hits) / len(hits):.3f}")
    print(f"off-topic questions answered 'no answer': {refused}/{len(off_topic)}\n")


def growth(sizes: list[int], base: Path) -> None:
    """Search p50 over the 60 questions against ``size`` synthetic chunks (words of the Background texts,
    shuffled into 60-word passages)."""
    words = " ".join(row["text"] for row in _tsv("document_rag_backgrounds.tsv")).split()
    questions = [q["question"] for q in _tsv("document_rag_questions.tsv")]
    rng = random.Random(7)
    embedder = LocalEmbedder()
    rows_out = []
    for size in sizes:
        store = GraphStore(None)
        index = PassageIndex(store, embedder, str(base / f"synthetic-{size}.sqlite"))
        rows = [PassageRow(f"urn:x:c{i}", f"urn:x:d{i // 10}", "", " ".join(rng.choices(words, k=60)))
                for i in range(size)]
        started = time.perf_counter()
        for start in range(0, size, 5000):
            batch = rows[start:start + 5000]
            index.add("synthetic", batch, index.embed_rows(batch))
        built = time.perf_counter() - started
        index._synced["synthetic"] = index._version("synthetic")  # noqa: SLF001 - no store to list: held as synced
        index._load_matrix("synthetic")  # noqa: SLF001
        times = []
        for question in questions * 2:
            started = time.perf_counter()
            index.search("synthetic", question, 5)
            times.append(time.perf_counter() - started)
        rows_out.append((size, built, statistics.median(times[len(questions):]) * 1000))
    first = rows_out[0][2]
    print(f"{'chunks':>8} {'index s':>8} {'search p50 ms':>14} {'x 1k':>6}")
    for size, built, p50 in rows_out:
        print(f"{size:>8} {built:>8.1f} {p50:>14.1f} {p50 / first:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = GraphStore(Path(tmp) / "store")
        quality(store, PassageIndex(store, LocalEmbedder(), str(Path(tmp) / "passages.sqlite")))
        growth([int(n) for n in args.sizes.split(",")], Path(tmp))


if __name__ == "__main__":
    main()
