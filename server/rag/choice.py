"""The selection stage: the model's choice of edges, sized to its context, with the deterministic
selector as the fallback when the model's choice is unusable.

* **Fit the context**: edges are ranked by the deterministic selector (``chains.choose``'s ranking)
  and cut into batches whose prompt fits ``llm.context_tokens`` (counted by the server's tokenizer
  when the provider offers one, else estimated at ``CHARS_PER_TOKEN`` bytes a token; ``REPLY_TOKENS``
  kept for the reply); at most ``MAX_BATCHES`` batches, the lowest-ranked edges beyond them are
  trimmed. Batches' selections are merged in rank order. A server that still refuses a prompt as
  too long gets the batch in halves (down to ``MIN_BATCH`` edges).
* **Fallback**: a reply that names no valid edge id (junk), a timeout or any other failure of a
  selection call, or a refusal even at ``MIN_BATCH`` edges: the deterministic selector chooses
  instead, and each of its edges says so. A failure after an earlier batch answered keeps that
  batch's choice; the batches not offered yet are not sent.
* **Accounting**: every batch offered says what became of it (``Choice.batch_log``: answered, none,
  junk, timed out, refused and halved), and every retrieved edge never offered to the model (trimmed
  or left after a failure) is named (``Choice.unoffered``); both are recorded in the trace.
* **The deterministic provider** (``offline``, whose ``deterministic`` is true): its selector's choice
  is the selection, whole (``MAX_SELECTED_EDGES`` is the budget of a model's context, not a cut of the
  answer), each edge chosen by ``DETERMINISTIC``.
* **Complete or cut**: ``Choice.cut`` counts the relevant edges left out (a model's choice past
  ``MAX_SELECTED_EDGES``, the selector's paths past its own cap); 0 means the selection holds every
  edge the selector found for the question.
* **No answer**: a model that replies ``NONE`` (or nothing) for every batch, or a fallback that
  finds nothing relevant: no edge is chosen, and the pipeline answers that the graph does not
  answer the question.
"""
from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyoxigraph import Literal, NamedNode, Triple

from server.rag import chains
from server.rag.llm import LLM, MAX_SELECTED_EDGES, ContextTooLong, Edge, LLMError, LLMTimeout, render_prompt
from server.rag.relations import Aliases
from server.rag.selection import parse_selection
from server.vocab import TG, XSD, Term

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 2  # bytes a token, cautiously: small models' tokenizers take ~2.2 for JSON with hex ids
REPLY_TOKENS = 1024  # kept free for the model's reply (MAX_SELECTED_EDGES JSONL lines)
MAX_BATCHES = 4  # selection calls per question at most
MIN_BATCH = 8  # edges: a prompt refused as too long is halved down to this size, then the fallback runs
_NONE = re.compile(r"[\W_]*(none|nothing|no edges?)?[\W_]*", re.IGNORECASE)

# who chose an edge: the configured model, the deterministic selector standing in for it, or the
# deterministic selector as the configured (offline) provider
MODEL, FALLBACK, DETERMINISTIC = "model", "fallback", "deterministic"


@dataclass
class Choice:
    """The selected edges ``(edge id, reasoning, chosen by)`` and what the model was shown."""

    edges: list[tuple[str, str, str]]
    method: str  # MODEL, FALLBACK or DETERMINISTIC
    fallback_reason: str | None = None
    cut: int = 0  # relevant edges left out of the selection (0: it is complete)
    shown: int = 0  # edges the model's prompts held
    batches: int = 0  # selection calls made
    trimmed: int = 0  # retrieved edges left out of every prompt (ranked lowest)
    prompt_tokens: int = 0  # the largest prompt, counted or estimated
    context_tokens: int | None = None
    notes: list[str] = field(default_factory=list)
    batch_log: list[str] = field(default_factory=list)  # "N: what became of batch N", one per call
    unoffered: list[str] = field(default_factory=list)  # edge ids the model never saw (trimmed or left over)
    queued_s: float = 0.0  # waited for the LLM endpoint's slots (GLASSGRAPH_LLM_CONCURRENCY)
    asked: list[str] = field(default_factory=list)  # the edge ids the deterministic selector chose, for the check

    @property
    def outcome(self) -> str:
        return "answered" if self.edges else "no-answer"


