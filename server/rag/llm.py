"""LLM providers for edge selection and answer synthesis: ``openai`` (any OpenAI-compatible endpoint)
and ``offline`` (deterministic, no network, see ``server.rag.offline``)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Protocol

import jinja2

from server.config import TEMPLATES_DIR, Config
from server.rag.offline import OfflineLLM

MAX_SELECTED_EDGES = 10  # what the selection prompt asks the LLM for at most

Edge = tuple[str, str, str]


class LLMError(RuntimeError):
    """An LLM call failed; the message is one line (timeout, HTTP status, cannot connect)."""


class LLM(Protocol):
    model: str  # recorded in the trace

    def select(self, question: str, edges: list[tuple[str, Edge]]) -> str:
        """Raw JSONL, one ``{"id", "reasoning"}`` per selected edge (parse with ``parse_selection``)."""
        ...

    def answer(self, question: str, edges: list[Edge]) -> Iterator[str]:
        """The answer from the selected edges only, in streamed pieces."""
        ...


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


def make_llm(config: Config) -> LLM:
    """The provider named by ``config.llm``: ``offline`` or ``openai``."""
    if config.llm == "offline":
        return OfflineLLM()
    if config.llm == "openai":
        from server.rag.openai_llm import OpenAILLM  # the openai package takes seconds to import

        return OpenAILLM(config)
    raise ValueError(f"unknown LLM provider {config.llm!r} (GLASSGRAPH_LLM): use 'offline' or 'openai'")
