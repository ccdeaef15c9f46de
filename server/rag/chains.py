"""The deterministic edge selector: follow the question's relations as chains from the entities it names.

1. **Anchors**: nodes whose label the question spells out (longest word n-grams first); a name
   inside a longer capitalized phrase the graph does not know is no anchor ("World" in "the 1998
   World Cup"), nor a weak name (``relations.weak_name``: relation words such as the tag "director",
   a capitalized label written in lower case) when the question names another node. With no such
   node, the labels most similar in meaning to the question's n-grams.
2. **Mentions**: the other content words; each matches relations lexically or semantically
   (``server.rag.relations``). "same", "share", "also", "together", "co-" are *cues* that a
   relation is walked there and back ("films with the same screenwriter as X").
3. **Paths** from the anchors, at most ``MAX_HOPS`` edges: every hop must match a mention better
   than the path did so far (by ``MIN_GAIN``), or walk the previous hop's relation back (a sibling:
   X -written by-> W <-written by- F). A path scores the best strength it reached for each mention,
   summed, plus ``CUE_BONUS`` when it walks a sibling and the question has a cue, less ``HOP_COST``
   a step, less ``INVERSION_COST`` for each step that serves a word nearer the anchor than the
   step before (a relation written further from the name comes later in the chain: "the
   screenwriter of the films starred by X's actors" walks starred, then written); among equal
   scores the shorter wins. The edges of every best path are chosen ("capital of the country that borders Portugal":
   borders, then capital), whole paths up to ``MAX_CHOSEN`` edges.
4. **No relation asked for**: a named anchor's only relation ("what films are about korean war"), or,
   when the question asks to describe the name ("describe X", "which topics is X about"), its facts.
5. **No answer**: when no relation of an anchor's edges matches a mention by ``MIN_GAIN``, there is
   no path and nothing is chosen: the graph does not answer the question. Nor does it when the best
   paths match no more than ``MIN_COVERAGE`` of the question's words outside the names it spells out
   and the kind of answer it asks for (the word after "which" or "what": "which person wrote X")
   ("what do people eat for breakfast in Mexico": "people" ~ ``population``, but not "eat" or
   "breakfast").

``rank`` orders every edge for a model whose context cannot take them all: the chosen ones,
then by how strongly their relation matches a mention, then those touching an anchor.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, zip_longest

import numpy as np

from server.rag.embeddings import embedder
from server.rag.llm import Edge
from server.rag.relations import (
    Aliases,
    Mention,
    alias_words,
    mention_of,
    relation_lemmas,
    relation_matches,
    weak_name,
)
from server.rag.text import STOPWORDS, WORD, fold, normalize

MAX_HOPS = 4  # the longest path followed (the retrieval's max_path_length is at most 4)
MIN_GAIN = 0.35  # how much better a hop must match the question than the path so far
CUE_BONUS = 0.5  # for a path whose sibling step the question asks for ("same", "also", ...)
HOP_COST = 0.25  # taken off a path's score per step: a detour must match the question better than that
MAX_CHOSEN = 60  # edges chosen at most
MAX_STEPS = 200_000  # hops tried per question at most (hubs)
ANCHOR_SIMILARITY = 0.65  # for an anchor found by meaning when no label is spelled out
ARTICLES = frozenset(("the", "a", "an"))
DESCRIBE = ("describ", "description")  # how "describe", "describing", "descriptions" begin
INVERSION_COST = 0.5  # taken off a path's score per step that goes back toward the anchor in the question's words
MAX_NGRAM = 8  # the longest label, in words, spelled out in a question
MIN_COVERAGE = 1 / 3  # the best paths must match more than this share of the question's words besides its names
CUES = frozenset("same share shares shared sharing together also co other both fellow".split())


@dataclass
class _Hop:
    edge: int  # index into the edge list
    node: str  # the node the hop reaches
    predicate: str
    side: int  # 0: the hop left its node as subject, 2: as object


@dataclass
class ChainChoice:
    """The selector's result: ``chosen`` (edge id, reasoning) in path order; ``ranking`` every edge id,
    most relevant first; ``score`` of the best path (0: the graph does not answer)."""

    chosen: list[tuple[str, str]]
    ranking: list[str]
    score: float
    anchors: list[str] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)
    left_out: int = 0  # edges of equally good paths past MAX_CHOSEN: the selection is cut, not complete


def choose(question: str, edges: list[tuple[str, Edge]], aliases: Aliases | None = None) -> ChainChoice:
    """The deterministic selection for ``question`` among labelled ``edges`` (see the module doc);
    ``aliases``: the relations' other names."""
    tokens = [(m.group(), fold(m.group())) for m in WORD.finditer(unicodedata.normalize("NFC", question))]
    relations = sorted({p for _, (_, p, _) in edges})
    spans = _anchor_spans(tokens, {label for _, (s, _, o) in edges for label in (s, o)})
    lemmas = relation_lemmas(relations, aliases)
    strong = [span for span in spans if not weak_name(_surface(tokens, span), span[2], lemmas)]
    spans_found, spans = spans, strong or spans  # a weak name is an anchor only when the question names no other
    anchors = list(dict.fromkeys(label for _, _, label in spans)) or _similar_anchors(tokens, edges)
    # A name the question writes in lower case may be a relation word too ("who stars in X": the tag "Star!")
    claimed = {i for start, end, _ in spans for i in range(start, end) if tokens[i][0] != tokens[i][1]}
    cue = any(folded in CUES for _, folded in tokens)
    asked = alias_words(aliases or {})
    mentions = [mention_of(i, surface) for i, (surface, folded) in enumerate(tokens) if i not in claimed
                and (folded not in STOPWORDS or folded in asked) and folded not in CUES and not folded.isdigit()]
    kinds = _kind_positions([folded for _, folded in tokens])
    matches = relation_matches(mentions, relations, aliases, kinds)
    search = _Search(edges, matches, mentions, cue)
    where = {label: (start, end) for start, end, label in reversed(spans)}
    for anchor in anchors:
        search.walk(anchor, where.get(anchor))
    inside = {i for start, end, _ in spans_found for i in range(start, end)}  # names, and
    inside |= kinds | _apposition_positions(tokens, strong)
    asked = sum(m.position not in inside for m in mentions)  # the question's other words
    chosen = list(search.best) if search.served > asked * MIN_COVERAGE else []
    reasons = [(edges[i][0], _reason(edges[i][1], search.best[i], mentions, matches)) for i in chosen]
    left_out = search.left_out if chosen else 0
    if not chosen and strong:  # a name spelled out, no relation asked for by a word
        named = list(dict.fromkeys(label for *_, label in strong))
        if _asks_description(tokens, strong):
            chosen, reasons, left_out = _overview_edges(edges, named)
        else:  # its only relation
            chosen, reasons = _only_relation_edges(
                edges, named, [surface for i, (surface, _) in enumerate(tokens) if i not in inside], cue)
    return ChainChoice(chosen=reasons, ranking=_rank(edges, chosen, matches, set(anchors)),
                       score=max(search.best_score, 0.0), anchors=anchors, mentions=[m.word for m in mentions],
                       left_out=left_out)


