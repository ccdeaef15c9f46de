"""A selection step read from the stream's ``explain_triples`` (server/explain/wire.py's shape), in the trace
shape the display prints (``read_trace``'s: edges with labels, reasoning, who chose them and source chains),
so ``tg-invoke-graph-rag`` shows the step without asking for the trace. Plain dicts only: no store, no
pyoxigraph.
"""
from __future__ import annotations

import json
from collections import defaultdict

TG = "https://trustgraph.ai/ns/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
DC_TITLE = "http://purl.org/dc/elements/1.1/title"
DERIVED_FROM = "http://www.w3.org/ns/prov#wasDerivedFrom"
NODE_TYPES = {TG + "Document": "Document", TG + "Page": "Page", TG + "Chunk": "Chunk"}
DETAILS = ("selectionMethod", "fallbackReason", "cutEdges", "promptEdges", "promptBatches", "trimmedEdges",
           "promptTokens", "contextTokens", "unofferedEdges", "llmQueueMs")


def key(term: dict) -> str:
    """A term's identity (an IRI, a literal with its datatype and language, a triple term)."""
    return term["i"] if term.get("t") == "i" else json.dumps(term, sort_keys=True)


def lexical(term: dict) -> str:
    """An IRI, a literal's lexical form, or a triple term's ``<<( s p o )>>``."""
    kind = term.get("t")
    if kind == "i":
        return term["i"]
    if kind == "l":
        return term.get("v", "")
    if kind == "r":
        inner = term["r"]
        return "<<( " + " ".join(lexical(inner[k]) for k in ("s", "p", "o")) + " )>>"
    return "_:" + str(term.get("b", ""))


class StepTriples:
    """The triples of one step, indexed by subject and predicate."""

    def __init__(self, triples: list[dict]) -> None:
        self.objects: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for triple in triples:
            self.objects[(key(triple["s"]), key(triple["p"]))].append(triple["o"])
        self.by_object: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for triple in triples:
            self.by_object[(key(triple["o"]), key(triple["p"]))].append(triple["s"])

    def value(self, subject: str, predicate: str) -> str | None:
        found = self.objects.get((subject, predicate))
        return lexical(found[0]) if found else None

    def name(self, term: dict) -> str:
        """What a term is called: its label, else an IRI's local name or a literal's form."""
        if term.get("t") == "i":
            from server.labels import local_name  # pure, but its module reads the store

            return self.value(term["i"], RDFS_LABEL) or local_name(term["i"])
        return lexical(term)

    def chains(self, edge: dict) -> list[list[dict]]:
        """The source chains of ``edge``: from each subgraph containing it, chunk -> page -> document."""
        chains = []
        for subgraph in self.by_object.get((key(edge), TG + "contains"), []):
            for start in self.objects.get((key(subgraph), DERIVED_FROM), []):
                chain, node = [], start
                while node is not None and all(n["iri"] != node["i"] for n in chain):
                    chain.append(self._node(node["i"]))
                    parents = self.objects.get((node["i"], DERIVED_FROM))
                    node = parents[0] if parents else None
                chains.append(chain)
        return chains

    def _node(self, iri: str) -> dict:
        types = [NODE_TYPES.get(lexical(t)) for t in self.objects.get((iri, RDF_TYPE), [])]
        spans = {name: self.value(iri, TG + name) for name in ("charOffset", "charLength")}
        return {"iri": iri, "label": self.value(iri, RDFS_LABEL), "title": self.value(iri, DC_TITLE),
                "type": next((t for t in types if t), None), "text": None,
                "offset": int(spans["charOffset"]) if spans["charOffset"] else None,
                "length": int(spans["charLength"]) if spans["charLength"] else None}


def selection_view(iri: str, triples: list[dict], model: str | None = None) -> dict:
    """``{"model", "selection_details", "edges"}`` of the selection ``iri`` from its step's triples; edges in
    selection order (the edge-selection nodes' index)."""
    step = StepTriples(triples)
    nodes = [lexical(node) for node in step.objects.get((iri, TG + "selectedEdge"), [])]
    nodes.sort(key=lambda node: int(node.rsplit(":", 1)[-1]) if node.rsplit(":", 1)[-1].isdigit() else 1 << 62)
    edges = []
    for node in nodes:
        found = [term for term in step.objects.get((node, TG + "edge"), []) if term.get("t") == "r"]
        if not found:
            continue
        edge = found[0]
        parts = [edge["r"][k] for k in ("s", "p", "o")]
        edges.append({"node": node, "labels": [step.name(part) for part in parts],
                      "reasoning": step.value(node, TG + "reasoning"),
                      "selected_by": step.value(node, TG + "selectedBy"),
                      "sources": step.chains(edge), "mentions": []})
    details = {name: step.value(iri, TG + name) for name in DETAILS}
    return {"model": model, "edges": edges,
            "selection_details": {k: int(v) if v.isdigit() else v for k, v in details.items() if v is not None}}
