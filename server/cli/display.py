"""Terminal display of a GraphRAG stream and of explain traces, shared by ``tg-invoke-graph-rag``
(over HTTP) and ``glassgraph ask`` / ``glassgraph explain`` (in-process).

Explain blocks go to stderr as each event arrives, named by the message's ``explain_kind``; the
answer goes to stdout, so redirecting stdout keeps just the answer. The selection block's details
(edges by label, reasoning, source chains, passages that mention an unsourced edge's entities, and with
``--show-source`` excerpts of those passages) come from a *trace lookup*: the server's ``/api/explain`` or
``read_trace`` in-process; the trace holds the chunks' text, so excerpts need no other request.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from server.cli.errors import CliError
from server.cli.step_view import TG, StepTriples, lexical, selection_view
from server.rag.text import one_line

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


EXCERPT_CONTEXT = 80  # characters of a chunk's text shown either side of the label an excerpt is about


def excerpt(text: str, labels: Sequence[str], context: int = EXCERPT_CONTEXT) -> str:
    """The passage of ``text`` around the first of ``labels`` it contains as whole words (case-insensitively),
    about ``context`` characters either side cut at spaces, white space collapsed, ``…`` where cut, in quotes;
    the text's beginning when it contains none of them."""
    flat = one_line(text)
    for label in labels:
        word = rf"(?<!\w){re.escape(one_line(label))}(?!\w)"  # "Euro" is not found in "Europe"
        found = re.search(word, flat, re.IGNORECASE) if label.strip() else None
        if found:
            start, end = _word_cut(flat, found.start() - context, found.end() + context, found.span())
            break
    else:
        start, end = 0, _word_cut(flat, 0, 2 * context, (0, 0))[1]
    return f"“{'…' if start else ''}{flat[start:end].strip()}{'…' if end < len(flat) else ''}”"


def _word_cut(text: str, start: int, end: int, keep: tuple[int, int]) -> tuple[int, int]:
    """``start`` and ``end`` in ``text``, moved inwards to spaces (never into ``keep``) so that no word is cut."""
    start, end = max(start, 0), min(end, len(text))
    if start > 0 and text[start - 1] != " ":
        space = text.find(" ", start, keep[0])
        start = space + 1 if space >= 0 else start
    if end < len(text) and text[end] != " ":
        space = text.rfind(" ", keep[1], end)
        end = space if space >= 0 else end
    return start, end


def chain_lines(name: str, chain: list[dict], labels: Sequence[str], show_source: bool) -> list[str]:
    """``Source: <chain>`` (or another ``name``), then with ``show_source`` an excerpt of its chunk's text
    around ``labels`` (the first found)."""
    from server.provenance import format_chain  # pyoxigraph: loaded once an edge is shown, not on import

    lines = [f"        {name}: {format_chain(chain)}"]
    texts = [node["text"] for node in chain if node.get("type") == "Chunk" and (node.get("text") or "").strip()]
    if show_source and texts:
        lines.append(f"          {excerpt(texts[0], labels)}")
    return lines


CHOSEN_BY = {"model": "the model", "fallback": "the deterministic selector (fallback)",
             "deterministic": "the deterministic selector"}
NO_ANSWER_LINE = "    Outcome: no answer (the knowledge graph does not answer this question)"
NO_PASSAGE_ANSWER_LINE = "    Outcome: no answer (the documents do not answer this question)"


def no_answer_line(graph: bool) -> str:
    """The outcome line of a question that got no answer: from the graph (and any passages), or the documents."""
    return NO_ANSWER_LINE if graph else NO_PASSAGE_ANSWER_LINE


