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

from server.rag.citations import MARK, named_words
from server.rag.passage_embedders import PassageEmbedder
from server.rag.passage_index import Passage, PassageIndex
from server.rag.text import terms

MAX_SENTENCES = 2  # in an extractive answer
MAX_SENTENCE_CHARS = 400  # past it, a "sentence" is read line by line
SECOND_SENTENCE = 0.8  # of the best sentence's score that a second sentence must reach
MIN_COVERAGE = 0.4  # of the question's weighted content words the best sentence must hold
ABSENT_WEIGHT = 0.5  # of a question word no candidate holds (a paraphrase: "emerge" for "arose")
MEANING_WEIGHT = 0.5  # of the sentence's cosine similarity to the question, added to its coverage
NO_PASSAGE_ANSWER = "The documents do not answer this question."
# A sentence ends at . ! ? followed by space and a capital, digit or quote, at a blank line, and at a line of
# Markdown's markup; an initial ("A. Smith", "B.C.") does not end one
_BOUNDARY = re.compile(r"(?<![A-Z])(?<!\b[A-Z]\.[A-Z])([.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n"
                       r"|\n(?=[ \t]*(?:#{1,6}|[-*+]|\d{1,3}[.)])[ \t])")  # a line that starts a heading or an item
# A line of Markdown's markup, never part of a sentence: an underline, a rule or a code fence (dropped), a
# heading (a sentence of its own)
_MARKUP_LINE = re.compile(r"[ \t]*(?:(?P<rule>[=\-*_~]{3,}|`{3,}[\w+-]*)|#{1,6}[ \t][^\n]*)[ \t]*")


# A heading line (Markdown's #), or a short line without a stop, a digit or a colon that a blank line follows (a
# plain text's title): no statement to quote
_HEADING = re.compile(r"#{1,6}[ \t]")
_TITLE_WORDS = 10
_PRONOUN_OPENING = re.compile(r"(?:It|Its|They|Their|He|His|She|Her|This|These)\b")


