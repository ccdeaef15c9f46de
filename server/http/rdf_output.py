"""RDF answers: the negotiated format, the bytes and the content type (no Flask: query workers use it).

One rule for every RDF answer (query results, the Graph Store, traces, resources): JSON-LD cannot
carry RDF 1.2 triple terms, so when the data holds one, JSON-LD steps aside and the client gets
its next acceptable format, or 406 if JSON-LD was the only one.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyoxigraph import Quad, RdfFormat, Triple, serialize

from server.errors import NotAcceptable
from server.http.negotiation import GRAPH_MEDIA, negotiate

PREFIXED = (RdfFormat.TURTLE, RdfFormat.TRIG)  # the formats an answer writes with the query's prefixes


@dataclass(frozen=True)
class Answer:
    content_type: str
    body: bytes


def not_acceptable(offers: list[str]) -> NotAcceptable:
    return NotAcceptable("none of the requested media types can be produced here; available: " + ", ".join(offers))


def choose_format(accept: str | None, has_triple_terms: bool, media: dict[str, RdfFormat] = GRAPH_MEDIA) -> RdfFormat:
    """The format of ``media`` that ``accept`` prefers, JSON-LD left out for data with triple terms."""
    offers = [m for m in media if not (has_triple_terms and media[m] == RdfFormat.JSON_LD)]
    chosen = negotiate(accept, offers)
    if chosen is not None:
        return media[chosen]
    if negotiate(accept, list(media)) is not None:  # acceptable only as the JSON-LD taken out
        raise NotAcceptable("JSON-LD cannot carry the RDF 1.2 triple terms in this data; accept Turtle, TriG, "
                            "N-Triples, N-Quads or RDF/XML")
    raise not_acceptable(offers)


def has_triple_term(item: Triple | Quad) -> bool:
    return isinstance(item.subject, Triple) or isinstance(item.object, Triple)


def rdf_answer(items: list[Triple | Quad], accept: str | None, media: dict[str, RdfFormat] = GRAPH_MEDIA,
               prefixes: dict[str, str] | None = None) -> Answer:
    """Triples or quads in the negotiated format (quads lose their graph in a triples format), written with
    ``prefixes`` in Turtle and TriG."""
    fmt = choose_format(accept, any(has_triple_term(item) for item in items), media)
    if not fmt.supports_datasets:
        items = [item.triple if isinstance(item, Quad) else item for item in items]
    try:
        body = serialize(items, format=fmt, prefixes=(prefixes or None) if fmt in PREFIXED else None)
    except (OSError, ValueError) as error:
        raise NotAcceptable(f"this data cannot be written as {fmt.name}: {error}") from None
    return Answer(rdf_content_type(fmt), body)


def rdf_content_type(fmt: RdfFormat) -> str:
    media = fmt.media_type
    return media + "; charset=utf-8" if media.startswith("text/") or media in (
        "application/n-triples", "application/n-quads", "application/trig") else media
