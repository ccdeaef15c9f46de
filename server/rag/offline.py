"""The ``offline`` LLM: deterministic, no network.

Selection is the deterministic selector of ``server.rag.chains`` (the question's relations followed
as chains from the entities it names, each edge with a sentence saying why). The answer is
extractive: one sentence per group of the selected edges sharing subject and predicate (or
predicate and object).
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

from server.rag import chains
from server.rag.llm import NO_ANSWER, Edge
from server.rag.relations import Aliases
from server.rag.text import lemma

PIECE_WORDS = 4  # words per streamed piece of the answer

_PREPOSITIONS = frozenset("at by for from in into of on to with".split())


class OfflineLLM:
    """The deterministic selection and an extractive answer; same input, same output."""

    model = "offline"
    context_tokens = None  # no model: every retrieved edge is read
    deterministic = True  # its selection is the deterministic selector's, and is named so
    waits = False  # it answers in-process at once: a streamed answer needs no keep-alive thread

    def select(self, question: str, edges: list[tuple[str, Edge]], aliases: Aliases | None = None) -> str:
        """The chosen edges as JSONL; nothing when the graph does not answer the question."""
        return "\n".join(json.dumps({"id": edge_id, "reasoning": reasoning}, ensure_ascii=False)
                         for edge_id, reasoning in chains.choose(question, edges, aliases).chosen)

    def answer(self, question: str, edges: list[Edge]) -> Iterator[str]:
        text = extractive_answer(edges)
        words = text.split(" ")
        for start in range(0, len(words), PIECE_WORDS):
            piece = " ".join(words[start : start + PIECE_WORDS])
            yield piece if start + PIECE_WORDS >= len(words) else piece + " "


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def extractive_answer(edges: list[Edge], numbers: list[int] | None = None) -> str:
    """One sentence per subject and predicate with its objects joined, or per predicate and single
    object with its subjects joined, told from that object ("France is the border of Italy, Spain and
    Germany.": a chain reached them from France; "Heat and Thief were directed by Michael Mann."), in edge order,
    each with ``[n]`` marks naming the edges it rests on (1-based, in the order given: the selection's; or
    ``numbers``, an edge's number each, when the edges are some of the selection's).
    An edge whose reverse (same predicate) is already stated is left out: a symmetric fact such as
    ``borders`` is told once, marked with both, from the entity in most such pairs ("The borders of France
    are Italy, Spain and Germany.", however the chain reached them)."""
    if not edges:
        return NO_ANSWER
    given = set(edges)
    pairs = Counter((s, p) for s, p, o in given if (o, p, s) in given)
    by_subject: dict[tuple[str, str], tuple[list[str], list[int]]] = {}
    stated: dict[Edge, tuple[str, str]] = {}
    for number, (s, p, o) in zip(numbers or range(1, len(edges) + 1), edges, strict=True):
        if pairs[(o, p)] > pairs[(s, p)]:
            s, o = o, s
        if (s, p, o) in stated or (o, p, s) in stated:
            by_subject[stated.get((s, p, o)) or stated[(o, p, s)]][1].append(number)
            continue
        stated[(s, p, o)] = (s, p)
        objects, numbers = by_subject.setdefault((s, p), ([], []))
        numbers.append(number)
        if o not in objects:
            objects.append(o)
    groups: dict[tuple[str, ...], tuple[list[str], str, list[str], list[int]]] = {}
    for (s, p), (objects, numbers) in by_subject.items():
        key = ("one", p, objects[0]) if len(objects) == 1 else ("many", s, p)
        group = groups.setdefault(key, ([], p, objects, []))
        group[0].append(s)
        group[3].extend(numbers)
    return " ".join(_marked(_sentence(subjects, p, objects), numbers)
                    for subjects, p, objects, numbers in groups.values())


def _marked(sentence: str, numbers: list[int]) -> str:
    """``"The capital of France is Paris [1]."``: the marks before the sentence's last stop."""
    marks = "".join(f"[{n}]" for n in sorted(set(numbers)))
    return f"{sentence[:-1]} {marks}{sentence[-1]}"


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
        if several and len(objects) == 1:  # from the value the subjects share, as a chain reaches them
            words[head] = lemma(words[head]) if plural else words[head]
            return f"{obj[:1].upper()}{obj[1:]} is the {' '.join(words)} of {subject}."
        if len(objects) > 1 and not plural:
            words[head], plural = _plural(words[head]), True
        sentence = f"The {' '.join(words)} of {subject} {'are' if plural else 'is'} {obj}"
    return sentence + ("" if sentence.endswith((".", "!", "?")) else ".")


def _plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u", ""):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh", "z")) else "s")