def _is_title(text: str, start: int, end: int) -> bool:
    piece = text[start:end]
    if _HEADING.match(piece):
        return True
    return ("\n" not in piece and piece[-1:] not in ".!?:;\"')" and not re.search(r"[\d:]", piece)
            and len(piece.split()) <= _TITLE_WORDS and re.match(r"[ \t]*\n[ \t]*\n", text[end:]) is not None)


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
    longer than ``MAX_SENTENCE_CHARS`` (a table, a list without stops) is taken line by line, a longer line
    in pieces of that size."""
    spans, start = [], 0
    for found in _BOUNDARY.finditer(text):
        spans.append((start, found.start() + len(found.group(1) or "")))
        start = found.end()
    spans.append((start, len(text)))
    lines = []
    for begin, end in spans:
        if end - begin > MAX_SENTENCE_CHARS:
            for line in re.finditer(r"[^\n]+", text[begin:end]):
                lines += _cut(text, begin + line.start(), begin + line.end())
        else:
            lines += _without_markup(text, begin, end)
    stripped = []
    for begin, end in lines:
        piece = text[begin:end]
        left, right = len(piece) - len(piece.lstrip()), len(piece.rstrip())
        if right > left:
            stripped.append((begin + left, begin + right))
    return stripped


def _cut(text: str, begin: int, end: int) -> list[tuple[int, int]]:
    """``begin..end`` in pieces of at most ``MAX_SENTENCE_CHARS``, cut after a space where there is one (a
    line without stops is not one sentence of any length)."""
    pieces = []
    while end - begin > MAX_SENTENCE_CHARS:
        space = text.rfind(" ", begin + 1, begin + MAX_SENTENCE_CHARS)
        cut = space + 1 if space > begin else begin + MAX_SENTENCE_CHARS
        pieces.append((begin, cut))
        begin = cut
    return [*pieces, (begin, end)]


def _without_markup(text: str, begin: int, end: int) -> list[tuple[int, int]]:
    """``begin..end`` cut at its lines of Markdown markup: rules, underlines and fences left out, a heading
    kept as a piece of its own."""
    pieces, start = [], begin
    for line in re.finditer(r"[^\n]*", text[begin:end]):
        found = _MARKUP_LINE.fullmatch(line.group())
        if found is None:
            continue
        line_start, line_end = begin + line.start(), begin + line.end()
        pieces.append((start, line_start))
        if found.group("rule") is None:
            pieces.append((line_start, line_end))
        start = line_end
    pieces.append((start, end))
    return [(a, b) for a, b in pieces if b > a]


def answering_sentences(question: str, collection: str, passages: Sequence[Passage],
                        index: PassageIndex) -> tuple[list[Sentence], list[str]]:
    """The :func:`best_sentences` of ``passages`` (empty when the question names something, a proper name
    or a number, that no passage of the collection mentions: the documents cannot answer a question about
    what they never name) and those names."""
    sentences = best_sentences(question, [p.text for p in passages], index.embedder)
    unmentioned = index.unmentioned(collection, named_words(question)) if sentences else []
    return ([] if unmentioned else sentences), unmentioned


def best_sentences(question: str, passages: Sequence[str], embedder: PassageEmbedder) -> list[Sentence]:
    """The sentences of ``passages`` that answer ``question``, best first (at most ``MAX_SENTENCES``);
    empty when none holds enough of it. A heading or a title line states nothing: it is no candidate. A
    sentence that opens with a pronoun ("It was completed in 1869") holds the words of the sentence before it
    too, whose subject the pronoun names."""
    asked = terms(question)
    candidates = [(number, start, end, text[start:end]) for number, text in enumerate(passages)
                  for start, end in sentence_spans(text) if not _is_title(text, start, end)]
    if not asked or not candidates:
        return []
    held = [terms(sentence) for *_, sentence in candidates]
    for i in range(1, len(candidates)):
        if candidates[i][0] == candidates[i - 1][0] and _PRONOUN_OPENING.match(candidates[i][3]):
            held[i] = held[i] | terms(candidates[i - 1][3])
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
    chosen = [s for s in scored[:MAX_SENTENCES] if s.score >= SECOND_SENTENCE * scored[0].score] if scored else []
    first = chosen[0].passage if chosen else None
    return sorted(chosen, key=lambda s: (s.passage != first, s.start))  # one passage's sentences in its order


Span = tuple[int, str, int, int]  # an answer's mark, the chunk, the offset and length of the sentence in its text


def used_passages(sentences: list[Sentence]) -> list[int]:
    """The positions of the passages the sentences come from, in the sentences' order."""
    return list(dict.fromkeys(s.passage for s in sentences))


def extractive_passage_answer(sentences: list[Sentence], chunks: Sequence[str],
                              used: list[int]) -> tuple[str, list[Span]]:
    """The sentences as the answer (``NO_PASSAGE_ANSWER`` without any), each marked with its passage's
    number among ``used`` (positions in ``chunks``, the candidates' chunk IRIs); and their spans."""
    if not sentences:
        return NO_PASSAGE_ANSWER, []
    pieces, spans = [], []
    for sentence in sentences:
        mark = used.index(sentence.passage) + 1
        text = " ".join(sentence.text.split())  # the source's line breaks and indentation are not the answer's
        stop = len(text) - 1 if text[-1:] in ".!?" else len(text)
        pieces.append(f"{text[:stop]} [{mark}]{text[stop:]}")
        spans.append((mark, chunks[sentence.passage], sentence.start, sentence.end - sentence.start))
    return " ".join(pieces), spans


def cited_spans(text: str, passages: Sequence[tuple[str, str]], first: int = 1) -> list[Span]:
    """``(mark, chunk, offset, length)`` of each passage sentence that a model's answer ``text`` rests on:
    for each ``[n]`` of each sentence, the sentence of passage ``n`` (``passages`` are ``(chunk, text)``,
    numbered from ``first``) sharing the most content words with it."""
    spans = []
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        for mark in dict.fromkeys(int(n) for n in MARK.findall(sentence)):
            if first <= mark < first + len(passages):
                chunk, passage = passages[mark - first]
                if span := supporting_span(MARK.sub("", sentence), passage):
                    spans.append((mark, chunk, span[0], span[1] - span[0]))
    return spans


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

