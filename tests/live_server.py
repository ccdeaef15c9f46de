"""A real HTTP server on 127.0.0.1 for the HTTP tests: werkzeug, threaded, on a free port."""
from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

from server.config import Config
from server.http.app import create_app
from server.store_base import StoreBackend

POLL_S = 0.02  # how often serve_forever looks for shutdown: werkzeug's 0.5 s default was half a second per test


class Verbs:
    """``requests``' verbs over a class's ``request(method, url, **kwargs)``: a test calls ``server.get(...)``
    the same way whether its server listens on loopback or is called in-process (``in_process``)."""

    def request(self, method: str, url: str, **kwargs: object) -> requests.Response:
        raise NotImplementedError

    def get(self, url: str, **kwargs: object) -> requests.Response:
        return self.request("GET", url, **kwargs)

    def head(self, url: str, **kwargs: object) -> requests.Response:
        return self.request("HEAD", url, **kwargs)

    def post(self, url: str, **kwargs: object) -> requests.Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: object) -> requests.Response:
        return self.request("PUT", url, **kwargs)

    def delete(self, url: str, **kwargs: object) -> requests.Response:
        return self.request("DELETE", url, **kwargs)


class LiveServer(Verbs):
    """``LiveServer(app)`` serves until ``close()``; ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self._server.daemon_threads = True
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_S,), daemon=True)
        self._thread.start()

    def request(self, method: str, url: str, **kwargs: object) -> requests.Response:
        return requests.request(method, url, **kwargs)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.app.extensions["glassgraph.runtime"].close()


def offline_app(store: StoreBackend, **settings: object) -> Flask:
    """The app over ``store`` with ``settings`` (Config fields; in-memory config, offline LLM, no question rate)."""
    config = Config(**{"store_path": None, "load_sample": False, "llm": "offline", "question_rate": 0, **settings})
    return create_app(config, store)


def serve(store: StoreBackend, **settings: object) -> LiveServer:
    """:func:`offline_app` on a live loopback server."""
    return LiveServer(offline_app(store, **settings))


def post_query(url: str, text: str, source: str = "127.0.0.1", accept: str = "application/sparql-results+json"
               ) -> tuple[int, bytes]:
    """POST a query to ``url``'s /sparql from the loopback address ``source``: the server tells clients apart by
    address (their fair share of the query workers), and 127.0.0.0/8 gives a test as many as it needs."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60, source_address=(source, 0))
    try:
        connection.request("POST", "/sparql", body=text.encode(),
                           headers={"Content-Type": "application/sparql-query", "Accept": accept})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


Serving = Callable[..., LiveServer]  # the ``serving`` fixture: serve(store, **settings)
T = TypeVar("T")  # a LiveServer or an in_process.InProcess: both close()


def closed_after(make: Callable[..., T]) -> Iterator[Callable[..., T]]:
    """A fixture's body: ``make`` as the test calls it, and everything it made closed when the test ends (the
    last made first)."""
    made: list[T] = []

    def record(*args: object, **kwargs: object) -> T:
        made.append(make(*args, **kwargs))
        return made[-1]

    yield record
    for server in reversed(made):
        server.close()


@pytest.fixture
def serving() -> Iterator[Serving]:
    """``serving(store, **settings)``: :func:`serve`, closed when the test ends."""
    yield from closed_after(serve)
