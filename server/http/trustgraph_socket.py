"""TrustGraph's websocket API (``/api/v1/socket``), so that its CLI (``trustgraph-cli``) asks Glassgraph.

The client's first frame is ``{"type": "auth", "token"}``, answered ``{"type": "auth-ok", "workspace"}``;
then requests ``{id, service, flow, request}`` (request keys hyphenated, ``entity-limit``), answered by
frames ``{id, response, complete}`` or ``{id, error: {type, message}, complete: true}``. Each request is
made into the HTTP request Glassgraph answers it with (``/api/graph-rag``, ``/api/document-rag``,
``/sparql``, ``/api/triples``) and run through the same app, the token given at auth as its
``Authorization``: every limit, queue, rate and check applies as over HTTP. Answers are read back into
TrustGraph's shapes: a GraphRAG message is already one (``message_type``, ``end_of_stream``,
``explain_triples``...); SPARQL results become ``query-type`` with ``variables`` and ``bindings`` (or
``ask-result``, or ``triples``), terms in TrustGraph's wire form (``server.explain.wire``).

Services so far: ``graph-rag`` and ``document-rag`` (streamed or not), ``sparql``, ``triples`` (a pattern,
by ``/api/triples``). Any other is an error frame naming the ones there are; a malformed frame, an unknown
service or a request before auth is an error frame, never a closed server.
"""
from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import chain, islice
from typing import Any
from urllib.parse import urlencode

from pyoxigraph import QueryResultsFormat, RdfFormat, parse, parse_query_results

from server import vocab
from server.errors import ErrorType
from server.explain.wire import term_wire
from server.http.socket_budget import AnswerBudget, Holding

log = logging.getLogger(__name__)

PATH = "/api/v1/socket"
MAX_FRAME_BYTES = 1 << 20  # a frame past it closes the socket (1009), as uvicorn's ws_max_size says
WORKSPACE = "default"
# TrustGraph's request keys -> Glassgraph's fields (edge-score-limit, fetch-limit and the like have no counterpart)
GRAPH_LIMITS = {key: key.replace("-", "_") for key in ("entity-limit", "triple-limit", "max-subgraph-size",
                                                        "max-path-length")}
DOCUMENT_LIMITS = {"doc-limit": "passages"}
SPARQL_BATCH = 20  # rows per frame when the client gives no batch-size


class RequestError(Exception):
    """A request this API cannot make into one of Glassgraph's: an error frame of ``type``."""

    def __init__(self, message: str, error_type: str = "bad-request") -> None:
        super().__init__(message)
        self.type = error_type


@dataclass
class Internal:
    """The HTTP request that answers one socket request, and how to read its answer back into frames."""

    method: str
    path: str
    frames: Callable[[int, dict[str, str], Iterator[bytes]], Iterator[dict]]  # (status, headers, body) -> frames
    query: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    accept: str = "application/json"
    content_type: str = "application/json"
    reserve: bool = True  # the answer may be large (``AnswerBudget.admission``); a RAG answer is a few KB


def _rag(path: str, limits: dict[str, str]) -> Callable[[dict], Internal]:
    """A GraphRAG or document RAG request: the question, collection, ``limits`` (TrustGraph's key -> ours)
    and streaming. Every question leaves its trace, as over HTTP; its explain messages go to a client that
    asked for them (``explainable``)."""

    def make(request: dict) -> Internal:
        body: dict[str, Any] = {"query": request.get("query"), "collection": request.get("collection") or "default",
                                "explainable": True}
        for key, name in limits.items():
            if request.get(key) is not None:
                body[name] = request[key]
        streaming = bool(request.get("streaming", False))
        frames = partial(_rag_frames, explain=bool(request.get("explainable", False))) if streaming else _rag_answer
        return Internal("POST", path, partial(_named_as_sent, frames, limits),
                        body=json.dumps({**body, "streaming": streaming}).encode(),
                        accept="application/x-ndjson" if streaming else "application/json", reserve=False)
    return make


