"""A VoID description of the store (https://www.w3.org/TR/void/): one ``void:Dataset`` for the
whole store and one subset per graph (each collection's knowledge graph, its extraction provenance,
the explanations, the librarian's text, any other named graph, and the default graph when it holds
triples), with triple counts, property and class partitions, the vocabularies used, example
resources, the SPARQL endpoint and a data dump (the graph's Graph Store URL).

Describing reads every graph once (two templates per graph, about 0.2 s on the sample), so the
HTTP layer keeps the result until the store's next write (``StoreBackend.generation``).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from urllib.parse import quote, urlencode

from pyoxigraph import BlankNode, DefaultGraph, Literal, NamedNode, Triple

from server import vocab
from server.store_base import GraphName, StoreBackend
from server.vocab import RDF, Namespace

VOID = Namespace("http://rdfs.org/ns/void#")
DCTERMS = Namespace("http://purl.org/dc/terms/")
SD = Namespace("http://www.w3.org/ns/sparql-service-description#")
FOAF = Namespace("http://xmlns.com/foaf/0.1/")
VOID_PATH = "/.well-known/void"
EXAMPLES = 3  # example resources per graph
_EXAMPLE_SCAN = 200  # quads looked at to find them


_TITLES = {
    "collection": "Collection {name}: knowledge graph",
    "source": "Collection {name}: extraction provenance",
    "explanations": "GraphRAG explanations: sessions, retrievals, selected edges, answers",
    "librarian": "Librarian: the text of documents, pages, chunks and answers",
    "default": "The default graph",
    "graph": "Graph <{name}>",
}


@dataclass(frozen=True)
class GraphRole:
    """What a graph holds, as its IRI tells (no data is read)."""

    kind: str  # a key of _TITLES
    name: str | None  # the collection, for "collection" and "source"; the IRI, for "graph"

    @property
    def title(self) -> str:
        return _TITLES[self.kind].format(name=self.name)

    @property
    def fragment(self) -> str:
        """The graph's dataset in the VoID document: ``collection-default``, ``explanations``, ``graph-<iri>``..."""
        return self.kind if self.name is None else f"{self.kind}-{quote(self.name, safe='')}"


@dataclass(frozen=True)
class GraphDescription:
    """What VoID says about one graph."""

    graph: GraphName
    role: GraphRole
    triples: int
    properties: list[tuple[NamedNode, int]]  # predicate, triples; most used first
    classes: list[tuple[NamedNode, int]]  # class, instances
    examples: list[NamedNode]

    @property
    def vocabularies(self) -> list[str]:
        """The namespaces of the predicates and classes used, in order of first use."""
        terms = [p for p, _ in self.properties] + [c for c, _ in self.classes]
        return list(dict.fromkeys(ns for ns in (namespace_of(t.value) for t in terms) if ns))


def namespace_of(iri: str) -> str | None:
    """``https://trustgraph.ai/r/capital`` -> ``https://trustgraph.ai/r/``; None without ``#`` or ``/``."""
    cut = max(iri.rfind("#"), iri.rfind("/"))
    return iri[:cut + 1] if cut > iri.find("//") + 1 else None


def graph_role(store: StoreBackend, graph: GraphName) -> GraphRole:
    if isinstance(graph, DefaultGraph):
        return GraphRole("default", None)
    if graph == store.explain_graph:
        return GraphRole("explanations", None)
    if graph == vocab.LIBRARIAN_GRAPH:
        return GraphRole("librarian", None)
    collection = store.collection_of(graph)
    if collection is not None:
        return GraphRole("collection", collection)
    source = graph.value.removesuffix(":source")
    if source != graph.value and store.collection_of(NamedNode(source)) is not None:
        return GraphRole("source", store.collection_of(NamedNode(source)))
    return GraphRole("graph", graph.value)


