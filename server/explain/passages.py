"""Where a fact sits in its source passage: the span the source viewer highlights.

A label is looked for as whole words, case-insensitively, any run of white space in the text standing
for the space between two of its words. A regular expression of the label's words joined by ``\\s+``
said that, but cost the text's length times the label's words ("0 0 ... 0 X" over a table of zeros:
seconds per request, holding the GIL). Here both the text and the label are rewritten in one
``str.translate`` each, so that the question becomes a plain substring search (linear, in C): every
character but a word character is wrapped in a boundary mark, the marks between two such characters
dropped and white space made one space. A word then stands between two marks exactly where it is a
whole word, and the label's marked form is found where its words are, whole, in that order.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import islice

MAX_TEXT = 1_000_000  # characters of a text searched for a label (the rest is shown, not searched)
MAX_LABEL = 10_000  # characters of a label looked for (a longer one is not)

_MARK = "\x02"
_WORD = re.compile(r"\w+")
_NON_SPACE = re.compile(r"\S")
_TABLE_SIZE = 65_536


class _Marked(dict):
    """``str.translate``'s table, filled on first sight of each character (up to ``_TABLE_SIZE`` of them):
    a word character (``\\w``) becomes its lower case (when that is one character, so that offsets keep),
    white space a marked space, any other character itself marked; the mark itself a marked U+FFFD."""

    def __missing__(self, code: int) -> int | str:
        char = chr(code)
        lower = char.lower() if len(char.lower()) == 1 else char
        if char.isalnum() or char == "_":
            value: int | str = ord(lower)
        elif char.isspace():
            value = f"{_MARK} {_MARK}"
        else:
            value = f"{_MARK}{chr(0xFFFD) if char == _MARK else lower}{_MARK}"
        if len(self) < _TABLE_SIZE:
            self[code] = value
        return value


_TABLE = _Marked()


def _marked(text: str) -> str:
    """``text`` lowered with a mark at each end of each word and every run of white space one space."""
    marked = text.translate(_TABLE).replace(_MARK + _MARK, "")
    while "  " in marked:  # each pass halves the runs
        marked = marked.replace("  ", " ")
    return marked


def _label_core(label: str) -> str:
    """The label's words, from its first word character to its last (its outer punctuation is not
    looked for); "" when it has none."""
    core = " ".join(label.split())
    first = _WORD.search(core)
    if first is None:
        return ""
    last = next(_WORD.finditer(core[::-1]))
    return core[first.start():len(core) - last.start()]


def _nth_word(text: str, number: int, start: int = 0) -> re.Match[str]:
    """The ``number``-th (from 0) run of word characters of ``text`` from ``start``."""
    return next(islice(_WORD.finditer(text, start), number, None))


def fact_span(text: str, labels: Sequence[str]) -> tuple[int, int] | None:
    """The line of ``text`` (a chunk: in the sample one Factbook field per line, "name: Paris") holding the
    first of ``labels`` found as whole words, case-insensitively, without its surrounding white space, as
    ``(start, end)`` character offsets; None when no label is in the text (or in its first ``MAX_TEXT``
    characters). Time is linear in the text and the labels."""
    searched = text[:MAX_TEXT]
    marked_text = None
    for label in labels:
        core = _label_core(label[:MAX_LABEL + 1])
        if not core or len(core) > MAX_LABEL:
            continue
        marked_text = marked_text if marked_text is not None else _marked(f" {searched} ")
        found = marked_text.find(f"{_MARK}{_marked(core)}{_MARK}")
        if found < 0:
            continue
        # marks before the found one: the first, then two per word; the label's words are as many
        words_before = (marked_text.count(_MARK, 0, found) - 1) // 2
        first = _nth_word(searched, words_before)
        last = _nth_word(searched, len(_WORD.findall(core)) - 1, first.start())
        start = text.rfind("\n", 0, first.start()) + 1
        end = text.find("\n", last.end())
        end = len(text) if end < 0 else end
        content = _NON_SPACE.search(text, start, end)
        if content is None:
            return None
        start = content.start()
        return start, start + len(text[start:end].rstrip())
    return None
