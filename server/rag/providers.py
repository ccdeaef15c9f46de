"""The LLM provider a configuration names (``GLASSGRAPH_LLM``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from server.config import Config
from server.errors import LLMFailed
from server.rag.llm import LLM, LLMError
from server.rag.offline import OfflineLLM

if TYPE_CHECKING:
    from server.rag.openai_llm import OpenAILLM

T = TypeVar("T")


def llm_ready(build: Callable[[], T]) -> T:
    """``build()`` of something that calls the LLM; settings that cannot work (no key and no base URL, an
    unknown provider) are :class:`LLMFailed` saying so (502 on the HTTP API, exit 1 in the CLIs)."""
    try:
        return build()
    except (LLMError, ValueError) as exc:
        raise LLMFailed(f"cannot set up the LLM: {exc}") from None


def make_llm(config: Config) -> LLM:
    """The provider named by ``config.llm``: ``offline`` or ``openai``."""
    if config.llm == "offline":
        return OfflineLLM()
    if config.llm == "openai":
        from server.rag.openai_llm import OpenAILLM  # the openai package takes seconds to import

        return OpenAILLM(config)
    raise ValueError(f"unknown LLM provider {config.llm!r} (GLASSGRAPH_LLM): use 'offline' or 'openai'")


def make_extractor(config: Config) -> OpenAILLM | None:
    """The LLM that extracts facts from documents at ingest, its calls queued behind questions'; None for
    ``offline``, which extracts no relationships (ingest then records the entities each chunk mentions)."""
    if config.llm == "offline":
        return None
    if config.llm == "openai":
        from server.rag.openai_llm import OpenAILLM

        return OpenAILLM(config, background=True)
    return make_llm(config)  # type: ignore[return-value]  # an unknown provider: its error names the setting
