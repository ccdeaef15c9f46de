"""A client's SPARQL, checked and run where it can be stopped: a query to a finished answer
(negotiated format, rows and bytes counted), an update to the text the server will run.

Everything here runs inside a worker process (``query_workers``: a query in a query worker, an
update's preparation in the parse worker), so that the server itself never lexes or parses a
client's text: the lexer and pyoxigraph's parser can be made to take minutes, gigabytes or the
process's stack. Only for an in-memory store, which no other process can open, does the server
call these itself. Nothing here needs a Flask request: tasks are picklable and answers are bytes.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pyoxigraph import NamedNode, QueryBoolean, QuerySolutions, Store

from server.errors import BadRequest, GlassgraphError, LimitExceeded, RemoteFailed, StoreFailed
from server.http.federation import ServiceLimits, relayed
from server.http.negotiation import RESULTS_CONTENT_TYPE, RESULTS_MEDIA, negotiate
from server.http.rdf_output import Answer, not_acceptable, rdf_answer
from server.http.results import write_boolean, write_solutions
from server.http.solution_bytes import FORMATS as SOLUTION_FORMATS
from server.http.solution_bytes import serialized_solutions, too_many_rows
from server.http.sparql_errors import SyntaxProblem, plain_syntax_error
from server.http.sparql_guard import (
    REFUSED_UNVERIFIED,
    Span,
    Sweep,
    add_using,
    ask_as_select,
    check_user_sparql,
    declared_prefixes,
    graph_sweeps,
    has_dataset_clause,
    makes_graph,
    parse_error,
    service_spans,
    without_calls,
    written_graphs,
)

_DEADLINE_EVERY = 64  # rows between deadline checks (in-process evaluation only)
PARSE_STACK_BYTES = 4 * 1024 * 1024  # an update is proven to parse within this; the server's threads have 4x


@dataclass(frozen=True)
class QueryTask:
    """Everything needed to answer one query; picklable, so that it can go to a worker process."""

    text: str
    accept: str | None
    max_rows: int
    max_bytes: int
    service_allow: tuple[str, ...] = ()  # GLASSGRAPH_SERVICE_ALLOW
    default_graphs: tuple[str, ...] = ()  # default-graph-uri
    named_graphs: tuple[str, ...] = ()  # named-graph-uri
    deadline_s: float | None = None  # checked between rows; None where the caller stops the evaluation
    base_iri: str | None = None  # relative IRIs resolve against it (the endpoint's URL) unless the text says BASE
    service_limits: ServiceLimits | None = None  # allowed SERVICE calls go through the relay; None: called directly
    first_rows: int | None = None  # the request's ``rows``: answer the first that many rows or triples, no error past


@dataclass(frozen=True)
class UpdateTask:
    """A client's update and what its request says around it; picklable."""

    text: str
    service_allow: tuple[str, ...] = ()
    using_graphs: tuple[str, ...] = ()  # using-graph-uri
    using_named_graphs: tuple[str, ...] = ()  # using-named-graph-uri
    base_iri: str | None = None  # as for QueryTask


@dataclass(frozen=True)
class PreparedUpdate:
    """An update that passed every check and parses: the text to run and what it may touch."""

    text: str  # with the protocol's USING clauses applied
    calls_remote: bool  # an allowed LOAD/SERVICE: run errors are the remote endpoint's
    written_graphs: tuple[str, ...] | None  # the named graphs it may write; None: any
    service_spans: tuple[Span, ...] = ()  # where its SERVICE endpoints are, for the relay (federation)
    names_dataset: bool = False  # USING or WITH (the protocol's using-graph-uri included) sets its dataset
    sweeps: tuple[Sweep, ...] = ()  # its DROP/CLEAR ALL, NAMED and DEFAULT (spelled out for some engines)


def _dataset_options(task: QueryTask) -> dict[str, object]:
    """The protocol's dataset, else FROM in the query, else the union of every graph as default graph."""
    if task.default_graphs or task.named_graphs:
        return {"default_graph": [NamedNode(g) for g in task.default_graphs],
                "named_graphs": [NamedNode(g) for g in task.named_graphs]}
    return {} if has_dataset_clause(task.text) else {"use_default_graph_as_union": True}


def evaluation_error(error: Exception, calls_remote: bool) -> GlassgraphError:
    """An error raised while a query ran: the remote endpoint's fault (502) or a store failure (500)."""
    if calls_remote:
        return RemoteFailed(f"the remote SPARQL endpoint failed or answered something unreadable: {error}")
    return StoreFailed(f"query evaluation failed: {error}")