def edge_lines(edge: dict, show_source: bool = False, model: str | None = None) -> list[str]:
    """One selected edge: its labels, the LLM's reasoning, who chose it, every source chain and the chains
    of the other chunks that mention its subject or object (an ingested document without an LLM links only
    those); ``show_source`` quotes each chunk."""
    lines = [f"      Edge: ({', '.join(edge['labels'])})"]
    if edge.get("reasoning") or edge.get("selected_by") == "model":
        lines.append(f"        Reason: {one_line(edge.get('reasoning') or '') or '(the model gave none)'}")
    if edge.get("selected_by"):
        chooser = CHOSEN_BY.get(edge["selected_by"], edge["selected_by"])
        if edge["selected_by"] == "model" and model:
            chooser = f"{chooser} ({model})"
        lines.append(f"        Chosen by: {chooser}")
    labels = [edge["labels"][2], edge["labels"][0]]  # an excerpt is about the object, else the subject
    for chain in edge.get("sources") or []:
        lines += chain_lines("Source", chain, labels, show_source)
    if not edge.get("sources"):
        lines.append("        Source: (no extraction provenance)")
    sourced = {chain[0]["iri"] for chain in edge.get("sources") or [] if chain}
    for chain in edge.get("mentions") or []:
        if chain and chain[0]["iri"] not in sourced:
            lines += chain_lines("Mentioned in", chain, labels, show_source)
    return lines


def selection_lines(trace: dict, show_source: bool = False) -> list[str]:
    """The body of a ``[selection]`` block."""
    edges = trace.get("edges") or []
    lines = [f"    Selected {len(edges)} edge(s)"]
    details = trace.get("selection_details") or {}
    if details.get("fallbackReason"):
        lines.append(f"    Fallback: {details['fallbackReason']}")
    if details.get("cutEdges"):
        lines.append(f"    Cut: {details['cutEdges']} more relevant edge(s) left out of the selection")
    elif edges and "cutEdges" in details:
        lines.append("    Complete: every relevant edge found is selected")
    lines += [f"    Batch {entry}" for entry in details.get("batches") or ()]
    if details.get("unofferedEdges"):
        lines.append(f"    Never offered to the model: {details['unofferedEdges']} edge(s)")
    for edge in edges:
        lines.extend(edge_lines(edge, show_source, trace.get("model")))
    return lines


def trace_lines(trace: dict, show_source: bool = False) -> list[str]:
    """A whole trace as text (``glassgraph explain``): a block per stage recorded, then the answer."""
    from server.stages import ANSWER, RETRIEVAL, SELECTION, SESSION  # pyoxigraph: loaded when shown, not on import

    lines = [f"[{SESSION.kind}] {trace[SESSION.kind]}", *_session_block(trace)]
    graph = trace.get("edge_count") is not None or not trace.get("passages")  # else document RAG's
    blocks = {RETRIEVAL: _retrieval_block, SELECTION: _selection_block, ANSWER: _answer_block}
    for stage, block in blocks.items():
        if trace.get(stage.kind):
            lines += ["", f"[{stage.kind}] {trace[stage.kind]}", *block(trace, graph, show_source)]
    if trace.get(ANSWER.kind) and trace.get("answer_text") is not None:
        lines += ["", trace["answer_text"].rstrip("\n")]
    return lines


def _session_block(trace: dict) -> list[str]:
    lines = [f"    Question: {trace['question']}"]
    for key, name in (("time", "Time"), ("model", "Model"), ("collection", "Collection"), ("status", "Status")):
        if trace.get(key):
            lines.append(f"    {name}: {trace[key]}")
    if trace.get("error"):
        lines.append(f"    Error: {error_text(trace['error'])}")
    return lines


def _retrieval_block(trace: dict, graph: bool, show_source: bool) -> list[str]:
    lines = []
    if graph:
        lines.append(f"    Retrieved {trace.get('edge_count') or 0} edge(s)")
        lines += [f"    Seed {line}" for line in trace.get("seed_reasons") or []]
    return lines + (passage_lines(trace) if trace.get("passages") else [])


def _selection_block(trace: dict, graph: bool, show_source: bool) -> list[str]:
    return [*(selection_lines(trace, show_source) if graph else []),
            *([used_passages_line(trace)] if trace.get("passages") else [])]


def _answer_block(trace: dict, graph: bool, show_source: bool) -> list[str]:
    lines = [no_answer_line(graph)] if trace.get("outcome") == "no-answer" else []
    lines += [line for span in trace.get("spans") or [] for line in span_lines(span)]
    lines += [f"    Unsupported: {one_line(sentence)}" for sentence in trace.get("unsupported") or []]
    if trace.get("answer_fallback"):
        lines.append(f"    Answer fallback: {trace['answer_fallback']}")
    return lines


