"""A SPARQL endpoint stand-in on 127.0.0.1 that records every request it gets (for the SERVICE guard tests)."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EMPTY_RESULTS = b'{"head":{"vars":[]},"results":{"bindings":[{}]}}'


class LoopbackListener:
    """``calls`` lists the request lines received; ``reply`` is the body answered to each."""

    def __init__(self, reply: bytes = EMPTY_RESULTS, content_type: str = "application/sparql-results+json") -> None:
        self.calls: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                listener.calls.append(self.requestline)
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/sparql"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