def _kind_positions(folded: list[str]) -> frozenset[int]:
    """Where the question names the kind of its answer: the word after "which" or "what", or after their
    "kind of", "type of", ... ("what kind of *film*"): the word before "of" asks for a relation then."""
    kinds = set()
    for i in range(1, len(folded)):
        if folded[i - 1] in ("which", "what"):
            kinds.add(i + 2 if i + 2 < len(folded) and folded[i + 1] == "of" else i)
    return frozenset(kinds)


def _apposition_positions(tokens: list[tuple[str, str]], spans: list[tuple[int, int, str]]) -> frozenset[int]:
    """Where a word between an article and a name says what the named thing is ("the *film* Macbeth",
    "the *river* Thames"): a word the answer need not serve (it still matches relations as any word does)."""
    return frozenset(start - 1 for start, _, _ in spans
                     if start >= 2 and tokens[start - 2][1] in ARTICLES and tokens[start - 1][1] not in STOPWORDS)


def _asks_description(tokens: list[tuple[str, str]], spans: list[tuple[int, int, str]]) -> bool:
    """Whether the question asks what a named thing is like rather than for one relation: a form of
    "describe" or "description", or "about" closing the question right after the name ("which topics
    is X about")."""
    folded = [f for _, f in tokens]
    return (any(f.startswith(DESCRIBE) for f in folded)
            or any(end == len(folded) - 1 and folded[end] == "about" for _, end, _ in spans))