@dataclass(frozen=True)
class CheckedQuery:
    """A client's query that passed the guard: whether it calls an allowed endpoint, and where."""

    calls_remote: bool
    service_spans: tuple[Span, ...] = ()
    names_dataset: bool = False  # FROM / FROM NAMED in the text (read with the whole parse only)
    makes_graph: bool = False  # a CONSTRUCT or DESCRIBE (read with the whole parse only)


def check_query(task: QueryTask, whole_parse: bool = False) -> CheckedQuery:
    """The guard (sparql_guard) on ``task``'s text; in a worker process, like every parse of a client's text.
    ``whole_parse``: the text must parse too (a query sent to another engine: its errors are then ours)."""
    checked = check_user_sparql(task.text, task.service_allow, is_update=False, base=task.base_iri)
    if checked.must_parse is not None and parse_error(checked.must_parse, False, task.base_iri) is not None:
        raise BadRequest(REFUSED_UNVERIFIED)
    names_dataset = graph = False
    if whole_parse:
        names_dataset, graph = has_dataset_clause(task.text), makes_graph(task.text)
        error = None if checked.calls_remote else parse_error(task.text, False, task.base_iri)
        if error is not None:
            raise BadRequest(f"malformed query: {plain_syntax_error(error, task.text, base=task.base_iri).sentence}")
    spans = service_spans(task.text, task.base_iri) if checked.calls_remote and task.service_limits else ()
    return CheckedQuery(checked.calls_remote, tuple(spans), names_dataset, graph)


def answer_query(store: Store, task: QueryTask) -> Answer:
    """Check ``task`` (sparql_guard), run it on ``store`` and write the answer in the negotiated format."""
    checked = check_query(task)
    with relayed(task.text, checked.service_spans, task.service_limits) as text:
        try:
            answer = result_answer(_evaluated(store, text.text, task), task)
        except SyntaxError as error:
            problem = plain_syntax_error(str(error), task.text, reread=True, base=task.base_iri)
            raise BadRequest(f"malformed query: {problem.sentence}") from None
        except (OSError, RuntimeError, ValueError) as error:
            raise text.failure or evaluation_error(error, checked.calls_remote) from None
    return within_bytes(answer, task)


def _evaluated(store: Store, text: str, task: QueryTask) -> QueryBoolean | bool | QuerySolutions | Iterator:
    """``text`` evaluated on ``store``; an ASK as its SELECT's first solution (``ask_as_select``, decision 30).
    A SELECT that does not parse gives way to the client's own text: its own error, or an ASK misread."""
    options = {"base_iri": task.base_iri, **_dataset_options(task)}
    as_select = ask_as_select(text)
    if as_select is not None:
        try:
            return next(iter(store.query(as_select, **options)), None) is not None
        except SyntaxError:
            pass
    return store.query(text, **options)


def result_answer(result: QueryBoolean | bool | QuerySolutions | Iterator, task: QueryTask) -> Answer:
    """A query's result (solutions, a boolean, or triples) in the negotiated format, within the row limit and
    the deadline (checked between rows)."""
    if isinstance(result, (QueryBoolean, bool, QuerySolutions)):
        return _results_answer(result, task)
    return rdf_answer(_pull(result, task, as_tuples=False), task.accept,
                      prefixes=declared_prefixes(task.text, task.base_iri))


def within_bytes(answer: Answer, task: QueryTask) -> Answer:
    if len(answer.body) > task.max_bytes:
        raise LimitExceeded(f"the answer has {len(answer.body)} bytes, more than {task.max_bytes} "
                            "(GLASSGRAPH_MAX_RESULT_BYTES): narrow the query or add LIMIT")
    return answer


def _results_answer(result: QueryBoolean | bool | QuerySolutions, task: QueryTask) -> Answer:
    media = negotiate(task.accept, list(RESULTS_MEDIA))
    if media is None:
        raise not_acceptable(list(RESULTS_MEDIA))
    fmt = RESULTS_MEDIA[media]
    if isinstance(result, (QueryBoolean, bool)):
        return Answer(RESULTS_CONTENT_TYPE[fmt], write_boolean(fmt, bool(result)))
    if task.deadline_s is None and fmt in SOLUTION_FORMATS and (task.first_rows is None or fmt == "tsv"):
        # stopped from outside (a query worker): faster
        return Answer(RESULTS_CONTENT_TYPE[fmt], serialized_solutions(result, fmt, task.max_bytes, task.max_rows,
                                                                      task.first_rows))
    variables = [v.value for v in result.variables]
    rows = _pull(result, task, as_tuples=True)
    return Answer(RESULTS_CONTENT_TYPE[fmt], b"".join(write_solutions(fmt, variables, rows)))


