"""The JSON API: GraphRAG (streamed as SSE or NDJSON, or one JSON object), explain traces,
sessions, librarian documents and collections.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Generator, Iterator

from flask import Blueprint, Response, current_app, jsonify, request

from server.errors import (
    BadRequest,
    Busy,
    ClientLeft,
    ContentTooLarge,
    NotAcceptable,
    NotFound,
    UnsupportedMediaType,
)
from server.explain.trace import MAX_SESSION_OFFSET, list_sessions, read_trace, trace_quads
from server.http.context import client_left, current_config, current_runtime, current_store
from server.http.descriptions import current_collections
from server.http.keepalive import joined, with_keepalive
from server.http.linked_data import requested_accept
from server.http.negotiation import GRAPH_MEDIA, negotiate
from server.http.params import int_parameter, iri_parameter
from server.http.responses import rdf_response
from server.http.write_gate import write_refusal
from server.rag.document_rag import PassageLimits
from server.rag.messages import GraphRagResponse
from server.rag.retrieval import RetrievalLimits
from server.rag.staged_run import StagedRun
from server.runtime import Runtime
from server.stages import SESSION

Limits = RetrievalLimits | PassageLimits

blueprint = Blueprint("api", __name__)

SSE, NDJSON, JSON = "text/event-stream", "application/x-ndjson", "application/json"
# field -> (lowest, highest) accepted value
FIELDS = {"query", "collection", "explainable", "streaming", "user"}
NOT_RECORDED = {"Glassgraph-Trace": "not-recorded (read-only)"}


def _answer_slot(runtime: Runtime) -> threading.BoundedSemaphore:
    """One of ``GLASSGRAPH_MAX_ANSWERS`` places for a GraphRAG answer in progress; 429 when none is free.

    An answer holds a request thread until its last message (a slow LLM holds it long), so the
    cap keeps threads for health checks, queries and writes. The caller releases the place when
    the response is closed.
    """
    if not runtime.answer_slots.acquire(blocking=False):
        raise Busy(f"{runtime.config.max_answers} answers (GraphRAG or document RAG) are already in progress "
                   "(GLASSGRAPH_MAX_ANSWERS): try again shortly", {"Retry-After": "2"})
    return runtime.answer_slots


def _count_question(runtime: Runtime) -> None:
    """An anonymous question counts against its client's rate (429 past it); a recorded one may first
    prune traces past the retention policy."""
    if write_refusal(runtime.config, request.headers.get("Authorization")) is not None:
        runtime.question_rate.take(request.remote_addr or "unknown")
    if not runtime.config.read_only:
        runtime.auto_prune.maybe_prune(runtime.store)


# --- POST /api/graph-rag ----------------------------------------------------------------------

def _field(body: dict, name: str, kind: type, default: object) -> object:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"field '{name}' must be {'an integer' if kind is int else kind.__name__}")
    if kind is str:
        _check_text(name, value)
    return value


def _check_text(name: str, value: str) -> None:
    """JSON may escape a lone surrogate (``"\\ud800"``): no RDF literal or IRI can hold one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"field '{name}' is not valid Unicode text: a lone surrogate "
                             f"(\\u{ord(value[exc.start]):04x}) at character {exc.start}") from None


def json_body() -> object:
    """The body, declared JSON: a form or text/plain POST (which a browser sends cross-site with no
    preflight) is refused."""
    if request.mimetype != JSON:
        got = request.headers.get("Content-Type") or "none"
        raise UnsupportedMediaType(f"the body must be JSON sent with 'Content-Type: application/json' (got {got!r})")
    try:
        return request.get_json(silent=True)
    except RecursionError:
        raise BadRequest("the JSON body is nested too deeply") from None


def _question(body: dict) -> str:
    query = _field(body, "query", str, "")
    limit = current_config().max_question_chars
    if len(query) > limit:
        raise ContentTooLarge(f"the question has {len(query)} characters, over the limit of {limit} "
                             "(GLASSGRAPH_MAX_QUESTION)")
    if not query.strip():
        raise BadRequest("field 'query' must be a non-empty question")
    return query