def _overview_edges(edges: list[tuple[str, Edge]], anchors: list[str]) -> tuple[list[int], list[tuple[str, str]], int]:
    """The named anchors' edges, one relation after another in turn (so that a cut at ``MAX_CHOSEN``
    leaves every relation its first edges): a description of the thing, as the question asks. Also
    the number of edges left out by the cut."""
    by_relation: dict[str, list[int]] = {}
    for i, (_, (s, p, o)) in enumerate(edges):
        if s in anchors or o in anchors:
            by_relation.setdefault(p, []).append(i)
    turns = [i for i in chain.from_iterable(zip_longest(*by_relation.values())) if i is not None]
    chosen = turns[:MAX_CHOSEN]
    return chosen, [(edges[i][0], f"Deterministic selector: the question asks to describe what it names and no "
                     f"word of it names a relation; this edge is one of the facts of {_end(edges[i][1], anchors)}: "
                     f"{edges[i][1][0]} {edges[i][1][1]} {edges[i][1][2]}.") for i in chosen], len(turns) - len(chosen)


def _end(edge: Edge, anchors: list[str]) -> str:
    return edge[0] if edge[0] in anchors else edge[2]


def _only_relation_edges(edges: list[tuple[str, Edge]], anchors: list[str], rest: list[str],
                         cue: bool) -> tuple[list[int], list[tuple[str, str]]]:
    """The edges of a named anchor that has one relation only (a tag, a year: "what films are about
    korean war"), when no word of the question names a relation: that relation is the closest there is;
    with a cue ("who appeared in the same movie with X") it is walked there and back, as a relation a
    word names would be. Not when the question's other words (``rest``) hold a name the graph does not
    know ("What is Beyonce's real name?": "real" is a currency's label; "the 100 metres world record") or
    when the anchors' relations differ."""
    relations = {p for _, (s, p, o) in edges if s in anchors or o in anchors}
    if len(relations) != 1 or any(word[:1].isupper() for word in rest[1:]) or any(w.isdigit() for w in rest):
        return [], []
    [relation] = relations
    if cue:
        search = _Search(edges, {p: [float(p == relation)] for _, (_, p, _) in edges}, [mention_of(-1, relation)],
                         cue)
        for anchor in anchors:
            search.walk(anchor, None)
        chosen = list(search.best)
    else:
        chosen = [i for i, (_, (s, p, o)) in enumerate(edges) if s in anchors or o in anchors][:MAX_CHOSEN]
    how = ", walked there and back as the question's 'same'/'also' asks" if cue else ""
    return chosen, [(edges[i][0], f"Deterministic selector: no word of the question names a relation, and "
                     f"'{relation}' is the only relation of the entity it names{how}; this edge links "
                     f"{edges[i][1][0]} to {edges[i][1][2]} by '{relation}'.") for i in chosen]


def _anchor_spans(tokens: list[tuple[str, str]], labels: set[str]) -> list[tuple[int, int, str]]:
    """``(start, end, label)`` of node labels spelled out by the question, longest first, not overlapping."""
    by_norm: dict[str, list[str]] = {}  # labels differing in case only ("Knights", "knights") are all anchors
    for label in sorted(labels):
        by_norm.setdefault(normalize(label), []).append(label)
    folded = [f for _, f in tokens]
    taken: set[int] = set()
    spans = []
    for size in range(min(MAX_NGRAM, len(folded)), 0, -1):
        for start in range(len(folded) - size + 1):
            end = start + size
            found = by_norm.get(" ".join(folded[start:end]))
            if found is None or taken & set(range(start, end)) or all(f in STOPWORDS for f in folded[start:end]):
                continue
            if _inside_unknown_name(tokens, start, end, taken):
                continue
            taken.update(range(start, end))
            spans += [(start, end, label) for label in found]
    return spans


