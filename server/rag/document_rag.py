"""Document RAG: a question answered from the passages of a collection's documents, with the same
messages and the same kind of trace as GraphRAG (``server.rag.pipeline``).

Stages: session, retrieval (the fused passage search, ``server.rag.passage_index``), selection (the
passages the answer is made from), synthesis and answer. Offline, the answer is extractive: the best
sentences of the retrieved passages (``server.rag.passage_answer``), each with its ``[n]`` mark, and
"no answer" when none holds enough of the question. With a model, the passages that fit its context go
to it and it answers with ``[n]`` marks; a sentence naming what its passages do not hold is recorded as
unsupported and, with ``GLASSGRAPH_CHECK_ANSWERS``, the extractive answer replaces the model's. Every
cited sentence is recorded as a span of its chunk (``tg:citedSpan``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from pyoxigraph import Literal, NamedNode

from server.rag.citations import citations, unsupported_sentences
from server.rag.llm import LLM, passages_that_fit, render_prompt
from server.rag.messages import GraphRagResponse
from server.rag.passage_answer import (
    NO_PASSAGE_ANSWER,
    Span,
    answering_sentences,
    cited_spans,
    extractive_passage_answer,
    used_passages,
)
from server.rag.passage_index import CANDIDATES, Passage, PassageIndex, query_terms
from server.rag.staged_run import Progress, StagedRun, StageSink
from server.stages import (
    ANSWER,
    RETRIEVAL,
    SELECTION,
    Answered,
    PassagesRetrieved,
    PassagesSelected,
    SessionStarted,
    StageResult,
)
from server.store_base import StoreBackend
from server.vocab import TG


@dataclass
class PassageLimits:
    """How many passages a question retrieves (all are recorded in the trace)."""

    passages: int = 5
    RANGES: ClassVar[dict[str, tuple[int, int]]] = {"passages": (1, CANDIDATES)}

    def check(self) -> None:
        """ValueError naming a field outside its range."""
        low, high = self.RANGES["passages"]
        if isinstance(self.passages, bool) or not isinstance(self.passages, int) or not low <= self.passages <= high:
            raise ValueError(f"'passages' must be an integer between {low} and {high}, got {self.passages!r}")


@dataclass
class _Answer:
    text: str
    spans: list[Span]
    unsupported: list[str]
    fallback_reason: str | None = None


class DocumentRag(StagedRun):
    """Passages -> answer, over one store's passage index with one LLM."""

    session_label = "Document RAG query session"

    def __init__(self, store: StoreBackend, index: PassageIndex, llm: LLM, check_answers: bool = True, *,
                 sinks: Callable[[StoreBackend], StageSink] | None) -> None:
        super().__init__(store, llm, sinks)
        self.index = index
        self.check_answers = check_answers

    def _stages(self, question: str, collection: str, limits: PassageLimits | None,
                progress: Progress) -> Iterator[GraphRagResponse | StageResult]:
        yield SessionStarted(question, self.llm.model, collection, self.session_label, documents=True)
        progress.stage = RETRIEVAL.kind
        passages = self.index.search(collection, question, (limits or PassageLimits()).passages)
        yield PassagesRetrieved(query_terms(question), [(NamedNode(p.chunk), p.lexical, p.semantic, p.fused)
                                                        for p in passages])
        progress.stage = SELECTION.kind
        deterministic = getattr(self.llm, "deterministic", False)
        sentences, unmentioned = answering_sentences(question, collection, passages, self.index)
        used = (used_passages(sentences) if deterministic
                else list(range(passages_that_fit(self.llm, [p.text for p in passages]))))
        if not sentences:  # nothing close enough: the model is not asked either
            used = []
        method = "extractive" if deterministic else "model"
        yield PassagesSelected([rank + 1 for rank in used], [
            (TG.selectionMethod, Literal(method)), *((TG.unmentionedName, Literal(name)) for name in unmentioned)])
        progress.stage = "synthesis"
        chosen = [passages[rank] for rank in used]
        chunks = [p.chunk for p in passages]
        if not chosen:
            answer = _Answer(NO_PASSAGE_ANSWER, [], [])
        elif deterministic:
            answer = _Answer(*extractive_passage_answer(sentences, chunks, used), [])
        else:
            fallback = _Answer(*extractive_passage_answer([s for s in sentences if s.passage in used], chunks, used),
                               [])
            answer = self._model_answer(question, chosen, fallback)
        yield GraphRagResponse("chunk", response=answer.text)
        outcome = "answered" if chosen else "no-answer"
        progress.stage = ANSWER.kind
        yield Answered(answer.text, "Document RAG answer", outcome, spans=answer.spans,
                       unsupported=answer.unsupported, fallback_reason=answer.fallback_reason)
        progress.outcome = outcome

    def _model_answer(self, question: str, chosen: list[Passage], extractive: _Answer) -> _Answer:
        """The model's answer from ``chosen`` (numbered from 1), its sentences checked against the passages
        they cite; the extractive answer replaces it when a sentence is unsupported (and checks are on)."""
        prompt = render_prompt("answer_passages", question=question, passages=[p.text for p in chosen])
        text = "".join(self.llm.stream(prompt)).strip()
        numbered = {n: (p.text,) for n, p in enumerate(chosen, start=1)}
        unsupported = unsupported_sentences(text, question, numbered, [])
        valid, invalid = citations(text, len(chosen))
        if not valid or invalid:
            unsupported = unsupported or [text]
        if unsupported and self.check_answers:
            reason = (f"{len(unsupported)} sentence(s) of the model's answer name what no cited passage holds; "
                      "the extractive answer replaces it")
            return _Answer(extractive.text, extractive.spans, unsupported, reason)
        return _Answer(text, cited_spans(text, [(p.chunk, p.text) for p in chosen]), unsupported)