def selection_facts(choice: Choice, edges: Mapping[str, Triple] | None = None) -> list[tuple[NamedNode, Term]]:
    """What a selection records about itself: ``tg:selectionMethod`` ("model", "fallback" or
    "deterministic"), ``tg:fallbackReason``, ``tg:cutEdges`` (relevant edges left out; 0: complete), and what
    the model saw: ``tg:promptEdges``, ``tg:promptBatches``, ``tg:trimmedEdges``, ``tg:promptTokens`` (counted
    or estimated), ``tg:contextTokens`` (configured), ``tg:selectionBatch`` (what became of each batch,
    "N: ..."), ``tg:unofferedEdges`` and, with ``edges`` (edge id -> triple), each ``tg:unofferedEdge``;
    ``tg:llmQueueMs``, the wait for the endpoint."""
    facts: list[tuple[NamedNode, Term]] = [(TG.selectionMethod, Literal(choice.method))]
    if choice.fallback_reason:
        facts.append((TG.fallbackReason, Literal(choice.fallback_reason)))
    counts = {TG.cutEdges: choice.cut, TG.promptEdges: choice.shown, TG.promptBatches: choice.batches,
              TG.trimmedEdges: choice.trimmed, TG.promptTokens: choice.prompt_tokens,
              TG.contextTokens: choice.context_tokens, TG.unofferedEdges: len(choice.unoffered),
              TG.llmQueueMs: round(choice.queued_s * 1000)}
    facts += [(name, Literal(str(value), datatype=XSD.integer)) for name, value in counts.items() if value is not None]
    facts += [(TG.selectionBatch, Literal(entry)) for entry in choice.batch_log]
    facts += [(TG.unofferedEdge, edges[edge_id]) for edge_id in choice.unoffered if edges and edge_id in edges]
    return facts


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` takes at most, about: one per ``CHARS_PER_TOKEN`` UTF-8 bytes."""
    return -(-len(text.encode()) // CHARS_PER_TOKEN)


def choose_edges(llm: LLM, question: str, labeled: dict[str, Edge], aliases: Aliases | None = None) -> Choice:
    """The selection for ``question`` among the retrieved ``labeled`` edges (edge id -> labels);
    ``aliases``: the other names of their relations."""
    method = DETERMINISTIC if getattr(llm, "deterministic", False) else MODEL
    if not labeled:
        return Choice([], method, context_tokens=llm.context_tokens)
    deterministic = chains.choose(question, list(labeled.items()), aliases)
    if method == DETERMINISTIC:
        return Choice([(i, why, DETERMINISTIC) for i, why in deterministic.chosen], DETERMINISTIC,
                      cut=deterministic.left_out, shown=len(labeled))
    ranked = [(i, labeled[i]) for i in deterministic.ranking]
    tokens = _token_counter(llm, question, ranked, aliases or {})
    batches, trimmed = _batches(question, ranked, llm.context_tokens, aliases or {}, tokens)
    choice = Choice([], MODEL, trimmed=trimmed, context_tokens=llm.context_tokens,
                    asked=[i for i, _ in deterministic.chosen])
    picked: dict[str, str] = {}
    failures: list[str] = []
    queue = list(batches)
    while queue and choice.batches < MAX_BATCHES * 2:
        batch = queue.pop(0)
        prompt = render_prompt("select", question=question, edges=batch, max_edges=MAX_SELECTED_EDGES,
                               aliases=aliases or {})
        choice.batches += 1
        offered = f"{choice.batches}: {len(batch)} edges offered"
        try:
            reply = llm.select(question, batch, aliases)
        except ContextTooLong as exc:
            _queued(llm, choice)
            if len(batch) >= 2 * MIN_BATCH:
                half = len(batch) // 2
                queue[:0] = [batch[:half], batch[half:]]
                choice.notes.append(f"a prompt of {len(batch)} edges was refused as too long; halved")
                choice.batch_log.append(f"{offered}, refused as too long ({exc}); halved")
                continue
            failures.append(f"the prompt was refused as too long even at {len(batch)} edges ({exc})")
            choice.batch_log.append(f"{offered}, refused as too long ({exc}); too few to halve")
            break
        except LLMError as exc:
            _queued(llm, choice)
            failures.append(str(exc))
            choice.batch_log.append(f"{offered}, {'timed out' if isinstance(exc, LLMTimeout) else 'failed'} ({exc})")
            break
        _queued(llm, choice)
        choice.shown += len(batch)
        choice.prompt_tokens = max(choice.prompt_tokens, tokens(prompt))
        found = parse_selection(reply, [i for i, _ in batch])
        if found:
            for edge_id, reasoning in found:
                picked.setdefault(edge_id, reasoning)
            choice.batch_log.append(f"{offered}, answered: {len(found)} chosen")
        elif _NONE.fullmatch(reply.strip().strip("`")):
            choice.batch_log.append(f"{offered}, answered: none relevant")
        else:
            failures.append(f"the model's reply named no valid edge id: {json.dumps(reply[:80], ensure_ascii=False)}")
            choice.batch_log.append(f"{offered}, the reply named no valid edge id")
    offered_ids = {edge_id for batch in batches for edge_id, _ in batch} - {i for b in queue for i, _ in b}
    choice.unoffered = [edge_id for edge_id, _ in ranked if edge_id not in offered_ids]
    if choice.unoffered:
        log.warning("selection: %d of %d retrieved edges were never offered to the model (%d trimmed, %d left "
                    "after a failure)", len(choice.unoffered), len(ranked), trimmed, len(choice.unoffered) - trimmed)
    if picked:
        choice.edges = [(i, reason, MODEL) for i, reason in list(picked.items())[:MAX_SELECTED_EDGES]]
        choice.cut = max(len(picked) - MAX_SELECTED_EDGES, 0)
        choice.notes += failures
        for note in choice.notes:
            log.warning("selection: %s", note)
        return choice
    if not failures:  # the model found nothing relevant in any batch: the graph does not answer it
        return choice
    reason = failures[0]
    log.warning("selection falls back to the deterministic selector: %s", reason)
    choice.method, choice.fallback_reason = FALLBACK, reason
    choice.edges = [(i, f"Fallback ({reason}). {why}", FALLBACK) for i, why in deterministic.chosen]
    choice.cut = deterministic.left_out
    return choice