def _surface(tokens: list[tuple[str, str]], span: tuple[int, int, str]) -> str:
    return " ".join(surface for surface, _ in tokens[span[0]:span[1]])


def _inside_unknown_name(tokens: list[tuple[str, str]], start: int, end: int, taken: set[int]) -> bool:
    """The span is part of a longer capitalized name ("World" in "World Cup", "Paris" in "Paris Hilton")."""
    def capital(i: int) -> bool:
        return 0 < i < len(tokens) and i not in taken and tokens[i][0][:1].isupper() and tokens[i][1] not in STOPWORDS
    return capital(start - 1) or capital(end)


def _similar_anchors(tokens: list[tuple[str, str]], edges: list[tuple[str, Edge]]) -> list[str]:
    """Node labels closest in meaning to a word n-gram of the question (a misspelled or foreign name)."""
    grams = [" ".join(s for s, _ in tokens[i:i + n]) for n in (1, 2, 3) for i in range(len(tokens) - n + 1)
             if tokens[i][1] not in STOPWORDS and tokens[i + n - 1][1] not in STOPWORDS]
    spelled = {normalize(gram) for gram in grams}  # a label spelled out was no anchor: nor is it by meaning
    labels = sorted({label for _, (s, _, o) in edges for label in (s, o) if normalize(label) not in spelled})
    if not grams or not labels:
        return []
    vectors = embedder().embed(grams + labels)
    similarity = (vectors[len(grams):] @ vectors[:len(grams)].T).max(axis=1)
    best = float(similarity.max())
    return [labels[i] for i in np.flatnonzero(similarity >= max(best - 0.05, ANCHOR_SIMILARITY))]


@dataclass(frozen=True)
class _Step:
    hop: _Hop
    strengths: tuple[float, ...]  # the best strength reached for each mention so far
    back: bool  # walks the previous step's relation back (a sibling)
    distance: int  # words between the anchor and the nearest mention this step serves (-1: none)


