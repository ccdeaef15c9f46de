"""Serving: the gunicorn worker and the ASGI-to-WSGI bridge, the one place where request framing is
handled.

Connections live in the worker's event loop: uvicorn's httptools parser reads the request line and
headers (``HeadBoundedHttp``: at most 16 KB of a head that has not ended), and the bridge reads the body,
counting its bytes however it is framed (Content-Length or chunked). A slow client therefore holds
a coroutine, never a thread. A body over ``GLASSGRAPH_MAX_BODY`` is answered 413 as soon as it is
seen to be too large, one that takes longer than ``GLASSGRAPH_BODY_TIMEOUT`` 408; the app never
sees either.

The Flask app then runs in a bounded thread pool (``GLASSGRAPH_THREADS``) with a PEP 3333 environ
whose input is the whole body. Its response goes out piece by piece as the app yields it (SSE and
NDJSON arrive incrementally), each piece after the client's socket has room for it; a body of declared
length up to ``PIECE_BYTES`` (most answers) is taken whole in the one call into the pool that runs the app.
A large piece (a SPARQL answer is one) goes out in ``PIECE_BYTES`` slices: uvicorn writes what it is given whole
into the transport's buffer and only then waits for room, so a client that reads nothing holds
about one slice, not a copy of its answer. A slice that finds no room for ``GLASSGRAPH_SEND_TIMEOUT``
drops the connection (its buffer discarded); then, as when the client leaves, the response iterable
is closed: a GraphRAG run stops, its session is recorded as cancelled and its answer slot is freed.
Errors are logged; the client gets at most a JSON 500.
"""
from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn_worker import UvicornWorker

from server.config import Config
from server.errors import ContentTooLarge, GlassgraphError, RequestTimeout
from server.http import log_redaction, trustgraph_socket
from server.http.allocator import Trimmer
from server.http.context import CLIENT_LEFT
from server.http.negotiation import prefers
from server.http.socket_budget import AnswerBudget
from server.http.sparql_eval import PARSE_STACK_BYTES

log = logging.getLogger("glassgraph.http")

Message = dict[str, Any]
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
# (method, path, header) -> the refusal of a request its head already decides (a write without the token)
HeadCheck = Callable[[str, str, Callable[[str], "str | None"]], "GlassgraphError | None"]

HEAD_LIMIT = 16 * 1024  # of a request head (line and headers) not yet ended; an 8 KB URL fits
MAX_HEADER_FIELDS = 100  # a request's; browsers send 10-20
PARSE_SLICE = 8 * 1024  # the most of a read parsed before the bytes held without progress are counted
MAX_PIPELINED = 8  # requests parsed ahead of the one being answered, on one connection
LINGER_S = 1.0  # after an early answer, how long the rest of a body is read and dropped
JSON = "application/json"
PIECE_BYTES = 64 * 1024  # the most of a response body handed to uvicorn at once (its write buffer's high water)
# pyoxigraph's parser recurses: request threads get four times the stack that the query workers
# prove an update parses within (sparql_eval.PARSE_STACK_BYTES) before the server parses it.
THREAD_STACK_BYTES = 4 * PARSE_STACK_BYTES