def _pull(result: Iterator, task: QueryTask, as_tuples: bool) -> list:
    """Every item of ``result`` (solutions as tuples of terms, or triples), within the row and time limits."""
    deadline = None if task.deadline_s is None else time.monotonic() + task.deadline_s
    rows: list = []
    for item in result:
        if task.first_rows is not None and len(rows) >= task.first_rows:
            break
        if len(rows) >= task.max_rows:
            raise too_many_rows(task.max_rows)
        if deadline is not None and len(rows) % _DEADLINE_EVERY == 0 and time.monotonic() > deadline:
            raise deadline_exceeded(task.deadline_s)
        rows.append(tuple(item) if as_tuples else item)
    return rows


def deadline_exceeded(deadline_s: float | None) -> GlassgraphError:
    return LimitExceeded(f"the query ran past its deadline of {deadline_s} s (GLASSGRAPH_DEADLINE) and was "
                          "stopped")


def prepare_update(task: UpdateTask) -> PreparedUpdate:
    """Check an update (sparql_guard), apply the protocol's USING graphs, and prove that it parses
    (and, when the guard renamed harmless SERVICE/LOAD, that the renamed reading parses too) on a
    thread with ``PARSE_STACK_BYTES`` of stack. Trying an update runs it (on an empty store), so an
    update calling an allowed endpoint is tried with its endpoints swapped for one nobody answers;
    the server then runs it with each SERVICE and LOAD going through the relay (``federation``)."""
    checked = check_user_sparql(task.text, task.service_allow, is_update=True, base=task.base_iri)
    text = task.text
    if task.using_graphs or task.using_named_graphs:
        text = add_using(text, [NamedNode(g) for g in task.using_graphs],
                         [NamedNode(g) for g in task.using_named_graphs])
    if checked.must_parse is not None and _parse_error_on_small_stack(checked.must_parse, task.base_iri) is not None:
        raise BadRequest(REFUSED_UNVERIFIED)
    spans = service_spans(text, task.base_iri, ("SERVICE", "LOAD")) if checked.calls_remote else ()
    error = _parse_error_on_small_stack(without_calls(text, spans), task.base_iri)
    if error is not None:
        raise BadRequest(f"malformed update: {plain_syntax_error(error, text, update=True).sentence}")
    touched = written_graphs(text, task.base_iri)
    return PreparedUpdate(text, checked.calls_remote, None if touched is None else tuple(sorted(touched)), spans,
                          has_dataset_clause(text, is_update=True), graph_sweeps(text))


@dataclass(frozen=True)
class CheckTask:
    """A query to parse without running it (the console editor's live marks); picklable."""

    text: str
    service_allow: tuple[str, ...] = ()
    base_iri: str | None = None


def check_syntax(task: CheckTask) -> SyntaxProblem | None:
    """Why ``task``'s query would be refused before it runs (the guard's checks, then the parser), or
    None when it parses. The parser builds the query on an empty store, where an ASK, or a SELECT with
    ORDER BY or an aggregate, is also evaluated: call it where it can be stopped (a query worker)."""
    try:
        checked = check_user_sparql(task.text, task.service_allow, is_update=False, base=task.base_iri)
    except GlassgraphError as refused:
        return SyntaxProblem(refused.message)
    if checked.must_parse is not None and _parse_error_on_small_stack(checked.must_parse, task.base_iri,
                                                                      is_update=False) is not None:
        return SyntaxProblem(REFUSED_UNVERIFIED)
    error = _parse_error_on_small_stack(task.text, task.base_iri, is_update=False)
    return None if error is None else plain_syntax_error(error, task.text, reread=True, base=task.base_iri)


def _parse_error_on_small_stack(text: str, base: str | None, is_update: bool = True) -> str | None:
    """``parse_error`` on a thread with ``PARSE_STACK_BYTES``: a text that overflows it ends this
    process, and one that does not is safe to parse on a request thread of the server."""
    found: list[str | None] = []
    previous = threading.stack_size(PARSE_STACK_BYTES)
    try:
        checker = threading.Thread(target=lambda: found.append(parse_error(text, is_update, base)))
        checker.start()
    finally:
        threading.stack_size(previous)
    checker.join()
    return found[0]
