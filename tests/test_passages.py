"""The fact span the source viewer highlights (``fact_span``): whole words, case-insensitively, any white
space between them, over generated labels and texts, compared with the regular expression it replaced
(which said the same in time proportional to the text times the label); and its memory, proportional to
the text whatever the label. Its time is measured in bench/hostile_inputs.py."""
from __future__ import annotations

import re
import tracemalloc

from hypothesis import example, given, settings
from hypothesis import strategies as st

from server.explain.passages import MAX_TEXT, fact_span

PROPERTY = settings(max_examples=500, deadline=None)
ALPHABET = "aAb0_.,-( \n\t\x02é"  # word characters of both cases, punctuation, white space, the internal mark
TEXTS = st.text(ALPHABET, max_size=60)
LABELS = st.lists(st.text(ALPHABET, max_size=8), max_size=3)


def regex_span(text: str, labels: list[str]) -> tuple[int, int] | None:
    """The span as the regular expression found it (fine on these small texts)."""
    for label in labels:
        words = label.split()
        if not words:
            continue
        found = re.search(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", text, re.IGNORECASE)
        if found:
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            line = text[start:len(text) if end < 0 else end]
            return start + len(line) - len(line.lstrip()), start + len(line.rstrip())
    return None


def word_edged(label: str) -> str:
    """A label that starts and ends with a word character (fact_span does not look for outer punctuation)."""
    return re.sub(r"^\W+|\W+$", "", label)


@PROPERTY
@given(TEXTS, LABELS)
@example("Paris\nThe capital is  PARIS,\tsurely", ["paris"])
@example("0 0 0 0 0 0 X\n0 0 0", ["0 0 0 X"])
@example("a-b a - b", ["a - b"])
def test_the_span_is_the_line_of_the_first_label_found_as_whole_words(text: str, labels: list[str]) -> None:
    labels = [word_edged(label) for label in labels]
    assert fact_span(text, labels) == regex_span(text, labels)


@PROPERTY
@given(st.integers(1, 2_000), st.integers(1, 300), st.sampled_from(["0", "ab", "a-b", "x_y"]),
       st.sampled_from([" ", "\n", "  ", " .\n"]))
def test_memory_is_proportional_to_the_text_whatever_the_label(repeats: int, words: int, word: str,
                                                               space: str) -> None:
    """Texts of one word repeated (number tables, dot leaders) and labels of that word many times then
    another: the worst case of the regular expression. Memory stays within a fixed multiple of the text's."""
    text = (word + space) * repeats
    label = " ".join([word] * words + ["X"])
    tracemalloc.start()
    try:
        fact_span(text, [label, word])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 16 * 4 * len(text) + len(label) * 16 + 256 * 1024


def test_a_text_past_the_searched_length_is_not_searched_past_it() -> None:
    text = "a\n" * (MAX_TEXT // 2) + "needle\n"
    assert fact_span(text, ["needle"]) is None
    assert fact_span("needle\n" + text, ["needle"]) == (0, 6)
