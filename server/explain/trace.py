"""Reading traces back: one session as data, and the list of sessions."""
from __future__ import annotations

from itertools import islice

from pyoxigraph import Literal, NamedNode, Quad, Triple

from server import vocab
from server.errors import ErrorType
from server.explain.passage_trace import read_passages
from server.labels import store_labels, term_name
from server.provenance import mention_chains_many, source_chains_many
from server.sparql_templates import Term, render_term
from server.stages import ANSWER, RETRIEVAL, SELECTION, SESSION, STAGES, answer_document_iri, session_id_of
from server.store_base import StoreBackend


def trace_quads(store: StoreBackend, trace: dict) -> list[Quad]:
    """Every explainability triple of a trace from :func:`read_trace`, plus the answer text from the
    librarian."""
    graph = store.explain_graph
    subjects = [trace[stage.kind] for stage in STAGES if trace.get(stage.kind)]
    for stage in STAGES:  # the nodes an entity lists: edges, passages, spans
        for link in stage.members if trace.get(stage.kind) else ():
            subjects += [q.object.value for q in store.quads(NamedNode(trace[stage.kind]), link, graph=graph)]
    quads = [q for s in subjects for q in store.quads(NamedNode(s), graph=graph)]
    session_id = session_id_of(trace[SESSION.kind])
    if session_id:
        quads += store.quads(answer_document_iri(session_id), graph=vocab.LIBRARIAN_GRAPH)
    return quads


def read_trace(store: StoreBackend, session_iri: str) -> dict | None:
    """The full trace of a session, or None if there is none.

    Any explainability IRI of the session (retrieval, selection, edge, answer) finds it too.
    """
    session = _session_node(session_iri)
    if session is None:
        return None
    rows = store.select("explain_session", values={SESSION.kind: [session]}, default_graph=store.explain_graph)
    if not rows:
        return None
    head = rows[0]
    error = None
    if "error" in head or "errorType" in head:
        error = {"type": _value(head.get("errorType")) or "error", "message": _value(head.get("error")) or ""}
    trace: dict = {}
    for stage in STAGES:  # each stage's entity, then what the reader reads of it
        trace[stage.kind] = session.value if stage is SESSION else _value(head.get(stage.kind))
        trace.update({column.key: _column(head.get(column.variable)) for column in stage.columns if column.key})
    collection = trace["collection"]
    retrieval, selection, answer = (head.get(stage.kind) for stage in (RETRIEVAL, SELECTION, ANSWER))
    return {
        **trace,
        "selection_details": _selection_details(store, selection) if selection else None,
        **_answer_check(store, answer),
        "seed_reasons": sorted((q.object.value for q in store.quads(retrieval, vocab.TG.seedReason,
                                                                    graph=store.explain_graph)),
                               key=lambda line: int(line.split(".", 1)[0])) if retrieval else [],
        "status": _status(head),
        "error": error,
        "edges": _edges(store, selection, collection) if selection else [],
        **(read_passages(store, retrieval, answer, collection) if retrieval
           else {"query_terms": [], "passages": [], "spans": [], "unmentioned": []}),
    }


MAX_SESSION_OFFSET = 10**9  # the furthest page of sessions any client may ask for


def list_sessions(store: StoreBackend, limit: int = 20, offset: int = 0) -> list[dict]:
    """Sessions newest first: ``{"session", "question", "time", "model", "collection", "status"}``."""
    solutions = store.query("explain_sessions", default_graph=store.explain_graph)
    start = max(offset, 0)
    page = [(row[SESSION.kind], row["time"]) for row in islice(solutions, start, start + max(limit, 0))]
    if not page:
        return []
    details = {row[SESSION.kind]: row for row in store.select("explain_session_details", values={
        SESSION.kind: [session for session, _ in page]}, default_graph=store.explain_graph)}
    result = []
    for session, time in page:
        row = details.get(session, {})
        result.append({SESSION.kind: session.value, "question": _value(row.get("question")), "time": time.value,
                       "model": _value(row.get("model")), "collection": _value(row.get("collection")),
                       "status": _status(row)})
    return result