class _Search:
    """Depth-first over paths from each anchor, keeping the best key and the edges of its paths.

    A path's key: its score less its inversions of the question's word order, then fewer inversions,
    then fewer steps.
    """

    def __init__(self, edges: list[tuple[str, Edge]], matches: dict[str, list[float]], mentions: list[Mention],
                 cue: bool) -> None:
        self.matches, self.mentions, self.cue = matches, mentions, cue
        self.links: dict[str, list[_Hop]] = {}
        for index, (_, (s, p, o)) in enumerate(edges):
            self.links.setdefault(s, []).append(_Hop(index, o, p, 0))
            self.links.setdefault(o, []).append(_Hop(index, s, p, 2))
        self.best_key: tuple[float, int, int] = (0.0, 0, 0)
        self.best: dict[int, tuple[str, int, bool]] = {}  # edges of the best paths -> (anchor, step, sibling)
        self.steps = 0
        self.served = 0  # mentions the best paths match, at most
        self.left_out = 0  # edges of best paths that did not fit in MAX_CHOSEN

    @property
    def best_score(self) -> float:
        return self.best_key[0]

    def walk(self, anchor: str, span: tuple[int, int] | None) -> None:
        for path in self._paths(anchor, span):
            sibling = any(step.back for step in path)
            steps = sum(not step.back for step in path)  # walking a relation back is the chain's pivot: free
            score = sum(path[-1].strengths) + (CUE_BONUS if sibling and self.cue else 0.0) - HOP_COST * steps
            distances = [step.distance for step in path if step.distance >= 0]
            inversions = sum(a > b for a, b in zip(distances, distances[1:], strict=False))
            key = (round(score - INVERSION_COST * inversions, 6), -inversions, -len(path))
            if key > self.best_key:
                self.best_key, self.best, self.served, self.left_out = key, {}, 0, 0
            if key == self.best_key:
                self.served = max(self.served, sum(strength > 0 for strength in path[-1].strengths))
                new = [(number, step) for number, step in enumerate(path, 1) if step.hop.edge not in self.best]
                if len(self.best) + len(new) <= MAX_CHOSEN:  # whole paths only: their ends are the answers
                    for number, step in new:
                        self.best[step.hop.edge] = (anchor, number, step.back)
                else:
                    self.left_out += len(new)

    def _paths(self, anchor: str, span: tuple[int, int] | None) -> Iterator[list[_Step]]:
        """Every admissible path from ``anchor``: each step matches the question better (``MIN_GAIN``)
        or walks the previous (non-sibling) step's relation back; no node twice. A relation that leaves the
        anchor is not also followed into it at the first step (a label reads from its subject)."""
        stack: list[tuple[list[_Step], frozenset[str]]] = [([], frozenset([anchor]))]
        while stack and self.steps < MAX_STEPS:
            path, seen = stack.pop()
            if len(path) >= MAX_HOPS:
                continue
            node = path[-1].hop.node if path else anchor
            strengths = path[-1].strengths if path else (0.0,) * len(self.mentions)
            children = []
            hops = self.links.get(node, [])
            if not path:  # "the export partners of Japan": Japan's own, not those whose partner Japan is
                leaving = {hop.predicate for hop in hops if hop.side == 0}
                hops = [hop for hop in hops if hop.side == 0 or hop.predicate not in leaving]
            for hop in hops:
                self.steps += 1
                if hop.node in seen:
                    continue
                found = self.matches[hop.predicate]
                reached = tuple(max(a, b) for a, b in zip(strengths, found, strict=True))
                last = path[-1] if path else None
                back = last is not None and not last.back and last.hop.predicate == hop.predicate \
                    and last.hop.side != hop.side
                if sum(reached) - sum(strengths) < MIN_GAIN and not back:
                    continue
                served = [i for i, (a, b) in enumerate(zip(strengths, found, strict=True)) if b > a]
                step = _Step(hop, reached, back, self._distance(served, span))
                children.append(([*path, step], seen | {hop.node}))
                yield children[-1][0]
            stack.extend(reversed(children))  # depth first, in edge order

    def _distance(self, served: list[int], span: tuple[int, int] | None) -> int:
        if span is None or not served:
            return -1
        start, end = span
        return min(start - self.mentions[i].position if self.mentions[i].position < start
                   else self.mentions[i].position - end + 1 for i in served)


def _reason(edge: Edge, why: tuple[str, int, bool], mentions: list[Mention], matches: dict[str, list[float]]) -> str:
    s, p, o = edge
    anchor, hop, sibling = why
    asked = [m.word for m, strength in zip(mentions, matches[p], strict=True) if strength > 0]
    start = f"this edge links {s} to {o} by '{p}'"
    if sibling:
        how = f"the same '{p}' as the step before, walked back, as the question's 'same'/'also' asks"
    elif asked:
        how = "the question asks about " + ", ".join(f"'{w}'" for w in asked)
    else:
        how = "it continues the path"
    where = f"{anchor}, which the question names" if hop == 1 else f"step {hop} of a path from {anchor}"
    return f"Deterministic selector: {how}; {start} ({where})."


def _rank(edges: list[tuple[str, Edge]], chosen: list[int], matches: dict[str, list[float]],
          anchors: set[str]) -> list[str]:
    first = set(chosen)

    def key(index: int) -> tuple[int, float, int, int]:
        s, p, o = edges[index][1]
        return (index not in first, -max(matches[p], default=0.0), not ({s, o} & anchors), index)
    order = chosen + sorted((i for i in range(len(edges)) if i not in first), key=key)
    return [edges[i][0] for i in order]
