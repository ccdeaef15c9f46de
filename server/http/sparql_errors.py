"""pyoxigraph's parser messages as plain sentences with a line and a column.

The parser reports the furthest point it reached and everything it could have read there, character
classes included (``error at 3:15: expected one of Prefix not found, ['%'], ['-' | '0' ..= '9' ...``).
A person needs the line, the column and what is wrong. What the guard's lexer can place exactly comes
first: a string that does not end, a bracket that closes nothing or the wrong one or never closes, an
undeclared prefix where it is used (the parser often notices it only at the end of the query). Then a
sentence the parser wrote among the alternatives ("The SELECT contains a variable that is unbound"),
or the keywords it expected, without the character classes. When the parser read to the end of a
query, shorter prefixes are parsed again to find where it stops being readable (decision 14). Runs
where the text is parsed (a worker process): it lexes and parses the client's text.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from server.errors import BadRequest
from server.http.sparql_guard import Token, parse_error, tokenize

_POSITION = re.compile(r"error at (\d+):(\d+): ", re.DOTALL)
_CHAR_CLASS = re.compile(r"\[(?:'(?:\\.|[^'\\])*'|[^\]'])*\]")
_SENTENCE = re.compile(r"^[A-Z][a-z]+(?: \S+)+$")  # "Prefix not found", not a token like "OPTIONAL"


@dataclass(frozen=True)
class SyntaxProblem:
    """Why a text does not parse; ``line`` and ``column`` count from 1 (columns in characters)."""

    message: str
    line: int | None = None
    column: int | None = None

    @property
    def sentence(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line is not None else ""
        return where + self.message

    def as_json(self) -> dict[str, object]:
        return {"message": self.message, "line": self.line, "column": self.column, "sentence": self.sentence}


SHOWN_CHARS = 40  # of a word quoted in a message (a 5 MB word made a 5 MB error)
QUERY_FORMS = ("SELECT", "CONSTRUCT", "DESCRIBE", "ASK")
UPDATE_FORMS = ("INSERT", "DELETE", "WITH", "LOAD", "CLEAR", "CREATE", "DROP", "COPY", "MOVE", "ADD")


def plain_syntax_error(raw: str, text: str, reread: bool = False, base: str | None = None,
                       update: bool = False) -> SyntaxProblem:
    """The parser's message ``raw`` about ``text`` (an ``update`` or a query) as a :class:`SyntaxProblem`.
    With ``reread`` (a query, never an update: parsing an update runs it), a query the parser read to its
    end is parsed again in shorter prefixes to find where it stops being readable."""
    lexical = _lexical_problem(text) or _unknown_form(text, UPDATE_FORMS if update else QUERY_FORMS)
    if lexical is not None:
        return lexical
    found = _POSITION.match(raw)
    if found is None:
        return SyntaxProblem(raw.strip())
    line, column = int(found.group(1)), int(found.group(2))
    alternatives = [item.strip() for item in _CHAR_CLASS.sub("", raw[found.end():]).removeprefix("expected one of ")
                    .removeprefix("expected ").split(",")]
    sentences = [item for item in alternatives if _SENTENCE.match(item)]
    if sentences:
        return SyntaxProblem(sentences[0].rstrip(".") + ".", line, column)
    tokens = [item for item in alternatives if item and item not in ("_", "<unreported>")]
    column, here = _word_at(text, line, column)
    if not here:  # the parser read to the end: what it expected there says little about what is wrong
        unreadable = _first_unreadable_token(text, base) if reread else None
        if unreadable is not None:
            return SyntaxProblem(f"the query cannot be read from {unreadable.value!r} on (a missing or extra "
                                 "term, bracket or dot here or just before).", *_position(text, unreadable.start))
        return SyntaxProblem("the query ends too early, or something before this point is malformed "
                             "(a missing term, bracket or dot).", line, column)
    return SyntaxProblem(f"unexpected {here!r}" + (f": expected {_listed(tokens)}." if tokens else "."), line, column)


def _position(text: str, offset: int) -> tuple[int, int]:
    """The line and column (from 1) of a character offset."""
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _lexical_problem(text: str) -> SyntaxProblem | None:
    """A string that does not end, or the first prefixed name whose prefix no ``PREFIX`` declares
    (pyoxigraph knows no other prefixes)."""
    try:
        tokens = tokenize(text)
    except BadRequest as error:
        start = re.search(r"character (\d+)", error.message)
        if start is None:
            return None
        return SyntaxProblem("this string does not end (a quote is missing).", *_position(text, int(start.group(1))))
    unbalanced = _unbalanced_bracket(tokens)
    if unbalanced is not None:
        token, sentence = unbalanced
        return SyntaxProblem(sentence, *_position(text, token.start))
    declared: set[str] = set()
    for index, token in enumerate(tokens):
        if token.kind != "pname":
            continue
        prefix = token.value.partition(":")[0]
        if prefix == "_":  # a blank node label
            continue
        if index > 0 and tokens[index - 1].is_word("PREFIX"):
            declared.add(prefix)
        elif prefix not in declared:
            return SyntaxProblem(f"unknown prefix {prefix}: (no PREFIX {prefix}: <…> declares it).",
                                 *_position(text, token.start))
    return None


def _unknown_form(text: str, forms: tuple[str, ...]) -> SyntaxProblem | None:
    """A first token after the ``PREFIX`` and ``BASE`` declarations that starts no operation of ``forms``
    ("SELEC ?x": the parser said "expected CONSTRUCT"): an operation of the other kind (a query sent as an
    update), or a word named with the form it is closest to."""
    tokens = tokenize(text)
    at = 0
    while at < len(tokens) and tokens[at].is_word("PREFIX", "BASE"):
        at += 3 if tokens[at].is_word("PREFIX") else 2
    update = "INSERT" in forms
    noun, kind, other = ("update", "an update", "a query") if update else ("query", "a query", "an update")
    if not tokens:
        return SyntaxProblem(f"the {noun} is empty (nothing but spaces or comments): {kind} starts with "
                             f"{_listed(forms)}.")
    if at >= len(tokens) or tokens[at].is_word(*forms):
        return None
    first = tokens[at]
    if first.is_word(*(QUERY_FORMS if update else UPDATE_FORMS)):
        return SyntaxProblem(f"{first.value!r} starts {other}, not {kind}: send it as {other}.",
                             *_position(text, first.start))
    close = difflib.get_close_matches(first.value.upper(), forms, n=1, cutoff=0.6) if first.kind == "word" else []
    hint = f" (did you mean {close[0]}?)" if close else ""
    shown = first.value if len(first.value) <= SHOWN_CHARS else first.value[:SHOWN_CHARS] + "…"
    return SyntaxProblem(f"unexpected {shown!r}{hint}: {kind} starts with {_listed(forms)}, after any PREFIX "
                         "and BASE declarations.", *_position(text, first.start))


def _listed(words: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


_PAIRS = {"(": ")", "{": "}", "[": "]"}
MAX_REREADS = 64  # parses spent looking back for where a query stops being readable
MAX_REREAD_CHARS = 20_000


def _brackets(tokens: list[Token]) -> tuple[list[Token], tuple[Token, str] | None]:
    """The brackets still open after ``tokens``, and the first that closes nothing or the wrong one."""
    opened: list[Token] = []
    for token in tokens:
        if token.kind != "punct":
            continue
        if token.value in _PAIRS:
            opened.append(token)
        elif token.value in _PAIRS.values():
            if not opened:
                return opened, (token, f"this '{token.value}' closes no bracket.")
            if _PAIRS[opened[-1].value] != token.value:
                return opened, (token, f"this '{token.value}' closes a '{opened[-1].value}'.")
            opened.pop()
    return opened, None


def _unbalanced_bracket(tokens: list[Token]) -> tuple[Token, str] | None:
    """The first bracket that closes nothing or the wrong bracket, else the innermost one never closed."""
    opened, wrong = _brackets(tokens)
    if wrong is not None:
        return wrong
    return (opened[-1], f"this '{opened[-1].value}' is never closed.") if opened else None


def _first_unreadable_token(text: str, base: str | None) -> Token | None:
    """The token after the longest prefix of ``text`` that parses once its open brackets are closed,
    looking back from the end at most ``MAX_REREADS`` tokens; None for an ASK (parsing one evaluates it)
    or a text longer than ``MAX_REREAD_CHARS``."""
    if len(text) > MAX_REREAD_CHARS:
        return None
    tokens = tokenize(text)  # it lexed once already (_lexical_problem)
    form = next((t for t in tokens if t.is_word("SELECT", "CONSTRUCT", "DESCRIBE", "ASK")), None)
    if form is None or form.is_word("ASK"):
        return None
    for cut in range(len(tokens) - 1, max(len(tokens) - 1 - MAX_REREADS, 0), -1):
        opened, _ = _brackets(tokens[:cut])
        closers = " ".join(_PAIRS[t.value] for t in reversed(opened))
        if parse_error(f"{text[:tokens[cut].start]} {closers}", False, base) is None:
            return tokens[cut]
    return None


def _word_at(text: str, line: int, column: int) -> tuple[int, str]:
    """The word (or character) at a parser position, for "unexpected ...", and the column where it
    starts (the parser may stop inside a word: ``SELEC * WHERE`` fails at the H)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return column, ""
    source = lines[line - 1]
    start = min(column - 1, len(source))
    if start < len(source) and source[start].isalnum():
        while start > 0 and source[start - 1].isalnum():
            start -= 1
    offset = sum(len(earlier) + 1 for earlier in lines[:line - 1]) + start
    rest = text[offset:]
    word = re.match(r"\s*([\w:?$]+|\S)", rest)
    if word is None:
        return column, ""
    return start + 1 + word.start(1), word.group(1)
