"""Answers from passages: the offline extractive answer (the sentences of the best passages that answer
the question, each with its ``[n]`` mark) and the spans an answer's sentences rest on.

A sentence's score is the share of the question's content words it holds, each weighted by how rare it
is among the candidate sentences (a country's name in every sentence of its profile counts little; a
word no candidate holds, little too: the question may say it otherwise), plus its closeness in meaning
to the question. "No answer" when the best sentence holds too little of
the question (``MIN_COVERAGE``) or nothing at all that is rare.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from server.rag.passage_embedders import PassageEmbedder
from server.rag.text import terms

MAX_SENTENCES = 2  # in an extractive answer
MAX_SENTENCE_CHARS = 400  # past it, a "sentence" is read line by line
SECOND_SENTENCE = 0.8  # of the best sentence's score that a second sentence must reach
MIN_COVERAGE = 0.4  # of the question's weighted content words the best sentence must hold
ABSENT_WEIGHT = 0.5  # of a question word no candidate holds (a paraphrase: "emerge" for "arose")
MEANING_WEIGHT = 0.5  # of the sentence's cosine similarity to the question, added to its coverage
NO_PASSAGE_ANSWER = "The documents do not answer this question."
# A sentence ends at . ! ? followed by space and a capital, digit or quote, or at a blank line; an
# initial ("A. Smith", "B.C.") does not end one
_BOUNDARY = re.compile(r"(?<![A-Z])(?<!\b[A-Z]\.[A-Z])([.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n")


@dataclass(frozen=True)
class Sentence:
    """A sentence of passage ``passage`` (its position among the candidates), ``start``..``end`` in its text."""

    passage: int
    start: int
    end: int
    text: str
    score: float


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``, stripped of surrounding white space; a "sentence"
    longer than ``MAX_SENTENCE_CHARS`` (a table, a list without stops) is taken line by line."""
    spans, start = [], 0
    for found in _BOUNDARY.finditer(text):
        spans.append((start, found.start() + len(found.group(1) or "")))
        start = found.end()
    spans.append((start, len(text)))
    lines = []
    for begin, end in spans:
        if end - begin <= MAX_SENTENCE_CHARS:
            lines.append((begin, end))
            continue
        for line in re.finditer(r"[^\n]+", text[begin:end]):
            lines.append((begin + line.start(), begin + line.end()))
    stripped = []
    for begin, end in lines:
        piece = text[begin:end]
        left, right = len(piece) - len(piece.lstrip()), len(piece.rstrip())
        if right > left:
            stripped.append((begin + left, begin + right))
    return stripped


def best_sentences(question: str, passages: Sequence[str], embedder: PassageEmbedder) -> list[Sentence]:
    """The sentences of ``passages`` that answer ``question``, best first (at most ``MAX_SENTENCES``);
    empty when none holds enough of it."""
    asked = terms(question)
    candidates = [(number, start, end, text[start:end]) for number, text in enumerate(passages)
                  for start, end in sentence_spans(text)]
    if not asked or not candidates:
        return []
    held = [terms(sentence) for *_, sentence in candidates]
    counts = {term: sum(term in words for words in held) for term in asked}
    weight = {term: math.log(1 + len(held) / (1 + count)) if count else ABSENT_WEIGHT for term, count in counts.items()}
    total = sum(weight.values())
    meaning = embedder.embed([question] + [sentence for *_, sentence in candidates])
    scored = []
    for (number, start, end, sentence), words, vector in zip(candidates, held, meaning[1:], strict=True):
        coverage = sum(weight[term] for term in asked & words) / total
        if coverage >= MIN_COVERAGE:
            scored.append(Sentence(number, start, end, sentence,
                                   coverage + MEANING_WEIGHT * float(vector @ meaning[0])))
    scored.sort(key=lambda s: (-s.score, s.passage, s.start))
    return [s for s in scored[:MAX_SENTENCES] if s.score >= SECOND_SENTENCE * scored[0].score] if scored else []


def supporting_span(sentence: str, passage: str) -> tuple[int, int] | None:
    """The sentence of ``passage`` sharing the most content words with ``sentence`` (a model's sentence
    citing that passage): its ``(start, end)``; None when they share none."""
    wanted = terms(sentence)
    best, best_count = None, 0
    for start, end in sentence_spans(passage):
        count = len(wanted & terms(passage[start:end]))
        if count > best_count:
            best, best_count = (start, end), count
    return best