def _named_as_sent(frames: Callable[[int, dict[str, str], Iterator[bytes]], Iterator[dict]], limits: dict[str, str],
                   status: int, headers: dict[str, str], body: Iterator[bytes]) -> Iterator[dict]:
    """``frames``, an error naming a field by the key the client sent (``'doc-limit'``, not ``'passages'``)."""
    for frame in frames(status, headers, body):
        if isinstance(frame.get("error"), dict) and isinstance(frame["error"].get("message"), str):
            message = frame["error"]["message"]
            for key, name in limits.items():
                message = message.replace(f"'{name}'", f"'{key}'")
            frame = {**frame, "error": {**frame["error"], "message": message}}
        yield frame


def _rag_frames(status: int, headers: dict[str, str], body: Iterator[bytes], explain: bool) -> Iterator[dict]:
    """Each NDJSON message of a streamed answer as the frame's ``response`` (the shapes are TrustGraph's); its
    explain messages only when ``explain``."""
    if status >= 400:
        yield _http_error(status, b"".join(body))
        return
    pending = b""
    for piece in body:
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            message = json.loads(line) if line.strip() else None
            if message is not None and (explain or message.get("message_type") != "explain"):
                yield from map(_message_frame, _per_entity(message))


def _per_entity(message: dict) -> list[dict]:
    """An explain message as one message per typed entity its triples describe, each with that entity's own
    triples: TrustGraph's client reads a message's inline triples as one entity, by every ``rdf:type`` among
    them, and GraphRAG's retrieval step records the grounding beside the exploration (``server.stages``)."""
    triples = message.get("explain_triples")
    if not triples or not message.get("explain_id"):
        return [message]
    by_subject: dict[str, list[dict]] = {}
    for triple in triples:
        by_subject.setdefault(triple.get("s", {}).get("i", ""), []).append(triple)
    typed = [subject for subject, own in by_subject.items() if subject != message["explain_id"]
             and any(t.get("p", {}).get("i") == vocab.RDF.type.value for t in own)]
    return [*({**message, "explain_id": subject, "explain_triples": by_subject[subject]} for subject in typed),
            {**message, "explain_triples": by_subject.get(message["explain_id"], [])}]


def _message_frame(message: dict) -> dict:
    """A GraphRAG message as a frame: its fields but those it leaves empty (a client reads ``"error" in
    response`` as an error)."""
    if message.get("error"):
        return {"error": message["error"], "complete": True}
    return {"response": {key: value for key, value in message.items() if value is not None},
            "complete": bool(message.get("end_of_session"))}


def _json_frames(read: Callable[[dict], Iterator[dict]]) -> Callable[[int, dict[str, str], Iterator[bytes]],
                                                                      Iterator[dict]]:
    """Frames from a JSON answer, read by ``read``; an error answer is an error frame."""
    def frames(status: int, headers: dict[str, str], body: Iterator[bytes]) -> Iterator[dict]:
        raw = b"".join(body)
        yield from [_http_error(status, raw)] if status >= 400 else read(json.loads(raw))
    return frames


@_json_frames
def _rag_answer(answer: dict) -> Iterator[dict]:
    """One frame of a whole answer: ``{"response": text}`` as TrustGraph's non-streamed RAG answers."""
    if answer.get("error"):
        yield {"error": answer["error"], "complete": True}
        return
    yield {"response": {"response": answer.get("answer", ""), "session": answer.get("session"),
                        "outcome": answer.get("outcome")}, "complete": True}


def _sparql(request: dict) -> Internal:
    """A SPARQL query; the answer read as TSV (SELECT, ASK) or N-Triples (CONSTRUCT, DESCRIBE): TSV goes into
    frames a batch of lines at a time, so an answer is held once, as the app made it, never as rows."""
    query = request.get("query")
    if not isinstance(query, str):
        raise RequestError("the request needs a 'query' (SPARQL text)")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError("the 'query' holds a lone surrogate (\\ud800-\\udfff): not text") from None
    batch, limit = _batch(request), _positive(request, "limit")
    rows = {"rows": str(limit)} if limit else {}  # the first rows of a longer answer, not its GLASSGRAPH_MAX_ROWS 422
    return Internal("GET", "/sparql", lambda status, headers, body: _sparql_frames(status, headers, body, batch, limit),
                    query={"query": query, **rows}, accept="text/tab-separated-values, application/n-triples;q=0.9")