def _request_fields(limits_type: type[Limits]) -> tuple[str, str, bool, bool | None, Limits]:
    body = json_body()
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object: {\"query\": \"...\", \"collection\": \"default\", ...}")
    fields = FIELDS | set(limits_type.RANGES)
    unknown = sorted(set(body) - fields)
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
    query = _question(body)
    collection = _field(body, "collection", str, current_config().default_collection)
    explainable = _field(body, "explainable", bool, True)
    streaming = _field(body, "streaming", bool, None)
    limits = limits_type()
    switches = getattr(limits_type, "SWITCHES", {})
    for name in limits_type.RANGES:
        if name in switches and isinstance(body.get(name), bool):  # "passages": true
            setattr(limits, name, switches[name] if body[name] else 0)
        elif name in switches and body.get(name) is not None and not isinstance(body[name], int):
            raise BadRequest(f"field '{name}' must be true, false or an integer")
        else:
            setattr(limits, name, _field(body, name, int, getattr(limits, name)))
    try:
        limits.check()
    except ValueError as error:
        raise BadRequest(f"field {error}") from None
    require_collection(collection)
    return query, collection, explainable, streaming, limits


def require_collection(collection: str) -> None:
    """400 for a name that is no collection's, 404 for a collection that holds nothing."""
    current_store().require_collection(collection)


@blueprint.route("/api/graph-rag", methods=["POST"])
def graph_rag() -> Response:
    """The GraphRAG pipeline's messages (see :func:`_answer`)."""
    return _answer(lambda runtime: runtime.pipeline, RetrievalLimits)


@blueprint.route("/api/document-rag", methods=["POST"])
def document_rag() -> Response:
    """The document RAG pipeline's messages, in the same shapes as GraphRAG's (see :func:`_answer`)."""
    return _answer(lambda runtime: runtime.document_rag, PassageLimits)


