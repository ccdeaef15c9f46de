"""A client's SPARQL query forwarded to the remote engine (``RemoteStore``), with the embedded endpoint's
guard and limits.

The guard runs first, in a query worker process (``QueryWorkers.check_and_forward``, which holds the worker's
place until the engine has answered, so the engine runs at most GLASSGRAPH_QUERY_WORKERS queries of each app
worker at once): SERVICE and LOAD are refused as on the embedded store, the text must parse, and whether it
names a dataset (``FROM``) is read there too, since the server never lexes a client's text. The text is sent
unchanged except for a ``BASE`` line in front (the endpoint's URL, so relative IRIs mean what they mean here;
a ``BASE`` of the client's comes later and wins). The dataset is the request's
(``default-graph-uri``/``named-graph-uri``), else the query's ``FROM``, else the union of all graphs.
The engine's answer is parsed as it arrives and written again in the negotiated format by the embedded
endpoint's own writers, so the row limit, the byte limit and the deadline are counted the same way; the
engine's body itself may hold at most ``ENGINE_BYTES_PER_ANSWER_BYTE`` times the byte limit. Past a limit, or
at the deadline (checked between rows and at the end), the connection is closed. The client has its
422 at the deadline whatever the engine does (``check_and_forward``), but the request waits up to
``ENGINE_WAIT_S`` for the engine's answer: the engine's own timeout (``oxigraph serve --timeout-s``) stops
most evaluations, not a sort, and until the engine answers the query keeps its worker's place.
An allowed SERVICE call is made by the engine itself, not through the relay.

A client's update is sent as it is, but where the default graph is kept in a named graph
(``default_graph_stand_in``) its ``DROP``/``CLEAR`` of ``ALL``, ``NAMED`` or ``DEFAULT`` is spelled out as a
``DROP SILENT GRAPH`` of each graph it means, the store's own (:func:`update_for_engine`): Virtuoso 7 reads
``ALL`` as its default graph only and ``NAMED`` as no graph (a 204 that dropped nothing), and its ``DEFAULT``
would be the engine's default graph, not the stand-in.
"""
from __future__ import annotations

import io
import time
from typing import IO

from pyoxigraph import NamedNode, QueryResultsFormat, RdfFormat, parse, parse_query_results

from server.dialects import StandardStream, client_prologue, standard_parsed, union_params
from server.errors import BadRequest, GlassgraphError, LimitExceeded, StoreUnavailable
from server.http.rdf_output import Answer
from server.http.sparql_eval import CheckedQuery, QueryTask, deadline_exceeded, result_answer, within_bytes
from server.http.sparql_guard import Sweep, replaced_spans
from server.remote_store import RemoteStore
from server.sparql_templates import render_term

ENGINE_BYTES_PER_ANSWER_BYTE = 4  # the engine's JSON may be this much bigger than the answer written from it
ENGINE_WAIT_S = 600.0  # the longest a query waits for the engine to answer: its timeout does not stop a sort
# Asked by the query form: Virtuoso reads no q-values (it answered a CONSTRUCT in SPARQL JSON, a SELECT in N-Triples)
_ACCEPT_RESULTS, _ACCEPT_GRAPH = "application/sparql-results+json", "application/n-triples"


class _Capped(io.RawIOBase):
    """The engine's body as a file, which fails past ``cap`` bytes (``over`` then says why)."""

    def __init__(self, raw: IO[bytes], cap: int) -> None:
        self.raw, self.cap, self.read_so_far, self.over = raw, cap, 0, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:
        data = self.raw.read(len(buffer))
        self.read_so_far += len(data)
        if self.read_so_far > self.cap:
            self.over = True
            raise OSError("the engine's answer is over the cap")
        buffer[:len(data)] = data
        return len(data)


def _dataset(task: QueryTask, checked: CheckedQuery, dialect: str) -> list[tuple[str, str]]:
    if task.default_graphs or task.named_graphs:
        return [("default-graph-uri", g) for g in task.default_graphs] + [("named-graph-uri", g)
                                                                          for g in task.named_graphs]
    return [] if checked.names_dataset else union_params(dialect)


def forward_query(store: RemoteStore, task: QueryTask, checked: CheckedQuery) -> Answer:
    """``task``'s answer from the engine (``checked``: the guard's verdict on it, from a worker process)."""
    try:
        text = task.text if task.base_iri is None else f"BASE {render_term(NamedNode(task.base_iri))}\n{task.text}"
    except ValueError:
        raise BadRequest(f"the request URL {task.base_iri!r} is not an IRI, so relative IRIs cannot resolve") from None
    deadline_s = store.timeout[1] if task.deadline_s is None else max(task.deadline_s, 0.001)
    started = time.monotonic()
    dataset = _dataset(task, checked, store.dialect)
    prologue = client_prologue(store.engine_software()) if checked.makes_graph else ""
    try:
        response = store.send("POST", store.endpoints.query, read=True, stream=True,
                              timeout=(store.timeout[0], max(deadline_s, ENGINE_WAIT_S)),
                              data=[("query", prologue + text), *dataset],
                              headers={"Accept": _ACCEPT_GRAPH if checked.makes_graph else _ACCEPT_RESULTS,
                                       "Accept-Encoding": "identity"})
    except StoreUnavailable:
        if time.monotonic() - started >= deadline_s:
            raise deadline_exceeded(deadline_s) from None
        raise
    with response:
        media = response.headers.get("Content-Type", "").split(";")[0].strip()
        body = _Capped(response.raw, task.max_bytes * ENGINE_BYTES_PER_ANSWER_BYTE)
        try:
            if media == "application/n-triples":
                result = (quad.triple for quad in parse(body, format=RdfFormat.N_TRIPLES))
            else:
                result = standard_parsed(parse_query_results(StandardStream(body), format=QueryResultsFormat.JSON))
            answer = result_answer(result, task)
        except GlassgraphError:
            raise
        except Exception:  # noqa: BLE001 - a body cut short: the engine's timeout (oxigraph serve appends
            if body.over:  # "...cancelled" to it) or ours (the read timed out), or our own cap
                raise LimitExceeded(f"the engine's answer has more than {body.cap} bytes (GLASSGRAPH_MAX_RESULT_BYTES"
                                    f" x {ENGINE_BYTES_PER_ANSWER_BYTE}): narrow the query or add LIMIT") from None
            raise deadline_exceeded(deadline_s) from None
    if time.monotonic() - started > deadline_s:  # the whole answer, not only its first byte, must be in time
        raise deadline_exceeded(deadline_s)
    return within_bytes(answer, task)


def update_for_engine(store: RemoteStore, text: str, sweeps: tuple[Sweep, ...]) -> str:
    """A client's update as the engine is sent it: each of its ``sweeps`` (``DROP``/``CLEAR`` of ``ALL``,
    ``NAMED``, ``DEFAULT``) a ``DROP SILENT GRAPH`` of each graph of the store it means, where the default graph
    is a stand-in (the engine's own graphs are never among them); an empty ``INSERT DATA`` when it means none."""
    if not sweeps or store.stand_in is None:
        return text
    named = store.named_graphs()
    graphs = {"ALL": [*named, store.stand_in], "NAMED": named, "DEFAULT": [store.stand_in]}
    return replaced_spans(text, [(sweep.start, sweep.end, " ;\n".join(
        f"DROP SILENT GRAPH {render_term(graph)}" for graph in graphs[sweep.target]) or "INSERT DATA { }")
        for sweep in sweeps])
