"""The CLI's reading of a streamed answer (``server.cli.tg_invoke._lines``) against a real HTTP server on
loopback: lines come out whole however the bytes are cut, and each as soon as it has arrived."""
from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from server.cli.tg_invoke import _lines

LONG = "x" * (3 * 1024 * 1024)  # one explain message of megabytes: many reads make one line


@contextmanager
def streaming_server(pieces: list[bytes], hold: threading.Event | None = None) -> Iterator[str]:
    """A server answering ``pieces`` as chunks of one chunked response; with ``hold``, it waits for it after
    the first piece."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n, piece in enumerate(pieces):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                if n == 0 and hold is not None:
                    hold.wait(60)  # longer than the client's read timeout: a reader that waits for more fails
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_lines_cut_anywhere_come_out_whole() -> None:
    body = f"first\r\n{LONG}\n\nlast-without-newline".encode()
    cuts = [0, 3, 7, 8, 9, 100, 70_000, 2_000_000, len(body) - 5, len(body)]
    pieces = [body[a:b] for a, b in itertools.pairwise(cuts) if b > a]
    with streaming_server(pieces) as url, requests.get(url, stream=True, timeout=30) as response:
        lines = list(_lines(response))
    assert lines == ["first", LONG, "", "last-without-newline"]


def test_a_line_comes_out_before_the_rest_of_the_answer_is_sent() -> None:
    hold = threading.Event()
    with streaming_server([b'{"n": 1}\n', b'{"n": 2}\n'], hold) as url, \
            requests.get(url, stream=True, timeout=10) as response:
        lines = _lines(response)
        first = next(lines)  # the server sends nothing more until it is released
        hold.set()
        rest = list(lines)
    assert (first, rest) == ('{"n": 1}', ['{"n": 2}'])
