"""Glassgraph: an explainable GraphRAG server on an embedded Oxigraph store."""
