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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from pyoxigraph import Literal, NamedNode

from server.explain.recorder import ExplainRecorder
from server.rag.citations import MARK, citations, unsupported_sentences
from server.rag.llm import LLM, render_prompt
from server.rag.messages import GraphRagResponse
from server.rag.passage_answer import NO_PASSAGE_ANSWER, Sentence, best_sentences, sentence_spans, supporting_span
from server.rag.passage_index import CANDIDATES, Passage, PassageIndex, query_terms
from server.rag.staged_run import Progress, StagedRun
from server.store_base import StoreBackend
from server.vocab import TG

PROMPT_CHARS_PER_TOKEN = 3.5  # to size the passages sent to a model without a tokenizer call
PROMPT_OVERHEAD_TOKENS = 300  # the prompt's own words and the question


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
    spans: list[tuple[int, NamedNode, int, int]]  # (mark, chunk, offset, length)
    unsupported: list[str]
    fallback_reason: str | None = None


class DocumentRag(StagedRun):
    """Passages -> answer, over one store's passage index with one LLM."""

    session_label = "Document RAG query session"

    def __init__(self, store: StoreBackend, index: PassageIndex, llm: LLM, check_answers: bool = True) -> None:
        super().__init__(store, llm)
        self.index = index
        self.check_answers = check_answers

    def _stages(self, question: str, collection: str, limits: PassageLimits | None,
                recorder: ExplainRecorder | None, progress: Progress) -> Iterator[GraphRagResponse]:
        if recorder:
            yield self._explain(recorder.session(question), recorder.written)
        progress.stage = "retrieval"
        passages = self.index.search(collection, question, (limits or PassageLimits()).passages)
        if recorder:
            iri = recorder.passages(query_terms(question), [(NamedNode(p.chunk), p.lexical, p.semantic, p.fused)
                                                            for p in passages])
            yield self._explain(iri, recorder.written)
        progress.stage = "selection"
        deterministic = getattr(self.llm, "deterministic", False)
        sentences = best_sentences(question, [p.text for p in passages], self.index.embedder)
        used = _used(sentences) if deterministic else self._fitting(passages)
        if not sentences:  # nothing close enough: the model is not asked either
            used = []
        if recorder:
            method = "extractive" if deterministic else "model"
            iri = recorder.passage_selection([rank + 1 for rank in used], [(TG.selectionMethod, Literal(method))])
            yield self._explain(iri, recorder.written)
        progress.stage = "synthesis"
        chosen = [passages[rank] for rank in used]
        if not chosen:
            answer = _Answer(NO_PASSAGE_ANSWER, [], [])
        elif deterministic:
            answer = _extractive(sentences, passages, used)
        else:
            fallback = _extractive([s for s in sentences if s.passage in used], passages, used)
            answer = self._model_answer(question, chosen, fallback)
        yield GraphRagResponse("chunk", response=answer.text)
        outcome = "answered" if chosen else "no-answer"
        progress.stage = "answer"
        if recorder:
            iri = recorder.passage_answer(answer.text, outcome, answer.spans, answer.unsupported,
                                          answer.fallback_reason)
            progress.stage = "done"
            yield self._explain(iri, recorder.written)
        progress.outcome = outcome

    def _fitting(self, passages: list[Passage]) -> list[int]:
        """The passages, best first, that fit the model's context beside the prompt and the answer."""
        budget = (self.llm.context_tokens or 8192) - PROMPT_OVERHEAD_TOKENS - getattr(self.llm, "answer_tokens", 1024)
        used: list[int] = []
        for rank, passage in enumerate(passages):
            budget -= int(len(passage.text) / PROMPT_CHARS_PER_TOKEN) + 8
            if budget < 0:
                break
            used.append(rank)
        return used

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
        spans = []
        for start, end in sentence_spans(text):
            sentence = text[start:end]
            for mark in dict.fromkeys(int(n) for n in MARK.findall(sentence)):
                if 1 <= mark <= len(chosen) and (span := supporting_span(MARK.sub("", sentence),
                                                                         chosen[mark - 1].text)):
                    spans.append((mark, NamedNode(chosen[mark - 1].chunk), span[0], span[1] - span[0]))
        return _Answer(text, spans, unsupported)


def _used(sentences: list[Sentence]) -> list[int]:
    """The retrieval ranks (from 0) of the passages the sentences come from, in the sentences' order."""
    return list(dict.fromkeys(s.passage for s in sentences))


def _extractive(sentences: list[Sentence], passages: list[Passage], used: list[int]) -> _Answer:
    """The best sentences as the answer, each marked with its passage's number among ``used``."""
    if not sentences:
        return _Answer(NO_PASSAGE_ANSWER, [], [])
    pieces, spans = [], []
    for sentence in sentences:
        mark = used.index(sentence.passage) + 1
        text = sentence.text
        stop = len(text) - 1 if text[-1:] in ".!?" else len(text)
        pieces.append(f"{text[:stop]} [{mark}]{text[stop:]}")
        spans.append((mark, NamedNode(passages[sentence.passage].chunk), sentence.start,
                      sentence.end - sentence.start))
    return _Answer(" ".join(pieces), spans, [])