def _answer(pipeline_of: Callable[[Runtime], StagedRun], limits_type: type[Limits]) -> Response:
    """A pipeline's messages as SSE or NDJSON (by Accept), or one JSON object when not streaming.

    Without a ``streaming`` field, the answer streams when Accept asks for SSE or NDJSON. A
    read-only server answers without recording anything (no trace, no answer text) and says so
    in the ``Glassgraph-Trace`` header.
    """
    query, collection, explainable, streaming, limits = _request_fields(limits_type)
    accept = request.headers.get("Accept")
    if streaming is None:
        streaming = negotiate(accept, [JSON, SSE, NDJSON]) in (SSE, NDJSON)
    read_only = current_config().read_only
    media = negotiate(accept, [SSE, NDJSON]) if streaming else JSON
    if media is None:
        raise NotAcceptable(f"a streamed answer is sent as {SSE} or {NDJSON}; or set \"streaming\": false")
    runtime = current_runtime()
    _count_question(runtime)
    slot = _answer_slot(runtime)
    try:
        pipeline = pipeline_of(runtime)
        messages = pipeline.run(query, collection, explainable and not read_only, limits)
        if not streaming:
            response = jsonify(_collect(messages, client_left()))
        else:  # keep-alives and frames one by one are for a run that waits on other processes (keepalive.py)
            waits = pipeline.llm.waits or runtime.answers_wait
            keepalive_s = current_config().sse_keepalive_s if media == SSE and waits else 0
            frames = _frames(messages, sse=media == SSE, keepalive_s=keepalive_s)
            response = Response(frames if waits else joined(frames),
                                content_type=media + "; charset=utf-8",
                                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    except BaseException:
        slot.release()
        raise
    response.call_on_close(slot.release)
    if read_only:
        response.headers.update(NOT_RECORDED)
    return response


def _frames(messages: Iterator[GraphRagResponse], sse: bool, keepalive_s: float) -> Generator[str, None, None]:
    """One SSE event (``data: {...}``) or one NDJSON line per message, and an SSE comment after each
    ``keepalive_s`` without one (0: none); a closed connection stops the run."""
    stream = with_keepalive(messages, keepalive_s) if keepalive_s > 0 else messages
    try:
        for message in stream:
            if message is None:
                yield ": keep-alive\n\n"
                continue
            data = json.dumps(message.to_dict(), ensure_ascii=False)
            yield f"data: {data}\n\n" if sse else data + "\n"
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _collect(messages: Generator[GraphRagResponse, None, None], left: threading.Event | None = None) -> dict:
    """``{"answer", "outcome", "session", "explain_ids", "explain_kinds", "explain_collection", "error"}`` of a
    whole run; stopped at the next message once ``left`` is set (the client closed its connection: the run is
    recorded as cancelled, as a stream's is)."""
    pieces, explains, collection, error, outcome = [], [], None, None, None
    for message in messages:
        if left is not None and left.is_set():
            messages.close()
            raise ClientLeft("the client left before its answer was complete: the run was stopped")
        outcome = message.outcome or outcome
        if message.explain_id:
            explains.append(message)
            collection = message.explain_collection
        if message.message_type == "chunk" and message.response:
            pieces.append(message.response)
        if message.error:
            error = message.error
    session = next((m.explain_id for m in explains if m.explain_kind == SESSION.kind), None)
    return {"answer": "".join(pieces), "outcome": outcome, SESSION.kind: session,
            "explain_ids": [m.explain_id for m in explains],
            "explain_kinds": [m.explain_kind for m in explains],
            "explain_collection": collection, "error": error}


# --- explain, sessions, documents, collections ---------------------------------------------------

EXPLAIN_RDF = {m: GRAPH_MEDIA[m] for m in ("text/turtle", "application/trig", "application/n-triples",
                                            "application/n-quads")}


@blueprint.route("/api/explain", methods=["GET"])
def explain() -> Response:
    """The trace of the session that ``id`` belongs to: JSON, or its triples as RDF by Accept or ``?format=``
    (as the linked-data pages read it; ``format=json`` is this JSON)."""
    iri = iri_parameter("id")
    trace = read_trace(current_store(), iri.value)
    if trace is None:
        raise NotFound(f"no GraphRAG session for <{iri.value}>")
    accept = JSON if request.args.get("format", "").lower() == "json" else requested_accept()
    media = negotiate(accept, [JSON, *EXPLAIN_RDF])
    if media is None:
        raise NotAcceptable("the trace is available as " + ", ".join([JSON, *EXPLAIN_RDF]))
    if media == JSON:
        return jsonify(trace)
    return rdf_response(trace_quads(current_store(), trace), media, EXPLAIN_RDF)


@blueprint.route("/api/sessions", methods=["GET"])
def sessions() -> Response:
    """Sessions newest first, paged by ``limit`` (1..500, default 20) and ``offset``."""
    limit = int_parameter("limit", 20, 1, 500)
    offset = int_parameter("offset", 0, 0, MAX_SESSION_OFFSET)
    return jsonify(sessions=list_sessions(current_store(), limit=limit, offset=offset), limit=limit, offset=offset)


@blueprint.route("/api/documents", methods=["GET"])
def documents() -> Response:
    """The librarian content (document, page, chunk or answer text) of ``id`` as text."""
    iri = iri_parameter("id")
    text = current_store().librarian_text(iri)
    if text is None:
        raise NotFound(f"no librarian content for <{iri.value}>")
    return Response(text, content_type="text/plain; charset=utf-8")


@blueprint.route("/api/collections", methods=["GET"])
def collections() -> Response:
    """Every collection with its triple counts, as counted after the store's last write of data (while one
    request counts them again, the others get the last counts: ``descriptions.kept_until_written``)."""
    return jsonify(collections=current_collections(current_app._get_current_object()))
