"""The app called in-process, for tests whose subject is not the socket (as Oxigraph's server tests call
the handler): Flask's test client behind the ``requests`` interface the HTTP tests are written in, so a
test reads the same whether its server listens on loopback (``live_server``) or not.

``client.get(client.url + path, params=..., headers=..., data=..., json=...)`` answers a real
``requests.Response``; like ``requests``, it sends ``Accept: */*`` unless told otherwise and follows
redirects for GET only.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from live_server import Verbs, closed_after, offline_app
from requests import Response
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from server.store_base import StoreBackend


class InProcess(Verbs):
    """``InProcess(app)``: requests' verbs over ``app.test_client()``; ``close()`` stops the app's workers."""

    url = "http://localhost"

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._client = app.test_client()

    def request(self, method: str, url: str, params: object = None, data: object = None,
                headers: dict[str, str] | None = None, json: object = None, timeout: float | None = None,
                allow_redirects: bool | None = None) -> Response:
        del timeout  # nothing waits on a socket
        follow = method == "GET" if allow_redirects is None else allow_redirects
        answer = self._client.open(url.removeprefix(self.url), method=method, query_string=params, data=data,
                                   json=json, headers={"Accept": "*/*", **(headers or {})}, follow_redirects=follow)
        response = Response()
        response.status_code, response.url = answer.status_code, url
        response.headers = CaseInsensitiveDict(answer.headers)
        response.encoding = get_encoding_from_headers(response.headers)
        response._content = answer.get_data()
        return response

    def close(self) -> None:
        self.app.extensions["glassgraph.runtime"].close()


def in_process(store: StoreBackend, **settings: object) -> InProcess:
    """``live_server.offline_app`` called in-process."""
    return InProcess(offline_app(store, **settings))


Calling = Callable[..., InProcess]  # the ``calling`` fixture: in_process(store, **settings)


@pytest.fixture
def calling() -> Iterator[Calling]:
    """``calling(store, **settings)``: :func:`in_process`, closed when the test ends."""
    yield from closed_after(in_process)