def describe_graph(store: StoreBackend, graph: GraphName) -> GraphDescription:
    properties = [(row["p"], int(row["n"].value)) for row in store.select("void_properties", default_graph=graph)]
    classes = [(row["class"], int(row["n"].value)) for row in store.select("void_classes", default_graph=graph)
               if isinstance(row["class"], NamedNode)]
    subjects = (q.subject for q in store.quads(graph=graph, limit=_EXAMPLE_SCAN) if isinstance(q.subject, NamedNode))
    return GraphDescription(graph, graph_role(store, graph), sum(n for _, n in properties), properties, classes,
                            list(islice(dict.fromkeys(subjects), EXAMPLES)))


def describe_store(store: StoreBackend) -> list[GraphDescription]:
    """Every named graph, then the default graph if it holds triples."""
    described = [describe_graph(store, graph) for graph in sorted(store.named_graphs(), key=lambda g: g.value)]
    default = describe_graph(store, DefaultGraph())
    return described + ([default] if default.triples else [])


def dataset_iri(root: str, role: GraphRole) -> NamedNode:
    """The IRI of a graph's ``void:Dataset`` in the document served at ``root + VOID_PATH``."""
    return NamedNode(f"{root}{VOID_PATH}#{role.fragment}")


def void_triples(descriptions: list[GraphDescription], root: str, endpoint: str, dump_limit: int) -> list[Triple]:
    """The VoID document for a server at ``root`` (``http://host:port``) with its SPARQL ``endpoint``."""
    store_dataset = NamedNode(f"{root}{VOID_PATH}#dataset")
    title = "Glassgraph: knowledge graphs, their provenance and the explanations of answers"
    triples = [Triple(store_dataset, RDF.type, VOID.Dataset),
               Triple(store_dataset, DCTERMS.title, Literal(title)),
               Triple(store_dataset, FOAF.homepage, NamedNode(root + "/")),
               Triple(store_dataset, VOID.sparqlEndpoint, NamedNode(endpoint)),
               Triple(store_dataset, VOID.triples, _integer(sum(d.triples for d in descriptions)))]
    for description in descriptions:
        node = dataset_iri(root, description.role)
        triples.append(Triple(store_dataset, VOID.subset, node))
        triples += _graph_dataset(node, description, root, endpoint, dump_limit)
    return triples


def _graph_dataset(node: NamedNode, description: GraphDescription, root: str, endpoint: str,
                   dump_limit: int) -> list[Triple]:
    """One graph's dataset, which is also its ``sd:Graph``, named by an ``sd:NamedGraph`` as in the
    service description; its data dump is its Graph Store URL when ``GET /store`` can answer it
    whole (at most ``dump_limit`` triples, GLASSGRAPH_MAX_ROWS)."""
    graph = description.graph
    triples = [Triple(node, RDF.type, VOID.Dataset), Triple(node, RDF.type, SD.Graph),
               Triple(node, DCTERMS.title, Literal(description.role.title)),
               Triple(node, VOID.sparqlEndpoint, NamedNode(endpoint)),
               Triple(node, VOID.triples, _integer(description.triples)),
               Triple(node, VOID.properties, _integer(len(description.properties)))]
    if description.triples <= dump_limit:
        dump = {"default": ""} if isinstance(graph, DefaultGraph) else {"graph": graph.value}
        triples.append(Triple(node, VOID.dataDump, NamedNode(f"{root}/store?{urlencode(dump)}")))
    if isinstance(graph, NamedNode):
        named = BlankNode()
        triples += [Triple(named, RDF.type, SD.NamedGraph), Triple(named, SD.name, graph),
                    Triple(named, SD.graph, node)]
    triples += [Triple(node, VOID.vocabulary, NamedNode(ns)) for ns in description.vocabularies]
    triples += [Triple(node, VOID.exampleResource, example) for example in description.examples]
    for predicate, count in description.properties:
        partition = BlankNode()
        triples += [Triple(node, VOID.propertyPartition, partition), Triple(partition, VOID.property, predicate),
                    Triple(partition, VOID.triples, _integer(count))]
    for cls, count in description.classes:
        partition = BlankNode()
        triples += [Triple(node, VOID.classPartition, partition), Triple(partition, VOID["class"], cls),
                    Triple(partition, VOID.entities, _integer(count))]
    return triples


def _integer(value: int) -> Literal:
    return Literal(str(value), datatype=vocab.XSD.integer)
