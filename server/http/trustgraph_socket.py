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
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from pyoxigraph import QueryResultsFormat, RdfFormat, parse, parse_query_results

from server.errors import ErrorType
from server.explain.wire import term_wire

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


def _rag(path: str, limits: dict[str, str]) -> Callable[[dict], Internal]:
    """A GraphRAG or document RAG request: the question, collection, ``limits`` (TrustGraph's key -> ours)
    and streaming."""

    def make(request: dict) -> Internal:
        body: dict[str, Any] = {"query": request.get("query"), "collection": request.get("collection") or "default",
                                "explainable": bool(request.get("explainable", False))}
        for key, name in limits.items():
            if request.get(key) is not None:
                body[name] = request[key]
        streaming = bool(request.get("streaming", False))
        return Internal("POST", path, _rag_frames if streaming else _rag_answer,
                        body=json.dumps({**body, "streaming": streaming}).encode(),
                        accept="application/x-ndjson" if streaming else "application/json")
    return make


def _rag_frames(status: int, headers: dict[str, str], body: Iterator[bytes]) -> Iterator[dict]:
    """Each NDJSON message of a streamed answer as the frame's ``response`` (the shapes are TrustGraph's)."""
    if status >= 400:
        yield _http_error(status, b"".join(body))
        return
    pending = b""
    for piece in body:
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield _message_frame(json.loads(line))


def _message_frame(message: dict) -> dict:
    """A GraphRAG message as a frame: its fields but those it leaves empty (a client reads ``"error" in
    response`` as an error)."""
    if message.get("error"):
        return {"error": message["error"], "complete": True}
    return {"response": {key: value for key, value in message.items() if value is not None},
            "complete": bool(message.get("end_of_session"))}


def _rag_answer(status: int, headers: dict[str, str], body: Iterator[bytes]) -> Iterator[dict]:
    """One frame of a whole answer: ``{"response": text}`` as TrustGraph's non-streamed RAG answers."""
    raw = b"".join(body)
    if status >= 400:
        yield _http_error(status, raw)
        return
    answer = json.loads(raw)
    if answer.get("error"):
        yield {"error": answer["error"], "complete": True}
        return
    yield {"response": {"response": answer.get("answer", ""), "session": answer.get("session"),
                        "outcome": answer.get("outcome")}, "complete": True}


def _sparql(request: dict) -> Internal:
    query = request.get("query")
    if not isinstance(query, str):
        raise RequestError("the request needs a 'query' (SPARQL text)")
    batch = SPARQL_BATCH if request.get("batch-size") is None else request["batch-size"]
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise RequestError("'batch-size' must be a positive integer")
    return Internal("GET", "/sparql", lambda status, headers, body: _sparql_frames(status, headers, body, batch),
                    query={"query": query}, accept="application/sparql-results+json, application/n-triples;q=0.9")


def _sparql_frames(status: int, headers: dict[str, str], body: Iterator[bytes], batch: int) -> Iterator[dict]:
    """SPARQL results as TrustGraph's ``sparql`` service sends them: SELECT in batches of ``batch`` rows."""
    raw = b"".join(body)
    if status >= 400:
        yield _http_error(status, raw)
        return
    media = headers.get("content-type", "").split(";")[0].strip()
    if media == "application/n-triples":
        triples = [{"s": term_wire(t.subject), "p": term_wire(t.predicate), "o": term_wire(t.object)}
                   for t in parse(raw, format=RdfFormat.N_TRIPLES)]
        yield {"response": {"query-type": "construct", "triples": triples}, "complete": True}
        return
    results = parse_query_results(raw, format=QueryResultsFormat.JSON)
    if isinstance(results, bool) or not hasattr(results, "variables"):
        yield {"response": {"query-type": "ask", "ask-result": bool(results)}, "complete": True}
        return
    variables = [variable.value for variable in results.variables]
    rows = [{"values": [term_wire(solution[name]) if solution[name] is not None else None for name in variables]}
            for solution in results]
    for start in range(0, max(len(rows), 1), batch):
        yield {"response": {"query-type": "select", "variables": variables, "bindings": rows[start:start + batch]},
               "complete": start + batch >= len(rows)}


