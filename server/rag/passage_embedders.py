"""Passage vectors: the shipped ``wordllama`` model (the offline default) or any OpenAI-compatible
``/v1/embeddings`` server (``GLASSGRAPH_EMBEDDINGS=openai``), behind one small interface.

An embedder has a ``name`` (recorded in the passage index: vectors of two models are never mixed) and
``embed(texts)``: one unit-length float32 row per text. A server that cannot be reached, answers an error,
or answers vectors of another size than the index holds is an :class:`EmbeddingsFailed` naming the server
and the setting to look at; nothing is indexed from a failed call.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from server.config import Config
from server.errors import EmbeddingsFailed
from server.rag.embeddings import DIMENSIONS, embedder

BATCH = 256  # texts per call to an embeddings server


class PassageEmbedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


class LocalEmbedder:
    """``wordllama``'s shipped model (256 dimensions): no network, about 20,000 passages a second."""

    name = f"wordllama/l2_supercat/{DIMENSIONS}"

    def embed(self, texts: list[str]) -> np.ndarray:
        return embedder().embed(texts, DIMENSIONS)


class OpenAIEmbedder:
    """``client.embeddings.create`` of the ``openai`` package against ``GLASSGRAPH_EMBEDDINGS_BASE_URL``."""

    def __init__(self, config: Config) -> None:
        import openai  # seconds to import: only when configured

        base_url = config.embeddings_base_url or config.llm_base_url
        api_key = config.embeddings_api_key or config.llm_api_key
        if not base_url and not api_key:
            raise EmbeddingsFailed("GLASSGRAPH_EMBEDDINGS=openai needs GLASSGRAPH_EMBEDDINGS_BASE_URL (a local "
                                   "server) or GLASSGRAPH_EMBEDDINGS_API_KEY")
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "none",
                                     timeout=config.embeddings_timeout_s, max_retries=1)
        self._model = config.embeddings_model
        self._where = str(self._client.base_url).rstrip("/")
        self.name = f"openai/{self._model}"

    def embed(self, texts: list[str]) -> np.ndarray:
        import openai

        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            batch = texts[start:start + BATCH]
            try:
                reply = self._client.embeddings.create(model=self._model, input=batch)
            except openai.OpenAIError as exc:
                raise EmbeddingsFailed(f"the embeddings server {self._where} failed ({type(exc).__name__}: "
                                       f"{str(exc)[:200]}); check GLASSGRAPH_EMBEDDINGS_BASE_URL and "
                                       "GLASSGRAPH_EMBEDDINGS_MODEL") from None
            data = sorted(reply.data, key=lambda item: item.index)
            if len(data) != len(batch) or len({len(item.embedding) for item in data}) > 1:
                raise EmbeddingsFailed(f"the embeddings server {self._where} answered {len(data)} vectors of "
                                       f"sizes {sorted({len(item.embedding) for item in data})} for {len(batch)} "
                                       "texts; check GLASSGRAPH_EMBEDDINGS_MODEL")
            rows += [item.embedding for item in data]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def make_passage_embedder(config: Config) -> PassageEmbedder:
    """The embedder ``GLASSGRAPH_EMBEDDINGS`` names."""
    if config.embeddings == "wordllama":
        return LocalEmbedder()
    if config.embeddings == "openai":
        return OpenAIEmbedder(config)
    raise EmbeddingsFailed(f"unknown embeddings provider {config.embeddings!r} (GLASSGRAPH_EMBEDDINGS): use "
                           "'wordllama' or 'openai'")
