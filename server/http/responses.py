"""Response helpers shared by the blueprints (which never import one another)."""
from __future__ import annotations

from flask import Response
from pyoxigraph import Quad, RdfFormat, Triple

from server import vocab
from server.http.negotiation import GRAPH_MEDIA
from server.http.rdf_output import Answer, rdf_answer


def answer_response(answer: Answer) -> Response:
    return Response(answer.body, content_type=answer.content_type)


def rdf_response(items: list[Triple | Quad], accept: str | None, media: dict[str, RdfFormat] = GRAPH_MEDIA) -> Response:
    """``items`` as RDF in the format ``accept`` prefers (see ``rdf_output``), Turtle and TriG with Glassgraph's
    prefixes (``tg:``, ``prov:``, ...): a trace is read by people too."""
    return answer_response(rdf_answer(items, accept, media, vocab.PREFIXES))
