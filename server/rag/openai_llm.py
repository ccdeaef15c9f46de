"""The ``openai`` provider: any OpenAI-compatible chat-completions endpoint through the openai client.

Every call is streamed, even when the caller wants the whole reply: closing a stream is the one way a
local server (llama.cpp, llama-cpp-python) learns that its client gave up and stops computing. Each
call has a ``max_tokens`` sized to its task, waits for one of the endpoint's slots
(``server.rag.llm_slots``), and is ended by a watchdog when no token came within
``GLASSGRAPH_LLM_TIMEOUT`` or the whole reply outlives ``GLASSGRAPH_LLM_DEADLINE``: it shuts the
connection's socket, which ends the blocked read at once (a stream's ``: ping`` comments would
otherwise keep the client's read timeout from ever firing).
"""
from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping

import openai

from server.config import Config
from server.rag.llm import (
    MAX_SELECTED_EDGES,
    CallStats,
    ContextTooLong,
    Edge,
    LLMCancelled,
    LLMError,
    LLMTimeout,
    render_prompt,
    selection_reply_tokens,
)
from server.rag.llm_slots import endpoint_slots
from server.rag.text import one_line

DETAIL_CHARS = 300  # of a failure's detail in an LLMError
TOKENIZE_TIMEOUT_S = 10.0
# How servers word a prompt longer than the context: OpenAI ("maximum context length",
# code context_length_exceeded), llama.cpp ("exceeds the available context size"), vLLM, Ollama.
_CONTEXT_WORDS = ("context length", "context size", "context window", "context_length", "too many tokens",
                  "maximum context", "prompt is too long")


