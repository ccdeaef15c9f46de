"""The source viewer: a document, page or chunk with its text, where it sits (document › page › chunk), the
span that supports a fact (or a cited sentence of a document RAG answer) highlighted, and the previous and next
chunk; and a passage with its span as JSON for the graph view's panel."""
from __future__ import annotations

import re

from flask import Blueprint, Response, jsonify, render_template, request
from pyoxigraph import Literal, NamedNode, RdfFormat, Triple, parse

from server.errors import BadRequest, NotFound
from server.explain.passages import fact_span
from server.http.context import current_store
from server.http.params import iri_parameter
from server.labels import store_labels, term_name
from server.store import GraphStore, graph_options
from server.vocab import SOURCE_KINDS

blueprint = Blueprint("sources", __name__)
MAX_EDGE = 8192  # characters of the edge parameter
MAX_DIGITS = 12  # of the offset and length parameters


def _edge_parameter() -> Triple | None:
    """The optional ``edge`` parameter, a triple term in N-Triples (``<<( <s> <p> <o> )>>``); 400 if it is not."""
    raw = request.args.get("edge")
    if not raw:
        return None
    if len(raw) > MAX_EDGE:
        raise BadRequest(f"'edge' is longer than {MAX_EDGE} characters")
    inner = raw.strip().removeprefix("<<(").removesuffix(")>>").strip()
    try:
        quads = list(parse(input=(inner + " .").encode(), format=RdfFormat.N_TRIPLES))
    except (SyntaxError, ValueError) as error:
        raise BadRequest(f"'edge' is not a triple term <<( s p o )>>: {error}") from None
    if len(quads) != 1:
        raise BadRequest("'edge' must be one triple term <<( s p o )>>")
    return quads[0].triple


def _span_parameters() -> tuple[int, int] | None:
    """The optional ``offset`` and ``length`` of a span in the chunk's text (a cited sentence); 400 unless both
    are given as non-negative integers."""
    raw = {name: request.args.get(name) for name in ("offset", "length")}
    if all(value is None for value in raw.values()):
        return None
    for name, value in raw.items():
        if value is None:
            raise BadRequest("'offset' and 'length' go together: the span of a sentence in the chunk's text")
        if not (value.isascii() and value.isdigit() and len(value) <= MAX_DIGITS):  # int("²") fails
            raise BadRequest(f"'{name}' must be a non-negative integer, got {value[:MAX_DIGITS]!r}")
    return int(raw["offset"]), int(raw["length"])


def _cited_span(store: GraphStore, node: dict, span: tuple[int, int]) -> tuple[int, int]:
    """``span`` (offset, length) as (start, end) in the chunk's text; 400 unless ``node`` is a chunk whose text
    holds it."""
    if node["type"] != "Chunk":
        raise BadRequest(f"'offset' and 'length' mark a span in a chunk's text; <{node['iri']}> is a "
                         f"{(node['type'] or 'node').lower()}")
    text = store.librarian_text(NamedNode(node["iri"]))
    if text is None:
        raise NotFound(f"no text for <{node['iri']}>")
    offset, length = span
    if length < 1 or offset + length > len(text):
        raise BadRequest(f"the span of {length} characters at offset {offset} is not inside the chunk's text "
                         f"({len(text)} characters)")
    return offset, offset + length


def _node(store: GraphStore, iri: NamedNode) -> dict:
    rows = store.select("console_source_node", values={"node": [iri]}, **graph_options(None))
    if not rows:
        raise NotFound(f"<{iri.value}> is not a document, page or chunk")
    info: dict = {"iri": iri.value, "type": None, "label": None, "title": None, "offset": None, "length": None,
                  "parent": None}
    for row in rows:
        info["type"] = info["type"] or SOURCE_KINDS.get(row["type"])
        for key in ("label", "title", "offset", "length"):
            if key in row and info[key] is None:
                info[key] = int(row[key].value) if key in ("offset", "length") and row[key].value.isdigit() \
                    else row[key].value
        if "parent" in row and info["parent"] is None and isinstance(row["parent"], NamedNode):
            info["parent"] = row["parent"]
    return info


def _order(row: dict) -> tuple[int, str]:
    """A child's place: its recorded index, else the last number in its IRI (``.../p4/c3``)."""
    if "index" in row and row["index"].value.isdigit():
        return int(row["index"].value), row["child"].value
    numbers = re.findall(r"\d+", row["child"].value.rsplit("/", 1)[-1])
    return (int(numbers[-1]) if numbers else 1 << 62), row["child"].value