def passage_lines(trace: dict) -> list[str]:
    """A document RAG retrieval: its query terms and each passage's chain and scores."""
    from server.provenance import format_chain

    lines = [f"    Retrieved {len(trace['passages'])} passage(s) for: {', '.join(trace.get('query_terms') or [])}"]
    for passage in trace["passages"]:
        where = format_chain(passage["chain"]) if passage["chain"] else passage["chunk"]
        lines.append(f"    {passage['rank']}. {where} (bm25 {passage['lexical']:.2f}, "
                     f"cosine {passage['semantic']:.3f}, fused {passage['fused']:.4f})")
    return lines


def used_passages_line(trace: dict) -> str:
    """``    Used 2 passage(s): #1 as [1], #3 as [2]``: the retrieval ranks of the passages an answer used, with
    the marks that cite them (and the names of the question that no passage mentions, when that is why none
    was)."""
    marks: dict[str, list[int]] = {}
    for span in trace.get("spans") or []:
        marks.setdefault(span["chunk"], []).append(span["mark"])
    used = [f"#{p['rank']}" + "".join(f" as [{mark}]" for mark in dict.fromkeys(marks.get(p["chunk"], [])))
            for p in trace["passages"] if p["selected"]]
    never = trace.get("unmentioned") or []
    return (f"    Used {len(used)} passage(s): {', '.join(used) or 'none'}"
            + (f" (the documents never mention: {', '.join(never)})" if never else ""))


def span_lines(span: dict) -> list[str]:
    """``Passage [1]: Chunk 4 (chars 120-388) → Page 2 → "Title"`` (the sentence's characters in its page)
    and the quoted sentence."""
    from server.provenance import format_chain

    chain = [dict(node) for node in span["chain"]]
    if chain:
        chain[0]["offset"] = (chain[0].get("offset") or 0) + span["offset"]
        chain[0]["length"] = span["length"]
    lines = [f"    Passage [{span['mark']}]: {format_chain(chain) if chain else span['chunk']}"]
    if span.get("quote"):
        lines.append(f"      “{one_line(span['quote'])}”")
    return lines


