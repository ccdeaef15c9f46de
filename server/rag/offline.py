"""The ``offline`` LLM: deterministic, no network.

Selection scores edges by the question words their labels cover (lightly lemmatized, stopwords
removed): the edges covering the most question words win, more of them in the predicate, then in
the subject first; edges one step further from those that cover the words still missing are added
(multi-hop questions). Each selected edge gets a sentence saying which question words it matched. The answer
is extractive: one sentence per group of the selected edges sharing subject and predicate (or
predicate and object).
"""
from __future__ import annotations

import json
from collections.abc import Iterator

from server.rag.llm import Edge
from server.rag.text import lemma, term_words, terms

MAX_DIRECT = 12  # edges that match the question best (all of a list answer, within reason)
MAX_CHAINED = 5  # edges one step further that cover question words the first ones miss
PIECE_WORDS = 4  # words per streamed piece of the answer

_PREPOSITIONS = frozenset("at by for from in into of on to with".split())


class OfflineLLM:
    """Lexical selection with a reason per edge and an extractive answer; same input, same output."""

    model = "offline"

    def select(self, question: str, edges: list[tuple[str, Edge]]) -> str:
        words = term_words(question)
        asked = set(words)
        scored = []
        for edge_id, (s, p, o) in edges:
            s_terms, p_terms, o_terms = terms(s), terms(p), terms(o)
            edge_terms = s_terms | p_terms | o_terms
            covered = asked & edge_terms
            extra = len(edge_terms - asked)
            # Most question words covered, then in the predicate, then in the subject ("capital of France").
            key = (-len(covered), -len(asked & p_terms), -len(asked & s_terms), extra, s, p, o, edge_id)
            scored.append((key, edge_id, (s, p, o), covered))
        scored.sort(key=lambda item: item[0])
        best = len(scored[0][3]) if scored else 0
        if best == 0:
            return ""
        direct = [item for item in scored if len(item[3]) == best][:MAX_DIRECT]
        lines = [_line(edge_id, _direct_reason(words, covered, edge)) for _, edge_id, edge, covered in direct]

        missing = asked - set().union(*(item[3] for item in direct))
        reached = {label.casefold() for _, _, (s, _, o), _ in direct for label in (s, o)}
        chosen = {item[1] for item in direct}
        chained = sorted(
            (
                (-len(covered & missing), key, edge_id, edge, covered & missing)
                for key, edge_id, edge, covered in scored
                if edge_id not in chosen and covered & missing and {edge[0].casefold(), edge[2].casefold()} & reached
            ),
            key=lambda item: item[:2],
        )
        for _, _, edge_id, edge, new in chained[:MAX_CHAINED]:
            via = edge[0] if edge[0].casefold() in reached else edge[2]
            lines.append(_line(edge_id, _chained_reason(words, new, edge, via)))
        return "\n".join(lines)

    def answer(self, question: str, edges: list[Edge]) -> Iterator[str]:
        text = extractive_answer(edges)
        words = text.split(" ")
        for start in range(0, len(words), PIECE_WORDS):
            piece = " ".join(words[start : start + PIECE_WORDS])
            yield piece if start + PIECE_WORDS >= len(words) else piece + " "


def _line(edge_id: str, reasoning: str) -> str:
    return json.dumps({"id": edge_id, "reasoning": reasoning}, ensure_ascii=False)


def _quoted(words: dict[str, str], lemmas: set[str]) -> str:
    return _join([f"'{surface}'" for key, surface in words.items() if key in lemmas])


def _direct_reason(words: dict[str, str], covered: set[str], edge: Edge) -> str:
    s, p, o = edge
    return f"The question asks about {_quoted(words, covered)}; this edge links {s} to {o} by '{p}'."


def _chained_reason(words: dict[str, str], new: set[str], edge: Edge, via: str) -> str:
    s, p, o = edge
    return (
        f"The question also asks about {_quoted(words, new)}; this edge links {s} to {o} by '{p}', "
        f"continuing from {via}, which a better-matching edge reached."
    )


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def extractive_answer(edges: list[Edge]) -> str:
    """One sentence per subject and predicate with its objects joined, or per predicate and single
    object with its subjects joined ("The currency of Austria and Belgium is euro."), in edge order.
    An edge whose reverse (same predicate) is already stated is left out: a symmetric fact such as
    ``borders`` is told once."""
    if not edges:
        return "The knowledge graph has no facts that answer this question."
    by_subject: dict[tuple[str, str], list[str]] = {}
    stated: set[Edge] = set()
    for s, p, o in edges:
        if (o, p, s) in stated:
            continue
        stated.add((s, p, o))
        objects = by_subject.setdefault((s, p), [])
        if o not in objects:
            objects.append(o)
    groups: dict[tuple[str, ...], tuple[list[str], str, list[str]]] = {}
    for (s, p), objects in by_subject.items():
        key = ("one", p, objects[0]) if len(objects) == 1 else ("many", s, p)
        groups.setdefault(key, ([], p, objects))[0].append(s)
    return " ".join(_sentence(subjects, p, objects) for subjects, p, objects in groups.values())


def _sentence(subjects: list[str], predicate: str, objects: list[str]) -> str:
    """"The capital of France is Paris.", "Heat and Thief were directed by Michael Mann.", ..."""
    words = predicate.replace("_", " ").split() or ["related to"]
    if words[0][:1].isupper() and words[0][1:2].islower():  # "Capital" -> "capital", "GDP" stays
        words[0] = words[0][:1].lower() + words[0][1:]
    phrase, subject, obj, several = " ".join(words), _join(subjects), _join(objects), len(subjects) > 1
    if len(words) > 1 and words[-1].casefold() == "by":
        sentence = f"{subject} {'were' if several else 'was'} {phrase} {obj}"
    elif len(words) > 1 and words[-1].casefold() in _PREPOSITIONS:
        sentence = f"{subject} {'are' if several else 'is'} {phrase} {obj}"
    else:
        if len(words) > 1 and words[0].casefold() in _PREPOSITIONS | {"has", "have"}:
            words = words[1:]
        head = words.index("of") - 1 if "of" in words[1:] else len(words) - 1  # "chief of state": "chief"
        plural = lemma(words[head]) != words[head].casefold()
        if len(objects) > 1 and not plural:
            words[head], plural = _plural(words[head]), True
        sentence = f"The {' '.join(words)} of {subject} {'are' if plural else 'is'} {obj}"
    return sentence + ("" if sentence.endswith((".", "!", "?")) else ".")


def _plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u", ""):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh", "z")) else "s")
