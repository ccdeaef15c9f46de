"""The Ask page's Stop button, in Debian's Chromium: it aborts the request mid-answer and the server records the
session as cancelled. The app here answers with the openai provider against a scripted model that writes its
answer slowly, so that there is time to stop it (``console_url`` is overridden for this module)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from console_browser import QUESTION, requires_chromium
from live_server import serve
from scripted_llm import Recorded, Reply, ScriptedLLM

from server.explain.trace import read_trace
from server.store import GraphStore

pytestmark = requires_chromium
PIECES = 40  # answer pieces, one every PIECE_DELAY_S: the answer would take 20 s


def _reply(request: Recorded) -> Reply:
    if "Facts (number." in request.prompt:  # synthesis: slow
        return Reply(pieces=[f"word{n} " for n in range(PIECES)], piece_delay_s=0.5)
    return Reply("not a selection")  # selection: the deterministic fallback chooses


@pytest.fixture(scope="module")
def console_url(sample_store: GraphStore) -> Iterator[str]:
    llm = ScriptedLLM()
    llm.responder = _reply
    live = serve(sample_store, llm="openai", llm_base_url=llm.base_url, llm_api_key="test",
                 llm_model="scripted-model", llm_retries=0,
                 check_answers=False)  # streamed as written: a checked answer is read whole before it is sent
    yield live.url
    live.close()
    llm.close()


def test_stop_cancels_the_request_and_the_session_is_recorded_cancelled(page: object, console_url: str,
                                                                        sample_store: GraphStore) -> None:
    page.goto(f"{console_url}/console/ask?q={quote(QUESTION)}")
    page.locator("#answer:has-text('word1')").wait_for()  # the answer is being written
    session = page.get_attribute("#live", "data-session")
    assert page.locator(".event-selection.done").count() == 1
    assert page.locator(".event-answer.running").count() == 1
    page.click("#stop-button")
    page.locator("#live[data-done]").wait_for()
    assert page.inner_text("#answer-status") == "cancelled"
    assert page.locator(".event-answer.stopped").count() == 1
    assert page.locator("#stop-button").is_hidden()
    aborted = [f for f in page.failed_requests if "/api/graph-rag" in f and "ERR_ABORTED" in f]
    assert len(aborted) == 1, page.failed_requests
    page.failed_requests.remove(aborted[0])
    deadline = time.monotonic() + 20
    while (trace := read_trace(sample_store, session))["error"] is None and time.monotonic() < deadline:
        time.sleep(0.2)  # the server notices the closed connection at its next piece
    assert trace["status"] == "cancelled" and trace["error"]["type"] == "cancelled", trace["error"]
    assert trace["answer"] is None
