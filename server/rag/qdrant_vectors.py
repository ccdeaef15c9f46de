"""Passage vectors in Qdrant (``GLASSGRAPH_VECTORS=qdrant``), the vector engine TrustGraph uses, for an app
tier of several processes over a remote store: each process keeps only the lexical index (rebuilt from the
store in seconds) and shares the vectors, so a chunk is embedded once, not once per process and restart.

One Qdrant collection per embedding model (``glassgraph-passages-{model}-{dimensions}``), so vectors of two
models never mix and changing the model starts a fresh collection. A point per chunk: its id derived from
the Glassgraph collection and the chunk IRI (the same chunk, the same point, in every process), its payload
the collection and the chunk. ``GLASSGRAPH_QDRANT_URL`` names a Qdrant server; ``GLASSGRAPH_QDRANT_PATH``
Qdrant's local mode (a directory one process owns; what the tests run, as no Qdrant server is installable
here).
"""
from __future__ import annotations

import re
import uuid

import numpy as np

from server.errors import EmbeddingsFailed

_POINTS = uuid.UUID("3f1c1f7e-5d0b-4f35-9a52-6b1f3c6a9e21")  # the namespace of point ids
_BATCH = 256  # points per upsert


def point_id(collection: str, chunk: str) -> str:
    """The point of ``chunk`` in ``collection``: a name-based uuid, the same in every process."""
    return str(uuid.uuid5(_POINTS, f"{collection}\n{chunk}"))


class QdrantVectors:
    """Passage vectors kept in a Qdrant server (``url``) or in its local mode (``path``)."""

    def __init__(self, embedder_name: str, url: str | None = None, path: str | None = None,
                 api_key: str | None = None) -> None:
        try:
            from qdrant_client import QdrantClient, models
        except ImportError:
            raise EmbeddingsFailed("GLASSGRAPH_VECTORS=qdrant needs the qdrant-client package: "
                                   "pip install 'glassgraph[qdrant]'") from None
        self._models = models
        self._server = bool(url)
        self.where = url or path
        try:
            self._client = QdrantClient(url=url, api_key=api_key) if url else QdrantClient(path=path)
        except Exception as exc:  # a local path held by another process, or not a directory
            raise EmbeddingsFailed(f"the Qdrant vector store {self.where} cannot be opened: {exc} "
                                   "(GLASSGRAPH_QDRANT_PATH is for one process; a server, GLASSGRAPH_QDRANT_URL, "
                                   "for several)") from None
        self._prefix = "glassgraph-passages-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", embedder_name)
        self.name: str | None = None  # the Qdrant collection, once the vectors' size is known

    def _collection(self, dimensions: int) -> str:
        """The Qdrant collection of this model's vectors of ``dimensions``, created on first use."""
        name = f"{self._prefix}-{dimensions}"
        if name != self.name:
            models = self._models
            try:
                if not self._client.collection_exists(name):
                    self._client.create_collection(name, vectors_config=models.VectorParams(
                        size=dimensions, distance=models.Distance.COSINE))
                    if self._server:  # the local mode filters without an index (and warns about one)
                        self._client.create_payload_index(name, "collection", models.PayloadSchemaType.KEYWORD)
            except Exception as exc:  # the client raises its own transport and HTTP errors
                raise self._failed(exc) from exc
            self.name = name
        return name

    def _failed(self, exc: Exception) -> EmbeddingsFailed:
        return EmbeddingsFailed(f"the Qdrant vector store {self.where} failed: {exc} (GLASSGRAPH_QDRANT_URL)")

    def missing(self, collection: str, chunks: list[str], dimensions: int) -> set[str]:
        """The ``chunks`` of ``collection`` that have no vector yet (another process may have added them)."""
        if not chunks:
            return set()
        ids = {point_id(collection, chunk): chunk for chunk in chunks}
        name = self._collection(dimensions)
        try:
            found = self._client.retrieve(name, list(ids), with_payload=False, with_vectors=False)
        except Exception as exc:
            raise self._failed(exc) from exc
        return set(chunks) - {ids[str(point.id)] for point in found}

    def put(self, collection: str, chunks: list[str], vectors: np.ndarray) -> None:
        """Store the vectors of ``chunks`` (a chunk's point is replaced)."""
        name = self._collection(vectors.shape[1])
        points = [self._models.PointStruct(id=point_id(collection, chunk), vector=vector.tolist(),
                                           payload={"collection": collection, "chunk": chunk})
                  for chunk, vector in zip(chunks, vectors.astype(np.float32), strict=True)]
        try:
            for start in range(0, len(points), _BATCH):
                self._client.upsert(name, points[start:start + _BATCH])
        except Exception as exc:
            raise self._failed(exc) from exc

    def drop(self, collection: str, chunks: list[str]) -> None:
        """Forget the vectors of ``chunks`` (those of a collection that no longer has them), in the Qdrant
        collection of every size of this model's vectors (a process may drop before it has embedded)."""
        if not chunks:
            return
        points = self._models.PointIdsList(points=[point_id(collection, chunk) for chunk in chunks])
        try:
            for found in self._client.get_collections().collections:
                if found.name.startswith(self._prefix + "-"):
                    self._client.delete(found.name, points_selector=points)
        except Exception as exc:
            raise self._failed(exc) from exc

    def search(self, collection: str, query: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """``(chunk, cosine similarity)`` of the ``limit`` nearest passages of ``collection``, best first."""
        models, name = self._models, self._collection(query.shape[0])
        try:
            found = self._client.query_points(name, query=query.astype(np.float32).tolist(), limit=limit,
                                              query_filter=models.Filter(must=[models.FieldCondition(
                                                  key="collection", match=models.MatchValue(value=collection))]))
        except Exception as exc:
            raise self._failed(exc) from exc
        return [(point.payload["chunk"], float(point.score)) for point in found.points]

    def close(self) -> None:
        self._client.close()
