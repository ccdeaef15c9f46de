"""How strongly a question word asks for a relation: by its letters first, by meaning second.

A *mention* is a content word of the question outside the entity names it contains. It matches a
relation label lexically (1.0) when a word of the label shares its lemma or a stem with it
("acted" ~ "starred actors", "directors" ~ "directed by", "screenwriter" ~ "written by": the
compound's "writer"), and semantically otherwise: the cosine of the word's vector and the label's
(or one of the label's words'), counted from ``SEMANTIC_FLOOR`` ("wrote" ~ "written by" 0.71,
"money" ~ "currency" 0.43; "film" ~ "starred actors" 0.34 is noise that the path scores of
``server.rag.chains`` outweigh).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from server.rag.embeddings import embedder
from server.rag.text import lemma, term_words

SEMANTIC_FLOOR = 0.3  # below it a similarity counts as no match
STEM = 4  # letters two words must share from their start to match by stem ("writ"er ~ "writ"ten)
_CACHE_SIZE = 20_000  # text -> vector entries kept across questions (relation labels repeat)


@dataclass(frozen=True)
class Mention:
    position: int  # index among the question's words
    word: str  # as the question spells it
    lemma: str


def stem_match(word: str, other: str) -> bool:
    """Same lemma, one a short whole prefix of the other ("act" ~ "actor"), a shared stem of
    ``STEM`` letters between words of five letters or more, or the same after a compound's head
    ("screenwriter" ~ "written")."""
    if word == other:
        return True
    if _prefix_match(word, other):
        return True
    return any(_prefix_match(word[cut:], other) for cut in range(3, len(word) - STEM + 1))


def _prefix_match(a: str, b: str) -> bool:
    shorter = min(len(a), len(b))
    if shorter < 3:
        return False
    common = 0
    while common < shorter and a[common] == b[common]:
        common += 1
    return common == shorter or (common >= STEM and shorter >= 5)


class _Vectors:
    """An LRU of text vectors shared by every question of the process."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, texts: list[str]) -> dict[str, np.ndarray]:
        with self._lock:
            found = {t: self._entries[t] for t in texts if t in self._entries}
            for text in found:
                self._entries.move_to_end(text)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            fresh = dict(zip(missing, embedder().embed(missing), strict=True))
            with self._lock:
                self._entries.update(fresh)
                while len(self._entries) > _CACHE_SIZE:
                    self._entries.popitem(last=False)
            found.update(fresh)
        return found


_VECTORS = _Vectors()


def relation_matches(mentions: list[Mention], relations: list[str]) -> dict[str, list[float]]:
    """For each relation label, one strength per mention (0 when it does not match)."""
    words = {relation: list(term_words(relation)) for relation in relations}
    texts = [m.word.casefold() for m in mentions]
    for relation, lemmas in words.items():
        texts.append(" ".join(lemmas) or relation.casefold())
        texts.extend(lemmas)
    vectors = _VECTORS.get(texts) if mentions and relations else {}
    result: dict[str, list[float]] = {}
    for relation, lemmas in words.items():
        strengths = []
        for mention in mentions:
            if any(stem_match(mention.lemma, other) for other in lemmas):
                strengths.append(1.0)
                continue
            own = vectors[mention.word.casefold()]
            names = [" ".join(lemmas) or relation.casefold(), *lemmas]
            similarity = max(float(own @ vectors[name]) for name in names)
            strengths.append(round(similarity, 3) if similarity >= SEMANTIC_FLOOR else 0.0)
        result[relation] = strengths
    return result


def mention_of(position: int, word: str) -> Mention:
    return Mention(position, word, lemma(word))
