"""The ``openai`` provider: any OpenAI-compatible chat-completions endpoint through the openai client."""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import openai

from server.config import Config
from server.rag.llm import MAX_SELECTED_EDGES, ContextTooLong, Edge, LLMError, LLMTimeout, render_prompt
from server.rag.text import one_line

DETAIL_CHARS = 300  # of a failure's detail in an LLMError
# How servers word a prompt longer than the context: OpenAI ("maximum context length",
# code context_length_exceeded), llama.cpp ("exceeds the available context size"), vLLM, Ollama.
_CONTEXT_WORDS = ("context length", "context size", "context window", "context_length", "too many tokens",
                  "maximum context", "prompt is too long")


class OpenAILLM:
    """Chat completions through the openai client: selection in one call, the answer streamed."""

    def __init__(self, config: Config) -> None:
        if not config.llm_api_key and not config.llm_base_url:
            raise ValueError(
                "GLASSGRAPH_LLM=openai needs GLASSGRAPH_LLM_API_KEY (or OPENAI_API_KEY) "
                "or GLASSGRAPH_LLM_BASE_URL for a local OpenAI-compatible server"
            )
        self.model = config.llm_model
        self.context_tokens: int | None = config.llm_context
        self._timeout = config.llm_timeout_s
        self._client = openai.OpenAI(
            base_url=config.llm_base_url,
            api_key=config.llm_api_key or "none",  # local servers ignore it; the client insists on one
            timeout=config.llm_timeout_s,
            max_retries=config.llm_retries,
        )
        self._where = str(self._client.base_url).rstrip("/")

    def select(self, question: str, edges: list[tuple[str, Edge]],
               aliases: Mapping[str, tuple[str, ...]] | None = None) -> str:
        return self.complete(render_prompt("select", question=question, edges=edges, max_edges=MAX_SELECTED_EDGES,
                                           aliases=aliases or {}))

    def complete(self, prompt: str) -> str:
        """One chat completion of ``prompt`` (not streamed): the reply's text, "" if it has none.

        Transport failures and HTTP 408/429/5xx are retried by the client (``GLASSGRAPH_LLM_RETRIES``);
        what still fails is an :class:`LLMError`."""
        try:
            completion = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}], temperature=0
            )
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMError(f"LLM returned no completion ({self._where}): {one_line(str(completion), 120)}")
        content = getattr(getattr(choices[0], "message", None), "content", None)
        return content if isinstance(content, str) else ""

    def answer(self, question: str, edges: list[Edge]) -> Iterator[str]:
        prompt = render_prompt("synthesize", question=question, edges=edges)
        try:
            stream = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}], temperature=0, stream=True
            )
            with stream:
                for chunk in stream:
                    for choice in getattr(chunk, "choices", None) or ():
                        content = getattr(getattr(choice, "delta", None), "content", None)
                        if content and isinstance(content, str):
                            yield content
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc

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
