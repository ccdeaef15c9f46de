"""Extracted names to RDF: entities linked to the collection's nodes or minted, facts as triples.

A name first links to an entity of the collection whose label normalizes the same (the label
index), so a new text about France attaches to the sample's France; otherwise it mints
``e:{slug}`` with the rule the sample uses (``vocab.entity_iri``), so the same name in two chunks
or two documents is the same node. Predicates mint ``r:{slug}``. Literal objects keep their text
exactly. Every entity and relation gets an ``rdfs:label`` unless the collection already labels it.
"""
from __future__ import annotations

from collections.abc import Iterable

from pyoxigraph import Literal, NamedNode, Triple

from server import vocab
from server.ingest.extraction import ChunkFacts
from server.rag.label_index import LabelIndex


class FactBuilder:
    """Builds one document's facts in one collection; keeps the names it has resolved."""

    def __init__(self, index: LabelIndex, collection: str) -> None:
        self.index, self.collection = index, collection
        self._entities: dict[str, NamedNode | None] = {}
        self.labels: dict[NamedNode, str] = {}  # new labels: term -> the first name it was given

    def resolve_names(self, extracted: Iterable[ChunkFacts]) -> None:
        """Link or mint every entity name of ``extracted`` at once (one index look-up for all)."""
        names = sorted({name for facts in extracted for name in _entity_names(facts)} - set(self._entities))
        linked = self.index.entities_named(names, self.collection)
        for name in names:
            minted = vocab.entity_iri(name)
            candidates = linked.get(name, [])
            self._entities[name] = minted if minted in candidates else (candidates[0] if candidates else minted)

    def resolved(self, name: str) -> NamedNode | None:
        """The entity :meth:`resolve_names` linked or minted for ``name`` (None: not resolved)."""
        return self._entities.get(name)

    def triples(self, facts: ChunkFacts) -> list[Triple]:
        """The chunk's facts as triples (definitions as ``skos:definition``), without duplicates; a
        name with no letter or digit (no IRI can be minted from it) drops its fact."""
        found: list[Triple] = []
        for item in facts.relationships:
            subject, predicate = self._entity(item.subject), self._relation(item.predicate)
            obj = self._entity(item.object) if item.object_entity else Literal(item.object)
            if subject is not None and predicate is not None and obj is not None:
                found.append(Triple(subject, predicate, obj))
        for item in facts.definitions:
            entity = self._entity(item.entity)
            if entity is not None:
                found.append(Triple(entity, vocab.SKOS.definition, Literal(item.definition)))
        return list(dict.fromkeys(found))

    def _entity(self, name: str) -> NamedNode | None:
        """The resolved entity of ``name`` (see :meth:`resolve_names`; an unresolved name is minted)."""
        term = self._entities[name] if name in self._entities else vocab.entity_iri(name)
        return self._remember(term, name)

    def _relation(self, name: str) -> NamedNode | None:
        return self._remember(vocab.relation_iri(name), name)

    def _remember(self, term: NamedNode | None, name: str) -> NamedNode | None:
        if term is not None:
            self.labels.setdefault(term, name.strip())
        return term

    def new_labels(self) -> dict[NamedNode, str]:
        """Labels for the terms used that the collection does not label yet."""
        known = self.index.display_labels(list(self.labels), self.collection)
        return {term: name for term, name in self.labels.items() if term not in known}


def _entity_names(facts: ChunkFacts) -> Iterable[str]:
    for item in facts.relationships:
        yield item.subject
        if item.object_entity:
            yield item.object
    for item in facts.definitions:
        yield item.entity
