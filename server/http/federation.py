"""SERVICE calls to allowed endpoints, made through a relay on loopback that bounds each call.

pyoxigraph calls a SERVICE endpoint itself, with no timeout and no limit on what comes back, and
reports a failure as a bare error. So before a query (or update) that calls out runs, each
SERVICE endpoint in its text is replaced by a one-use URL of this process's relay
(``http://127.0.0.1:PORT/call/{random id}``): pyoxigraph sends its request there, and the relay
passes it to the real endpoint with a deadline for the whole call (``GLASSGRAPH_SERVICE_TIMEOUT``),
reads at most ``GLASSGRAPH_MAX_RESULT_BYTES``, counts the rows (``GLASSGRAPH_SERVICE_MAX_ROWS``) and
hands the answer back untouched (triple terms included). When a call fails, the relay answers
pyoxigraph with an error and keeps the reason, which the query's caller raises instead of the
store's bare error: 502 naming the endpoint and what went wrong, or 422 past a limit. With
``SERVICE SILENT`` pyoxigraph ignores the failure, and so does the caller.

``LOAD`` in an update goes through the relay too, within the same time and byte limits: the relay
reads the document with the real URL as its base and hands pyoxigraph N-Triples (N-Quads for a
dataset), whose IRIs are all absolute, so relative IRIs resolve against the document's own URL, not
the relay's.

Redirects are not followed: an allowed endpoint could otherwise send the server anywhere. The
endpoint spans come from ``sparql_guard.service_spans`` (in a worker), so the server itself only
splices text at given offsets.
"""
from __future__ import annotations

import http.client
import secrets
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from urllib.parse import urlsplit

from pyoxigraph import QueryResultsFormat, QuerySolutions, RdfFormat, parse, parse_query_results, serialize

from server.errors import GlassgraphError, LimitExceeded, RemoteFailed
from server.http.sparql_guard import Span

_READ_SIZE = 64 * 1024
_FORWARDED_HEADERS = ("Accept", "Content-Type")


@dataclass(frozen=True)
class ServiceLimits:
    timeout_s: float  # GLASSGRAPH_SERVICE_TIMEOUT: one whole call, connection to last byte
    max_rows: int  # GLASSGRAPH_SERVICE_MAX_ROWS
    max_bytes: int  # GLASSGRAPH_MAX_RESULT_BYTES


@dataclass
class _Call:
    endpoint: str
    limits: ServiceLimits
    keyword: str = "SERVICE"  # or LOAD
    failure: GlassgraphError | None = None

    @property
    def name(self) -> str:
        """How errors name the call: ``SERVICE <endpoint>``, ``LOAD <document>``."""
        return f"{self.keyword} <{self.endpoint}>"


@dataclass
class Relayed:
    """A text whose SERVICE endpoints go through the relay, and the calls it may make."""

    text: str
    calls: list[_Call] = field(default_factory=list)

    @property
    def failure(self) -> GlassgraphError | None:
        """Why the first failed call failed (None if none did)."""
        return next((call.failure for call in self.calls if call.failure is not None), None)


class _Relay:
    """One loopback HTTP server per process, started on first use; calls are registered by id."""

    def __init__(self) -> None:
        self.calls: dict[str, _Call] = {}
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def _relay(self) -> None:
                call = relay.calls.get(self.path.removeprefix("/call/"))
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if call is None:
                    self._send(404, "text/plain", b"no such call")
                    return
                try:
                    headers = {k: self.headers[k] for k in _FORWARDED_HEADERS if k in self.headers}
                    content_type, payload = _forward(call, self.command, body, headers)
                except GlassgraphError as failure:
                    call.failure = call.failure or failure
                    self._send(502, "text/plain", failure.message.encode())
                    return
                self._send(200, content_type, payload)

            def _send(self, status: int, content_type: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _relay

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_port}/call/"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="service-relay").start()


_relay: _Relay | None = None
_starting = threading.Lock()


def _the_relay() -> _Relay:
    global _relay
    with _starting:
        if _relay is None:
            _relay = _Relay()
        return _relay


@contextmanager
def relayed(text: str, spans: Sequence[Span], limits: ServiceLimits) -> Iterator[Relayed]:
    """``text`` with the endpoint at each span replaced by a relay URL, valid until the block ends
    (pyoxigraph evaluates lazily: read the whole result inside it)."""
    if not spans:
        yield Relayed(text)
        return
    relay = _the_relay()
    result, pieces, cursor, ids = Relayed(text), [], 0, []
    for span in sorted(spans, key=lambda s: s.start):
        call_id = secrets.token_urlsafe(16)
        call = _Call(span.endpoint, limits, span.keyword)
        relay.calls[call_id] = call
        ids.append(call_id)
        result.calls.append(call)
        pieces += [text[cursor:span.start], f"<{relay.base}{call_id}>"]
        cursor = span.end
    result.text = "".join(pieces) + text[cursor:]
    try:
        yield result
    finally:
        for call_id in ids:
            relay.calls.pop(call_id, None)


