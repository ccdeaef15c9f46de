"""Tolerant parsing of the LLM's edge selection: JSON Lines of ``{"id": ..., "reasoning": ...}``.

LLMs wrap JSONL in code fences, add prose, break lines, invent or repeat ids and forget fields, and
small ones give the edge's place in the list for its id (``{"id": 1, ...}``). The parser finds every
JSON object in the text (whole objects first, then a regex salvage of broken ones), keeps the ids
that exist (or the place of one), the first occurrence of each, in the order given.
"""
from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator

from server.rag.text import one_line

_ID_KEYS = ("id", "edge_id", "edge")
_DECODER = json.JSONDecoder()
# Salvage of objects that do not parse as JSON (truncated lines, single quotes, leading zeros).
_ID_RE = re.compile(r"""["']?\b(?:edge_id|id)\b["']?\s*:\s*(?:"([^"\n]*)"|'([^'\n]*)'|(\d+))""")
_REASON_RE = re.compile(r"""["']?\breasoning["']?\s*:\s*(?:"((?:[^"\\\n]|\\.)*)"?|'([^'\n]*)'?)""")


def parse_selection(text: str, valid_ids: Collection[str]) -> list[tuple[str, str]]:
    """``(id, reasoning)`` pairs for the ids in ``valid_ids``, first occurrence wins, in text order.

    Ids are matched after trimming and case-folding (numbers count as their digits); a number that is
    no valid id but a position in the list (1-based, as small models number it) names the edge there;
    a missing reasoning is the empty string.
    """
    canonical = {str(v).strip().casefold(): v for v in valid_ids}
    numbered = {str(n): v for n, v in enumerate(valid_ids, start=1) if str(n) not in canonical}
    chosen: dict[str, str] = {}
    for _, raw_id, reasoning in sorted(_candidates(text), key=lambda c: c[0]):
        key = raw_id.strip().casefold()
        edge_id = canonical.get(key, numbered.get(key))
        if edge_id is not None and edge_id not in chosen:
            chosen[edge_id] = reasoning
    return list(chosen.items())


def _candidates(text: str) -> Iterator[tuple[int, str, str]]:
    """``(position, id, reasoning)`` for every selection-like object in ``text``."""
    covered: list[tuple[int, int]] = []
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        covered.append((pos, end))
        for entry in _selections(value):
            yield pos, *entry
        pos = text.find("{", end)
    yield from _salvage(text, covered)


def _selections(value: object) -> Iterator[tuple[str, str]]:
    """Selection entries in a decoded JSON value, nested lists and wrapper objects included."""
    if isinstance(value, dict):
        raw_id = next((value[k] for k in _ID_KEYS if k in value), None)
        if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool):
            yield str(raw_id), _reasoning_text(value.get("reasoning"))
            return
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return
    for child in children:
        yield from _selections(child)


def _reasoning_text(value: object) -> str:
    if value is None:
        return ""
    return one_line(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _salvage(text: str, covered: list[tuple[int, int]]) -> Iterator[tuple[int, str, str]]:
    """Ids and reasonings found by pattern in the parts of ``text`` that did not parse as JSON.

    Each ``{`` starts a fragment; within one, an id owns the text up to the next id (the first id
    also the text before it), and the reasoning is looked for there.
    """
    bounds = [0] + [b for span in covered for b in span] + [len(text)]
    for begin, end in zip(bounds[::2], bounds[1::2], strict=True):
        for fragment in re.finditer(r"[^{]+|\{[^{]*", text[begin:end]):
            ids = list(_ID_RE.finditer(fragment.group()))
            for i, match in enumerate(ids):
                lo = match.start() if i else 0
                hi = ids[i + 1].start() if i + 1 < len(ids) else len(fragment.group())
                reason = _REASON_RE.search(fragment.group(), lo, hi)
                raw_id = next(g for g in match.groups() if g is not None)
                yield begin + fragment.start() + match.start(), raw_id, _unescape(reason)


def _unescape(match: re.Match[str] | None) -> str:
    if match is None:
        return ""
    text, raw = match.group(2), match.group(1)
    if text is None:
        try:
            text = json.loads(f'"{raw}"')
        except ValueError:
            text = raw.replace('\\"', '"')
    return one_line(text)
