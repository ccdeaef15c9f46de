"""The text rules of retrieval and the LLMs: what a word is, how words compare, which carry no content,
and free text on one line.

A word is a run of letters and digits (``WORD``). Words compare folded: compatibility-decomposed,
accents stripped, casefolded (``"Fröbe"`` -> ``"frobe"``). The label index matches a question's
folded words against labels (:func:`words`, :func:`normalize`); content matching (the offline LLM,
the relations a question names) also drops stopwords and folds plurals (:func:`term_words`).
"""
from __future__ import annotations

import re
import unicodedata

WORD = re.compile(r"[^\W_]+")
# Too common to rank label matches by: the words the label index's bm25 stage leaves out.
RANKING_STOPWORDS = frozenset(
    """a an and are as at be by did do does for from has have how in is it of on or that the their this to
    was were what when where which who whom whose why with""".split()
)
# No content in a question: the ranking stopwords and the wording of a request ("please list all ...").
# Ranking keeps these, titles are made of them ("All About Eve", "Show Boat"): ranking without them
# finds the same MetaQA topic entities but leaves 4 of its 14,274 3-hop dev questions no answer edge.
STOPWORDS = RANKING_STOPWORDS | frozenset(
    """about all also any been being can could give had i its list me my please show tell than them there
    these they those us we will would you your""".split()
)


def fold(text: str) -> str:
    """``text`` compatibility-decomposed, without accents, casefolded: ``"Gert Fröbe!"`` -> ``"gert frobe!"``."""
    if text.isascii():  # nothing to decompose: the common case, made fast
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def words(text: str) -> list[str]:
    """The folded words of ``text``: ``"Gert Fröbe!"`` -> ``["gert", "frobe"]``."""
    return WORD.findall(fold(text))


def normalize(text: str) -> str:
    """A label's key: its folded words joined by spaces; a label of punctuation only (a film called
    ``$``) keeps its symbols, casefolded."""
    return " ".join(words(text)) or " ".join(text.casefold().split())


def symbols(text: str) -> list[str]:
    """The whitespace-separated pieces of ``text`` without a word, casefolded (``$``): what
    :func:`normalize` keeps of a label of punctuation only."""
    return [piece.casefold() for piece in text.split() if not words(piece)]


def lemma(word: str) -> str:
    """The folded word without a plural (or long ``-ing``) ending: ``"Borders"`` -> ``"border"``,
    ``"countries"`` -> ``"country"``."""
    return _stem(fold(word))


def _stem(w: str) -> str:
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    if len(w) > 6 and w.endswith("ing"):
        return w[:-3]
    return w


def term_words(text: str) -> dict[str, str]:
    """The content words of ``text``: lemma -> the word as ``text`` first spells it, in text order.

    Words are taken from the text's composed form (NFC), so that a decomposed accent does not
    split one, as in :func:`words`.
    """
    found: dict[str, str] = {}
    for word in WORD.findall(unicodedata.normalize("NFC", text)):
        folded = fold(word)
        if folded not in STOPWORDS:
            found.setdefault(_stem(folded), word)
    return found


def terms(text: str) -> set[str]:
    """The content words of ``text`` as lemmas."""
    return set(term_words(text))


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` with each run of whitespace (newlines included) as one space, trimmed; cut to
    ``limit`` characters with an ellipsis when longer."""
    line = " ".join(text.split())
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"