def _forward(call: _Call, method: str, body: bytes, headers: dict[str, str]) -> tuple[str, bytes]:
    """The endpoint's answer to the request pyoxigraph made: ``(content type, body)``, checked.

    Each socket operation waits at most the timeout, and a timer cuts the connection when the whole
    call has taken it (an endpoint that answers a byte at a time never times out a single read).
    """
    endpoint, limits = call.endpoint, call.limits
    parts = urlsplit(endpoint)
    kind = {"http": http.client.HTTPConnection, "https": http.client.HTTPSConnection}.get(parts.scheme)
    if kind is None or not parts.hostname:
        raise RemoteFailed(f"{call.name}: only http and https endpoints can be called")
    connection = kind(parts.hostname, parts.port, timeout=limits.timeout_s)
    expired, sockets = threading.Event(), []
    timer = threading.Timer(limits.timeout_s, _cut, args=(sockets, expired))
    timer.start()
    try:
        connection.connect()
        sockets.append(connection.sock)  # kept: http.client lets go of it once the answer says "close"
        if expired.is_set():  # the timer fired while connecting, before there was a socket to cut
            raise TimeoutError
        connection.request(method, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                           body=body or None, headers={**headers, "User-Agent": "Glassgraph"})
        response = connection.getresponse()
        payload = _read_at_most(response, call)
        if expired.is_set():  # the cut ended the body early: what was read is not the answer
            raise TimeoutError
    except (OSError, http.client.HTTPException) as error:
        if expired.is_set() or isinstance(error, TimeoutError):
            raise RemoteFailed(f"{call.name} did not answer within {limits.timeout_s:g} s "
                               "(GLASSGRAPH_SERVICE_TIMEOUT)") from None
        raise RemoteFailed(f"{call.name} cannot be reached or broke off: {error}") from None
    finally:
        timer.cancel()
        connection.close()
    content_type = response.getheader("Content-Type") or ""
    if response.status != 200:
        raise RemoteFailed(f"{call.name} answered {response.status} {response.reason}: "
                           f"{payload[:300].decode('utf-8', errors='replace').strip()}")
    if call.keyword == "LOAD":
        return _absolute(call, content_type, payload)
    _check_rows(call, content_type, payload)
    return content_type, payload


def _cut(sockets: list[socket.socket], expired: threading.Event) -> None:
    expired.set()
    for sock in sockets:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _read_at_most(response: http.client.HTTPResponse, call: _Call) -> bytes:
    """The body, refused past ``max_bytes`` (GLASSGRAPH_MAX_RESULT_BYTES) without reading on."""
    parts, size = [], 0
    while part := response.read1(_READ_SIZE):
        parts.append(part)
        size += len(part)
        if size > call.limits.max_bytes:
            raise LimitExceeded(f"{call.name} answered more than {call.limits.max_bytes} bytes "
                                "(GLASSGRAPH_MAX_RESULT_BYTES)")
    return b"".join(parts)


def _absolute(call: _Call, content_type: str, payload: bytes) -> tuple[str, bytes]:
    """A LOADed document as N-Triples (N-Quads for a dataset), its relative IRIs resolved against its URL."""
    media = content_type.partition(";")[0].strip().lower()
    fmt = RdfFormat.from_media_type(media) if media else None
    if fmt is None:
        raise RemoteFailed(f"{call.name} answered something that is not RDF ({media or 'no Content-Type'})")
    target = RdfFormat.N_QUADS if fmt.supports_datasets else RdfFormat.N_TRIPLES
    try:
        data = serialize(parse(payload, format=fmt, base_iri=call.endpoint), format=target)
    except (SyntaxError, ValueError, OSError) as error:
        raise RemoteFailed(f"{call.name} answered {media} that does not parse: {error}") from None
    return target.media_type, data or b""


def _check_rows(call: _Call, content_type: str, payload: bytes) -> None:
    """SPARQL results of at most ``max_rows`` rows, or the reason they are not."""
    media = content_type.partition(";")[0].strip().lower()
    fmt = QueryResultsFormat.from_media_type(media) if media else None
    try:
        if fmt is None:
            raise ValueError("not a SPARQL results format")
        results = parse_query_results(payload, format=fmt)
        rows = sum(1 for _ in islice(results, call.limits.max_rows + 1)) if isinstance(results, QuerySolutions) else 0
    except (SyntaxError, ValueError, OSError) as error:
        raise RemoteFailed(f"SERVICE <{call.endpoint}> answered something that is not SPARQL results "
                           f"({media or 'no Content-Type'}): {error}") from None
    if rows > call.limits.max_rows:
        raise LimitExceeded(f"SERVICE <{call.endpoint}> answered more than {call.limits.max_rows} rows "
                            "(GLASSGRAPH_SERVICE_MAX_ROWS): narrow the pattern or put a LIMIT inside SERVICE")
