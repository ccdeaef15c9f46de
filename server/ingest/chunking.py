"""Splitting a page's text into chunks whose offsets index the text exactly.

A recursive splitter in the manner of LangChain's ``RecursiveCharacterTextSplitter`` (which TrustGraph
uses): the text is cut at paragraph breaks into pieces, pieces longer than ``size`` at line breaks, then
after sentence ends, then at spaces, then anywhere. Consecutive pieces are merged into chunks of at most
``size`` characters, and a chunk starts with the last pieces of the one before, at most ``overlap``
characters of them (leaving room for the next piece). Chunks are ``(start, end)`` ranges of the one text,
never copies, so a chunk's text is exactly ``text[span.offset:span.offset + span.length]``. Every
separator is white space (or nothing, after a CJK full stop), so every other character is in a chunk;
chunks are trimmed of white space and come in increasing offset order.

The work is per chunk, not per piece: the end of a chunk is the last separator within ``size`` characters
of its start, found in one regular-expression match, so a text of many tiny pieces splits as fast as prose.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Span:
    offset: int  # in the page's text, in code points (Python's str indexes)
    length: int


# The cuts, from the coarsest to the finest: each is white space, ending before a non-space character (or
# the end). Characters, the last resort, are cut by _cut_characters.
_CUTS = (
    r"\n[^\S\n]*\n\s*",  # a paragraph break: a run of white space with a blank line in it
    r"\n\s*",  # a line break
    r"(?:(?<=[.!?])|(?<=[.!?][\"')\]\u201d\u2019]))\s+|(?<=[\u3002\uff01\uff1f])\s*",  # after a sentence end
    r"\s+",  # a space
)
# The same cuts as group 1 of patterns that search fast (a pattern that opens with a lookbehind is tried at
# every position, one that opens with a character class is not).
_SEARCHES = tuple(re.compile(pattern) for pattern in (
    rf"({_CUTS[0]})",
    rf"({_CUTS[1]})",
    r"(?:[.!?][\"')\]\u201d\u2019]?(?=\s)|[\u3002\uff01\uff1f])(\s*)",
    rf"({_CUTS[3]})",
))
_NON_SPACE = re.compile(r"\S")


@lru_cache(maxsize=64)
def _last_cut(level: int, size: int) -> re.Pattern[str]:
    """Matched at a chunk's start: group 1 runs to the start of the last separator within ``size``
    characters (and at least one character on)."""
    return re.compile(rf"(?s:(.{{1,{size}}}))(?:{_CUTS[level]})")


class TooManyChunks(Exception):
    """The text makes more chunks than the ``limit`` given to :func:`split` (found while splitting)."""


class _Ranges(list):
    """The chunks found so far; one past ``limit`` is refused as it is found, so that memory never
    holds more than ``limit`` of them (chunk size 1 over 3 MB of text would make 3 million)."""

    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self.limit = limit

    def append(self, item: tuple[int, int]) -> None:
        if self.limit is not None and len(self) >= self.limit:
            raise TooManyChunks(f"the text makes more than {self.limit} chunks")
        super().append(item)


def split(text: str, size: int = 2000, overlap: int = 100, limit: int | None = None) -> list[Span]:
    """The chunks of ``text``: at most ``size`` characters each, consecutive ones sharing at most
    ``overlap``; ``[]`` for blank text. ``ValueError`` unless ``1 <= size`` and ``0 <= overlap < size``;
    ``TooManyChunks`` as soon as a chunk past ``limit`` is found."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, not {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be at least 0 and less than the chunk size {size}, not {overlap}")
    first = _NON_SPACE.search(text)
    if first is None:
        return []
    ranges = _Ranges(limit)
    _split_range(text, first.start(), len(text.rstrip()), 0, size, overlap, ranges)
    spans = []
    for start, end in ranges:  # each starts on a non-space character; trailing white space goes
        spans.append(Span(start, len(text[start:end].rstrip())))
    return spans


def _split_range(text: str, start: int, end: int, level: int, size: int, overlap: int,
                 out: list[tuple[int, int]]) -> None:
    """Append to ``out`` the chunks of ``text[start:end]``, which starts on a non-space character, cut at
    separator ``level`` or finer."""
    if level == len(_CUTS):
        _cut_characters(start, end, size, overlap, out)
        return
    cut = _SEARCHES[level]
    chunk_start = start
    while end - chunk_start > size:
        last = _last_cut(level, size).match(text, chunk_start, end)
        if last is None:  # the piece at chunk_start is longer than size: cut it finer
            after = cut.search(text, chunk_start, end)
            _split_range(text, chunk_start, after.start(1) if after else end, level + 1, size, overlap, out)
            if after is None or after.end(1) >= end:
                return
            chunk_start = after.end(1)
            continue
        chunk_end, next_piece = last.end(1), last.end()
        out.append((chunk_start, chunk_end))
        if next_piece >= end:
            return
        following = cut.search(text, next_piece, end)
        following_end = following.start(1) if following else end
        # the next chunk starts at the first piece within the overlap that leaves room for the next piece
        earliest = max(chunk_end - overlap, following_end - size, chunk_start + 1)
        # (from earliest - 1: a cut found there ends at earliest or later, as each consumes a character first)
        back = cut.search(text, earliest - 1, chunk_end) if earliest < chunk_end else None
        chunk_start = back.end(1) if back and back.end(1) < chunk_end else next_piece
    out.append((chunk_start, end))


def _cut_characters(start: int, end: int, size: int, overlap: int, out: list[tuple[int, int]]) -> None:
    """Windows of ``size`` characters over a range with no white space, each ``overlap`` into the next."""
    step = size - overlap
    position = start
    while True:
        out.append((position, min(position + size, end)))
        if position + size >= end:
            return
        position += step