def _queued(llm: LLM, choice: Choice) -> None:
    """Add the last call's wait for the endpoint's slots (providers that queue report it)."""
    last_call = getattr(llm, "last_call", None)
    stats = last_call() if last_call is not None else None
    if stats is not None:
        choice.queued_s += stats.queued_s


def _token_counter(llm: LLM, question: str, ranked: list[tuple[str, Edge]],
                   aliases: Aliases) -> Callable[[str], int]:
    """How many tokens a text of these prompts takes: the server's count of the prompt holding every
    edge gives the bytes a token of such text (one call; a tenth kept in reserve), else
    :func:`estimate_tokens`."""
    count_tokens = getattr(llm, "count_tokens", None)
    if count_tokens is None or llm.context_tokens is None:
        return estimate_tokens
    whole = render_prompt("select", question=question, edges=ranked, max_edges=MAX_SELECTED_EDGES, aliases=aliases)
    counted = count_tokens(whole)
    if not counted:
        return estimate_tokens
    per_token = len(whole.encode()) / (counted * 1.1)
    return lambda text: math.ceil(len(text.encode()) / per_token)


def _batches(question: str, ranked: list[tuple[str, Edge]], context: int | None, aliases: Aliases,
             tokens: Callable[[str], int] = estimate_tokens) -> tuple[list[list[tuple[str, Edge]]], int]:
    """``ranked`` edges cut into prompts that fit ``context`` (all in one without a limit; ``tokens``
    measures a text), and how many were trimmed past ``MAX_BATCHES``."""
    if context is None:
        return [ranked], 0
    budget = context - REPLY_TOKENS - tokens(render_prompt("select", question=question, edges=[],
                                                           max_edges=MAX_SELECTED_EDGES, aliases=aliases))
    batches: list[list[tuple[str, Edge]]] = []
    used = 0
    for item in ranked:
        edge_id, (s, p, o) = item
        cost = tokens(json.dumps({"id": edge_id, "s": s, "p": p, "o": o}, ensure_ascii=False) + "\n")
        if not batches or used + cost > budget:
            if len(batches) == MAX_BATCHES:
                return batches, len(ranked) - sum(len(b) for b in batches)
            batches.append([])
            used = 0
        batches[-1].append(item)
        used += cost
    return batches, 0
