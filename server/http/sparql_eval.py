"""A client's SPARQL query evaluated to a finished answer: negotiated format, rows counted, bytes.

The same function runs inside a query worker process (``query_workers``) and, for an in-memory
store that no other process can open, in the server itself. It needs no Flask request: everything
it needs is in the :class:`QueryTask`, and the answer is a content type and a body.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyoxigraph import NamedNode, QueryBoolean, QuerySolutions, Store

from server.errors import BadRequest, GlassgraphError, LimitExceeded, RemoteFailed, StoreFailed
from server.http.negotiation import RESULTS_CONTENT_TYPE, RESULTS_MEDIA, negotiate
from server.http.rdf_output import Answer, not_acceptable, rdf_answer
from server.http.results import write_boolean, write_solutions
from server.http.sparql_guard import REFUSED_UNVERIFIED, parse_error

_DEADLINE_EVERY = 64  # rows between deadline checks (in-process evaluation only)


@dataclass(frozen=True)
class QueryTask:
    """Everything needed to answer one query; picklable, so that it can go to a worker process."""

    text: str
    accept: str | None
    max_rows: int
    max_bytes: int
    default_graphs: tuple[str, ...] = ()  # default-graph-uri
    named_graphs: tuple[str, ...] = ()  # named-graph-uri
    union_default_graph: bool = False  # no dataset named anywhere: the default graph is every graph
    calls_remote: bool = False  # an allowed SERVICE: evaluation errors are the remote endpoint's
    must_parse: str | None = None  # the guard's renamed text (sparql_guard.Checked): refuse unless it parses
    deadline_s: float | None = None  # checked between rows; None where the caller stops the evaluation
    dataset_options: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        options: dict[str, object] = {}
        if self.default_graphs or self.named_graphs:
            options = {"default_graph": [NamedNode(g) for g in self.default_graphs],
                       "named_graphs": [NamedNode(g) for g in self.named_graphs]}
        elif self.union_default_graph:
            options["use_default_graph_as_union"] = True
        object.__setattr__(self, "dataset_options", options)


def evaluation_error(error: Exception, calls_remote: bool) -> GlassgraphError:
    """An error raised while a query ran: the remote endpoint's fault (502) or a store failure (500)."""
    if calls_remote:
        return RemoteFailed(f"the remote SPARQL endpoint failed or answered something unreadable: {error}")
    return StoreFailed(f"query evaluation failed: {error}")


def answer_query(store: Store, task: QueryTask) -> Answer:
    """Run ``task`` on ``store`` and write the answer in the negotiated format."""
    if task.must_parse is not None and parse_error(task.must_parse, is_update=False) is not None:
        raise BadRequest(REFUSED_UNVERIFIED)
    try:
        result = store.query(task.text, **task.dataset_options)
        if isinstance(result, (QueryBoolean, QuerySolutions)):
            answer = _results_answer(result, task)
        else:
            answer = rdf_answer(_pull(result, task, as_tuples=False), task.accept)
    except SyntaxError as error:
        raise BadRequest(f"malformed query: {error}") from None
    except (OSError, RuntimeError, ValueError) as error:
        raise evaluation_error(error, task.calls_remote) from None
    if len(answer.body) > task.max_bytes:
        raise LimitExceeded(f"the answer has {len(answer.body)} bytes, more than {task.max_bytes} "
                            "(GLASSGRAPH_MAX_RESULT_BYTES): narrow the query or add LIMIT")
    return answer


def _results_answer(result: QueryBoolean | QuerySolutions, task: QueryTask) -> Answer:
    media = negotiate(task.accept, list(RESULTS_MEDIA))
    if media is None:
        raise not_acceptable(list(RESULTS_MEDIA))
    fmt = RESULTS_MEDIA[media]
    if isinstance(result, QueryBoolean):
        return Answer(RESULTS_CONTENT_TYPE[fmt], write_boolean(fmt, bool(result)))
    variables = [v.value for v in result.variables]
    rows = _pull(result, task, as_tuples=True)
    return Answer(RESULTS_CONTENT_TYPE[fmt], b"".join(write_solutions(fmt, variables, rows)))


def _pull(result: Iterator, task: QueryTask, as_tuples: bool) -> list:
    """Every item of ``result`` (solutions as tuples of terms, or triples), within the row and time limits."""
    deadline = None if task.deadline_s is None else time.monotonic() + task.deadline_s
    rows: list = []
    for item in result:
        if len(rows) >= task.max_rows:
            raise LimitExceeded(f"the result has more than {task.max_rows} rows (GLASSGRAPH_MAX_ROWS): "
                                 "narrow the query or add LIMIT")
        if deadline is not None and len(rows) % _DEADLINE_EVERY == 0 and time.monotonic() > deadline:
            raise deadline_exceeded(task.deadline_s)
        rows.append(tuple(item) if as_tuples else item)
    return rows


def deadline_exceeded(deadline_s: float | None) -> GlassgraphError:
    return LimitExceeded(f"the query ran past its deadline of {deadline_s} s (GLASSGRAPH_DEADLINE) and was "
                          "stopped")