class StreamDisplay:
    """Renders GraphRAG messages (``GraphRagResponse.to_dict()``) as they arrive.

    ``fmt="text"``: explain blocks to ``err`` (when ``explainable``), the answer to ``out``.
    ``fmt="json"``: every message as one JSON line to ``out``.
    ``show_source``: the selection block quotes the chunk of each chain. ``passages``: the retrieval, selection
    and answer blocks show passages and cited spans (read from the trace, each block only what its step has
    recorded: the marks citing the used passages under the answer): document RAG, or GraphRAG asked for
    passages; ``edges``: the selection block shows the selected edges (not in document RAG's).
    """

    def __init__(self, out: TextIO, err: TextIO, lookup: TraceLookup, fmt: str = "text",
                 explainable: bool = True, show_source: bool = False, passages: bool = False,
                 edges: bool = True) -> None:
        self.out, self.err, self.lookup = out, err, lookup
        self.fmt, self.explainable, self.show_source, self.passages = fmt, explainable, show_source, passages
        self.edges = edges
        self._answer_open = False  # answer text written that does not end with a newline
        self._model: str | None = None  # from the session step's triples
        self._one_screen = _one_screen(out, err)

    def run(self, messages: Iterable[dict]) -> None:
        """Display the whole stream; raises :class:`StreamError` on an error message or early end."""
        for message in messages:
            if self.fmt == "json" and (self.explainable or message.get("message_type") != "explain"):
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
                    self.err.write(f"[outcome] no-answer\n{no_answer_line(self.edges)}\n")
                    self.err.flush()
                return
        self._close_answer()
        raise StreamError("the stream ended before the end of the session")

    def _show(self, message: dict) -> None:
        if message.get("message_type") == "explain":
            if self.explainable and message.get("explain_id"):
                self._explain(message.get("explain_kind") or "explain", message["explain_id"],
                              message.get("explain_triples"))
            return
        text = message.get("response") or ""
        if text:
            self.out.write(text)
            self.out.flush()
            self._answer_open = not text.endswith("\n")

    def _explain(self, kind: str, iri: str, triples: list[dict] | None) -> None:
        from server.stages import ANSWER, RETRIEVAL, SELECTION, SESSION  # pyoxigraph: loaded when shown, not on import

        lines = [f"[{kind}] {iri}"]
        if kind == SESSION.kind and triples:
            self._model = StepTriples(triples).value(iri, TG + "model")
        if kind == RETRIEVAL.kind and self.edges and triples and StepTriples(triples).value(iri, TG + "edgeCount"):
            lines.append(f"    Retrieved {StepTriples(triples).value(iri, TG + 'edgeCount')} edge(s)")
        if kind == SELECTION.kind and self.edges:
            lines += self._selection(iri, triples)
        if self.passages and kind in (RETRIEVAL.kind, SELECTION.kind, ANSWER.kind):
            lines += self._passage_block(kind, iri)
        if kind == ANSWER.kind and triples:
            step = StepTriples(triples)
            unsupported = sorted(lexical(o) for o in step.objects.get((iri, TG + "unsupported"), []))
            lines += [f"    Unsupported: {one_line(sentence)}" for sentence in unsupported]
            if step.value(iri, TG + "answerFallback"):
                lines.append(f"    Answer fallback: {step.value(iri, TG + 'answerFallback')}")
        if self._answer_open and self._one_screen:  # keep the block off the answer's last line
            self.err.write("\n\n")
        self.err.write("\n".join(lines) + "\n\n")
        self.err.flush()

    def _selection(self, iri: str, triples: list[dict] | None) -> list[str]:
        """From the step's own triples when they hold all it shows; else from a trace lookup (an old server, a
        passage to quote, or an edge with no source whose mentioning chunks the trace lists)."""
        if triples and not self.show_source:
            view = selection_view(iri, triples, self._model)
            if all(edge["sources"] for edge in view["edges"]):
                return selection_lines(view)
        trace, unavailable = self._trace(iri)
        return unavailable or selection_lines(trace, self.show_source)

    def _trace(self, iri: str) -> tuple[dict, list[str]]:
        """The trace of ``iri``'s session, or an empty one and the line saying why there is none."""
        try:
            trace = self.lookup(iri)
        except TraceUnavailable as exc:
            return {}, [f"    (details unavailable: {exc})"]
        if trace is None:
            return {}, ["    (details unavailable: no trace for this session)"]
        return trace, []

    def _passage_block(self, kind: str, iri: str) -> list[str]:
        """A document RAG block, from the trace: the passages retrieved, those used, or the marks that cite
        them and the cited spans.

        A block shows only what its step has recorded. The marks that cite the used passages are the answer's
        spans, recorded after the selection's event is sent (the answer is written after it), so a lookup made
        for the selection block may or may not find them: the selection block leaves them out and the answer
        block pairs the passages with their marks."""
        from server.stages import RETRIEVAL, SELECTION  # pyoxigraph: loaded when shown, not on import

        trace, unavailable = self._trace(iri)
        if unavailable:
            return unavailable
        if kind == RETRIEVAL.kind:
            return passage_lines(trace)
        if kind == SELECTION.kind:
            return [used_passages_line({**trace, "spans": []})]
        spans = trace.get("spans") or []
        return ([used_passages_line(trace)] if spans and trace.get("passages") else []) + [
            line for span in spans for line in span_lines(span)]

    def _close_answer(self) -> None:
        if self.fmt == "text" and self._answer_open:
            self.out.write("\n")
            self.out.flush()
            self._answer_open = False


def _one_screen(out: TextIO, err: TextIO) -> bool:
    """Whether the answer and the explain blocks meet in one place: a terminal, or one pipe or file that both
    streams go to (``2>&1``)."""
    try:
        if out.isatty():
            return True
        mine, theirs = os.fstat(out.fileno()), os.fstat(err.fileno())
    except (OSError, ValueError):  # a stream with no file (StringIO)
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
