"""What the pipeline asks of an LLM: the provider protocol, its error, and the prompts.

Providers: ``offline`` (deterministic, no network, ``server.rag.offline``) and ``openai`` (any
OpenAI-compatible endpoint, ``server.rag.openai_llm``); ``server.rag.providers`` picks one by name.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import jinja2

from server.config import TEMPLATES_DIR

MAX_SELECTED_EDGES = 10  # what the selection prompt asks the LLM for at most
SELECTION_LINE_TOKENS = 80  # one {"id", "reasoning"} line of a selection reply, generously

Edge = tuple[str, str, str]  # an edge as the LLM sees it: the labels of subject, predicate and object


NO_ANSWER = "The knowledge graph does not answer this question."  # the answer when nothing relevant was found


class LLMError(RuntimeError):
    """An LLM call failed; the message is one line (timeout, HTTP status, cannot connect)."""


class LLMTimeout(LLMError):
    """The LLM did not answer within ``GLASSGRAPH_LLM_TIMEOUT``."""


class ContextTooLong(LLMError):
    """The server refused the prompt as longer than the model's context."""


class LLMCancelled(LLMError):
    """The call was cancelled (Ctrl-C of an ingest) before or while it ran."""


@dataclass
class CallStats:
    """What one call to the model cost: the time it queued for the endpoint (``GLASSGRAPH_LLM_CONCURRENCY``),
    the tokens the server counted (0: not reported) and why the reply ended ("stop", "length")."""

    queued_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


class LLM(Protocol):
    model: str  # recorded in the trace
    context_tokens: int | None  # the context length the prompts must fit in (None: no limit, no model)
    waits: bool  # its calls wait on a model server: a streamed answer sends keep-alives meanwhile

    def select(self, question: str, edges: list[tuple[str, Edge]],
               aliases: Mapping[str, tuple[str, ...]] | None = None) -> str:
        """Raw JSONL, one ``{"id", "reasoning"}`` per selected edge (parse with ``parse_selection``);
        ``aliases``: other names of the edges' relations (``skos:altLabel``), relation label -> names."""
        ...

    def answer(self, question: str, edges: list[Edge]) -> Iterator[str]:
        """The answer from the selected edges only, in streamed pieces."""
        ...


PROMPT_CHARS_PER_TOKEN = 3.5  # to size passages sent to a model without a tokenizer call
PROMPT_OVERHEAD_TOKENS = 300  # a prompt's own words and the question


def passages_that_fit(llm: LLM, texts: list[str], reserved_tokens: int = 0) -> int:
    """How many of ``texts``, in order, fit the model's context beside the prompt, ``reserved_tokens``
    (the edges also sent) and the answer."""
    budget = ((llm.context_tokens or 8192) - PROMPT_OVERHEAD_TOKENS - reserved_tokens
              - getattr(llm, "answer_tokens", 1024))
    for count, text in enumerate(texts):
        budget -= int(len(text) / PROMPT_CHARS_PER_TOKEN) + 8
        if budget < 0:
            return count
    return len(texts)


def selection_reply_tokens(edges: int) -> int:
    """``max_tokens`` of a selection reply offered ``edges`` edges: a line for each it may choose."""
    return 32 + SELECTION_LINE_TOKENS * max(1, min(edges, MAX_SELECTED_EDGES))


@lru_cache(maxsize=1)
def _prompts() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR / "prompts"),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)
    return env


def render_prompt(name: str, **params: object) -> str:
    """Render ``templates/prompts/{name}.j2``; a missing parameter is an error, not an empty string."""
    return _prompts().get_template(f"{name}.j2").render(**params)