class HeadBoundedHttp(HttpToolsProtocol):
    """uvicorn's httptools (llhttp) protocol, bounded as h11 bounded itself. llhttp holds nothing, but httptools
    keeps a header's name and value, and uvicorn the URL, each header and each request parsed ahead of the one
    being answered, so an attacker could otherwise grow them without end. Here:

    - a head, a chunk's size line or trailer fields are refused (400, the connection closed) once more than
      ``HEAD_LIMIT`` bytes have been parsed without the parser making progress (the head's end, a chunk's start
      or end, a piece of body, the request's end). Each read is parsed in slices of ``PARSE_SLICE`` and the count
      looked at after each; what follows the progress in its own slice goes uncounted, so a connection holds at
      most ``HEAD_LIMIT + 2 * PARSE_SLICE`` unended (32 KB), and a head of up to ``HEAD_LIMIT`` is never refused;
    - a request has at most ``MAX_HEADER_FIELDS`` header fields (400): httptools hands each to uvicorn as it
      ends, and 16 KB of empty fields held about 480 KB a connection;
    - at most ``MAX_PIPELINED`` requests wait behind the one being answered; past them the connection is
      dropped (no 400: an answer may be half sent). One read of 256 KB of pipelined `GET /` queued 14,562;
    - trailer fields (after a chunked body) are dropped, as they were under h11: uvicorn would have added them
      to the request's headers, where a front proxy's filtering of headers never saw them;
    - an upgrade other than to a websocket (``Upgrade: h2c`` from some HTTP/2 clients) is ignored, the request
      and its body read as if it had not been asked (``_parse``); a ``CONNECT`` is refused (400).
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._since_progress, self._fields, self._in_head, self._upgrade_ignored = 0, 0, True, False
        self._too_many_pipelined = False
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        for start in range(0, len(data), PARSE_SLICE):
            piece = data[start:start + PARSE_SLICE]
            self._since_progress += len(piece)
            self._parse(piece)
            if self.transport.is_closing() or self.transport.get_protocol() is not self:  # refused, or a websocket
                return
            if self._too_many_pipelined:
                self.logger.warning("more than %d requests pipelined: the connection was dropped", MAX_PIPELINED)
                self.pipeline.clear()
                self.transport.abort()
                return
            if self._since_progress > HEAD_LIMIT:
                self.logger.warning("%d bytes of a head, chunk line or trailers: refused", self._since_progress)
                self.send_400_response(f"Request head, chunk line or trailers larger than {HEAD_LIMIT} bytes.")
                return

    def _parse(self, piece: bytes) -> None:
        """uvicorn's ``data_received`` for one slice, but for an upgrade other than to a websocket (``Upgrade: h2c``
        from Java's HTTP client, on requests with a body too). llhttp stops at such a request's head as if its
        body were another protocol's, and uvicorn dropped the rest of the read and read on from there: the app
        had an empty body, and the bytes of the declared body were read as requests of their own (one request
        to a proxy in front, two here). Here the head is given to the parser again without the upgrade (its app
        not started the first time), so that its body is read as a body."""
        self._unset_keepalive_if_required()
        again = b""  # the head given again, in front of ``piece``
        while piece:
            try:
                self.parser.feed_data(piece)
                return
            except httptools.HttpParserError:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
                return
            except httptools.HttpParserUpgrade as upgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                    return
                if upgrade.args[0] <= len(again):  # a CONNECT, or an upgrade the head given again still asks
                    self.send_400_response("This server upgrades a connection only to a websocket.")
                    return
                again = self._head_without_upgrade()
                piece = again + piece[upgrade.args[0]:]
                self.parser = httptools.HttpRequestParser(self)  # llhttp's own may hold the request ended and closed

    def _head_without_upgrade(self) -> bytes:
        """The head just parsed (as uvicorn keeps it), without ``Upgrade`` and its ``Connection`` token."""
        lines = [b"%s %s HTTP/%s" % (self.parser.get_method(), self.url, self.parser.get_http_version().encode())]
        for name, value in self.headers:
            if name == b"connection":
                value = b", ".join(token for token in (t.strip() for t in value.split(b","))
                                   if token and token.lower() != b"upgrade")
            if name != b"upgrade" and value:
                lines.append(name + b": " + value)
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def on_message_begin(self) -> None:
        self._fields, self._in_head, self._upgrade_ignored = 0, True, False
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            return  # a trailer field
        self._fields += 1
        if self._fields > MAX_HEADER_FIELDS:
            self.logger.warning("a request with more than %d header fields: refused", MAX_HEADER_FIELDS)
            raise ValueError("too many header fields")  # httptools: a parse error, which uvicorn answers 400
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._since_progress, self._in_head = 0, False
        if self.parser.should_upgrade() and not self._should_upgrade():
            self._upgrade_ignored = True  # its head is parsed again without it (``_parse``), and only then run
            return
        super().on_headers_complete()
        if len(self.pipeline) > MAX_PIPELINED:
            self.pipeline.popleft()  # never started; the connection is dropped once this slice is parsed
            self._too_many_pipelined = True

    def on_body(self, body: bytes) -> None:
        self._since_progress = 0
        super().on_body(body)

    def on_chunk_header(self) -> None:
        self._since_progress = 0

    def on_chunk_complete(self) -> None:
        self._since_progress = 0

    def on_message_complete(self) -> None:
        self._since_progress = 0
        if not self._upgrade_ignored:  # its request was not started: its head is parsed again
            super().on_message_complete()


class Worker(UvicornWorker):
    """uvicorn's gunicorn worker with httptools' parser, bounded (``HeadBoundedHttp``; h11, which bounds a head by
    itself, cost 10% more of the server's CPU a request: docs/decisions.md, decision 33), with gunicorn's
    ``--worker-connections`` (default 1000) as uvicorn's ``limit_concurrency``: past that many connections or
    requests, a request is answered 503. uvicorn_worker's own worker passes neither of them to uvicorn (nor
    gunicorn's ``--limit-request-*``). A client's address is its connection's: ``X-Forwarded-For`` is read only
    from ``GLASSGRAPH_TRUSTED_PROXIES`` (uvicorn believes it from loopback by default, so any local
    client, or one behind a proxy that passes the header on, could take another's fair share)."""

    CONFIG_KWARGS = {"loop": "auto", "http": HeadBoundedHttp,
                     "ws": "websockets", "ws_max_size": trustgraph_socket.MAX_FRAME_BYTES,
                     "ws_max_queue": 2}  # frames a socket buffers unread: 32 (of up to 1 MB) by default
    # "websockets", not the "websockets-sansio" its deprecation warning points to: uvicorn 0.55's sans-I/O
    # implementation ignores ws_max_queue, and with it the bound on what a socket buffers unread

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config.limit_concurrency = self.cfg.worker_connections
        try:
            proxies = Config.from_env().trusted_proxies
        except ValueError:  # a bad setting: the app's start names it and stops the worker (server.asgi)
            proxies = ()
        self.config.proxy_headers, self.config.forwarded_allow_ips = bool(proxies), list(proxies)
        log_redaction.install()


class _ClientGone(Exception):
    """The client closed the connection while its body was being read."""


class _SendStalled(Exception):
    """The client took no slice of its response for the send timeout: its connection has been dropped."""


class WsgiBridge:
    """An ASGI app serving a WSGI app: ``WsgiBridge(flask_app, max_body_bytes, body_timeout_s, threads,
    send_timeout_s, trimmer, check_head, token_ok, socket_budget)``; ``check_head`` answers a request from its
    head, before its body is read, ``token_ok`` tells the token a TrustGraph socket presents (both from
    ``write_gate``), ``socket_budget`` bounds the answers sockets hold unsent (``server.http.socket_budget``)."""

    def __init__(self, app: WsgiApp, max_body_bytes: int, body_timeout_s: float, threads: int,
                 send_timeout_s: float = Config.send_timeout_s, trimmer: Trimmer | None = None,
                 check_head: HeadCheck | None = None, token_ok: Callable[[str], bool] = lambda token: False,
                 socket_budget: AnswerBudget | None = None) -> None:
        self.app, self.check_head = app, check_head
        self.sockets = trustgraph_socket.SocketSettings(send_timeout_s, token_ok, socket_budget or AnswerBudget(
            Config.socket_memory_mb << 20, Config.max_result_bytes, Config.queue_wait_s))
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.send_timeout_s = send_timeout_s
        self.trimmer = trimmer  # told the size of each request and response, to give memory back after large ones
        threading.stack_size(THREAD_STACK_BYTES)  # for the pool's threads, created from here on
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wsgi")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        if scope["type"] != "http":  # lifespan: nothing to start or stop
            return
        send = _SlicedSend(send, self.send_timeout_s)
        refusal = self.check_head and self.check_head(scope["method"], scope["path"],
                                                      lambda name: _header(scope, name.encode()))
        if refusal is not None:
            await _refuse(refusal, scope, receive, send)
            return
        body = None
        try:
            body = await self._receive_body(scope, receive, send)
            if body is None:
                return
            gone, left = asyncio.Event(), threading.Event()  # the event loop's, and the app thread's
            watcher = asyncio.create_task(_watch_disconnect(receive, gone, left))
            try:
                await self._respond(scope, body, send, gone, left)
            finally:
                watcher.cancel()
        except _SendStalled:
            log.warning("dropped the response to %s %s: the client took none of it for %g s "
                        "(GLASSGRAPH_SEND_TIMEOUT)", scope["method"], scope["path"], self.send_timeout_s)
        finally:
            if self.trimmer is not None:
                self.trimmer.note(len(body or b"") + send.body_bytes)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """TrustGraph's websocket API (``server.http.trustgraph_socket``); any other socket path is refused."""
        if scope["path"] != trustgraph_socket.PATH:
            await send({"type": "websocket.close", "code": 1008, "reason": f"no socket here; {trustgraph_socket.PATH}"})
            return

        async def run(internal: trustgraph_socket.Internal, token: str | None) -> trustgraph_socket.Answered:
            headers = [(b"accept", internal.accept.encode()),
                       (b"content-type", internal.content_type.encode("latin-1", "replace"))]
            if token:
                headers.append((b"authorization", f"Bearer {token}".encode("latin-1", "replace")))
            http = {"type": "http", "method": internal.method, "path": internal.path, "headers": headers,
                    "query_string": trustgraph_socket.query_string(internal), "client": scope.get("client"),
                    "server": scope.get("server"), "scheme": "http", "http_version": "1.1"}
            response = _AppResponse(self.app, wsgi_environ(http, internal.body))
            calls = _AppCalls(self.pool)
            try:
                first = await calls(response.begin)
            except BaseException:
                await calls(response.close)
                raise

            def pieces() -> Iterator[bytes]:
                piece = first
                while piece is not None:
                    yield piece
                    piece = response.pull()

            async def close() -> None:
                if not response.closed:
                    await calls(response.close)

            status = int(response.start.status.split(" ", 1)[0])
            return trustgraph_socket.Answered(status, {name.lower(): value for name, value in response.start.headers},
                                              pieces(), calls, close)

        await trustgraph_socket.serve(receive, send, run, self.sockets, (scope.get("client") or ("?",))[0])

    async def _receive_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body; None when the client left or has been answered 413 or 408."""
        try:
            return await asyncio.wait_for(self._read_body(scope, receive), self.body_timeout_s)
        except _ClientGone:
            return None
        except ContentTooLarge as refusal:
            await _refuse(refusal, scope, receive, send)
        except asyncio.TimeoutError:
            await _refuse(RequestTimeout(f"request body not received within {self.body_timeout_s:g} s "
                                         "(GLASSGRAPH_BODY_TIMEOUT)"), scope, receive, send)
        return None

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        """The whole body, counted as it arrives; ``ContentTooLarge`` past the limit, before reading on."""
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise ContentTooLarge.over_limit(self.max_body_bytes)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                raise ContentTooLarge.over_limit(self.max_body_bytes)
            if not message.get("more_body", False):
                return bytes(body)

    async def _respond(self, scope: Scope, body: bytes, send: Send, gone: asyncio.Event,
                       left: threading.Event) -> None:
        """Run the app in the pool and send its response; an error before the headers is a JSON 500. The app
        sees ``left`` (``context.CLIENT_LEFT``), set when the client closes the connection."""
        environ = wsgi_environ(scope, body)
        environ[CLIENT_LEFT] = left
        response = _AppResponse(self.app, environ)
        run = _AppCalls(self.pool)
        try:
            await _stream(response, send, gone, run)
        except _SendStalled:
            raise
        except Exception:
            log.exception("error serving %s %s", scope["method"], scope["path"])
            if not response.start.sent:
                await _send_error(send, scope, GlassgraphError("internal error; see the server log"))
            # else the response stays incomplete and uvicorn closes the connection: the client sees it cut
        finally:
            if not response.closed:
                await run(response.close)


async def _stream(response: _AppResponse, send: Send, gone: asyncio.Event, run: _AppCalls) -> None:
    """Each piece as the app yields it, after uvicorn has room for it; stop when the client is gone."""
    start = response.start
    piece = await run(response.begin)
    if gone.is_set():
        return
    if response.closed and piece is not None:  # the whole body came with the first call: send it as the end
        await send(start.message())
        await send({"type": "http.response.body", "body": piece, "more_body": False})
        return
    while piece is not None:
        if gone.is_set():
            return
        if piece:
            if not start.sent:
                await send(start.message())
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        piece = await run(response.pull)
    if not start.sent:
        await send(start.message())
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _SlicedSend:
    """uvicorn's ``send``, given at most ``PIECE_BYTES`` of a body at a time, each within ``timeout_s``;
    ``body_bytes`` counts what was sent.

    uvicorn's ``send`` waits for room in the transport's buffer (its flow control: ``drain``
    until the buffer is below its low water) *before* writing, then writes the whole message: the
    wait of each slice is therefore for the previous one, and it is this wait that is timed. Past
    it the connection is aborted: ``transport.close()`` (what uvicorn does after an error) would
    keep the buffer until a client that reads nothing has read it.
    """

    def __init__(self, send: Send, timeout_s: float) -> None:
        self.send, self.timeout_s = send, timeout_s
        self.body_bytes = 0

    async def __call__(self, message: Message) -> None:
        body = message.get("body", b"")
        self.body_bytes += len(body)
        if len(body) <= PIECE_BYTES:
            return await _send_within(self.send, message, self.timeout_s)
        view, more_body = memoryview(body), message.get("more_body", False)
        for start in range(0, len(view), PIECE_BYTES):
            last = start + PIECE_BYTES >= len(view)
            await _send_within(self.send, {"type": "http.response.body", "body": view[start:start + PIECE_BYTES],
                                           "more_body": more_body or not last}, self.timeout_s)


async def _send_within(send: Send, message: Message, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(send(message), timeout_s)
    except asyncio.TimeoutError:
        transport = getattr(getattr(send, "__self__", None), "transport", None)  # uvicorn's request cycle holds it
        if transport is not None:
            transport.abort()
        raise _SendStalled from None


class _AppCalls:
    """Runs one request's calls into the app one at a time in the pool, all in one contextvars context
    (as if the whole request ran in one thread: Flask's ``stream_with_context`` relies on that)."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.context = contextvars.copy_context()

    def __call__(self, function: Callable[[], Any]) -> Awaitable[Any]:
        return asyncio.get_running_loop().run_in_executor(self.pool, self.context.run, function)


class _AppResponse:
    """The app's answer to one request, called from the pool only: ``begin`` runs the app and gives
    the first piece of the body, ``pull`` the next; at the end (None) the iterable is closed."""

    def __init__(self, app: WsgiApp, environ: dict[str, Any]) -> None:
        self.app, self.environ = app, environ
        self.start = _StartResponse()
        self.result: Iterable[bytes] | None = None
        self.iterator: Iterator[bytes] = iter(())
        self.closed = False

    def begin(self) -> bytes | None:
        """The first piece; for a short answer of known length, the whole body (then the response is closed,
        sparing the event loop a second call into the pool for the end)."""
        self.result = self.app(self.environ, self.start)
        self.iterator = iter(self.result)
        piece = self.pull()
        if piece is None or not self.start.short():
            return piece
        pieces = [piece]
        while (piece := self.pull()) is not None:  # the last pull closes the response
            pieces.append(piece)
        return b"".join(pieces)

    def pull(self) -> bytes | None:
        """The next piece, after anything the app passed to ``write()``; None at the end."""
        if self.closed:
            return None
        piece = next(self.iterator, None)
        written = self.start.written
        if written:
            piece = b"".join([*written, piece or b""])
            written.clear()
        if piece is None:
            self.close()
        return piece

    def close(self) -> None:
        self.closed = True
        close = getattr(self.result, "close", None)
        if close is not None:
            close()


class _StartResponse:
    """The WSGI ``start_response`` of one request: status and headers are kept until the first
    piece of the body goes out; ``write()`` pieces go out before the iterable's next one."""

    def __init__(self) -> None:
        self.status = ""
        self.headers: list[tuple[str, str]] = []
        self.written: list[bytes] = []
        self.sent = False

    def __call__(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None and self.sent:
            raise exc_info[1].with_traceback(exc_info[2])
        self.status, self.headers = status, headers
        return self.written.append

    def short(self) -> bool:
        """Whether the headers declare a body of at most ``PIECE_BYTES`` (one that an app streams has no length)."""
        length = next((value for name, value in self.headers if name.lower() == "content-length"), "")
        return length.isdigit() and int(length) <= PIECE_BYTES

    def message(self) -> Message:
        """``http.response.start``; from here on the headers cannot change."""
        if not self.status:
            raise RuntimeError("the WSGI app returned without calling start_response")
        self.sent = True
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in self.headers]
        return {"type": "http.response.start", "status": int(self.status.split(" ", 1)[0]), "headers": headers}


async def _watch_disconnect(receive: Receive, gone: asyncio.Event, left: threading.Event) -> None:
    """Set ``gone`` and ``left`` when the client closes the connection (the body has been read: only
    ``http.disconnect`` can come)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()
    left.set()


async def _refuse(refusal: GlassgraphError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer at once and close; meanwhile drop what the client still sends, for up to ``LINGER_S``,
    so that a client still sending its body can read the answer instead of a reset connection."""
    await _send_error(send, scope, refusal, more_body=True)
    try:
        await asyncio.wait_for(_drop_body(receive), LINGER_S)
    except asyncio.TimeoutError:
        pass
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _drop_body(receive: Receive) -> None:
    while (await receive()).get("more_body", False):
        pass


async def _send_error(send: Send, scope: Scope, error: GlassgraphError, more_body: bool = False) -> None:
    """The app's error shapes (``server.http.errors``): ``{"error": {"type", "message"}}`` under ``/api/`` and to a
    client that prefers JSON, else the message as text; the connection closes after it."""
    if scope["path"].startswith("/api/") or prefers(_header(scope, b"accept"), JSON, ["text/plain"]):
        body, media = json.dumps({"error": error.to_dict()}).encode(), JSON.encode()
    else:
        body, media = error.message.rstrip("\n").encode() + b"\n", b"text/plain; charset=utf-8"
    headers = [(b"content-type", media), (b"content-length", str(len(body)).encode()),
               (b"x-content-type-options", b"nosniff"), (b"connection", b"close")]
    headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": more_body})


def _header(scope: Scope, name: bytes) -> str | None:
    return next((value.decode("latin-1") for key, value in scope["headers"] if key.lower() == name), None)


def wsgi_environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """The PEP 3333 environ of an ASGI HTTP request whose whole body is ``body``.

    Paths are native strings of latin-1-decoded bytes; the body is no longer chunked, so
    ``CONTENT_LENGTH`` is its length and Transfer-Encoding is dropped. Header names with an
    underscore are dropped too (as gunicorn does): ``X_Token`` must not pass for ``X-Token``.
    """
    scheme = scope.get("scheme", "http")
    root, path = scope.get("root_path", ""), scope["path"]
    if root and path.startswith(root):
        path = path[len(root):]
    host, port = scope.get("server") or ("localhost", None)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root.encode("utf-8").decode("latin-1"),
        "PATH_INFO": path.encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": host,
        "SERVER_PORT": str(port) if port else ("443" if scheme == "https" else "80"),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    if scope.get("raw_path"):  # the request target as sent, percent-encoding kept (werkzeug's name for it)
        query = environ["QUERY_STRING"]
        environ["RAW_URI"] = scope["raw_path"].decode("latin-1") + (f"?{query}" if query else "")
    if scope.get("client"):
        environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = scope["client"][0], str(scope["client"][1])
    environ.update(_header_variables(scope["headers"]))
    return environ


def _header_variables(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """``CONTENT_TYPE`` and ``HTTP_*`` from the request headers; repeated headers joined with commas."""
    variables: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if "_" in name or name in ("content-length", "transfer-encoding"):
            continue
        key = "CONTENT_TYPE" if name == "content-type" else "HTTP_" + name.upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        variables[key] = f"{variables[key]},{value}" if key in variables else value
    return variables
