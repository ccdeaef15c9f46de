"""The recursive splitter: exact offsets, coverage, bounds and order, and where it prefers to cut."""
from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from server.ingest.chunking import Span, TooManyChunks, split

PROPERTY = settings(max_examples=400, deadline=None)

# Pieces that exercise every level of cut: paragraph breaks, line ends (LF, CRLF, CR), sentence ends
# (with closing quotes, CJK full stops), spaces of several kinds, and words too long for any chunk.
FRAGMENTS = st.one_of(
    st.sampled_from(["a", "word", "é", "日本", "🙂", " ", "  ", "\t", "\u3000", "\u00a0", "\n", "\n\n", "\r\n",
                     "\r\n\r\n", "\r", " \n \n ", ". ", "! ", "?\n", '." ', "\u3002", "\u2028", "\f"]),
    st.text(alphabet="xyz", min_size=5, max_size=70),
)
TEXTS = st.one_of(st.lists(FRAGMENTS, max_size=60).map("".join), st.text(max_size=300))


@st.composite
def size_and_overlap(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(min_value=1, max_value=80))
    return size, draw(st.integers(min_value=0, max_value=size - 1))


def check_chunks(text: str, spans: list[Span], size: int, overlap: int) -> None:
    """Bounds, trimming, order, overlap and coverage of every character that is not white space."""
    covered = [0] * (len(text) + 1)
    previous: Span | None = None
    for span in spans:
        assert 0 <= span.offset and span.offset + span.length <= len(text)
        assert 1 <= span.length <= size
        chunk = text[span.offset:span.offset + span.length]
        assert chunk == chunk.strip(), f"{chunk!r} is not trimmed"
        if previous is not None:
            assert span.offset > previous.offset
            assert span.offset + span.length > previous.offset + previous.length
            assert previous.offset + previous.length - span.offset <= overlap
        covered[span.offset] += 1
        covered[span.offset + span.length] -= 1
        previous = span
    depth = 0
    for index, character in enumerate(text):
        depth += covered[index]
        assert depth > 0 or character.isspace(), f"{character!r} at {index} is in no chunk"


@PROPERTY
@given(TEXTS, size_and_overlap())
@example("a\r\n\r\nb", (1, 0))
@example("x" * 25, (10, 3))
@example(" word. word!  word\n\n\nword ", (6, 5))
@example("a b c d e fffffffff", (10, 8))  # no overlap: the long next piece would not fit after it
def test_chunks_are_exact_trimmed_ordered_and_cover_the_text(text: str, size_overlap: tuple[int, int]) -> None:
    size, overlap = size_overlap
    check_chunks(text, split(text, size, overlap), size, overlap)


@PROPERTY
@given(TEXTS, size_and_overlap(), st.integers(0, 40))
def test_a_limit_is_met_while_splitting_never_past_it(text: str, size_overlap: tuple[int, int], limit: int) -> None:
    """With a limit, the chunks are the same when there are at most that many, else TooManyChunks, raised
    as the first one past it is found (the splitter never holds more: ``_Ranges``)."""
    size, overlap = size_overlap
    spans = split(text, size, overlap)
    if len(spans) <= limit:
        assert split(text, size, overlap, limit=limit) == spans
    else:
        with pytest.raises(TooManyChunks, match=f"more than {limit} chunks"):
            split(text, size, overlap, limit=limit)


@PROPERTY
@given(TEXTS)
def test_a_text_that_fits_is_one_chunk_its_trimmed_self(text: str) -> None:
    spans = split(text, size=max(1, len(text)), overlap=0)
    if text.strip():
        assert len(spans) == 1
        assert text[spans[0].offset:spans[0].offset + spans[0].length] == text.strip()
    else:
        assert spans == []


def chunk_texts(text: str, size: int, overlap: int) -> list[str]:
    return [text[span.offset:span.offset + span.length] for span in split(text, size, overlap)]


def test_blank_text_has_no_chunks() -> None:
    assert split("") == []
    assert split(" \n\t\r\n\u3000 ") == []


def test_paragraphs_are_kept_whole_when_they_fit() -> None:
    first, second = "The first paragraph is here.", "And the second one follows it."
    text = f"{first}\n\n{second}\n"
    assert chunk_texts(text, size=40, overlap=0) == [first, second]
    assert chunk_texts(text, size=len(text), overlap=0) == [text.strip()]


def test_a_paragraph_too_long_is_cut_at_line_ends_then_sentence_ends() -> None:
    lines = "Line one is short.\nLine two is short too."
    assert chunk_texts(lines, size=25, overlap=0) == ["Line one is short.", "Line two is short too."]
    sentences = "One sentence here. Another one there! A third? And \u201cquoted.\u201d Last"
    assert chunk_texts(sentences, size=20, overlap=0) == [
        "One sentence here.", "Another one there!", "A third?", "And \u201cquoted.\u201d Last"]


def test_a_sentence_too_long_is_cut_at_spaces() -> None:
    text = "alpha beta gamma delta epsilon"
    chunks = chunk_texts(text, size=12, overlap=0)
    assert chunks == ["alpha beta", "gamma delta", "epsilon"]


def test_a_word_longer_than_a_chunk_is_cut_into_windows_that_overlap() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(25))
    assert split(text, size=10, overlap=3) == [Span(0, 10), Span(7, 10), Span(14, 10), Span(21, 4)]


def test_consecutive_chunks_share_their_last_whole_words() -> None:
    words = [f"w{i}" for i in range(60)]
    text = " ".join(words)
    spans = split(text, size=30, overlap=10)
    shared = []
    for previous, span in pairwise(spans):
        end = previous.offset + previous.length
        assert 0 < end - span.offset <= 10
        shared.append(text[span.offset:end])
    assert all(set(part.split()) <= set(words) for part in shared)  # whole words, never a word's tail
    assert all(text[span.offset - 1] == " " for span in spans[1:])


def test_the_overlap_leaves_room_for_the_next_piece() -> None:
    # The next piece (18 characters) could not follow a 10-character overlap within 20: no overlap then.
    text = "aaaa bbbb cccc dddd " + "e" * 18
    assert chunk_texts(text, size=20, overlap=10) == ["aaaa bbbb cccc dddd", "e" * 18]


def test_defaults_fill_chunks_up_to_two_thousand_characters() -> None:
    sentence = "This sentence has exactly forty-eight characters. "
    text = sentence * 200  # 10,000 characters, one paragraph
    spans = split(text)
    check_chunks(text, spans, 2000, 100)
    assert all(2000 - len(sentence) < span.length <= 2000 for span in spans[:-1])
    assert all(text[span.offset:].startswith("This") for span in spans)


def test_offsets_count_code_points_of_the_text() -> None:
    text = "🙂 é\n\nnext"
    first, second = split(text, size=4, overlap=0)
    assert text[first.offset:first.offset + first.length] == "🙂 é"
    assert (second.offset, second.length) == (5, 4)


@pytest.mark.parametrize(("size", "overlap", "wrong"), [
    (0, 0, "size must be at least 1"),
    (-5, 0, "size must be at least 1"),
    (10, -1, "overlap must be at least 0"),
    (10, 10, "less than the chunk size 10"),
    (10, 50, "less than the chunk size 10"),
])
def test_impossible_sizes_are_value_errors(size: int, overlap: int, wrong: str) -> None:
    with pytest.raises(ValueError, match=wrong):
        split("some text", size, overlap)
