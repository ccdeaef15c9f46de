"""TrustGraph's REST forms of the services its websocket offers (``server.http.trustgraph_socket``):
``POST /api/v1/flow/{flow}/service/{service}`` and ``POST /api/v1/librarian``, the request object as the body.

Each is made into the same Glassgraph request as over the socket and run through this app (a nested request:
the caller's address and ``Authorization`` go with it, so every limit, rate and check applies); the answer is
the one response object TrustGraph's client reads (a SELECT's batches joined). An error is
``{"error": {"type", "message"}}`` with status 200, as TrustGraph's gateway answers it (its client reads an
error's message only from a 200, and says "Status code 400" of anything else); the status Glassgraph would have
answered is in ``X-Glassgraph-Status``. A refused token keeps its 401 or 403, as TrustGraph's does. REST answers
are never streamed.
"""
from __future__ import annotations

import io
import json
from collections.abc import Iterator
from itertools import chain
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from server.errors import BadRequest, LimitExceeded, NotFound
from server.http.api import json_body
from server.http.context import CLIENT_LEFT
from server.http.trustgraph_socket import Internal, RequestError, answer_too_large, internal_request, query_string

blueprint = Blueprint("trustgraph_rest", __name__)
_KEPT = ("SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "SCRIPT_NAME", "REMOTE_ADDR", "REMOTE_PORT", "HTTP_HOST",
         "HTTP_AUTHORIZATION", "wsgi.version", "wsgi.url_scheme", "wsgi.errors", "wsgi.multithread",
         "wsgi.multiprocess", "wsgi.run_once", CLIENT_LEFT)  # the nested request stops when its client leaves


AUTH_STATUSES = (401, 403)


@blueprint.after_request
def _error_in_the_body(response: Response) -> Response:
    """An error answered 200 with its ``{"error": ...}`` body, its status in ``X-Glassgraph-Status``."""
    if request.method == "POST" and response.status_code >= 400 and response.status_code not in AUTH_STATUSES \
            and response.is_json:
        response.headers["X-Glassgraph-Status"] = str(response.status_code)
        response.status_code = 200
    return response


@blueprint.route("/api/v1/flow/<flow>/service/<service>", methods=["POST"])
def flow_service(flow: str, service: str) -> Response:
    return _answer(service)


@blueprint.route("/api/v1/librarian", methods=["POST"])
def librarian() -> Response:
    return _answer("librarian")


@blueprint.route("/api/v1/document-stream", methods=["GET"])
def document_stream() -> Response:
    """TrustGraph's ``tg-get-document-content``: the text of a document, page or chunk (``document-id``, its
    IRI), as ``/api/documents`` answers it; an error with its own status (the client checks the status)."""
    document = request.args.get("document-id")
    if not document:
        raise BadRequest("document-stream needs the 'document-id' of a document, page or chunk (its IRI)")
    answered_as_is = Internal("GET", "/api/documents", lambda *_: iter(()), query={"id": document},
                              accept="text/plain")  # no frames: the body is the answer
    status, headers, body = _run(answered_as_is)
    return Response(body, status=status, content_type=headers.get("content-type"))


def _answer(service: str) -> Response:
    body = json_body()
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object: the service's request")
    try:
        internal = internal_request({"service": service, "request": {**body, "streaming": False}})
    except RequestError as error:
        raise (NotFound if error.type == "unknown-service" else BadRequest)(str(error)) from None
    status, headers, answer = _run(internal)
    frames = internal.frames(status, headers, iter([answer]))
    frame = next(frames)
    if "error" in frame:
        response = jsonify(error=frame["error"])
        response.status_code = status if status >= 400 else 502
        return response
    first: dict[str, Any] | list = frame["response"]
    if frame["complete"]:
        return jsonify(first)
    if isinstance(first, list):  # triples in pieces
        return jsonify([*first, *(triple for frame in frames for triple in frame["response"])])
    most, written, size = current_app.config["GLASSGRAPH"].max_result_bytes, [], 0
    for piece in _joined_bindings(first, frames):
        size += len(piece)
        if size > most:
            raise LimitExceeded(answer_too_large(most))
        written.append(piece)
    return Response(written, mimetype="application/json")


def _joined_bindings(first: dict[str, Any], frames: Iterator[dict]) -> Iterator[bytes]:
    """A SELECT's frames as one JSON object, a frame at a time: an answer of 5 MB of TSV is some hundreds of MB
    as rows of wire terms in Python (one built whole peaked the worker at 720 MB), and its JSON at most
    ``GLASSGRAPH_MAX_RESULT_BYTES`` (``_answer``)."""
    head = json.dumps({key: value for key, value in first.items() if key != "bindings"})
    yield f'{head[:-1]}, "bindings": ['.encode()
    separator = ""
    for frame in chain([{"response": first}], frames):
        rows = frame.get("response", {}).get("bindings", [])
        if rows:
            yield (separator + ", ".join(json.dumps(row) for row in rows)).encode()
            separator = ", "
    yield b"]}"


def _run(internal: Internal) -> tuple[int, dict[str, str], bytes]:
    """``internal`` through this app, as a request of the caller's: status, headers (lower-case), body."""
    environ = {key: request.environ[key] for key in _KEPT if key in request.environ}
    environ.update({"REQUEST_METHOD": internal.method, "PATH_INFO": internal.path,
                    "QUERY_STRING": query_string(internal).decode("latin-1"), "CONTENT_TYPE": internal.content_type,
                    "CONTENT_LENGTH": str(len(internal.body)), "HTTP_ACCEPT": internal.accept,
                    "wsgi.input": io.BytesIO(internal.body)})
    started: list = []
    result = current_app.wsgi_app(environ, lambda status, headers, exc_info=None: started.extend([status, headers]))
    try:
        body = b"".join(result)
    finally:
        getattr(result, "close", lambda: None)()
    return int(started[0].split(" ", 1)[0]), {name.lower(): value for name, value in started[1]}, body
