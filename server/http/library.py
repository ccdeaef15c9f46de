"""The library's processing records (TrustGraph's ``add-processing``, ``list-processing``, ``remove-processing``).

TrustGraph's librarian keeps a document's bytes apart from its collections and loads them into a collection
when a processing record names it. Glassgraph ingests a document when it is added, into the collection it
is added to; a processing record asks for the same document in its ``collection``: nothing new when the
collection holds it (the same document, the same original bytes, or their ingest on the way), otherwise its
text (the librarian's, pages joined) is ingested there as ``text/plain`` under its title. Records are kept
in the librarian graph (``urn:trustgraph:processing:{id}``, ``sparql/library_*.r[qu]``): a restart loses none.

``GET /api/library/processing`` lists them, ``POST`` adds one (``{"id", "document", "collection", "flow",
"tags"}``; ``flow`` is ``default`` unless given), ``DELETE ?id=`` removes one (the record only, as TrustGraph's
does: not what its ingest wrote).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from flask import Blueprint, Response, jsonify, request
from pyoxigraph import Literal, NamedNode

from server import vocab
from server.errors import BadRequest, NotFound
from server.http.api import json_body
from server.http.context import current_store, require_write_access
from server.http.documents import checked_collection, queued_job, status_url, submitted
from server.ingest.catalog import holds_document
from server.ingest.documents import IngestOptions
from server.store_base import StoreBackend

blueprint = Blueprint("library", __name__)
PATH = "/api/library/processing"
_FIELDS = ("id", "document", "collection", "flow", "tags")


@blueprint.route(PATH, methods=["GET"])
def processing() -> Response:
    """Every record, oldest first: ``{"processing": [{"id", "document", "collection", "flow", "time" (seconds
    since the epoch), "tags"}]}``."""
    records: dict[str, dict] = {}
    for row in current_store().select("library_processing"):
        record = records.setdefault(row["processing"].value, {
            "id": row["id"].value, "document": row["document"].value, "collection": row["collection"].value,
            "flow": row["flow"].value, "tags": [],
            "time": int(dt.datetime.fromisoformat(row["time"].value).timestamp())})
        if "tag" in row:
            record["tags"].append(row["tag"].value)
    return jsonify(processing=list(records.values()))


@blueprint.route(PATH, methods=["POST"])
def add_processing() -> Response:
    """A record, and the document ingested into its collection unless it is there: the ingest's answer
    (``status`` ``unchanged`` when nothing new was ingested)."""
    require_write_access()
    body = json_body()
    if not isinstance(body, dict) or set(body) - set(_FIELDS):
        raise BadRequest(f"the body must be a JSON object of {', '.join(_FIELDS)}")
    processing_id, collection, flow = (_text({"flow": "default", **body}, key) for key in ("id", "collection", "flow"))
    tags = body.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise BadRequest("'tags' must be a list of strings")
    for tag in tags:
        _text({"tag": tag}, "tag")
    try:
        doc = NamedNode(_text(body, "document"))
    except ValueError as error:
        raise BadRequest(f"'document' is not an IRI: {error}") from None
    checked_collection(collection, must_exist=False)
    store = current_store()
    record = vocab.processing_iri(processing_id)
    if _exists(store, record):
        raise BadRequest(f"processing {processing_id!r} exists: remove it first")
    answer = _ingested(store, doc, collection)
    with store.writing():
        if _exists(store, record):
            raise BadRequest(f"processing {processing_id!r} exists: remove it first")
        store.extend(vocab.entity_quads(vocab.LIBRARIAN_GRAPH, record, [
            (vocab.RDF.type, vocab.PROV.Activity), (vocab.RDF.type, vocab.TG.Processing),
            (vocab.RDFS.label, Literal(processing_id)), (vocab.PROV.used, doc),
            (vocab.TG.collection, Literal(collection)), (vocab.TG.flow, Literal(flow)),
            (vocab.PROV.startedAtTime, vocab.now_literal()), *((vocab.TG.tag, Literal(tag)) for tag in tags)]))
    return answer


@blueprint.route(PATH, methods=["DELETE"])
def remove_processing() -> Response:
    require_write_access()
    processing_id = _text(request.args, "id")
    store = current_store()
    record = vocab.processing_iri(processing_id)
    with store.writing():
        if not _exists(store, record):
            raise NotFound(f"no processing {processing_id!r}")
        store.update("library_remove_processing", {"processing": [record]})
    return jsonify(removed=processing_id)


def _text(fields: Mapping, key: str) -> str:
    value = fields.get(key)
    if not isinstance(value, str) or not value or any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise BadRequest(f"{key!r} must be a non-empty string of text")
    return value


def _exists(store: StoreBackend, record: NamedNode) -> bool:
    return next(store.quads(record, vocab.RDF.type, vocab.TG.Processing, vocab.LIBRARIAN_GRAPH), None) is not None


def _ingested(store: StoreBackend, doc: NamedNode, collection: str) -> Response:
    """``doc`` in ``collection``: 200 ``unchanged`` when it is there or on its way, else its text submitted."""
    doc_id = doc.value.removeprefix(vocab.URN + "doc:")
    if holds_document(store, collection, doc) or queued_job(collection, doc_id) is not None:
        return jsonify(id=doc_id, status="unchanged", url=status_url(collection, doc_id))
    found = _library_document(store, doc)
    text = store.librarian_text(doc)
    if found is None or text is None:
        raise NotFound(f"no document <{doc.value}> in the library (a document being ingested is there once "
                       "its ingest is committed)")
    title, sha256 = found
    same = next((quad.subject for quad in store.quads(None, vocab.TG.sha256, sha256, vocab.source_graph(collection))
                 if holds_document(store, collection, quad.subject)), None) if sha256 is not None else None
    if same is not None:
        same_id = same.value.removeprefix(vocab.URN + "doc:")
        return jsonify(id=same_id, status="unchanged", url=status_url(collection, same_id))
    return submitted(collection, text.encode("utf-8"), "text/plain", title, IngestOptions(title=title))


def _library_document(store: StoreBackend, doc: NamedNode) -> tuple[str | None, Literal | None] | None:
    """The title and ``tg:sha256`` of ``doc`` in the first collection's provenance that holds it; None if none."""
    for quad in store.quads(doc, vocab.RDF.type, vocab.TG.Document):
        graph = quad.graph_name
        if isinstance(graph, NamedNode) and graph.value.endswith(":source"):
            title = next(store.quads(doc, vocab.DC.title, None, graph), None)
            sha256 = next(store.quads(doc, vocab.TG.sha256, None, graph), None)
            return (title.object.value if title else None), (sha256.object if sha256 else None)
    return None
