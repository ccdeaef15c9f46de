"""The ``[n]`` marks of an answer: each names the selected edge it rests on (1-based, in selection order).
The offline synthesizer writes them; a model is asked for them (``templates/prompts/synthesize.j2``) and
its marks are checked here: a number that names no selected edge is invalid. A model's sentences are
checked against their edges too (:func:`unsupported_sentences`)."""
from __future__ import annotations

import re

from server.rag.text import STOPWORDS, WORD, fold, words

MARK = re.compile(r"\[(\d{1,6})\]")


def citations(text: str, edge_count: int) -> tuple[list[int], list[int]]:
    """The distinct numbers the answer cites, in order of first mention: ``(valid, invalid)``."""
    numbers = list(dict.fromkeys(int(found) for found in MARK.findall(text)))
    return [n for n in numbers if 1 <= n <= edge_count], [n for n in numbers if not 1 <= n <= edge_count]


_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")


def unsupported_sentences(text: str, question: str, cited_edges: dict[int, tuple[str, str, str]],
                          selected: list[tuple[str, str, str]]) -> list[str]:
    """The sentences of an answer that name an entity or a value that neither the edges they cite
    (``cited_edges``: number -> labels) nor the selected edges nor the question hold.

    A sentence *names* its capitalized words (but its first, unless a capitalized word follows it: "Yes",
    "However") and its numbers; each must be a word of one of those labels (or of the question).
    """
    held = {word for edge in selected for label in edge for word in words(label)} | set(words(question))
    unsupported = []
    for found in _SENTENCE.finditer(text):
        sentence = found.group().strip()
        numbers = [int(n) for n in MARK.findall(sentence)]
        own = held | {word for n in numbers if n in cited_edges for label in cited_edges[n] for word in words(label)}
        named = named_words(MARK.sub(" ", sentence))
        if any(word not in own for word in named):
            unsupported.append(sentence)
    return unsupported


def named_words(sentence: str) -> list[str]:
    """The folded words of ``sentence`` that name something: capitalized or numbers (see above)."""
    tokens = WORD.findall(sentence)
    named = []
    for position, token in enumerate(tokens):
        capital = token[:1].isupper()
        if position == 0 and capital and not (len(tokens) > 1 and tokens[1][:1].isupper()):
            continue
        if (capital or token[:1].isdigit()) and fold(token) not in STOPWORDS:
            named.append(fold(token))
    return named
