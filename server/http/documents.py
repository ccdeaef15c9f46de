"""Documents of a collection over HTTP: ingest (in the background), list, read one, delete one.

``POST /api/collections/{c}/documents`` takes the file as the body with its media type (``?title=``,
``?name=`` for the file name, ``?chunk_size=``, ``?chunk_overlap=``, ``?workers=``: chunks sent to the LLM
at once; ``?encoding=base64`` when the body is the file in base64, as TrustGraph's librarian sends it: it is
decoded after the write gate let the request in), or as ``multipart/form-data`` (one ``file`` part; the same names
as fields, each once). The bytes
are checked before the answer: an unsupported or unreadable document is 415 or 422 at once and nothing is queued;
a readable one is 202 with its id and status URL, or 200 when the same bytes are already there.
"""
from __future__ import annotations

import base64
from collections import Counter

from flask import Blueprint, Response, jsonify, request, url_for

from server.errors import BadRequest, ContentTooLarge, NotFound
from server.http.context import current_config, current_runtime, current_store, require_write_access
from server.http.multipart import MULTIPART, form_parts
from server.ingest.catalog import (
    delete_document,
    document_of_id,
    document_warnings,
    existing_document,
    list_documents,
)
from server.ingest.documents import IngestOptions, chunk_spans, document_id
from server.ingest.formats import checked_declaration
from server.ingest.jobs import Job

blueprint = Blueprint("documents", __name__)

MAX_CHUNK_SIZE = 1_000_000
MAX_WORKERS = 16
_FIELDS = ("title", "chunk_size", "chunk_overlap", "workers", "replace")


def _queued(collection: str) -> list[Job]:
    """The jobs of ``collection`` (none without an ingest queue: listing needs no LLM)."""
    jobs = current_runtime().queued_jobs
    return jobs.of_collection(collection) if jobs is not None else []


def queued_job(collection: str, doc_id: str) -> Job | None:
    jobs = current_runtime().queued_jobs
    return jobs.get(collection, doc_id) if jobs is not None else None


def checked_collection(name: str, must_exist: bool = True) -> str:
    """``name``, checked; with ``must_exist``, 404 unless it holds data or has documents on the way.

    The queue is read before the store in this module: a job leaves the queue only after its document
    is committed, so a document is always found in one or the other."""
    store = current_store()
    try:
        store.check_collection(name)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if must_exist and not _queued(name) and not store.has_collection(name):
        raise NotFound(f"no collection {name!r}")
    return name


def _upload() -> tuple[bytes, str | None, str | None, dict[str, str]]:
    """``(bytes, declared media type, file name, fields)`` of the request: a multipart ``file`` part or the body."""
    fields = {key: request.args[key] for key in ("name", *_FIELDS) if key in request.args}
    encoding = request.args.get("encoding")
    if encoding not in (None, "base64") or (encoding and request.mimetype == MULTIPART):
        raise BadRequest("'encoding' may only be base64, for a document sent as the body")
    if request.mimetype == MULTIPART:
        sent = form_parts(request.content_type, request.get_data(cache=False))
        counts = Counter(part.name for part in sent)
        repeated = next((name for name in ("file", *_FIELDS) if counts[name] > 1), None)
        if repeated:
            raise BadRequest(f"the multipart upload has more than one part named {repeated!r}: send one document, "
                             "and each field once, per upload")
        parts = {part.name: part for part in sent}
        part = parts.get("file")
        if part is None:
            raise BadRequest("a multipart upload needs a part named 'file' holding the document")
        for key in _FIELDS:
            if key in parts:
                try:
                    fields[key] = parts[key].data.decode("utf-8")
                except UnicodeDecodeError:
                    raise BadRequest(f"the form field {key!r} is not UTF-8 text") from None
        declared = part.media_type if part.media_type not in ("", "application/octet-stream") else None
        return part.data, declared, part.filename, fields
    declared = request.mimetype if request.mimetype not in ("", "application/octet-stream") else None
    data = request.get_data(cache=False)
    if encoding:
        try:
            data = base64.b64decode(data, validate=True)
        except ValueError:
            raise BadRequest("the body is not base64 (?encoding=base64)") from None
    return data, declared, fields.get("name"), fields


