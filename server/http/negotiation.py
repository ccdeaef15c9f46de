"""Content negotiation in one place: Accept parsing (q-values, wildcards) and the format tables."""
from __future__ import annotations

from collections.abc import Sequence

from pyoxigraph import RdfFormat

# SELECT / ASK: canonical media type first; aliases map to the same serializer name.
RESULTS_MEDIA: dict[str, str] = {
    "application/sparql-results+json": "json",
    "application/sparql-results+xml": "xml",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/json": "json",
    "application/xml": "xml",
    "text/xml": "xml",
}
RESULTS_CONTENT_TYPE = {"json": "application/sparql-results+json", "xml": "application/sparql-results+xml",
                        "csv": "text/csv; charset=utf-8", "tsv": "text/tab-separated-values; charset=utf-8"}

# CONSTRUCT / DESCRIBE / graph store / linked data: default first.
GRAPH_MEDIA: dict[str, RdfFormat] = {
    "text/turtle": RdfFormat.TURTLE,
    "application/n-triples": RdfFormat.N_TRIPLES,
    "application/n-quads": RdfFormat.N_QUADS,
    "application/trig": RdfFormat.TRIG,
    "application/rdf+xml": RdfFormat.RDF_XML,
    "application/ld+json": RdfFormat.JSON_LD,
    "text/plain": RdfFormat.N_TRIPLES,
    "application/x-turtle": RdfFormat.TURTLE,
    "application/xml": RdfFormat.RDF_XML,
}
# Formats that can carry named graphs (for whole-dataset answers such as /resource).
DATASET_MEDIA: dict[str, RdfFormat] = {m: f for m, f in GRAPH_MEDIA.items() if f.supports_datasets}


def parse_accept(header: str | None) -> list[tuple[str, float]]:
    """``[(media range, q)]`` of an Accept header; malformed q-values count as 0 (not acceptable)."""
    ranges = []
    for part in (header or "").split(","):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        if not media:
            continue
        if "/" not in media:
            media = "*/*" if media == "*" else media + "/*"
        q = 1.0
        for param in pieces[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = min(max(float(value.strip()), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        ranges.append((media, q))
    return ranges


def _quality(ranges: list[tuple[str, float]], offer: str) -> float:
    """q of the most specific range matching ``offer`` (RFC 9110 section 12.5.1), -1 if none."""
    kind = offer.split("/")[0]
    best_specificity, q = -1, -1.0
    for media, quality in ranges:
        if media == offer:
            specificity = 2
        elif media == kind + "/*":
            specificity = 1
        elif media == "*/*":
            specificity = 0
        else:
            continue
        if specificity > best_specificity:
            best_specificity, q = specificity, quality
    return q


def negotiate(accept: str | None, offers: Sequence[str]) -> str | None:
    """The offer the client prefers (server order breaks ties); the first offer without Accept; None: 406."""
    ranges = parse_accept(accept)
    if not ranges:
        return offers[0] if offers else None
    best, best_q = None, 0.0
    for offer in offers:
        q = _quality(ranges, offer)
        if q > best_q:
            best, best_q = offer, q
    return best


def prefers(accept: str | None, media: str, others: Sequence[str]) -> bool:
    """Whether ``media`` is acceptable and ranks strictly above every one of ``others``."""
    ranges = parse_accept(accept)
    mine = _quality(ranges, media)
    return mine > 0 and all(mine > _quality(ranges, other) for other in others)
