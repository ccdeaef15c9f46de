"""The explain stages, declared once (docs/architecture.md, 'Query-time explainability').

A question's trace is a chain of entities in the explainability graph: the session, then one entity per stage,
each linked to the one before it. A :class:`Stage` is everything the code knows of one: its ``kind`` (the
stream's ``explain_kind``, the trace's keys, the CLI's ``[kind]`` blocks), its IRI, the quads each of its
results is recorded as, the columns the trace reader reads of it (the SPARQL templates that walk the chain are
written from :data:`STAGES`: ``server.sparql_templates``), the nodes it lists, and what the console shows while it
runs and once it is recorded (``/console/ask`` reads :func:`console_steps`).

The pipelines (``server/rag``) yield the typed results below; the explain recorder writes each as its stage's
quads. No other Python, SPARQL or JavaScript source spells a stage's name (``tests/test_import_graph.py``).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pyoxigraph import Literal, NamedNode, Quad, Triple

from server.vocab import (
    LIBRARIAN_GRAPH,
    PROV,
    RDF,
    RDFS,
    TG,
    URN,
    Term,
    content_quads,
    double_literal,
    entity_quads,
    integer_literal,
    now_literal,
)

Labels = tuple[str, str, str]  # an edge's subject, predicate and object as the LLM sees them
Scored = tuple[NamedNode, float, float, float]  # a retrieved passage: its chunk, bm25, cosine and fused scores
Span = tuple[int, str, int, int]  # a cited span: the answer's mark, the chunk's IRI, offset and length in its text
Facts = list[tuple[NamedNode, Term]]  # what an entity records about itself


# --- the typed results of the stages, as the pipelines yield them -------------------------------

@dataclass(frozen=True)
class SessionStarted:
    """A question asked: the model, the collection, and what kind of session (``label``)."""

    question: str
    model: str
    collection: str
    label: str = "GraphRAG query session"
    started: Literal = field(default_factory=now_literal)  # xsd:dateTime
    documents: bool = False  # a document RAG session (TrustGraph 2.x's DocRagQuestion)


@dataclass(frozen=True)
class EdgesRetrieved:
    """GraphRAG's retrieval: every retrieved edge with its labels, the seeds and, ranked, why each was taken
    ("1. France: its label is spelled out in the question"); asked for passages, those and the query terms."""

    edges: list[tuple[Triple, Labels]]
    seeds: list[NamedNode] = field(default_factory=list)
    seed_reasons: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    passages: list[Scored] = field(default_factory=list)
    seed_names: list[str] = field(default_factory=list)  # the seeds' labels: the question's concepts


@dataclass(frozen=True)
class EdgesSelected:
    """GraphRAG's selection: each chosen edge with the reasoning and who chose it (original terms), their
    labels, ``facts`` about how they were chosen (``server.rag.choice.selection_facts``), and the retrieved
    passages (by rank) given to the answer beside them."""

    edges: list[tuple[Triple, str] | tuple[Triple, str, str]]
    labels: list[Labels] = field(default_factory=list)
    facts: Facts = field(default_factory=list)
    passages: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PassagesRetrieved:
    """Document RAG's retrieval: the query terms its lexical search read and the ranked passages."""

    terms: list[str]
    passages: list[Scored]


@dataclass(frozen=True)
class PassagesSelected:
    """Document RAG's selection: the passages (by retrieval rank) the answer was made from, and how."""

    ranks: list[int]
    facts: Facts = field(default_factory=list)


@dataclass(frozen=True)
class Answered:
    """The answer: its text, ``outcome`` ("answered" or "no-answer"), the selected edges its ``[n]`` marks cite
    (1-based) and the marks that name none, the cited ``spans`` of passages, a model's sentences that what it
    was given does not hold, and why the deterministic answer replaced the model's. ``label`` says whose."""

    text: str
    label: str = "GraphRAG answer"
    outcome: str | None = None
    cited: list[int] = field(default_factory=list)
    invalid: list[int] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    fallback_reason: str | None = None