def _options(fields: dict[str, str]) -> IngestOptions:
    values = {}
    defaults = IngestOptions()
    for key, low, high in (("chunk_size", 1, MAX_CHUNK_SIZE), ("chunk_overlap", 0, MAX_CHUNK_SIZE),
                           ("workers", 1, MAX_WORKERS)):
        raw = fields.get(key, "")
        try:
            values[key] = int(raw) if raw.strip() else getattr(defaults, key)
        except ValueError:
            raise BadRequest(f"'{key}' must be an integer, got {raw!r}") from None
        if not low <= values[key] <= high:
            raise BadRequest(f"'{key}' must be between {low} and {high}, got {values[key]}")
    replace = fields.get("replace", "false")
    if replace not in ("true", "false"):
        raise BadRequest(f"'replace' must be true or false, got {replace!r}")
    try:
        return IngestOptions(title=fields.get("title") or None, replace=replace == "true", **values)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def status_url(collection: str, doc_id: str) -> str:
    return url_for("documents.document", collection=collection, doc_id=doc_id)


@blueprint.route("/api/collections/<collection>/documents", methods=["POST"])
def ingest(collection: str) -> Response:
    require_write_access()
    checked_collection(collection, must_exist=False)
    data, declared, name, fields = _upload()
    return submitted(collection, data, declared, name, _options(fields))


def submitted(collection: str, data: bytes, declared: str | None, name: str | None,
              options: IngestOptions) -> Response:
    """``data`` queued for ingest into ``collection`` (202 with its id and status URL), or 200 ``unchanged`` when
    the collection holds the same bytes; 413, 415 or 422 at once for a document that cannot be ingested."""
    limit = current_config().max_document_bytes
    if len(data) > limit:
        raise ContentTooLarge(f"the document has {len(data)} bytes, over the limit of {limit} "
                              "(GLASSGRAPH_MAX_DOCUMENT)")
    checked_declaration(data, declared, name)  # bytes that contradict their type are refused, even known ones
    doc_id, _ = document_id(data, collection)
    url = status_url(collection, doc_id)
    if not options.replace and existing_document(current_store(), collection, doc_id) is not None:
        return jsonify(id=doc_id, status="unchanged", url=url,
                       message="the same bytes are already in this collection: nothing was ingested "
                               "(?replace=true extracts them again)")
    document = current_runtime().readers.read(data, declared, name)
    chunk_spans(document, options)  # a document over the limits is refused now, not after its 202
    job = current_runtime().ingest_jobs.submit(Job(doc_id, collection, options.title or document.title or name,
                                                   document.media_type), data, document, name, options)
    response = jsonify(id=doc_id, status=job.status, url=url)
    response.status_code = 202
    response.headers["Location"] = url
    return response


@blueprint.route("/api/collections/<collection>/documents", methods=["GET"])
def documents(collection: str) -> Response:
    """Documents in the store (``ingested``), then those queued, running or failed."""
    checked_collection(collection)
    jobs = _queued(collection)
    listed = [{**doc, "status": "ingested", "error": None} for doc in list_documents(current_store(), collection)]
    stored = {doc["id"] for doc in listed}  # a job whose document was just committed is listed once
    listed += [job.to_dict() for job in jobs if job.id not in stored]
    return jsonify(collection=collection, documents=listed)


@blueprint.route("/api/collections/<collection>/documents/<doc_id>", methods=["GET"])
def document(collection: str, doc_id: str) -> Response:
    checked_collection(collection)
    job = queued_job(collection, doc_id)
    doc = document_of_id(doc_id)
    found = list_documents(current_store(), collection, doc) if doc is not None else []
    if found:
        return jsonify({**found[0], "status": "ingested", "error": None,
                        "warning_messages": document_warnings(current_store(), collection, doc)})
    if job is None:
        raise NotFound(f"no document {doc_id!r} in collection {collection!r}")
    return jsonify(job.to_dict())


@blueprint.route("/api/collections/<collection>/documents/<doc_id>", methods=["DELETE"])
def delete(collection: str, doc_id: str) -> Response:
    """Delete a document: its text, its provenance and the facts no other document states."""
    require_write_access()
    checked_collection(collection)
    doc = document_of_id(doc_id)
    if doc is None or not delete_document(current_store(), collection, doc):
        raise NotFound(f"no document {doc_id!r} in collection {collection!r}")
    return jsonify(deleted=doc_id, collection=collection)
