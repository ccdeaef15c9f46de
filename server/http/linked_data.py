"""Linked-data answers shared by the blueprints: one URL answers HTML or RDF by content negotiation,
``?format=`` chooses where a browser cannot set Accept (download links), and every such answer
carries ``Link`` headers to its alternates (``Vary: Accept`` is added app-wide for GET and HEAD).

``?format=`` takes a short name (``ttl``, ``trig``, ``nt``, ``nq``, ``jsonld``, ``rdf``, ``html``;
``json``, ``xml``, ``csv``, ``tsv`` for query results) or a media type, and wins over Accept. The names
SPARQLWrapper sends, in ``format=``, ``output=`` and ``results=`` alike, as Virtuoso and Fuseki read them
(``turtle``, ``n3``, ``json-ld``, ``rdf+xml``), are taken too; its ``json`` and ``xml`` mean query results or a
graph by what the query answers.
"""
from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from flask import Response, make_response, request
from flask.typing import ResponseReturnValue
from pyoxigraph import Quad, RdfFormat, Triple

from server.errors import BadRequest, LimitExceeded, NotFound
from server.http.negotiation import GRAPH_MEDIA, negotiate
from server.http.rdf_output import has_triple_term, rdf_answer

HTML = "text/html"
FORMAT_NAMES: dict[str, str] = {
    "html": HTML,
    "ttl": "text/turtle",
    "trig": "application/trig",
    "nt": "application/n-triples",
    "nq": "application/n-quads",
    "jsonld": "application/ld+json",
    "rdf": "application/rdf+xml",
    "json": "application/sparql-results+json",
    "xml": "application/sparql-results+xml",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
}
_NAME_OF = {media: name for name, media in FORMAT_NAMES.items()}
# Other clients' names, each as an Accept value (SPARQLWrapper's, as Virtuoso and Fuseki read them)
FORMAT_ALIASES: dict[str, str] = {
    "turtle": "text/turtle",
    "n3": "text/turtle",  # Turtle is N3's subset that RDF needs
    "ntriples": "application/n-triples",
    "json-ld": "application/ld+json",
    "rdf+xml": "application/rdf+xml",
    "json": "application/sparql-results+json, application/ld+json",
    "xml": "application/sparql-results+xml, application/rdf+xml",
}
FORMAT_PARAMETERS = ("format", "output", "results")  # read in this order
# What a resource or a trace is offered as: Turtle first (what a client that takes several formats
# alike, as rdflib does, gets: a dataset format would hide named graphs' triples from a graph reader).
LINKED_DATA_MEDIA: dict[str, RdfFormat] = {"text/turtle": RdfFormat.TURTLE, "application/trig": RdfFormat.TRIG,
                                            **GRAPH_MEDIA}


def requested_accept() -> str | None:
    """What ``?format=`` (or ``output=``, ``results=``) names, as an Accept value (400 if it names nothing),
    else the request's Accept header."""
    parameter = next((name for name in FORMAT_PARAMETERS if name in request.args), None)
    if parameter is None:
        return request.headers.get("Accept")
    chosen = request.args[parameter].lower()
    media = FORMAT_ALIASES.get(chosen) or FORMAT_NAMES.get(chosen) or (chosen if "/" in chosen else None)
    if media is None:
        raise BadRequest(f"{parameter}={request.args[parameter]!r} is not a format; use one of "
                         f"{', '.join(dict.fromkeys([*FORMAT_NAMES, *FORMAT_ALIASES]))} or a media type")
    return media


def wants_html(accept: str | None, rdf_media: dict[str, RdfFormat], html_by_default: bool) -> bool:
    """Whether to answer HTML: ``html_by_default`` unless the client ranks an RDF format above HTML
    (or, for a machine-first URL, HTML above every RDF format)."""
    if html_by_default:
        return negotiate(accept, [HTML, *rdf_media]) in (HTML, None)
    return negotiate(accept, [*rdf_media, HTML]) == HTML


def alternates_link(media: list[str], html: bool) -> str:
    """A ``Link`` header value: this URL in each of ``media`` (and as HTML), with ``?format=``."""
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "format"]
    offers = ([HTML] if html else []) + [m for m in dict.fromkeys(media) if m in _NAME_OF]
    return ", ".join(f'<{request.path}?{urlencode([*args, ("format", _NAME_OF[m])])}>; rel="alternate"; type="{m}"'
                     for m in offers)


def rdf_offers(items: list[Triple | Quad], media: dict[str, RdfFormat] = LINKED_DATA_MEDIA) -> list[str]:
    """The media types ``items`` can be written as: every one of ``media`` but JSON-LD when they
    hold a triple term (see rdf_output), one media type per format."""
    nested = any(has_triple_term(item) for item in items)
    seen: dict[RdfFormat, str] = {}
    for name, fmt in media.items():
        if not (nested and fmt == RdfFormat.JSON_LD):
            seen.setdefault(fmt, name)
    return list(seen.values())


def linked_data_response(items: list[Triple | Quad], html: Callable[[], ResponseReturnValue], missing: str,
                         html_by_default: bool = True, limit: int | None = None,
                         media: dict[str, RdfFormat] = LINKED_DATA_MEDIA) -> Response:
    """HTML (``html()``) or ``items`` as RDF, as the request asks, with Link headers to every
    alternate the data allows. As RDF, no items is 404 (``missing``) and more than ``limit`` is 422."""
    accept = requested_accept()
    link = alternates_link(rdf_offers(items, media), html=True)
    if wants_html(accept, media, html_by_default):
        response = make_response(html())
    else:
        if not items:
            raise NotFound(missing)
        if limit is not None and len(items) > limit:
            raise LimitExceeded(f"more than {limit} triples (GLASSGRAPH_MAX_ROWS); read them with /sparql and "
                                "LIMIT/OFFSET")
        answer = rdf_answer(items, accept, media)
        response = Response(answer.body, content_type=answer.content_type)
    response.headers["Link"] = link
    return response