def _session_node(iri: str) -> NamedNode | None:
    session_id = session_id_of(iri)
    if session_id is None:
        return None
    try:
        return SESSION.iri(session_id)
    except ValueError:  # not a valid IRI
        return None


def _status(row: dict) -> str:
    """``answered``, ``no-answer`` (the graph does not answer the question), ``cancelled`` (its client left),
    ``failed`` or ``incomplete``."""
    if STAGES[-1].kind in row:
        return "no-answer" if _value(row.get("outcome")) == "no-answer" else "answered"
    if "errorType" in row:
        return "cancelled" if _value(row["errorType"]) == ErrorType.CANCELLED.wire_name else "failed"
    return "incomplete"


def _value(term: NamedNode | Literal | None) -> str | None:
    return None if term is None else term.value


def _column(term: NamedNode | Literal | None) -> str | int | None:
    """A column's value: an integer literal as an int."""
    if isinstance(term, Literal) and term.datatype == vocab.XSD.integer:
        return int(term.value)
    return _value(term)


def _edges(store: StoreBackend, selection: NamedNode, collection: str | None) -> list[dict]:
    """The selected edges in selection order, with labels, reasoning, source chains and the chains of the
    chunks that mention their subject or object."""
    rows = store.select("explain_edges", values={"entity": [selection]}, default_graph=store.explain_graph)
    rows.sort(key=lambda row: _index(row["node"].value))
    triples: list[Triple] = [row["edge"] for row in rows]
    graph = vocab.collection_graph(collection) if collection else None
    labels = store_labels(store, (t for triple in triples for t in (triple.subject, triple.predicate, triple.object)),
                          graph)
    sources = source_chains_many(store, triples, collection)
    mentions = mention_chains_many(store, triples, collection)
    edges = []
    for row, triple in zip(rows, triples, strict=True):
        terms = (triple.subject, triple.predicate, triple.object)
        edges.append({
            "node": row["node"].value,
            "s": terms[0].value, "p": terms[1].value, "o": _lexical(terms[2]),
            "triple": render_term(triple),
            "labels": [term_name(term, labels.get(term)) for term in terms],
            "reasoning": _value(row.get("reasoning")),
            "selected_by": _value(row.get("selectedBy")),
            "sources": sources.get(triple, []),
            "mentions": mentions.get(triple, []),
        })
    return edges


def _answer_check(store: StoreBackend, answer: NamedNode | None) -> dict:
    """``unsupported``: the model's sentences its edges do not hold; ``answer_fallback``: why the deterministic
    answer replaced the model's (None when it did not)."""
    if answer is None:
        return {"unsupported": [], "answer_fallback": None}
    graph = store.explain_graph
    return {"unsupported": sorted(q.object.value for q in store.quads(answer, vocab.TG.unsupported, graph=graph)),
            "answer_fallback": next((q.object.value for q in store.quads(answer, vocab.TG.answerFallback,
                                                                         graph=graph)), None)}


def _selection_details(store: StoreBackend, selection: NamedNode) -> dict:
    """How the selection was made (``server.rag.choice.selection_facts``), as plain values."""
    [row] = store.select("explain_selection", values={"entity": [selection]}, default_graph=store.explain_graph)
    details = {name: int(term.value) if term.value.isdigit() else term.value for name, term in row.items()
               if name != "entity"}
    rows = store.select("explain_selection_batches", values={"entity": [selection]},
                        default_graph=store.explain_graph)
    batches = sorted((r["batch"].value for r in rows if "batch" in r), key=_batch_number)
    unoffered = sorted(render_term(r["unoffered"]) for r in rows if "unoffered" in r)
    return {**details, **({"batches": batches} if batches else {}), **({"unoffered": unoffered} if unoffered else {})}


def _batch_number(entry: str) -> int:
    head = entry.split(":", 1)[0]
    return int(head) if head.isdigit() else 0


def _index(node_iri: str) -> tuple[int, str]:
    tail = node_iri.rsplit(":", 1)[-1]
    return (int(tail), node_iri) if tail.isdigit() else (1 << 62, node_iri)


def _lexical(term: Term) -> str:
    """An IRI or a literal's lexical form; a nested triple term in N-Triples."""
    return render_term(term) if isinstance(term, Triple) else term.value


