"""A scripted OpenAI-compatible server on 127.0.0.1 for tests that drive the real openai client.

Queue replies (``reply``, ``fail``, ``stall``), or set ``responder`` (a function of the recorded
request that makes the reply, for many concurrent requests such as document extraction), then point
``Config(llm="openai", llm_base_url=server.base_url)`` at it. Each ``POST /v1/chat/completions`` takes
the next queued reply, else the responder's,
as SSE chunks ending with ``data: [DONE]`` when the request asks to stream, as one JSON
completion otherwise. Requests are recorded in ``server.requests``.

``behave_like_local_model()`` makes it a serial local model server (llama.cpp, llama-cpp-python):
one request computed at a time, a reply that never ends (its text over and over, a token a word)
unless ``max_tokens`` stops it, ``: ping`` comments on a stream while it waits its turn, a
``POST /tokenize`` endpoint (``{"content"}`` -> ``{"tokens"}``) and ``usage`` counts. A streamed request
stops being computed when its client is gone (as those servers do when a write fails); a request
computed on after its client left counts in ``server.abandoned``.
"""
from __future__ import annotations

import json
import queue
import re
import select
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from live_server import POLL_S


@dataclass
class Reply:
    """One scripted answer to a chat completion request."""

    text: str = ""
    status: int = 200
    error: str = "scripted failure"  # the error message when status >= 400
    delay_s: float = 0.0  # before the response starts (timeouts, slow LLM)
    held: threading.Event | None = None  # the response starts once it is set (an LLM slow until the test says)
    pieces: list[str] | None = None  # the streamed deltas; default: the text in words
    piece_delay_s: float = 0.0  # before each streamed piece after the first chunk (a stream that stalls)
    stream_error: str | None = None  # an SSE error event after the pieces (a failure mid-stream)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        """Every message's content, joined."""
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))


@dataclass
class LocalModel:
    """How the serial local model computes: ``token_s`` a token, a ``: ping`` every ``ping_s`` while queued."""

    token_s: float = 0.01
    ping_s: float = 0.05
    turn: threading.Lock = field(default_factory=threading.Lock)  # one request computed at a time


def count_tokens(text: str) -> list[int]:
    """The scripted tokenizer: a token for each word and each other symbol."""
    return [len(token) for token in re.findall(r"\w+|[^\w\s]", text)]


class ScriptedLLM:
    """The server; ``close()`` stops it and wakes any stalled reply."""

    model = "scripted-model"

    def __init__(self) -> None:
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.requests: list[Recorded] = []
        self.closing = threading.Event()
        self.responder: Callable[[Recorded], Reply] | None = None  # replies when none is queued
        self.local: LocalModel | None = None  # see behave_like_local_model
        self.tokenized = 0  # POST /tokenize requests answered
        self.abandoned = 0  # requests computed on after their client had gone (local model)
        self.computing = threading.Event()  # set while the local model computes a request
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_S,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reply(self, text: str = "", **options: object) -> None:
        """Queue a successful reply (see ``Reply`` for the options)."""
        self.replies.put(Reply(text=text, **options))

    def fail(self, status: int = 500, error: str = "scripted failure") -> None:
        """Queue an HTTP error reply with an OpenAI-style error body."""
        self.replies.put(Reply(status=status, error=error))

    def stall(self, seconds: float, text: str = "too late") -> None:
        """Queue a reply that starts only after ``seconds`` (or when the server closes)."""
        self.replies.put(Reply(text=text, delay_s=seconds))

    def behave_like_local_model(self, token_s: float = 0.01, ping_s: float = 0.05) -> LocalModel:
        """Serve as a serial local model server (see the module)."""
        self.local = LocalModel(token_s, ping_s)
        return self.local

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()


