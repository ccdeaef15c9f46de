"""Text vectors from ``wordllama``, a static-embedding model whose weights ship inside its wheel
(``l2_supercat``, 256 dimensions, MIT): loaded from the installed package with downloads disabled,
so nothing is fetched at run time. A text's vector is the mean of its token vectors, unit length;
the similarity of two texts is the dot product of their vectors.

Used where words fail: question words against relation labels in the offline selector
(``server.rag.relations``), and the semantic tier of entity lookup (``server.rag.label_index``).
"""
from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

DIMENSIONS = 256  # of the shipped model; entity vectors keep the first LABEL_DIMENSIONS (Matryoshka)
LABEL_DIMENSIONS = 128  # of the entity label vectors kept beside the label index
_BATCH = 512  # texts per tokenizer call


class Embedder:
    """The shipped model, loaded once per process (``embedder()``); thread-safe."""

    def __init__(self) -> None:
        import wordllama  # numpy, tokenizers and safetensors: loaded on first use, not on import
        from wordllama import WordLlama

        self._model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        self._lock = threading.Lock()  # the tokenizer's padding state is shared

    def embed(self, texts: list[str], dimensions: int = DIMENSIONS) -> np.ndarray:
        """``len(texts)`` unit vectors (float32 rows) of the first ``dimensions`` dimensions; a text
        without any known token gets the zero vector (similar to nothing)."""
        out = np.zeros((len(texts), dimensions), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # a batch pads to its longest text
        for start in range(0, len(texts), _BATCH):
            rows = order[start:start + _BATCH]
            with self._lock:
                vectors = self._model.embed([texts[i] for i in rows], norm=False, batch_size=_BATCH)[:, :dimensions]
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            out[rows] = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return out


@lru_cache(maxsize=1)
def embedder() -> Embedder:
    """The process's model (about 0.15 s to load the first time)."""
    return Embedder()
