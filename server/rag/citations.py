"""The ``[n]`` marks of an answer: each names the selected edge it rests on (1-based, in selection order).
The offline synthesizer writes them; a model is asked for them (``templates/prompts/synthesize.j2``) and
its marks are checked here: a number that names no selected edge is invalid."""
from __future__ import annotations

import re

MARK = re.compile(r"\[(\d{1,6})\]")


def citations(text: str, edge_count: int) -> tuple[list[int], list[int]]:
    """The distinct numbers the answer cites, in order of first mention: ``(valid, invalid)``."""
    numbers = list(dict.fromkeys(int(found) for found in MARK.findall(text)))
    return [n for n in numbers if 1 <= n <= edge_count], [n for n in numbers if not 1 <= n <= edge_count]