class OpenAILLM:
    """Chat completions through the openai client: selection, extraction and the answer, each streamed."""

    waits = True  # on the model server, for seconds at a time

    def __init__(self, config: Config, background: bool = False) -> None:
        """``background``: its calls wait behind questions' for the endpoint's slots (ingest)."""
        if not config.llm_api_key and not config.llm_base_url:
            raise ValueError(
                "GLASSGRAPH_LLM=openai needs GLASSGRAPH_LLM_API_KEY (or OPENAI_API_KEY) "
                "or GLASSGRAPH_LLM_BASE_URL for a local OpenAI-compatible server"
            )
        self.model = config.llm_model
        self.context_tokens: int | None = config.llm_context
        self.answer_tokens = config.llm_answer_tokens
        self._timeout = config.llm_timeout_s
        self._deadline = config.llm_deadline_s
        self._client = openai.OpenAI(
            base_url=config.llm_base_url,
            api_key=config.llm_api_key or "none",  # local servers ignore it; the client insists on one
            timeout=config.llm_timeout_s,
            max_retries=config.llm_retries,
        )
        self._where = str(self._client.base_url).rstrip("/")
        self.slots = endpoint_slots(self._where, config.llm_concurrency)
        self._background = background
        self._cancelled = threading.Event()
        self._active: set[_Watch] = set()
        self._active_lock = threading.Lock()
        self._calls = threading.local()
        self._tokenizer: str | None = "unknown"  # the tokenize route that works, None: the server has none
        self._bytes_per_token: float | None = None  # the fewest seen in a reply's usage

    def select(self, question: str, edges: list[tuple[str, Edge]],
               aliases: Mapping[str, tuple[str, ...]] | None = None) -> str:
        prompt = render_prompt("select", question=question, edges=edges, max_edges=MAX_SELECTED_EDGES,
                               aliases=aliases or {})
        return self.complete(prompt, selection_reply_tokens(len(edges)))

    def complete(self, prompt: str, max_tokens: int | None = None) -> str:
        """The whole reply to ``prompt`` (streamed, see the module), at most ``max_tokens`` tokens
        (default: the answer's). Transport failures and HTTP 408/429/5xx before the reply starts are
        retried by the client (``GLASSGRAPH_LLM_RETRIES``); what still fails is an :class:`LLMError`."""
        return "".join(self._stream(prompt, max_tokens or self.answer_tokens))

    def answer(self, question: str, edges: list[Edge]) -> Iterator[str]:
        return self._stream(render_prompt("synthesize", question=question, edges=edges), self.answer_tokens)

    def stream(self, prompt: str) -> Iterator[str]:
        """The reply to ``prompt`` in pieces, at most the answer's tokens (document RAG's answer)."""
        return self._stream(prompt, self.answer_tokens)

    def last_call(self) -> CallStats | None:
        """The stats of this thread's last call (None before the first)."""
        return getattr(self._calls, "last", None)

    def cancel(self) -> None:
        """End every call in progress or queued, now and from now on (an ingest interrupted by Ctrl-C)."""
        self._cancelled.set()
        with self._active_lock:
            active = list(self._active)
        for watch in active:
            watch.expire("cancelled")

    def _stream(self, prompt: str, max_tokens: int) -> Iterator[str]:
        """The reply's text pieces; the slot is held and the watchdog armed until the generator ends."""
        if self._cancelled.is_set():
            raise LLMCancelled("cancelled")
        stats = CallStats()
        self._calls.last = stats
        with self.slots.hold(self._cancelled, self._background) as waited:
            stats.queued_s = waited
            watch = _Watch(self._timeout, self._deadline)
            with self._active_lock:
                self._active.add(watch)
            try:
                yield from self._pieces(prompt, max_tokens, watch, stats)
            finally:
                watch.stop()
                with self._active_lock:
                    self._active.discard(watch)

    def _pieces(self, prompt: str, max_tokens: int, watch: _Watch, stats: CallStats) -> Iterator[str]:
        try:
            stream = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}], temperature=0,
                max_tokens=max_tokens, stream=True,
            )
            watch.attach(stream.response)
            with stream:
                for chunk in stream:
                    self._note_usage(prompt, getattr(chunk, "usage", None), stats)
                    for choice in getattr(chunk, "choices", None) or ():
                        stats.finish_reason = getattr(choice, "finish_reason", None) or stats.finish_reason
                        content = getattr(getattr(choice, "delta", None), "content", None)
                        if content and isinstance(content, str):
                            watch.first_token()
                            yield content
        except Exception as exc:
            if watch.expired or self._cancelled.is_set():
                raise self._expired(watch) from None
            if isinstance(exc, openai.OpenAIError):
                raise self._error(exc) from exc
            if isinstance(exc, LLMError):
                raise
            raise LLMError(f"the LLM's stream broke: {type(exc).__name__}: "
                           f"{one_line(str(exc), DETAIL_CHARS)} ({self._where})") from exc
        if watch.expired:  # the socket was shut between two reads and the stream ended quietly
            raise self._expired(watch)

    def _expired(self, watch: _Watch) -> LLMError:
        """The error of a call its watchdog ended."""
        if watch.expired == "first":
            return LLMTimeout(f"LLM request timed out after {self._timeout:g} s ({self._where})")
        if watch.expired == "total":
            return LLMTimeout(f"LLM reply outlived its deadline of {self._deadline:g} s (GLASSGRAPH_LLM_DEADLINE) "
                              f"({self._where})")
        return LLMCancelled("cancelled")

    def _note_usage(self, prompt: str, usage: object, stats: CallStats) -> None:
        """Keep the server's token counts, and calibrate the estimate of prompts from them."""
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        if isinstance(prompt_tokens, int) and prompt_tokens > 0:
            stats.prompt_tokens = prompt_tokens
            stats.completion_tokens = getattr(usage, "completion_tokens", 0) or 0
            ratio = len(prompt.encode()) / prompt_tokens
            self._bytes_per_token = min(ratio, self._bytes_per_token or ratio)

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` as the server counts them (llama.cpp's ``/tokenize``, llama-cpp-python's
        ``/extras/tokenize/count``), else as the replies' ``usage`` calibrated them; None when neither
        is known (the caller estimates)."""
        if self._tokenizer is not None:
            counted = self._server_count(text)
            if counted is not None:
                return counted
        if self._bytes_per_token:
            return -(-len(text.encode()) // max(1, int(self._bytes_per_token)))
        return None

    def _server_count(self, text: str) -> int | None:
        root = self._where.removesuffix("/v1")
        routes = ("/tokenize", "/extras/tokenize/count") if self._tokenizer == "unknown" else (self._tokenizer,)
        for route in routes:
            payload = {"content": text} if route == "/tokenize" else {"input": text, "model": self.model}
            request = urllib.request.Request(root + route, json.dumps(payload).encode(),
                                             {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=TOKENIZE_TIMEOUT_S) as response:  # noqa: S310 (configured URL)
                    reply = json.load(response)
            except (OSError, ValueError):  # no such route (404), or not a tokenizer's answer
                continue
            count = reply.get("count") if isinstance(reply, dict) else None
            tokens = reply.get("tokens") if isinstance(reply, dict) else None
            count = len(tokens) if isinstance(tokens, list) else count
            if isinstance(count, int):
                self._tokenizer = route
                return count
        if self._tokenizer == "unknown":
            self._tokenizer = None
        return None

    def _error(self, exc: openai.OpenAIError) -> LLMError:
        """One clear line for a failure of the client, the transport below it or the reply."""
        if isinstance(exc, openai.APITimeoutError):
            return LLMTimeout(f"LLM request timed out after {self._timeout:g} s ({self._where})")
        if isinstance(exc, openai.APIStatusError):
            detail = _status_detail(exc)
            kind = ContextTooLong if exc.status_code in (400, 413, 422) and _about_context(exc, detail) else LLMError
            return kind(f"LLM returned HTTP {exc.status_code}: {detail} ({self._where})")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return LLMError(f"cannot connect to the LLM at {self._where}: {one_line(str(cause), DETAIL_CHARS)}")
        if isinstance(exc, openai.APIError):  # e.g. an error event in the middle of a stream
            return LLMError(f"LLM reported an error: {one_line(exc.message, DETAIL_CHARS)} ({self._where})")
        return LLMError(f"LLM call failed: {type(exc).__name__}: {one_line(str(exc), DETAIL_CHARS)} ({self._where})")


def _about_context(exc: openai.APIStatusError, detail: str) -> bool:
    """The refusal says the prompt does not fit the model's context."""
    error = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    text = f"{detail} {code or ''}".casefold()
    return any(words in text for words in _CONTEXT_WORDS) or "context" in text and "exceed" in text


def _status_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return one_line(str(message), DETAIL_CHARS)
    return one_line(exc.response.text or exc.response.reason_phrase or "no detail", DETAIL_CHARS)


class _Watch:
    """The watchdog of one streamed call: past ``first_s`` without a token or ``total_s`` in all, it
    shuts the connection's socket (the blocked read returns, the server sees its client gone)."""

    def __init__(self, first_s: float, total_s: float) -> None:
        self.expired: str | None = None  # "first", "total" or "cancelled"
        self._response: object | None = None
        self._lock = threading.Lock()
        self._timers = [threading.Timer(first_s, self.expire, ("first",)), threading.Timer(total_s, self.expire,
                                                                                           ("total",))]
        for timer in self._timers:
            timer.daemon = True
            timer.start()

    def attach(self, response: object) -> None:
        with self._lock:
            self._response = response
            expired = self.expired
        if expired:
            _shut(response)

    def first_token(self) -> None:
        self._timers[0].cancel()

    def expire(self, why: str) -> None:
        with self._lock:
            if self.expired is not None:
                return
            self.expired, response = why, self._response
        if response is not None:
            _shut(response)

    def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()


def _shut(response: object) -> None:
    """End an HTTP response from another thread: shut its socket down (a close alone would not wake the
    thread blocked reading it), else close it."""
    stream = getattr(response, "extensions", {}).get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
            return
        except OSError:  # already closed
            return
    try:
        response.close()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 (best effort from a timer thread)
        pass