def _handler(server: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:
            server.requests.append(Recorded("GET", self.path, dict(self.headers)))
            if self.path.rstrip("/") == "/v1/models":
                model = {"id": server.model, "object": "model", "created": 0, "owned_by": "scripted"}
                self._json(200, {"object": "list", "data": [model]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            recorded = Recorded("POST", self.path, dict(self.headers), body)
            if "tokenize" in self.path:  # not a chat request: only the local model has a tokenizer
                if server.local is not None and self.path.rstrip("/") == "/tokenize":
                    server.tokenized += 1
                    self._json(200, {"tokens": count_tokens(str(body.get("content", "")))})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            server.requests.append(recorded)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                reply = server.replies.get_nowait()
            except queue.Empty:
                reply = (server.responder(recorded) if server.responder is not None
                         else Reply(status=500, error="scripted server: no reply queued"))
            if reply.delay_s and server.closing.wait(reply.delay_s):
                return
            while reply.held is not None and not reply.held.wait(POLL_S):
                if server.closing.is_set():
                    return
            try:
                if reply.status >= 400:
                    error = {"message": reply.error, "type": "server_error", "code": None}
                    self._json(reply.status, {"error": error}, {"x-should-retry": "true", "retry-after-ms": "1"})
                elif server.local is not None:
                    self._compute(server.local, reply, body, recorded.prompt)
                elif body.get("stream"):
                    self._stream(reply, body.get("model", server.model))
                else:
                    self._json(200, _completion(reply.text, body.get("model", server.model)))
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass

        def _json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for i, event in enumerate(_chunks(reply, model)):
                if i and reply.piece_delay_s and server.closing.wait(reply.piece_delay_s):
                    return
                self.wfile.write(f"data: {event}\n\n".encode())
                self.wfile.flush()

        def _gone(self) -> bool:
            """Whether the client closed its end (a readable socket with nothing to read)."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _compute(self, local: LocalModel, reply: Reply, body: dict, prompt: str) -> None:
            """The serial local model: wait for the turn (pinging a stream), then a token at a time."""
            streaming, model = bool(body.get("stream")), body.get("model", server.model)
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            if streaming:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
            while not local.turn.acquire(timeout=local.ping_s):
                if server.closing.is_set() or (streaming and self._gone()):
                    return
                if streaming:
                    self._send(": ping\n\n")
            try:
                server.computing.set()
                self._generate(local, reply, streaming, model, limit, count_tokens(prompt))
            finally:
                server.computing.clear()
                local.turn.release()

        def _generate(self, local: LocalModel, reply: Reply, streaming: bool, model: str, limit: int | None,
                      prompt_tokens: list[int]) -> None:
            words = [w + " " for w in reply.text.split(" ")] or ["? "]
            produced: list[str] = []
            abandoned = False
            if streaming:
                self._send(f"data: {_chunk_json({'role': 'assistant', 'content': ''}, model)}\n\n")
            while limit is None or len(produced) < limit:
                if server.closing.wait(local.token_s):
                    return
                if self._gone():
                    if streaming:  # the write would fail: the server stops computing
                        return
                    if not abandoned:
                        abandoned = True
                        server.abandoned += 1
                produced.append(words[len(produced) % len(words)])
                if streaming:
                    self._send(f"data: {_chunk_json({'content': produced[-1]}, model)}\n\n")
            usage = {"prompt_tokens": len(prompt_tokens), "completion_tokens": len(produced),
                     "total_tokens": len(prompt_tokens) + len(produced)}
            if streaming:
                final = json.loads(_chunk_json({}, model, "length"))
                self._send(f"data: {json.dumps({**final, 'usage': usage})}\n\ndata: [DONE]\n\n")
            elif not abandoned:
                self._json(200, {**_completion("".join(produced), model), "usage": usage})

        def _send(self, text: str) -> None:
            self.wfile.write(text.encode())
            self.wfile.flush()

    return Handler


def _chunk_json(delta: dict, model: str, finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": model,
                       "choices": [choice]})


def _completion(text: str, model: str) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _chunks(reply: Reply, model: str) -> Iterator[str]:
    """The SSE data lines of a streamed completion: role, deltas, finish (or an error), [DONE]."""
    pieces = reply.pieces if reply.pieces is not None else [w + " " for w in reply.text.split(" ")]
    if reply.pieces is None and pieces:
        pieces[-1] = pieces[-1][:-1]

    def chunk(delta: dict, finish: str | None = None) -> str:
        return _chunk_json(delta, model, finish)

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces:
        yield chunk({"content": piece})
    if reply.stream_error is not None:
        yield json.dumps({"error": {"message": reply.stream_error, "type": "server_error"}})
        return
    yield chunk({}, "stop")
    yield "[DONE]"


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A fresh scripted OpenAI-compatible server on 127.0.0.1 for one test."""
    server = ScriptedLLM()
    yield server
    server.close()


@pytest.fixture(scope="module")
def module_llm() -> Iterator[ScriptedLLM]:
    """One scripted OpenAI-compatible server on 127.0.0.1 for a module's tests (a module-scoped server's
    LLM); each test sets the ``responder`` it needs."""
    server = ScriptedLLM()
    yield server
    server.close()