StageResult = SessionStarted | EdgesRetrieved | EdgesSelected | PassagesRetrieved | PassagesSelected | Answered


# --- the declaration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """A value the trace reader reads of a stage (a variable of ``explain_session.rq``): ``predicate`` of the
    stage's entity, or of the node another column holds (``of``), in ``graph`` (None: the explainability
    graph); a ``required`` one decides whether the entity is there at all. ``key`` is its name in the trace."""

    variable: str
    predicate: NamedNode
    key: str | None = None
    required: bool = False
    of: str | None = None
    graph: NamedNode | None = None

    def pattern(self, entity: str) -> str:
        """The column's triple pattern, ``entity`` being the variable of its stage's entity."""
        triple = f"?{self.of or entity} {self.predicate} ?{self.variable}"
        return f"GRAPH {self.graph} {{ {triple} }}" if self.graph else triple


@dataclass(frozen=True, eq=False)
class Stage:
    """One stage of a trace (see the module's docstring). ``link`` leads from its entity to the previous stage's
    (None: the session, the chain's root); ``records`` builds the quads of each result type it takes;
    ``members`` are the links to the nodes its entity lists (edges, passages, spans)."""

    kind: str
    infix: str  # its IRIs: urn:trustgraph:{infix}{session uuid}
    link: NamedNode | None
    records: dict[type, Callable[[NamedNode, str, StageResult], list[Quad]]]
    columns: tuple[Column, ...] = ()
    members: tuple[NamedNode, ...] = ()
    running: str = ""  # the console's title while it runs, once recorded, and once recorded in Documents mode
    done: str = ""
    passages_done: str | None = None

    def iri(self, session_id: str) -> NamedNode:
        """The stage's entity of session ``session_id``."""
        return NamedNode(f"{URN}{self.infix}{session_id}")

    def quads(self, graph: NamedNode, session_id: str, result: StageResult) -> list[Quad]:
        """What ``result`` is recorded as, in ``graph``."""
        return self.records[type(result)](graph, session_id, result)


# TrustGraph 2.x reads the same chain under its own names (question, grounding, exploration, focus, synthesis):
# each entity carries that vocabulary's class beside ours, and a GraphRAG retrieval derives from a grounding node
# (the question's concepts), so TrustGraph's explain tools read a Glassgraph trace (docs/decisions.md, 24).

def _session(graph: NamedNode, session_id: str, result: SessionStarted) -> list[Quad]:
    return entity_quads(graph, SESSION.iri(session_id), [
        (RDF.type, PROV.Activity), (RDF.type, PROV.Entity), (RDF.type, TG.Question),
        (RDF.type, TG.DocRagQuestion if result.documents else TG.GraphRagQuestion),
        (RDFS.label, Literal(result.label)), (PROV.startedAtTime, result.started),
        (TG.query, Literal(result.question)), (TG.model, Literal(result.model)),
        (TG.collection, Literal(result.collection))])


def _edges_retrieved(graph: NamedNode, session_id: str, result: EdgesRetrieved) -> list[Quad]:
    """Each retrieved edge as a triple term (``tg:retrievedEdge``, decision 15), each seed (``tg:seed``), why
    each seed was taken (``tg:seedReason``), and the passages when asked for."""
    quads = _grounding(graph, session_id, result.seed_names)
    quads += entity_quads(graph, RETRIEVAL.iri(session_id), [
        (RDF.type, PROV.Entity), (RDF.type, TG.Exploration), (RDFS.label, Literal("Retrieved edges")),
        (PROV.wasGeneratedBy, SESSION.iri(session_id)), (PROV.wasDerivedFrom, grounding_iri(session_id)),
        (TG.edgeCount, integer_literal(len(result.edges))),
        *((TG.retrievedEdge, edge) for edge, _ in result.edges), *((TG.seed, seed) for seed in result.seeds),
        *((TG.entity, seed) for seed in result.seeds),
        *((TG.seedReason, Literal(reason)) for reason in result.seed_reasons)])
    return quads + (_passage_nodes(graph, session_id, result.terms, result.passages) if result.passages else [])


def _passages_retrieved(graph: NamedNode, session_id: str, result: PassagesRetrieved) -> list[Quad]:
    """The passages, derived from a grounding of the query terms, counted as TrustGraph counts a document RAG
    exploration's chunks (``tg:chunkCount``)."""
    return _grounding(graph, session_id, result.terms) + entity_quads(graph, RETRIEVAL.iri(session_id), [
        (RDF.type, PROV.Entity), (RDF.type, TG.Exploration), (RDFS.label, Literal("Retrieved passages")),
        (PROV.wasGeneratedBy, SESSION.iri(session_id)), (PROV.wasDerivedFrom, grounding_iri(session_id)),
        (TG.chunkCount, integer_literal(len(result.passages)))]) + _passage_nodes(graph, session_id, result.terms,
                                                                                   result.passages)


def _grounding(graph: NamedNode, session_id: str, concepts: Iterable[str]) -> list[Quad]:
    """TrustGraph 2.x's grounding of the question (its ``concepts``: GraphRAG's seeds' labels, document RAG's query
    terms), which the retrieval derives from and lists as a member."""
    return entity_quads(graph, grounding_iri(session_id), [
        (RDF.type, PROV.Entity), (RDF.type, TG.Grounding), (RDFS.label, Literal("Grounding")),
        (PROV.wasDerivedFrom, SESSION.iri(session_id)), *((TG.concept, Literal(name)) for name in concepts)])


def _passage_nodes(graph: NamedNode, session_id: str, terms: Iterable[str], passages: list[Scored]) -> list[Quad]:
    """The query terms (``tg:queryTerm``) and each passage (``tg:retrievedPassage``, ranked from 1) with its
    chunk and scores: bm25 (``tg:lexicalScore``, 0 when no word matched), cosine similarity
    (``tg:semanticScore``) and the fused reciprocal-rank score (``tg:fusedScore``)."""
    retrieval = RETRIEVAL.iri(session_id)
    quads = entity_quads(graph, retrieval, [(TG.passageCount, integer_literal(len(passages))),
                                      *((TG.queryTerm, Literal(term)) for term in terms)])
    for rank, (chunk, lexical, semantic, fused) in enumerate(passages, start=1):
        node = passage_iri(session_id, rank)
        quads.append(Quad(retrieval, TG.retrievedPassage, node, graph))
        quads += entity_quads(graph, node, [(TG.chunk, chunk), (TG.rank, integer_literal(rank)),
                                      (TG.lexicalScore, double_literal(lexical)),
                                      (TG.semanticScore, double_literal(semantic)),
                                      (TG.fusedScore, double_literal(fused))])
    return quads


def _edges_selected(graph: NamedNode, session_id: str, result: EdgesSelected) -> list[Quad]:
    """The selection with its facts and one edge-selection node per edge (original terms, reasoning, who
    chose it), and the passages given beside the edges (``tg:selectedPassage``)."""
    selection = SELECTION.iri(session_id)
    quads = entity_quads(graph, selection, [
        (RDF.type, PROV.Entity), (RDF.type, TG.Focus), (RDFS.label, Literal("Selected edges")),
        (PROV.wasDerivedFrom, RETRIEVAL.iri(session_id)), *result.facts,
        *((TG.selectedPassage, passage_iri(session_id, rank)) for rank in result.passages)])
    for index, (edge, reasoning, *chosen_by) in enumerate(result.edges):
        node = edge_selection_iri(session_id, index)
        quads.append(Quad(selection, TG.selectedEdge, node, graph))
        quads.extend(entity_quads(graph, node, [(RDF.type, TG.EdgeSelection), (TG.edge, edge),
                                                (TG.reasoning, Literal(reasoning)),
                                          *((TG.selectedBy, Literal(by)) for by in chosen_by)]))
    return quads


def _passages_selected(graph: NamedNode, session_id: str, result: PassagesSelected) -> list[Quad]:
    """The retrieved passages the answer was made from (``tg:selectedPassage``, in the order its ``[n]`` marks
    count them)."""
    return entity_quads(graph, SELECTION.iri(session_id), [
        (RDF.type, PROV.Entity), (RDF.type, TG.Focus), (RDFS.label, Literal("Selected passages")),
        (PROV.wasDerivedFrom, RETRIEVAL.iri(session_id)), *result.facts,
        *((TG.selectedPassage, passage_iri(session_id, rank)) for rank in result.ranks)])


def _answered(graph: NamedNode, session_id: str, result: Answered) -> list[Quad]:
    """The answer entity (``tg:outcome``, ``tg:citedEdge`` edge-selection nodes, ``tg:invalidCitation``
    numbers), each cited span (``tg:citedSpan``: the mark, the chunk, the span's offset and length in its
    text), ``tg:unsupported`` sentences, ``tg:answerFallback``, and its text in the librarian graph."""
    answer = ANSWER.iri(session_id)
    quads = entity_quads(graph, answer, [
        (RDF.type, PROV.Entity), (RDF.type, TG.Synthesis), (RDF.type, TG.Answer), (RDFS.label, Literal(result.label)),
        (PROV.wasDerivedFrom, SELECTION.iri(session_id)), (TG.document, answer_document_iri(session_id)),
        *([(TG.outcome, Literal(result.outcome))] if result.outcome else []),
        *((TG.citedEdge, edge_selection_iri(session_id, n - 1)) for n in result.cited),
        *((TG.invalidCitation, integer_literal(n)) for n in result.invalid)])
    for number, (mark, chunk, offset, length) in enumerate(result.spans, start=1):
        node = span_iri(session_id, number)
        quads.append(Quad(answer, TG.citedSpan, node, graph))
        quads += entity_quads(graph, node, [(TG.mark, integer_literal(mark)), (TG.chunk, NamedNode(chunk)),
                                      (TG.charOffset, integer_literal(offset)),
                                      (TG.charLength, integer_literal(length))])
    quads += entity_quads(graph, answer, [*((TG.unsupported, Literal(sentence)) for sentence in result.unsupported),
                                    *([(TG.answerFallback, Literal(result.fallback_reason))]
                                      if result.fallback_reason else [])])
    return quads + content_quads(answer_document_iri(session_id), result.text)


SESSION = Stage(
    "session", "session:", None, {SessionStarted: _session},
    columns=(Column("question", TG.query, "question", required=True), Column("time", PROV.startedAtTime, "time"),
             Column("model", TG.model, "model"), Column("collection", TG.collection, "collection"),
             Column("errorType", TG.errorType), Column("error", TG.error)),
    running="Starting the session…", done="Session started")
RETRIEVAL = Stage(
    "retrieval", "prov:retrieval:", PROV.wasGeneratedBy,
    {EdgesRetrieved: _edges_retrieved, PassagesRetrieved: _passages_retrieved},
    columns=(Column("edgeCount", TG.edgeCount, "edge_count"),), members=(TG.retrievedPassage, PROV.wasDerivedFrom),
    running="Retrieving…", done="Edges retrieved", passages_done="Passages retrieved")
SELECTION = Stage(
    "selection", "prov:selection:", PROV.wasDerivedFrom,
    {EdgesSelected: _edges_selected, PassagesSelected: _passages_selected}, members=(TG.selectedEdge,),
    running="Selecting…", done="Edges selected", passages_done="Passages selected")
ANSWER = Stage(
    "answer", "prov:answer:", PROV.wasDerivedFrom, {Answered: _answered},
    columns=(Column("document", TG.document, required=True),
             Column("answerText", TG.content, "answer_text", of="document", graph=LIBRARIAN_GRAPH),
             Column("outcome", TG.outcome, "outcome")),
    members=(TG.citedSpan,), running="Writing the answer…", done="Answer recorded")
STAGES = (SESSION, RETRIEVAL, SELECTION, ANSWER)  # in the order they are recorded, each linked to the one before
_BY_RESULT = {result: stage for stage in STAGES for result in stage.records}


def stage_of(result: StageResult) -> Stage:
    """The stage that records ``result``."""
    return _BY_RESULT[type(result)]


def chain() -> list[dict]:
    """The stages as the SPARQL templates walk them, the session first: each one's ``kind``, its ``link`` to the
    ``previous`` stage's kind, the property ``path`` from its entity back to the session (None for the session),
    its columns and its members."""
    steps, path = [{"kind": SESSION.kind, "link": None, "previous": None, "path": None, "columns": SESSION.columns,
                    "members": SESSION.members}], ""
    for previous, stage in itertools.pairwise(STAGES):
        path = f"{stage.link}" + (f"/{path}" if path else "")
        steps.append({"kind": stage.kind, "link": stage.link, "previous": previous.kind, "path": path,
                      "columns": stage.columns, "members": stage.members})
    return steps


def console_steps() -> list[dict]:
    """The stages as the Ask page shows them, in order: kind, and the titles while running and once recorded."""
    return [{"kind": stage.kind, "running": stage.running, "done": stage.done,
             **({"passages": stage.passages_done} if stage.passages_done else {})} for stage in STAGES]


# --- the IRIs of the nodes stages list, and reading any explain IRI back ------------------------

def edge_selection_iri(session_id: str, index: int) -> NamedNode:
    """A selected edge's node, ``index`` counting from 0 in selection order."""
    return NamedNode(f"{URN}prov:edge:{session_id}:{index}")


def grounding_iri(session_id: str) -> NamedNode:
    """The question's concepts as TrustGraph 2.x names them (its IRI too), listed by the retrieval."""
    return NamedNode(f"{URN}prov:grounding:{session_id}")


def answer_document_iri(session_id: str) -> NamedNode:
    """The answer's text in the librarian graph."""
    return NamedNode(f"{URN}answer:{session_id}")


def passage_iri(session_id: str, rank: int) -> NamedNode:
    """A passage retrieved by a session, by its rank from 1."""
    return NamedNode(f"{URN}prov:passage:{session_id}:{rank}")


def span_iri(session_id: str, mark: int) -> NamedNode:
    """The span of a chunk that an answer's sentence rests on, by the order of its citation from 1."""
    return NamedNode(f"{URN}prov:span:{session_id}:{mark}")


# Explainability IRIs after URN, by kind; a numbered node's uuid is followed by ``:{number}``.
_NODE_PREFIXES = (("prov:edge:", "edge"), ("answer:", "answer-document"), ("prov:passage:", "passage"),
                  ("prov:span:", "span"), ("prov:grounding:", "grounding"))
_PREFIXES = (*((stage.infix, stage.kind) for stage in STAGES), *_NODE_PREFIXES)
_NUMBERED_KINDS = ("edge", "passage", "span")


def parse_explain_iri(iri: str) -> tuple[str, str] | None:
    """``(kind, session uuid)`` of an explainability IRI, kind being a stage's kind, ``edge``,
    ``answer-document``, ``passage`` or ``span``; None for any other IRI."""
    for prefix, kind in _PREFIXES:
        if iri.startswith(URN + prefix):
            rest = iri[len(URN + prefix):]
            return kind, rest.rsplit(":", 1)[0] if kind in _NUMBERED_KINDS else rest
    return None


def session_id_of(iri: str) -> str | None:
    """The uuid of any explainability IRI (see :func:`parse_explain_iri`)."""
    parsed = parse_explain_iri(iri)
    return parsed[1] if parsed else None
