"""Question and label words for lexical matching: content words, lightly lemmatized."""
from __future__ import annotations

import re
import unicodedata

WORD = re.compile(r"[^\W_]+")
STOPWORDS = frozenset(
    """a about all also an and any are as at be been being by can could did do does for from give had has
    have how i in is it its list me my of on or please show tell than that the their them there these they
    this those to us was we were what when where which who whom whose why will with would you your""".split()
)


def lemma(word: str) -> str:
    """Case-, accent- and plural-folded form of one word ("Borders" -> "border", "countries" -> "country")."""
    w = "".join(c for c in unicodedata.normalize("NFKD", word.casefold()) if not unicodedata.combining(c))
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
    """The content words of ``text``: lemma -> the word as ``text`` first spells it, in text order."""
    words: dict[str, str] = {}
    for word in WORD.findall(text):
        if word.casefold() not in STOPWORDS:
            words.setdefault(lemma(word), word)
    return words


def terms(text: str) -> set[str]:
    """The content words of ``text`` as lemmas."""
    return set(term_words(text))