def answer_too_large(most: int) -> str:
    """Why an answer was cut: its frames passed ``most`` bytes. A term of a few bytes of TSV is some 70 as a wire
    term: 4 MB of TSV made 307 MB of frames (14 s of the worker's CPU), past the /sparql answer's own limit."""
    return (f"the answer passed {most} bytes of frames (GLASSGRAPH_MAX_RESULT_BYTES): narrow the query or add "
            "LIMIT")


CONSTRUCT_FRAME_BYTES = 8 * 1024 * 1024  # TrustGraph's client takes a graph in one frame: its N-Triples at most


def _sparql_frames(status: int, headers: dict[str, str], body: Iterator[bytes], batch: int,
                   limit: int | None) -> Iterator[dict]:
    """SPARQL results as TrustGraph's ``sparql`` service sends them: SELECT in frames of ``batch`` rows, the
    first ``limit`` rows (the client's ``limit``) when it gives one; ASK and a graph in one frame."""
    if status >= 400:
        yield _http_error(status, b"".join(body))
        return
    if headers.get("content-type", "").split(";")[0].strip() == "application/n-triples":
        raw = b"".join(body)
        if len(raw) > CONSTRUCT_FRAME_BYTES:
            yield {"error": {"type": "too-large", "message": f"the graph is {len(raw)} bytes of N-Triples, more "
                             f"than one frame takes ({CONSTRUCT_FRAME_BYTES}); add a LIMIT, or ask /sparql over HTTP"},
                   "complete": True}
            return
        yield {"response": {"query-type": "construct", "triples": _wire_triples(raw)}, "complete": True}
        return
    lines = _lines(body)
    head = next(lines, b"")
    if head in (b"true", b"false"):
        yield {"response": {"query-type": "ask", "ask-result": head == b"true"}, "complete": True}
        return
    variables = [name[1:] for name in head.decode("utf-8").split("\t")] if head else []
    batches = _batches(islice(lines, limit), batch)
    taken = next(batches)
    for following in chain(batches, [None]):
        yield {"response": {"query-type": "select", "variables": variables,
                            "bindings": _wire_rows(head, taken, len(variables))}, "complete": following is None}
        if following is None:
            return
        taken = following


FRAME_TSV_BYTES = 64 * 1024  # TSV rows one frame is made of at most (beside the client's batch-size)


def _batches(lines: Iterator[bytes], batch: int) -> Iterator[list[bytes]]:
    """``lines`` in lists of at most ``batch`` lines and ``FRAME_TSV_BYTES`` (a longer line alone); one empty list
    when there are none. A term of a few bytes of TSV is some hundreds as a wire term in Python: a batch-size
    of a million once made one 100,000-row answer of 5 MB into 900 MB of rows at once."""
    taken: list[bytes] = []
    size = 0
    for line in lines:
        if taken and (len(taken) >= batch or size + len(line) > FRAME_TSV_BYTES):
            yield taken
            taken, size = [], 0
        taken.append(line)
        size += len(line)
    yield taken


