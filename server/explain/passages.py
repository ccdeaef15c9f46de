"""Where a fact sits in its source passage: the span the source viewer highlights."""
from __future__ import annotations

import re
from collections.abc import Sequence


def fact_span(text: str, labels: Sequence[str]) -> tuple[int, int] | None:
    """The line of ``text`` (a chunk: in the sample one Factbook field per line, "name: Paris") holding the
    first of ``labels`` found as whole words, case-insensitively, without its surrounding white space, as
    ``(start, end)`` character offsets; None when no label is in the text."""
    for label in labels:
        words = label.split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(word) for word in words)
        found = re.search(rf"(?<!\w){pattern}(?!\w)", text, re.IGNORECASE)
        if found:
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            end = len(text) if end < 0 else end
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            return start, end
    return None
