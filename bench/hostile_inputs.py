"""The attacker's inputs of issues 22 and 21 at doubling sizes: the source viewer's highlight, multipart
parsing, ingest's splitting and the console's neighbourhood of a hub, each timed (best of five) with its ratio
to the input of half the size. Linear work doubles (ratio about 2, at most about 2.5); work refused or cut at a
limit stays flat (ratio about 1). The code they replace took the text times the label's words (the highlight),
time and memory quadratic in a header (the email parser), all of a document's chunks or sections before
counting them, and every edge of a hub sorted before the console's 60 were taken.

    .venv/bin/python -m bench.hostile_inputs          # about a minute
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

from pyoxigraph import NamedNode, Quad

from server import vocab
from server.errors import GlassgraphError
from server.explain.passages import fact_span
from server.http.multipart import form_parts
from server.ingest.documents import IngestOptions, chunk_spans
from server.ingest.formats import read_document
from server.store import GraphStore, graph_options

BOUNDARY = "b0undary"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"
RUNS = 5  # the best of them is reported: the machine is shared


def best_of_runs(work: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        try:
            work()
        except GlassgraphError:  # a refusal at a limit is the answer measured
            pass
        times.append(time.perf_counter() - started)
    return min(times)


def multipart_body(head: bytes, data: bytes, parts: int = 1) -> bytes:
    part = b"--" + BOUNDARY.encode() + b"\r\n" + head + b"\r\n\r\n" + data + b"\r\n"
    return part * parts + b"--" + BOUNDARY.encode() + b"--\r\n"


Case = tuple[str, str, Callable[[int], object], Callable[[object], object], tuple[int, ...]]


def cases() -> list[Case]:
    """(name, unit, make the input of a size, the work on it, sizes doubling)."""
    table = ("0 " * 50 + "\n") * 10_000
    rfc2047 = b"=?utf-8?q?a?= "
    turtle_head = b'Content-Disposition: form-data; name="f"\r\nContent-Type: text/turtle'
    return [
        ("highlight: lines of '0 ', label 1,000 zeros + X", "chars of text",
         lambda n: table[:n], lambda text: fact_span(text, [" ".join(["0"] * 1_000 + ["X"])]),
         (125_000, 250_000, 500_000, 1_000_000)),
        ("highlight: 1 MB of '0 ' lines, label of n zeros + X", "words of label",
         lambda n: " ".join(["0"] * n + ["X"]), lambda label: fact_span(table, [label]), (500, 1_000, 2_000, 4_000)),
        ("highlight: prose, a label that is not there", "chars of text",
         lambda n: "The capital of France is Paris, on the Seine. " * (n // 46),
         lambda text: fact_span(text, ["Lisbon on the Tagus"]), (125_000, 250_000, 500_000, 1_000_000)),
        ("multipart: file name of RFC 2047 words (refused past 4 KB)", "bytes of header",
         lambda n: multipart_body(b'Content-Disposition: form-data; name="f"; filename="'
                                  + rfc2047 * (n // len(rfc2047)) + b'"', b"x"),
         lambda body: form_parts(CONTENT_TYPE, body), (34_000, 68_000, 136_000, 273_000)),
        ("multipart: one part of CRLF-dash lines", "bytes of body",
         lambda n: multipart_body(turtle_head, b"\r\n--b0und" * (n // 9)),
         lambda body: form_parts(CONTENT_TYPE, body), (1_000_000, 2_000_000, 4_000_000, 8_000_000)),
        ("multipart: parts of 4 KB headers", "parts",
         lambda n: multipart_body(b'Content-Disposition: form-data; name="f"; filename="' + rfc2047 * 280 + b'"',
                                  b"x", n),
         lambda body: form_parts(CONTENT_TYPE, body), (32, 64, 128, 256)),
        ("ingest: text at chunk size 1 (refused at 20,000 chunks)", "bytes of text",
         lambda n: read_document(b"abc def. " * (n // 9), "text/plain"),
         lambda document: chunk_spans(document, IngestOptions(chunk_size=1, chunk_overlap=0)),
         (1_250_000, 2_500_000, 5_000_000, 10_000_000)),
        ("ingest: text at chunk size 2000", "bytes of text",
         lambda n: read_document(b"Lisbon lies on the Tagus. " * (n // 26), "text/plain"),
         lambda document: chunk_spans(document, IngestOptions()), (2_500_000, 5_000_000, 10_000_000, 20_000_000)),
        ("ingest: Markdown headings (refused at 10,000 pages)", "headings",
         lambda n: b"# a\n" * n, lambda data: read_document(data, "text/markdown"),
         (312_500, 625_000, 1_250_000, 2_500_000)),
        ("console neighbourhood of a class (anonymous GET)", "typed resources",
         hub_store, lambda store: store.select("console_neighbourhood", values={"iri": [HUB]},
                                               **graph_options(None)),
         (16_000, 32_000, 64_000, 128_000)),
    ]


HUB = NamedNode("https://example.org/Class")


def hub_store(n: int) -> GraphStore:
    """An in-memory store where ``n`` resources have the type ``HUB``."""
    store = GraphStore()
    store.extend([Quad(NamedNode(f"https://example.org/r{i}"), vocab.RDF.type, HUB, vocab.collection_graph("default"))
                  for i in range(n)])
    return store


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; best of {RUNS} runs each")
    print(f"{'case':<58} {'size':>12} {'unit':<15} {'seconds':>9} {'ratio':>7}")
    for name, unit, make, work, sizes in cases():
        times: list[float] = []
        for size in sizes:
            made = make(size)
            times.append(best_of_runs(lambda made=made, work=work: work(made)))
            ratio = f"{times[-1] / times[-2]:.2f}" if len(times) > 1 else "-"
            print(f"{name:<58} {size:>12,} {unit:<15} {times[-1]:>9.4f} {ratio:>7}")
        per_doubling = (times[-1] / times[0]) ** (1 / (len(times) - 1))  # steadier than one ratio on a busy machine
        print(f"{'':<58} {'':>12} {'per doubling, first to last':<35} {per_doubling:>7.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