def _lines(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The lines of a body that comes in pieces, each line copied out of its piece on its own (an answer may
    be one piece of 64 MB)."""
    pending = b""
    for piece in pieces:
        start = 0
        while (end := piece.find(b"\n", start)) >= 0:
            yield pending + piece[start:end]
            pending, start = b"", end + 1
        pending += piece[start:]
    if pending:
        yield pending


# pyoxigraph's parsers and result iterators may only be used, and dropped, by the thread that made them (a
# frame generator is advanced by any pool thread): each is made and used up within one of these calls.

def _wire_triples(raw: bytes) -> list[dict]:
    return [{"s": term_wire(t.subject), "p": term_wire(t.predicate), "o": term_wire(t.object)}
            for t in parse(raw, format=RdfFormat.N_TRIPLES)]


def _wire_rows(head: bytes, lines: list[bytes], width: int) -> list[dict]:
    """TSV rows (under their ``head``) as TrustGraph's bindings: one wire term, or None, per variable."""
    if not width:
        return [{"values": []} for _ in lines]
    solutions = parse_query_results(b"\n".join([head, *lines, b""]), format=QueryResultsFormat.TSV)
    return [{"values": [None if value is None else term_wire(value) for value in solution]}
            for solution in solutions]


def _triples(request: dict) -> Internal:
    """A pattern (``s``, ``p``, ``o`` wire terms, ``g`` or ``collection``, ``limit``) for ``/api/triples``."""
    batch = _batch(request)
    pattern = {key: request[key] for key in ("s", "p", "o", "g", "collection", "limit") if request.get(key) is not None}
    streaming = bool(request.get("streaming", False))
    return Internal("POST", "/api/triples",
                    lambda status, headers, body: _triple_frames(status, body, batch if streaming else None),
                    body=json.dumps(pattern).encode())


def _triple_frames(status: int, body: Iterator[bytes], batch: int | None) -> Iterator[dict]:
    """The matching triples as one frame's ``response`` list, or in frames of ``batch`` when streamed."""
    raw = b"".join(body)
    if status >= 400:
        yield _http_error(status, raw)
        return
    found = json.loads(raw)["triples"]
    size = batch or max(len(found), 1)
    for start in range(0, max(len(found), 1), size):
        yield {"response": found[start:start + size], "complete": start + size >= len(found)}


def _batch(request: dict) -> int:
    """Rows (or triples) per frame: the request's ``batch-size``, default ``SPARQL_BATCH``."""
    return _positive(request, "batch-size") or SPARQL_BATCH


def _positive(request: dict, key: str) -> int | None:
    """The request's ``key``, a positive integer, or None when it gives none."""
    value = request.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise RequestError(f"'{key}' must be a positive integer")
    return value if value is None else min(value, sys.maxsize)  # islice takes no more (10**30 was a 500)


def _http_error(status: int, raw: bytes) -> dict:
    """An error frame from Glassgraph's JSON error body (``{"error": {"type", "message"}}``) or, from
    ``/sparql``, its text (the protocol's plain-text errors), typed by the status."""
    try:
        error = json.loads(raw)["error"]
        return {"error": {"type": error["type"], "message": error["message"]}, "complete": True}
    except (ValueError, KeyError, TypeError):
        message = raw.decode("utf-8", "replace").strip()[:2000] or f"HTTP {status}"
        return {"error": {"type": ErrorType.of_status(status).wire_name, "message": message}, "complete": True}


def _librarian(request: dict) -> Internal:
    """TrustGraph's librarian: ``get-document-content`` (the text of a document, page or chunk, base64 as its
    client reads it), ``list-documents`` and ``add-document`` (an ingest) in a collection (``collection``,
    Glassgraph's own key: TrustGraph's library has none; default ``default``)."""
    operation = request.get("operation")
    if not isinstance(operation, str):  # an object is no key of PROCESSING_OPERATIONS: it was a 500
        raise RequestError("the librarian request needs an 'operation' (a string)")
    collection = request.get("collection") or "default"
    if not isinstance(collection, str):
        raise RequestError("'collection' must be a string")
    documents = f"/api/collections/{collection}/documents"  # a WSGI path is decoded: the name as it is
    if operation == "get-document-content":
        if not isinstance(request.get("document-id"), str):
            raise RequestError("get-document-content needs the 'document-id' of a document, page or chunk (its IRI)")
        return Internal("GET", "/api/documents", _content_frames, query={"id": request["document-id"]},
                        accept="text/plain")
    if operation == "list-documents":
        return Internal("GET", documents, _listing_frames)
    if operation == "add-document":
        metadata = request.get("document-metadata")
        if not isinstance(metadata, dict) or not isinstance(request.get("content"), str):
            raise RequestError("add-document needs 'document-metadata' (an object) and 'content' (base64)")
        kind, title = metadata.get("kind") or "text/plain", metadata.get("title") or metadata.get("id") or "document"
        if not isinstance(kind, str) or not isinstance(title, str):
            raise RequestError("'kind' and 'title' must be strings")
        # the content goes on as it came: decoded by the app, once the write gate let the request in;
        # a title given (tg-add-library-document --name) is the document's, over the one its text has
        given = {"title": title} if metadata.get("title") else {}
        return Internal("POST", documents, _added_frames, query={"name": title, "encoding": "base64", **given},
                        body=request["content"].encode("utf-8", "surrogatepass"), content_type=kind)
    if operation in PROCESSING_OPERATIONS:
        return PROCESSING_OPERATIONS[operation](request)
    raise RequestError(f"unknown librarian operation {operation!r}; this server offers get-document-content, "
                       f"list-documents, add-document and {', '.join(PROCESSING_OPERATIONS)}", "unknown-operation")


def _content_frames(status: int, headers: dict[str, str], body: Iterator[bytes]) -> Iterator[dict]:
    raw = b"".join(body)
    yield _http_error(status, raw) if status >= 400 else {
        "response": {"content": base64.b64encode(raw).decode("ascii")}, "complete": True}


@_json_frames
def _listing_frames(listing: dict) -> Iterator[dict]:
    """The collection's documents as TrustGraph's document metadata (``id`` is the document's IRI)."""
    listed = [{"id": document["iri"], "kind": document["media_type"] or "text/plain", "title": document["title"] or "",
               "comments": "", "metadata": [], "tags": [], "document-type": "source",
               "time": _epoch(document["ingested"])} for document in listing["documents"]]
    yield {"response": {"document-metadatas": listed}, "complete": True}


def _epoch(moment: str | None) -> int:
    """An ISO 8601 time as TrustGraph's seconds since the epoch (0 for a document still being ingested)."""
    return int(dt.datetime.fromisoformat(moment).timestamp()) if moment else 0


@_json_frames
def _added_frames(job: dict) -> Iterator[dict]:
    """An ingest accepted (it goes on in the background): the document's IRI and the job's status URL."""
    yield {"response": {"document-id": f"{vocab.URN}doc:{job['id']}", "status": job["status"], "url": job["url"]},
           "complete": True}


def _add_processing(request: dict) -> Internal:
    """A processing record for ``/api/library/processing`` (``server.http.library``): the document ingested into
    the record's collection unless it is there."""
    metadata = request.get("processing-metadata")
    if not isinstance(metadata, dict):
        raise RequestError("add-processing needs 'processing-metadata' (an object)")
    record = {"id": metadata.get("id"), "document": metadata.get("document-id"), "collection":
              metadata.get("collection"), "flow": metadata.get("flow") or "default", "tags": metadata.get("tags") or []}
    return Internal("POST", LIBRARY_PROCESSING, _added_frames, body=json.dumps(record).encode())


def _remove_processing(request: dict) -> Internal:
    processing_id = request.get("processing-id")
    if not isinstance(processing_id, str) or not processing_id:
        raise RequestError("remove-processing needs the 'processing-id' of a record")
    try:
        processing_id.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError("the 'processing-id' holds a lone surrogate (\\ud800-\\udfff): not text") from None
    return Internal("DELETE", LIBRARY_PROCESSING, _removed_frames, query={"id": processing_id})


@_json_frames
def _removed_frames(removed: dict) -> Iterator[dict]:
    """A record removed: TrustGraph's empty response."""
    yield {"response": {}, "complete": True}


@_json_frames
def _processing_frames(listing: dict) -> Iterator[dict]:
    """The library's processing records as TrustGraph's processing metadata."""
    yield {"response": {"processing-metadatas": [
        {"id": record["id"], "document-id": record["document"], "time": record["time"], "flow": record["flow"],
         "collection": record["collection"], "tags": record["tags"]} for record in listing["processing"]]},
        "complete": True}


LIBRARY_PROCESSING = "/api/library/processing"
PROCESSING_OPERATIONS: dict[str, Callable[[dict], Internal]] = {
    "add-processing": _add_processing,
    "list-processing": lambda request: Internal("GET", LIBRARY_PROCESSING, _processing_frames),
    "remove-processing": _remove_processing,
}

SERVICES: dict[str, Callable[[dict], Internal]] = {
    "graph-rag": _rag("/api/graph-rag", GRAPH_LIMITS),
    "document-rag": _rag("/api/document-rag", DOCUMENT_LIMITS),
    "sparql": _sparql,
    "triples": _triples,
    "librarian": _librarian,
}


def internal_request(frame: dict) -> Internal:
    """The HTTP request that answers one request frame; :class:`RequestError` for one that names no service
    of this API or carries no request object."""
    service = frame.get("service")
    if not isinstance(service, str) or service not in SERVICES:
        raise RequestError(f"unknown service {service!r}; this server offers {', '.join(SERVICES)}",
                           "unknown-service")
    request = frame.get("request")
    if not isinstance(request, dict):
        raise RequestError("'request' must be a JSON object")
    internal = SERVICES[service](request)
    for text in (internal.path, *internal.query.values()):  # a collection, document id or title of the client's
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError("a string of the request holds a lone surrogate (\\ud800-\\udfff): not text") from None
    return replace(internal, frames=lambda *answer: map(trustgraph_terms, internal.frames(*answer)))


def trustgraph_terms(value: Any) -> Any:
    """``value`` with every wire term in TrustGraph 2.x's spelling: a triple term ``{"t": "t", "tr": {s, p,
    o}}`` (Glassgraph writes ``{"t": "r", "r"}``), a literal's datatype and language ``dt`` and ``ln``."""
    if isinstance(value, list):
        return [trustgraph_terms(item) for item in value]
    if not isinstance(value, dict):
        return value
    if value.get("t") == "r" and isinstance(value.get("r"), dict):
        return {"t": "t", "tr": trustgraph_terms(value["r"])}
    if value.get("t") == "l" and isinstance(value.get("v"), str):
        return {"t": "l", "v": value["v"], **({"dt": value["d"]} if "d" in value else {}),
                **({"ln": value["l"]} if "l" in value else {})}
    return {key: trustgraph_terms(item) for key, item in value.items()}


@dataclass
class Answered:
    """The app's answer to an :class:`Internal` request: status, headers (lower-case names), the body's
    pieces (read through ``call``, which runs a function where the app's calls run) and ``close``."""

    status: int
    headers: dict[str, str]
    pieces: Iterator[bytes]
    call: Callable[[Callable[[], Any]], Awaitable[Any]]
    close: Callable[[], Awaitable[None]]


Runner = Callable[[Internal, "str | None"], Awaitable[Answered]]  # an Internal request through the app
MAX_IN_FLIGHT = 16  # requests one socket may have unanswered; past it a request is refused (busy)


class _Socket:
    """One socket's state: its token, its requests in flight, and whether it is gone (closed, or dropped
    after a send the client took none of for ``send_timeout_s``: its memory and requests then freed).

    Requests are never cancelled: a request whose socket is gone ends after its call in progress (the app's
    calls run in the pool, one at a time), and closes its answer there, as a client that leaves an HTTP
    stream does; nothing is sent to a gone socket."""

    def __init__(self, send: Callable[[dict], Awaitable[None]], run: Runner, settings: SocketSettings,
                 client: str) -> None:
        self.send, self.run, self.settings, self.client = send, run, settings, client
        self.token: str | None = None
        self.authenticated = False
        self.gone = False
        self.tasks: set[asyncio.Task] = set()
        self.lock = asyncio.Lock()

    async def reply(self, frame: dict) -> int:
        """Send ``frame`` (ASCII JSON: a lone surrogate in a string cannot break its encoding); its length."""
        text = json.dumps(frame)
        async with self.lock:
            if self.gone:
                return len(text)
            try:
                await asyncio.wait_for(self.send({"type": "websocket.send", "text": text}),
                                       self.settings.send_timeout_s)
            except asyncio.TimeoutError:
                self.drop()
                log.warning("dropped a TrustGraph socket: the client took no frame for %g s (GLASSGRAPH_SEND_TIMEOUT)",
                            self.settings.send_timeout_s)
            except (OSError, RuntimeError):  # uvicorn's ClientDisconnected (an OSError), or a send after the close
                self.gone = True  # the client left mid-answer: its requests end quietly, as an HTTP client's
        return len(text)

    def drop(self) -> None:
        """Mark the socket gone and abort its connection (uvicorn's websocket protocol holds the transport),
        so that what it buffered is freed now, not when a client that reads nothing reads it."""
        self.gone = True
        transport = getattr(getattr(self.send, "__self__", None), "transport", None)
        if transport is not None:
            transport.abort()

    async def take(self, text: str) -> None:
        """One frame from the client: auth, or a request started in a task of its own (a client multiplexes
        them by id)."""
        frame = _frame(text)
        if frame is None:
            await self.reply({"error": {"type": "bad-request", "message": "a frame must be one JSON object"},
                              "complete": True})
            return
        if frame.get("type") == "auth":
            await self.authenticate(frame.get("token"))
            return
        request_id = frame.get("id") if isinstance(frame.get("id"), (str, int)) else None
        if not self.authenticated:
            await self.reply({"id": request_id, "error": {"type": "unauthorized", "message":
                              'send {"type": "auth", "token": ...} first'}, "complete": True})
        elif len(self.tasks) >= MAX_IN_FLIGHT:
            await self.reply({"id": request_id, "error": {"type": "too-many-requests", "message":
                              f"{MAX_IN_FLIGHT} requests of this socket are unanswered; wait for one"},
                              "complete": True})
        elif not self.settings.budget.take_request(self.client, len(text)):
            await self.reply({"id": request_id, "error": {"type": "too-many-requests", "message":
                              "the requests of this client waiting to be answered are as large as they may be; "
                              "wait for their answers"}, "complete": True})
        else:
            task = asyncio.create_task(self.answer(request_id, frame))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            size = len(text)
            task.add_done_callback(lambda _: self.settings.budget.give_request(self.client, size))

    async def authenticate(self, token: object) -> None:
        """TrustGraph's first frame: an empty token reads as anyone may; a token must be the server's."""
        given = token if isinstance(token, str) and token else None
        if given is not None and not (_is_text(given) and self.settings.token_ok(given)):  # \ud800 was a crash
            await self.reply({"type": "auth-failed", "error": "wrong token (GLASSGRAPH_TOKEN)"})
            return
        self.token, self.authenticated = given, True
        await self.reply({"type": "auth-ok", "workspace": WORKSPACE, "default_workspace": WORKSPACE})

    async def answer(self, request_id: str | int | None, frame: dict) -> None:
        answered, budget, holding = None, self.settings.budget, Holding(self.client)
        try:
            internal = internal_request(frame)
            async with budget.admission(self.client, internal.reserve) as admitted:
                if not admitted:
                    raise RequestError("the server holds as many unsent answers as it may (of this client's "
                                       "sockets, or of all); read the answers you have, then ask again",
                                       "too-many-requests")
                answered = await self.run(internal, self.token)
                pieces = budget.counted(answered.pieces, holding)
                first = await answered.call(lambda: next(pieces, None))
            frames = internal.frames(answered.status, answered.headers, chain([] if first is None else [first], pieces))
            sent, most = 0, self.settings.budget.client_bytes  # GLASSGRAPH_MAX_RESULT_BYTES, as over HTTP
            while not self.gone and (next_frame := await answered.call(lambda: next(frames, None))) is not None:
                sent += await self.reply({"id": request_id, **next_frame})
                if sent > most and not next_frame.get("complete"):
                    raise RequestError(answer_too_large(most), "limit-exceeded")
        except RequestError as error:
            await self.reply({"id": request_id, "error": {"type": error.type, "message": str(error)},
                              "complete": True})
        except Exception:  # noqa: BLE001 - the socket outlives one request's failure
            log.exception("the socket request %r failed", request_id)
            await self.reply({"id": request_id, "error": {"type": "internal-error", "message": "see the server log"},
                              "complete": True})
        finally:
            if answered is not None:
                await answered.close()
            await budget.release(holding)


def _is_text(value: str) -> bool:
    """Whether ``value`` holds no lone surrogate (JSON's "\\ud800" decodes to one; UTF-8 cannot encode it)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _frame(text: str) -> dict | None:
    """The client's frame as a JSON object; None for anything else (not JSON, NaN, nested past the parser's
    recursion limit, not an object)."""
    try:
        frame = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    return frame if isinstance(frame, dict) else None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class SocketSettings:
    """What every socket of a server shares: the send timeout (``GLASSGRAPH_SEND_TIMEOUT``), the token check
    (``write_gate``) and the budget of unsent answers (``server.http.socket_budget``)."""

    send_timeout_s: float
    token_ok: Callable[[str], bool]
    budget: AnswerBudget


async def serve(receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]], run: Runner,
                settings: SocketSettings, client: str) -> None:
    """One socket's life (the ASGI websocket messages) for ``client`` (its address); when it ends, its
    requests finish their calls in progress and close their answers before this returns."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    socket = _Socket(send, run, settings, client)
    try:
        while not socket.gone:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            await socket.take(text if text is not None else (message.get("bytes") or b"").decode("utf-8", "replace"))
    finally:
        socket.gone = True
        if socket.tasks:
            await asyncio.wait(list(socket.tasks))


def query_string(internal: Internal) -> bytes:
    """The request's query string."""
    return urlencode(internal.query).encode("latin-1") if internal.query else b""
