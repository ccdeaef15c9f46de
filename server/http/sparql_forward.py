"""A client's SPARQL query forwarded to the remote engine (``RemoteStore``), with the embedded endpoint's
guard and limits.

The guard runs first, in the parse worker (``QueryWorkers.check_query``): SERVICE and LOAD are refused
as on the embedded store, and the text is sent unchanged except for a ``BASE`` line in front (the
endpoint's URL, so relative IRIs mean what they mean here; a ``BASE`` of the client's comes later and
wins). The dataset is the request's (``default-graph-uri``/``named-graph-uri``), else the query's
``FROM``, else the union of all graphs. The engine's answer is parsed as it arrives and written again
in the negotiated format by the embedded endpoint's own writers, so the row limit, the byte limit and
the deadline are counted the same way: past the row limit, or at the deadline (the read timeout of the
request), the connection is closed and the engine's own timeout (``oxigraph serve --timeout-s``) stops
the evaluation. An allowed SERVICE call is made by the engine itself, not through the relay.
"""
from __future__ import annotations

import time

from pyoxigraph import NamedNode, QueryResultsFormat, RdfFormat, parse, parse_query_results

from server.errors import GlassgraphError, StoreUnavailable
from server.http.rdf_output import Answer
from server.http.sparql_eval import CheckedQuery, QueryTask, deadline_exceeded, result_answer, within_bytes
from server.http.sparql_guard import has_dataset_clause
from server.remote_store import RemoteStore
from server.sparql_templates import render_term

_ACCEPT = "application/sparql-results+json, application/n-triples;q=0.9"


def _dataset(task: QueryTask) -> list[tuple[str, str]]:
    if task.default_graphs or task.named_graphs:
        return [("default-graph-uri", g) for g in task.default_graphs] + [("named-graph-uri", g)
                                                                          for g in task.named_graphs]
    return [] if has_dataset_clause(task.text) else [("union-default-graph", "")]


def forward_query(store: RemoteStore, task: QueryTask, checked: CheckedQuery) -> Answer:
    """``task``'s answer from the engine (``checked``: the guard's verdict on it, from the parse worker)."""
    text = task.text if task.base_iri is None else f"BASE {render_term(NamedNode(task.base_iri))}\n{task.text}"
    deadline_s = store.timeout[1] if task.deadline_s is None else max(task.deadline_s, 0.001)
    started = time.monotonic()
    try:
        response = store.send("POST", store.endpoints.query, read=True, stream=True,
                              timeout=(store.timeout[0], deadline_s), data=[("query", text), *_dataset(task)],
                              headers={"Accept": _ACCEPT, "Accept-Encoding": "identity"})
    except StoreUnavailable:
        if time.monotonic() - started >= deadline_s:
            raise deadline_exceeded(deadline_s) from None
        raise
    with response:
        media = response.headers.get("Content-Type", "").split(";")[0].strip()
        try:
            if media == "application/n-triples":
                result = (quad.triple for quad in parse(response.raw, format=RdfFormat.N_TRIPLES))
            else:
                result = parse_query_results(response.raw, format=QueryResultsFormat.JSON)
            answer = result_answer(result, task)
        except GlassgraphError:
            raise
        except Exception:  # noqa: BLE001 - a body cut short: the engine's timeout (oxigraph serve appends
            raise deadline_exceeded(deadline_s) from None  # "...cancelled" to it) or ours (the read timed out)
    if time.monotonic() - started > deadline_s:  # the whole answer, not only its first byte, must be in time
        raise deadline_exceeded(deadline_s)
    return within_bytes(answer, task)
