"""Terminal display of a GraphRAG stream and of explain traces, shared by ``tg-invoke-graph-rag``
(over HTTP) and ``glassgraph ask`` / ``glassgraph explain`` (in-process).

Explain blocks go to stderr as each event arrives, named by the message's ``explain_kind``; the
answer goes to stdout, so redirecting stdout keeps just the answer. The selection block's details
(edges by label, reasoning, source chains) come from a *trace lookup*: the server's ``/api/explain``
or ``read_trace`` in-process.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TextIO

from server.cli.errors import CliError

TraceLookup = Callable[[str], "dict | None"]  # any explain IRI of a session -> its trace (read_trace's shape)


class StreamError(CliError):
    """The stream reported an error, or ended before the end of the session."""


class TraceUnavailable(Exception):
    """A trace lookup failed (the selection block then says so and the answer still follows)."""


def error_text(error: object) -> str:
    """One line from an error field: ``{"type", "message"}``, a string, or anything else."""
    if isinstance(error, dict):
        message = error.get("message") or error.get("type") or json.dumps(error)
        kind = error.get("type")
        text = f"{kind}: {message}" if kind and kind != message else str(message)
    else:
        text = str(error)
    return " ".join(text.split())


def edge_lines(edge: dict) -> list[str]:
    """One selected edge: its labels, the LLM's reasoning and every source chain."""
    from server.explain.provenance import format_chain  # pyoxigraph: loaded once an edge is shown, not on import

    lines = [f"      Edge: ({', '.join(edge['labels'])})"]
    if edge.get("reasoning"):
        lines.append(f"        Reason: {' '.join(edge['reasoning'].split())}")
    if edge.get("selected_by"):
        lines.append(f"        Chosen by: {CHOSEN_BY.get(edge['selected_by'], edge['selected_by'])}")
    if edge.get("sources"):
        lines.extend(f"        Source: {format_chain(chain)}" for chain in edge["sources"])
    else:
        lines.append("        Source: (no extraction provenance)")
    return lines


CHOSEN_BY = {"model": "the model", "fallback": "the deterministic selector (fallback)"}
NO_ANSWER_LINE = "    Outcome: no answer (the knowledge graph does not answer this question)"


def selection_lines(trace: dict) -> list[str]:
    """The body of a ``[selection]`` block."""
    edges = trace.get("edges") or []
    lines = [f"    Selected {len(edges)} edge(s)"]
    details = trace.get("selection_details") or {}
    if details.get("fallbackReason"):
        lines.append(f"    Fallback: {details['fallbackReason']}")
    for edge in edges:
        lines.extend(edge_lines(edge))
    return lines


def trace_lines(trace: dict) -> list[str]:
    """A whole trace as text (``glassgraph explain``): every block, then the answer."""
    lines = [f"[session] {trace['session']}", f"    Question: {trace['question']}"]
    for key, name in (("time", "Time"), ("model", "Model"), ("collection", "Collection"), ("status", "Status")):
        if trace.get(key):
            lines.append(f"    {name}: {trace[key]}")
    if trace.get("error"):
        lines.append(f"    Error: {error_text(trace['error'])}")
    if trace.get("retrieval"):
        lines += ["", f"[retrieval] {trace['retrieval']}", f"    Retrieved {trace.get('edge_count') or 0} edge(s)"]
    if trace.get("selection"):
        lines += ["", f"[selection] {trace['selection']}", *selection_lines(trace)]
    if trace.get("answer"):
        lines += ["", f"[answer] {trace['answer']}"]
        if trace.get("outcome") == "no-answer":
            lines.append(NO_ANSWER_LINE)
        if trace.get("answer_text") is not None:
            lines += ["", trace["answer_text"].rstrip("\n")]
    return lines


class StreamDisplay:
    """Renders GraphRAG messages (``GraphRagResponse.to_dict()``) as they arrive.

    ``fmt="text"``: explain blocks to ``err`` (when ``explainable``), the answer to ``out``.
    ``fmt="json"``: every message as one JSON line to ``out``.
    """

    def __init__(self, out: TextIO, err: TextIO, lookup: TraceLookup, fmt: str = "text",
                 explainable: bool = True) -> None:
        self.out, self.err, self.lookup = out, err, lookup
        self.fmt, self.explainable = fmt, explainable
        self._answer_open = False  # answer text written that does not end with a newline

    def run(self, messages: Iterable[dict]) -> None:
        """Display the whole stream; raises :class:`StreamError` on an error message or early end."""
        for message in messages:
            if self.fmt == "json":
                self.out.write(json.dumps(message, ensure_ascii=False) + "\n")
                self.out.flush()
            if message.get("error"):
                self._close_answer()
                raise StreamError(error_text(message["error"]))
            if self.fmt == "text":
                self._show(message)
            if message.get("end_of_session"):
                self._close_answer()
                if self.fmt == "text" and message.get("outcome") == "no-answer":
                    self.err.write(f"[outcome] no-answer\n{NO_ANSWER_LINE}\n")
                    self.err.flush()
                return
        self._close_answer()
        raise StreamError("the stream ended before the end of the session")

    def _show(self, message: dict) -> None:
        if message.get("message_type") == "explain":
            if self.explainable and message.get("explain_id"):
                self._explain(message.get("explain_kind") or "explain", message["explain_id"])
            return
        text = message.get("response") or ""
        if text:
            self.out.write(text)
            self.out.flush()
            self._answer_open = not text.endswith("\n")

    def _explain(self, kind: str, iri: str) -> None:
        lines = [f"[{kind}] {iri}"]
        if kind == "selection":
            lines += self._selection(iri)
        if self._answer_open and self.out.isatty():  # keep the block off the answer's last line
            self.err.write("\n\n")
        self.err.write("\n".join(lines) + "\n\n")
        self.err.flush()

    def _selection(self, iri: str) -> list[str]:
        try:
            trace = self.lookup(iri)
        except TraceUnavailable as exc:
            return [f"    (details unavailable: {exc})"]
        if trace is None:
            return ["    (details unavailable: no trace for this session)"]
        return selection_lines(trace)

    def _close_answer(self) -> None:
        if self.fmt == "text" and self._answer_open:
            self.out.write("\n")
            self.out.flush()
            self._answer_open = False
