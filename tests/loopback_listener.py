"""A SPARQL endpoint stand-in on 127.0.0.1 that records every request it gets (for the SERVICE guard
and federation tests), and can answer late, slowly, with an error status or a redirect."""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from live_server import POLL_S

EMPTY_RESULTS = b'{"head":{"vars":[]},"results":{"bindings":[{}]}}'


class LoopbackListener:
    """``calls`` lists the request lines received, ``bodies`` their bodies; ``reply`` is the body answered to each, with
    ``status`` and ``headers``, after ``delay_s``, each byte ``drip_s`` after the one before."""

    def __init__(self, reply: bytes = EMPTY_RESULTS, content_type: str = "application/sparql-results+json",
                 status: int = 200, headers: dict[str, str] | None = None, delay_s: float = 0.0,
                 drip_s: float = 0.0) -> None:
        self.calls: list[str] = []
        self.bodies: list[bytes] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                listener.calls.append(self.requestline)
                listener.authorizations.append(self.headers.get("Authorization"))
                length = int(self.headers.get("Content-Length") or 0)
                listener.bodies.append(self.rfile.read(length))
                time.sleep(delay_s)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(reply)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                step = 1 if drip_s else max(len(reply), 1)
                try:
                    for start in range(0, len(reply), step):
                        self.wfile.write(reply[start:start + step])
                        self.wfile.flush()
                        time.sleep(drip_s)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the federation tests' timeouts)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/sparql"
        threading.Thread(target=self._server.serve_forever, args=(POLL_S,), daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
