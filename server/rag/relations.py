"""How strongly a question word asks for a relation: by its letters first, by meaning second.

A *mention* is a content word of the question outside the entity names it contains. It matches a
relation label lexically (1.0) when a word of the label shares its lemma or a stem with it
("acted" ~ "starred actors", "directors" ~ "directed by", "screenwriter" ~ "written by": the
compound's "writer"), and semantically otherwise: the cosine of the word's vector and the label's
(or one of the label's words'), counted from ``SEMANTIC_FLOOR``, or below it when the relation is
the one clearly closest to the word (``CLOSEST_FLOOR``, ``CLOSEST_MARGIN``) ("wrote" ~ "written by" 0.71,
"money" ~ "currency" 0.43; "film" ~ "starred actors" 0.34 is noise that the path scores of
``server.rag.chains`` outweigh).

A relation's other names (``skos:altLabel`` in the graph, ``Aliases``: relation label -> names)
are matched like its label: "what kind of film is X" asks for ``has genre`` when the vocabulary
says that a genre is also a "kind". A one-word alias that is a stopword ("about") makes that word a
mention (``alias_words``).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from server.rag.embeddings import embedder
from server.rag.text import STOPWORDS, WORD, fold, lemma, term_words

SEMANTIC_FLOOR = 0.3  # below it a similarity counts as no match
CLOSEST_FLOOR = 0.24  # a relation closest to a mention by this much and ...
CLOSEST_MARGIN = 0.11  # ... this far ahead of the next is asked for, at
CLOSEST_STRENGTH = 0.4  # this strength (a hop must gain chains.MIN_GAIN)
STEM_AGREEMENT = 0.3  # similarity that confirms a match by stem ("acted" ~ "actor" 0.43, "popular" ~ "population" 0.11)
TIE_MARGIN = 0.06  # similarities this close to a word's best match by meaning are a tie (see _near_ties)
CLASS_WORDS = frozenset(("type", "kind", "sort", "category", "class", "variety"))  # one meaning, "a kind of",
# that the word vectors spread unevenly ("kind" ~ "genre" 0.25, "sort" 0.13): each is compared as the mean of
CLASS_SENSE = ("kind", "category", "variety")  # those whose first sense it is (not "to type", "to sort", "a class"),
# and asks from SEMANTIC_FLOOR at CLOSEST_STRENGTH ("what types are the films written by X": their genres, 0.34)
STEM = 4  # letters two words must share from their start to match by stem ("writ"er ~ "writ"ten)
_CACHE_SIZE = 20_000  # text -> vector entries kept across questions (relation labels repeat)

Aliases = Mapping[str, tuple[str, ...]]  # relation label -> its other names (skos:altLabel)


@dataclass(frozen=True)
class Mention:
    position: int  # index among the question's words
    word: str  # as the question spells it
    lemma: str


@lru_cache(maxsize=1 << 16)
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


def relation_matches(mentions: list[Mention], relations: list[str], aliases: Aliases | None = None,
                     kinds: frozenset[int] = frozenset(), closest: bool = True) -> dict[str, list[float]]:
    """For each relation label, one strength per mention (0 when it does not match), against the
    label and the relation's ``aliases``. A mention at one of the ``kinds`` positions names the kind
    of answer ("which *countries*"): it matches a label by its head (``kind_matches``) or, by meaning,
    only the relation clearly closest to it ("what *money*": currency), so that "countries" does not
    ask for ``internet country code`` or ``region``. Without ``closest``, a word matches only by stem or
    from ``SEMANTIC_FLOOR`` (:func:`_closest_of_the_rest` is not applied)."""
    names = {relation: _names(relation, (aliases or {}).get(relation, ())) for relation in relations}
    texts = [m.word.casefold() for m in mentions]
    for _, phrases in names.values():
        texts.extend(phrases)
    vectors = _VECTORS.get(texts + list(CLASS_SENSE)) if mentions and relations else {}
    result: dict[str, list[float]] = {}
    raw: dict[str, list[float]] = {}
    for relation, (lemmas, phrases) in names.items():
        strengths, similarities = [], []
        for mention in mentions:
            own = _class_vector(vectors) if mention.lemma in CLASS_WORDS else vectors[mention.word.casefold()]
            similarity = max(float(own @ vectors[phrase]) for phrase in phrases)
            similarities.append(similarity)
            kind = mention.position in kinds
            if kind and kind_matches(mention, relation) or not kind and any(
                    stem_match(mention.lemma, other) and (mention.lemma == other or _agree(own, other))
                    for other in lemmas):
                strengths.append(1.0)
            elif mention.lemma in CLASS_WORDS:  # the kind of thing asked for, at any position
                strengths.append(CLOSEST_STRENGTH if similarity >= SEMANTIC_FLOOR else 0.0)
            else:
                strengths.append(round(similarity, 3) if not kind and similarity >= SEMANTIC_FLOOR else 0.0)
        result[relation], raw[relation] = strengths, similarities
    shares = [any(stem_match(m.lemma, other) for lemmas, _ in names.values() for other in lemmas) for m in mentions]
    _near_ties(result, raw, [m.position in kinds for m in mentions])
    if closest:
        _closest_of_the_rest(result, raw, [m.position in kinds for m in mentions], shares)
    return result


def _class_vector(vectors: dict[str, np.ndarray]) -> np.ndarray:
    mean = np.mean([vectors[word] for word in CLASS_SENSE], axis=0)
    return mean / np.linalg.norm(mean)


def _near_ties(result: dict[str, list[float]], raw: dict[str, list[float]], kinds: list[bool]) -> None:
    """A word matched by meaning alone gives the same strength to every relation about as close to it
    (within ``TIE_MARGIN``): "spoken" ~ "official language" 0.33 and ~ "language" 0.27 cannot tell the two
    apart, so neither wins by it ("What languages are spoken in Switzerland?" lists both relations' edges)."""
    for position, kind in enumerate(kinds):
        semantic = [relation for relation, strengths in result.items() if 0 < strengths[position] < 1.0]
        if kind or not semantic or any(strengths[position] >= 1.0 for strengths in result.values()):
            continue
        best = max(result[relation][position] for relation in semantic)
        for relation, similarities in raw.items():
            if similarities[position] >= best - TIE_MARGIN:
                result[relation][position] = best


def _closest_of_the_rest(result: dict[str, list[float]], raw: dict[str, list[float]], kinds: list[bool],
                         shares: list[bool]) -> None:
    """A mention that matches no relation by stem or from ``SEMANTIC_FLOOR`` still asks for the relation
    closest to it in meaning when that one stands out (``CLOSEST_FLOOR``, ahead of the next by
    ``CLOSEST_MARGIN``): "kind" ~ "has genre" 0.25, the next 0.09; "film" is near several relations alike
    and asks for none. A word naming the answer's kind (``kinds``) keeps its similarity when it stands out
    from ``SEMANTIC_FLOOR`` ("money" ~ "currency" 0.43, the next 0.14), unless it is a word of another label
    (``shares``: "countries" of "internet country code")."""
    for position, kind in enumerate(kinds):
        if len(raw) < 2 or any(strengths[position] for strengths in result.values()):
            continue
        ranked = sorted(raw, key=lambda relation: -raw[relation][position])
        best, second = raw[ranked[0]][position], raw[ranked[1]][position]
        if kind and best >= SEMANTIC_FLOOR and not shares[position] and best - second >= CLOSEST_MARGIN:
            result[ranked[0]][position] = round(best, 3)
        elif not kind and best >= CLOSEST_FLOOR and best - second >= CLOSEST_MARGIN:
            result[ranked[0]][position] = CLOSEST_STRENGTH


def _agree(vector: np.ndarray, other: str) -> bool:
    """A stem match that the meanings confirm: "popular" shares "popul" with "population", not its sense."""
    return float(vector @ _VECTORS.get([other])[other]) >= STEM_AGREEMENT


@lru_cache(maxsize=1 << 12)
def _names(relation: str, aliases: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The lemmas a mention matches lexically (the content words of the label and aliases, and each
    one-word alias), and the texts it is compared to by meaning (each name whole, and its words)."""
    lemmas: list[str] = []
    phrases: list[str] = []
    for name in (relation, *aliases):
        content = list(term_words(name))
        lemmas += content
        lemmas += [lemma(name)] if len(WORD.findall(name)) == 1 and not content else []
        phrases += [" ".join(content) or name.casefold(), *content]
    return list(dict.fromkeys(lemmas)), list(dict.fromkeys(phrases))


def head_lemma(relation: str) -> str:
    """The lemma of the word a relation label is about: the last content word, or the one before "of"
    ("internet country code": "code", "chief of state": "chief", "directed by": "directed")."""
    found = [fold(w) for w in WORD.findall(relation)]
    if "of" in found[1:]:
        return lemma(found[found.index("of") - 1])
    content = [w for w in found if w not in STOPWORDS]
    return lemma(content[-1]) if content else ""


def kind_matches(mention: Mention, relation: str) -> bool:
    """Whether a word naming the kind of answer ("which *countries*") can ask for ``relation``: only by the
    label's head, since a set of countries is not asked for by ``internet country code``."""
    head = head_lemma(relation)
    return bool(head) and stem_match(mention.lemma, head)


def alias_words(aliases: Aliases) -> frozenset[str]:
    """The one-word aliases, folded: question words that ask for a relation even when they are
    stopwords ("about")."""
    return frozenset(fold(alias) for names in aliases.values() for alias in names if len(WORD.findall(alias)) == 1)


def mention_of(position: int, word: str) -> Mention:
    return Mention(position, word, lemma(word))


def relation_lemmas(relations: list[str], aliases: Aliases | None = None) -> frozenset[str]:
    """Every lemma a question word matches relations by lexically (labels and aliases)."""
    return frozenset(w for relation in relations for w in _names(relation, (aliases or {}).get(relation, ()))[0])


def weak_name(surface: str, label: str, lemmas: frozenset[str]) -> bool:
    """Whether the question's words ``surface``, spelling out the node ``label``, more likely ask for
    something else than name that node: only stopwords ("What?"), only relation words ("director",
    "actors": a tag of those words), or written in lower case for a capitalized label ("fall" for the
    film "Fall"). Such a node is an anchor or a seed only after the others."""
    content = [lemma(w) for w in WORD.findall(surface) if fold(w) not in STOPWORDS]
    if not content or all(any(stem_match(w, other) for other in lemmas) for w in content):
        return True
    return not any(c.isupper() for c in surface) and any(c.isupper() for c in label)