def _triples(request: dict) -> Internal:
    """A pattern (``s``, ``p``, ``o`` wire terms, ``g`` or ``collection``, ``limit``) for ``/api/triples``."""
    batch = SPARQL_BATCH if request.get("batch-size") is None else request["batch-size"]
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise RequestError("'batch-size' must be a positive integer")
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


def _http_error(status: int, raw: bytes) -> dict:
    """An error frame from Glassgraph's JSON error body (``{"error": {"type", "message"}}``) or, from
    ``/sparql``, its text (the protocol's plain-text errors), typed by the status."""
    try:
        error = json.loads(raw)["error"]
        return {"error": {"type": error["type"], "message": error["message"]}, "complete": True}
    except (ValueError, KeyError, TypeError):
        message = raw.decode("utf-8", "replace").strip()[:2000] or f"HTTP {status}"
        return {"error": {"type": ErrorType.of_status(status).wire_name, "message": message}, "complete": True}


SERVICES: dict[str, Callable[[dict], Internal]] = {
    "graph-rag": _rag("/api/graph-rag", GRAPH_LIMITS),
    "document-rag": _rag("/api/document-rag", DOCUMENT_LIMITS),
    "sparql": _sparql,
    "triples": _triples,
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
    return SERVICES[service](request)


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


async def serve(receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]], run: Runner) -> None:
    """One socket's life (the ASGI websocket messages): auth first, then each request answered in a task of
    its own (a client multiplexes them by id)."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    token: str | None = None
    authenticated = False
    tasks: set[asyncio.Task] = set()
    lock = asyncio.Lock()

    async def reply(frame: dict) -> None:
        async with lock:
            await send({"type": "websocket.send", "text": json.dumps(frame, ensure_ascii=False)})

    try:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                text = (message.get("bytes") or b"").decode("utf-8", "replace")
            try:
                frame = json.loads(text)
            except ValueError:
                await reply({"error": {"type": "bad-request", "message": "a frame must be one JSON object"}})
                continue
            if not isinstance(frame, dict):
                await reply({"error": {"type": "bad-request", "message": "a frame must be one JSON object"}})
                continue
            if frame.get("type") == "auth":
                token = frame.get("token") if isinstance(frame.get("token"), str) and frame.get("token") else None
                authenticated = True
                await reply({"type": "auth-ok", "workspace": WORKSPACE, "default_workspace": WORKSPACE})
                continue
            request_id = frame.get("id")
            if not authenticated:
                await reply({"id": request_id, "error": {"type": "unauthorized", "message":
                             "send {\"type\": \"auth\", \"token\": ...} first"}, "complete": True})
                continue
            task = asyncio.create_task(_answer(frame, token, run, reply))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        for task in tasks:
            task.cancel()


async def _answer(frame: dict, token: str | None, run: Runner, reply: Callable[[dict], Awaitable[None]]) -> None:
    request_id = frame.get("id")
    try:
        internal = internal_request(frame)
        answered = await run(internal, token)
        try:
            frames = internal.frames(answered.status, answered.headers, answered.pieces)
            while (next_frame := await answered.call(lambda: next(frames, None))) is not None:
                await reply({"id": request_id, **next_frame})
        finally:  # a socket that closes stops the run, as a client that leaves an HTTP stream does
            await answered.close()
    except RequestError as error:
        await reply({"id": request_id, "error": {"type": error.type, "message": str(error)}, "complete": True})
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - the socket outlives one request's failure
        log.exception("the socket request %r failed", request_id)
        await reply({"id": request_id, "error": {"type": "internal-error", "message": "see the server log"},
                     "complete": True})


def query_string(internal: Internal) -> bytes:
    """The request's query string."""
    return urlencode(internal.query).encode("latin-1") if internal.query else b""