def _children(store: GraphStore, parent: NamedNode) -> list[dict]:
    rows = store.select("console_source_children", values={"parent": [parent]}, **graph_options(None))
    unique = {row["child"]: row for row in sorted(rows, key=_order)}
    return [{"iri": child.value, "label": _value(row.get("label")) or child.value, "title": _value(row.get("title"))}
            for child, row in unique.items()]


def _value(term: Literal | None) -> str | None:
    return None if term is None else term.value


def _fact_labels(store: GraphStore, edge: Triple | None) -> list[str]:
    """What to look for in the passage: the object's name, then the subject's."""
    if edge is None:
        return []
    labels = store_labels(store, [edge.object, edge.subject])
    return [term_name(term, labels.get(term)) for term in (edge.object, edge.subject)]


def _highlight(store: GraphStore, node: dict, edge: Triple | None) -> tuple[str, tuple[int, int] | None, str]:
    """The text to show, the span to highlight and what the span is: a chunk inside its page's text by its
    recorded offsets (ingested documents), else the fact's field in the chunk's own text."""
    own = store.librarian_text(NamedNode(node["iri"])) or ""
    if node["type"] == "Chunk" and edge is None and node["offset"] is not None and node["length"] is not None \
            and node["parent"] is not None:
        page = store.librarian_text(node["parent"])
        if page is not None and node["offset"] + node["length"] <= len(page):
            return page, (node["offset"], node["offset"] + node["length"]), "the chunk in its page"
    span = fact_span(own, _fact_labels(store, edge))
    return own, span, "the fact"


def _segments(text: str, span: tuple[int, int] | None,
              cited: tuple[int, int] | None) -> list[tuple[str, str | None]]:
    """``text`` cut into ``(piece, mark)``: ``mark`` is "span" for the highlighted span, None elsewhere; with a
    ``cited`` sentence (start, end in the chunk's text, ``span`` being the chunk's place in ``text`` or None when
    ``text`` is the chunk's), the sentence is the "span" and the rest of its chunk "chunk"."""
    if cited is None:
        marks = [(0, None), (span[0], "span"), (span[1], None)] if span else [(0, None)]
    else:
        start, end = span or (0, len(text))
        marks = [(0, None), (start, "chunk"), (start + cited[0], "span"), (start + cited[1], "chunk"), (end, None)]
    ends = [at for at, _ in marks[1:]] + [len(text)]
    return [(text[at:stop], mark) for (at, mark), stop in zip(marks, ends, strict=True) if stop > at]


@blueprint.get("/console/source")
def source() -> str:
    """The source viewer page of a document, page or chunk (``id``); ``edge`` highlights that fact, ``offset`` and
    ``length`` a sentence of the chunk's text (a cited span)."""
    store = current_store()
    iri = iri_parameter("id")
    edge = _edge_parameter()
    sentence = _span_parameters()
    if edge is not None and sentence is not None:
        raise BadRequest("give either 'edge' (a fact) or 'offset' and 'length' (a sentence), not both")
    node = _node(store, iri)
    cited = _cited_span(store, node, sentence) if sentence is not None else None
    crumbs = [node]
    while crumbs[0]["parent"] is not None and len(crumbs) < 4:
        crumbs.insert(0, _node(store, crumbs[0]["parent"]))
    text, span, what = _highlight(store, node, edge)
    siblings = _children(store, node["parent"]) if node["type"] == "Chunk" and node["parent"] is not None else []
    at = next((i for i, s in enumerate(siblings) if s["iri"] == node["iri"]), None)
    previous = siblings[at - 1] if at else None
    following = siblings[at + 1] if at is not None and at + 1 < len(siblings) else None
    children = _children(store, iri) if node["type"] in ("Document", "Page") else []
    if cited is not None:
        what = "the cited sentence"
    return render_template("source.html", node=node, crumbs=crumbs, segments=_segments(text, span, cited),
                           highlighted=what if span or cited else None, cited=cited is not None,
                           edge=request.args.get("edge") if edge else None, previous=previous, following=following,
                           children=children)


@blueprint.get("/console/source/passage")
def passage() -> Response:
    """``{"text", "span"}``: a chunk's text and the span of the fact ``edge`` in it (null when not found)."""
    store = current_store()
    iri = iri_parameter("id")
    text = store.librarian_text(iri)
    if text is None:
        raise NotFound(f"no text for <{iri.value}>")
    span = fact_span(text, _fact_labels(store, _edge_parameter()))
    return jsonify(text=text, span=list(span) if span else None)
