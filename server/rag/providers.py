"""The LLM provider a configuration names (``GLASSGRAPH_LLM``)."""
from __future__ import annotations

from server.config import Config
from server.rag.llm import LLM
from server.rag.offline import OfflineLLM


def make_llm(config: Config) -> LLM:
    """The provider named by ``config.llm``: ``offline`` or ``openai``."""
    if config.llm == "offline":
        return OfflineLLM()
    if config.llm == "openai":
        from server.rag.openai_llm import OpenAILLM  # the openai package takes seconds to import

        return OpenAILLM(config)
    raise ValueError(f"unknown LLM provider {config.llm!r} (GLASSGRAPH_LLM): use 'offline' or 'openai'")
