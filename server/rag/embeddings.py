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
_BATCH = 512  # texts per tokenizer call at most
BATCH_CHARS = 256_000  # a batch's texts times its longest, at most: the tokenizer pads every text to the longest
WINDOW_CHARS = 1_000  # a longer text is embedded as windows of about this size, their vectors averaged


class Embedder:
    """The shipped model, loaded once per process (``embedder()``); thread-safe."""

    def __init__(self) -> None:
        import wordllama  # numpy, tokenizers and safetensors: loaded on first use, not on import
        from wordllama import WordLlama

        self._model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        self._lock = threading.Lock()  # the tokenizer's padding state is shared

    def embed(self, texts: list[str], dimensions: int = DIMENSIONS) -> np.ndarray:
        """``len(texts)`` unit vectors (float32 rows) of the first ``dimensions`` dimensions; a text
        without any known token gets the zero vector (similar to nothing).

        The work is bounded whatever the texts: a batch pads every text to its longest, so texts go in
        order of length, in batches of at most ``BATCH_CHARS`` padded characters, and a text longer than
        ``WINDOW_CHARS`` goes as windows whose mean vectors are averaged by length (a mean of token
        vectors either way): one 21,000-character sentence among a few hundred had taken 8 GB."""
        windows, owner = [], []
        for index, text in enumerate(texts):
            for start in range(0, max(len(text), 1), WINDOW_CHARS):
                windows.append(text[start:start + WINDOW_CHARS])
                owner.append(index)
        sums = np.zeros((len(texts), dimensions), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for rows in _batches(order, [len(windows[i]) for i in order]):
            with self._lock:
                vectors = self._model.embed([windows[i] for i in rows], norm=False, batch_size=len(rows))
            for row, vector in zip(rows, vectors[:, :dimensions], strict=True):
                sums[owner[row]] += vector * max(len(windows[row]), 1)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)


def _batches(order: list[int], lengths: list[int]) -> list[list[int]]:
    """``order`` (by ascending ``lengths``) cut into batches of at most ``_BATCH`` texts whose count times
    their longest stays within ``BATCH_CHARS``."""
    batches: list[list[int]] = []
    for row, length in zip(order, lengths, strict=True):
        if batches and len(batches[-1]) < _BATCH and (len(batches[-1]) + 1) * max(length, 1) <= BATCH_CHARS:
            batches[-1].append(row)
        else:
            batches.append([row])
    return batches


@lru_cache(maxsize=1)
def embedder() -> Embedder:
    """The process's model (about 0.15 s to load the first time)."""
    return Embedder()
