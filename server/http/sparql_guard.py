"""Static checks on SPARQL text that pyoxigraph cannot do for us (it has no syntax-tree API).

A small lexer classifies the text the way the SPARQL grammar does: comments, strings (short and
long, with escapes), IRIs, variables, prefixed names, language tags, keywords and punctuation.
Keywords are the only place where ``SERVICE``, ``LOAD``, ``FROM``, ``USING``, ``WITH`` and
``WHERE`` mean anything, so a word hidden in a comment, string, IRI or name is not mistaken for
one. Because a lexer that disagreed with the real parser could be fooled, :func:`check_remote_calls`
also verifies its reading with the parser: every occurrence of ``SERVICE``/``LOAD`` in the raw text
that the lexer calls harmless is renamed, and the renamed text must still parse. If the lexer had
missed a real keyword, the rename breaks the syntax and the request is refused.
(pyoxigraph does not unescape ``\\u`` codepoints outside strings and IRIs, so no keyword can be
spelled with escapes.) The verification looks at every occurrence of the letters, whatever surrounds
them: ``1SERVICE`` is an integer followed by the keyword for the parser, and a word-boundary search
would not see it.

pyoxigraph's parser recurses: a few thousand nested brackets overflow its stack and kill the process.
:func:`check_nesting` refuses deep nesting before any parse, with the same lexer.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin

from pyoxigraph import NamedNode, Store

from server.errors import BadRequest, Forbidden
from server.sparql_templates import render_term

_LEXER = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n\r]*)
  | (?P<string>'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n\r])*'|"(?:\\.|[^"\\\n\r])*")
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<var>[?$][\w\u00b7]+)
  | (?P<langtag>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
  | (?P<name>[A-Za-z_][\w.\-]*(?::(?:[\w:%.\-]|\\.)*)?|:(?:[\w:%.\-]|\\.)*)
  | (?P<punct>.)
""", re.VERBOSE | re.DOTALL)
_REMOTE_WORDS = re.compile(r"SERVICE|LOAD", re.IGNORECASE)  # anywhere: no word boundaries
_FROM = re.compile(r"FROM", re.IGNORECASE)
_USING_WITH = re.compile(r"USING|WITH", re.IGNORECASE)
_GRAPH_FORMS = re.compile(r"CONSTRUCT|DESCRIBE", re.IGNORECASE)
_ASK = re.compile(r"ASK", re.IGNORECASE)
_SWEPT = re.compile(r"ALL|NAMED|DEFAULT", re.IGNORECASE)
_OPENERS, _CLOSERS = frozenset("{(["), frozenset("})]")
MAX_NESTING = 64  # brackets and '!' one inside another; pyoxigraph's parser crashes past ~2,000 '{'
_NESTING_CHARS = re.compile(r"[{(\[!]")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")


@dataclass(frozen=True)
class Token:
    kind: str
    value: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.value.upper() in words


def tokenize(text: str) -> list[Token]:
    """The significant tokens of ``text`` (whitespace and comments dropped).

    A quote that starts no string is a syntax error, refused at once (400): lexing on would try a
    string at every later quote, each try scanning to the end of the line (quadratic time).
    """
    tokens = []
    for match in _LEXER.finditer(text):
        kind = match.lastgroup or "punct"
        if kind == "name":  # one alternative, so that a run like a.a.a is read once, not once per letter
            kind = "pname" if ":" in match.group() else "word"
        if kind == "punct" and match.group() in "'\"":
            raise BadRequest(f"malformed request: the string starting at character {match.start()} does not end")
        if kind not in ("ws", "comment"):
            tokens.append(Token(kind, match.group(), match.start(), match.end()))
    return tokens


def _iri_value(token: Token, base: str | None) -> str:
    raw = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), token.value[1:-1])
    return urljoin(base, raw) if base else raw


def _term_iri(token: Token | None, prefixes: dict[str, str], base: str | None) -> str | None:
    """The IRI an IRI or prefixed-name token denotes; None for a variable or anything else."""
    if token is None:
        return None
    if token.kind == "iri":
        return _iri_value(token, base)
    if token.kind == "pname":
        prefix, _, local = token.value.partition(":")
        if prefix in prefixes:
            return prefixes[prefix] + re.sub(r"\\(.)", r"\1", local)
    return None


MAX_ANSWER_PREFIXES = 1_000  # writing an answer costs prefixes x IRIs
_PREFIX_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*|")  # Turtle's, in ASCII


def declared_prefixes(text: str, base: str | None = None) -> dict[str, str]:
    """The prefixes the prologue of ``text`` declares (``PREFIX e: <...>``, before the query form), their IRIs
    resolved as the parser resolves them: the names a Turtle answer to the query writes its IRIs with. Only
    names every writer takes (no ``xml``, which XML reserves), at most ``MAX_ANSWER_PREFIXES``."""
    tokens, prefixes, at = tokenize(text), {}, 0
    while at + 1 < len(tokens) and len(prefixes) < MAX_ANSWER_PREFIXES:
        keyword, name = tokens[at], tokens[at + 1]
        if keyword.is_word("BASE") and name.kind == "iri":
            base, at = _iri_value(name, base), at + 2
        elif keyword.is_word("PREFIX") and name.kind == "pname" and at + 2 < len(tokens) \
                and tokens[at + 2].kind == "iri":
            prefixes[name.value.rstrip(":")] = _iri_value(tokens[at + 2], base)
            at += 3
        else:
            break
    return {name: iri for name, iri in prefixes.items()
            if _PREFIX_NAME.fullmatch(name) and not name.lower().startswith("xml") and _absolute(iri)}


def _absolute(iri: str) -> bool:
    try:
        NamedNode(iri)
    except ValueError:  # relative (no base to resolve it against), or no IRI at all
        return False
    return True


def _with_iris(tokens: Sequence[Token], base: str | None) -> Iterator[tuple[Token, Token | None, str | None]]:
    """Each token, the token after it (after ``SILENT``), and the IRI that one denotes (None when it
    is not a constant IRI), with PREFIX and BASE applied as they are declared; relative IRIs before
    any BASE resolve against ``base`` (the endpoint's URL, as the parser is told)."""
    prefixes: dict[str, str] = {}
    for index, token in enumerate(tokens):
        nxt = tokens[index + 1] if index + 1 < len(tokens) else None
        if token.is_word("BASE") and nxt is not None and nxt.kind == "iri":
            base = _iri_value(nxt, base)
        elif token.is_word("PREFIX") and nxt is not None and nxt.kind == "pname" and index + 2 < len(tokens):
            target = tokens[index + 2]
            if target.kind == "iri":
                prefixes[nxt.value.rstrip(":")] = _iri_value(target, base)
        if nxt is not None and nxt.is_word("SILENT"):
            nxt = tokens[index + 2] if index + 2 < len(tokens) else None
        yield token, nxt, _term_iri(nxt, prefixes, base)


def _remote_targets(tokens: Sequence[Token], base: str | None) -> list[tuple[Token, str | None]]:
    """Each SERVICE/LOAD keyword with the endpoint IRI it calls (None when not a constant IRI)."""
    return [(token, iri) for token, _, iri in _with_iris(tokens, base) if token.is_word("SERVICE", "LOAD")]


@dataclass(frozen=True)
class Span:
    """Where a SERVICE clause (or a LOAD) names its endpoint in a text: ``text[start:end]`` denotes ``endpoint``."""

    start: int
    end: int
    endpoint: str
    keyword: str = "SERVICE"


def service_spans(text: str, base: str | None, keywords: tuple[str, ...] = ("SERVICE",)) -> tuple[Span, ...]:
    """The endpoint of every SERVICE keyword (or each of ``keywords``: ``LOAD`` too, in an update) in a
    text that passed :func:`check_remote_calls` (which verified that the lexer finds every genuine
    keyword and that each names a constant IRI)."""
    return tuple(Span(nxt.start, nxt.end, iri, token.value.upper())
                 for token, nxt, iri in _with_iris(tokenize(text), base)
                 if token.is_word(*keywords) and nxt is not None and iri is not None)


NOT_CALLED = "<urn:glassgraph:not-called>"  # an endpoint no SERVICE or LOAD can reach


def without_calls(text: str, spans: Sequence[Span]) -> str:
    """``text`` with the endpoint at each span replaced by one that cannot be called: parsing (and so
    running, on an empty store) this text proves the real one parses, without calling anybody."""
    return replaced_spans(text, [(span.start, span.end, NOT_CALLED) for span in spans])


def replaced_spans(text: str, replacements: Sequence[tuple[int, int, str]]) -> str:
    """``text`` with each ``text[start:end]`` replaced (the spans do not overlap)."""
    pieces, cursor = [], 0
    for start, end, replacement in sorted(replacements):
        pieces += [text[cursor:start], replacement]
        cursor = end
    return "".join(pieces) + text[cursor:]


@dataclass(frozen=True)
class Sweep:
    """``text[start:end]`` is a DROP or CLEAR (SILENT or not) of ``target``: ALL, NAMED or DEFAULT."""

    start: int
    end: int
    target: str


def graph_sweeps(text: str) -> tuple[Sweep, ...]:
    """Every DROP or CLEAR of ALL, NAMED or DEFAULT in an update; text without those words is not lexed."""
    if _SWEPT.search(text) is None:
        return ()
    tokens = tokenize(text)
    sweeps = []
    for index, token in enumerate(tokens):
        if token.is_word("DROP", "CLEAR"):
            after = index + 1 + (index + 1 < len(tokens) and tokens[index + 1].is_word("SILENT"))
            if after < len(tokens) and tokens[after].is_word("ALL", "NAMED", "DEFAULT"):
                sweeps.append(Sweep(token.start, tokens[after].end, tokens[after].value.upper()))
    return tuple(sweeps)


def written_graphs(text: str, base: str | None = None) -> set[str] | None:
    """The named graphs an update may write: the constant IRI after every GRAPH, WITH, INTO, ADD, MOVE,
    COPY and TO (a GRAPH in a WHERE clause counts too: more is harmless). None when one of them is
    not a constant IRI, or the update says ALL or NAMED: any graph, then."""
    graphs: set[str] = set()
    for token, nxt, iri in _with_iris(tokenize(text), base):
        if token.is_word("ALL", "NAMED"):
            return None
        if token.is_word("GRAPH", "WITH") or (token.is_word("INTO", "ADD", "MOVE", "COPY", "TO") and nxt is not None
                                              and not nxt.is_word("GRAPH", "DEFAULT")):
            if iri is None:
                return None
            graphs.add(iri)
    return graphs


REFUSED_UNVERIFIED = ("malformed request, or SERVICE/LOAD used in a way this server cannot verify: refused "
                      "without running it")


@dataclass(frozen=True)
class Checked:
    """What the static checks leave to the real parser."""

    calls_remote: bool  # an allowed SERVICE/LOAD: evaluation errors are the remote endpoint's
    must_parse: str | None  # the text with harmless SERVICE/LOAD renamed: refuse unless it still parses


def parse_error(text: str, is_update: bool, base: str | None = None) -> str | None:
    """The parser's message if ``text`` (with relative IRIs resolved against ``base``) does not parse,
    else None. It runs on an empty in-memory store, so an update is also executed there and a query
    may be evaluated: call it only where it can be stopped (a query worker), since the parser can
    overflow its stack on long texts."""
    scratch = Store()
    try:
        if is_update:
            scratch.update(text, base_iri=base)
        else:
            scratch.query(text, base_iri=base)
    except SyntaxError as error:
        return str(error)
    except (OSError, RuntimeError):
        pass  # it parsed; running it on nothing failed
    return None


def check_user_sparql(text: str, allow: Iterable[str], is_update: bool, base: str | None = None) -> Checked:
    """Every check on a client's query or update that needs no parser, in the order that keeps the
    parser safe; what is left for the parser is in the result. ``base`` is the IRI the parser will
    resolve relative IRIs against."""
    tokens = check_nesting(text)
    return check_remote_calls(text, allow, is_update, tokens, base)


def check_nesting(text: str) -> list[Token] | None:
    """Refuse text nested deeper than :data:`MAX_NESTING` (400) before anything parses it.

    A ``!`` counts as a level until the bracket around it closes (``!!!!x`` recurses like
    ``((((x``). Text with at most as many openers as the limit cannot be too deep and is not lexed; otherwise
    the tokens are returned for the next check.
    """
    if len(_NESTING_CHARS.findall(text)) <= MAX_NESTING:
        return None
    tokens = tokenize(text)
    depth, frames = 0, [0]  # frames[-1]: the '!' seen inside the innermost open bracket
    for token in tokens:
        if token.kind != "punct":
            continue
        if token.value in _OPENERS or token.value == "!":
            depth += 1
            if token.value == "!":
                frames[-1] += 1
            else:
                frames.append(0)
            if depth > MAX_NESTING:
                raise BadRequest(f"the request nests brackets or '!' more than {MAX_NESTING} levels deep, "
                                      "the most this server parses: refused without running it")
        elif token.value in _CLOSERS and len(frames) > 1:
            depth -= 1 + frames.pop()
    return tokens


def check_remote_calls(text: str, allow: Iterable[str], is_update: bool,
                       tokens: list[Token] | None = None, base: str | None = None) -> Checked:
    """Refuse SERVICE and LOAD unless their endpoint is in ``allow``; see the module docstring."""
    occurrences = list(_REMOTE_WORDS.finditer(text))
    if not occurrences:
        return Checked(calls_remote=False, must_parse=None)
    allowed = set(allow)
    genuine = _remote_targets(tokens if tokens is not None else tokenize(text), base)
    for token, endpoint in genuine:
        keyword = token.value.upper()
        if endpoint is None:
            raise Forbidden(f"{keyword} needs a constant endpoint IRI on this server "
                                  "(a variable endpoint cannot be checked against GLASSGRAPH_SERVICE_ALLOW)")
        if endpoint not in allowed:
            raise Forbidden(f"{keyword} <{endpoint}> is refused: remote calls are disabled unless the "
                                  "endpoint is listed in GLASSGRAPH_SERVICE_ALLOW")
    keyword_starts = {token.start for token, _ in genuine}
    harmless = [m for m in occurrences if m.start() not in keyword_starts]
    if not harmless:
        return Checked(calls_remote=bool(genuine), must_parse=None)
    if is_update and genuine:
        raise BadRequest("an update that calls LOAD or SERVICE may not also mention those words in strings, "
                         "names or comments")
    chars = list(text)
    for match in harmless:
        chars[match.start()] = "X"  # SERVICE -> XERVICE, LOAD -> XOAD: no longer keywords
    return Checked(calls_remote=bool(genuine), must_parse="".join(chars))


def has_dataset_clause(text: str, is_update: bool = False) -> bool:
    """Whether a query has FROM / FROM NAMED, or an update USING or WITH (then it, not the union default graph or
    the store's default graph, sets the dataset). Lexing takes about a second per 5 MB, so text without the
    letters is not lexed."""
    pattern, words = (_USING_WITH, ("USING", "WITH")) if is_update else (_FROM, ("FROM",))
    return pattern.search(text) is not None and any(token.is_word(*words) for token in tokenize(text))


def makes_graph(text: str) -> bool:
    """Whether a query is a CONSTRUCT or a DESCRIBE (its first query form); text without either word is not
    lexed."""
    if _GRAPH_FORMS.search(text) is None:
        return False
    form = next((token for token in tokenize(text) if token.is_word("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")), None)
    return form is not None and form.is_word("CONSTRUCT", "DESCRIBE")


def ask_as_select(text: str) -> str | None:
    """An ASK query as the SELECT with the same solutions, to read lazily; None for any other form, and for
    a text this lexer may read otherwise than the engine (its prologue not plain ``BASE <iri>`` and
    ``PREFIX p: <iri>`` declarations, or a string that does not end: the engine's error is the client's).

    Why: Oxigraph's ASK reads on past a store error (to prefer a solution to an error), and a read-only
    snapshot's iterator repeats a lost file's error for ever (a file the writing server compacted away:
    docs/decisions.md, decision 30), so that ASK spun to the deadline. A SELECT raises the first error.
    """
    if _ASK.search(text) is None:
        return None
    try:
        tokens = tokenize(text)
    except BadRequest:
        return None
    at = 0
    while at < len(tokens) and tokens[at].is_word("BASE", "PREFIX"):
        declaration = [token.kind for token in tokens[at + 1:at + 3]]
        if tokens[at].is_word("BASE") and declaration[:1] == ["iri"]:
            at += 2
        elif tokens[at].is_word("PREFIX") and declaration == ["pname", "iri"] and tokens[at + 1].value.endswith(":"):
            at += 3
        else:
            return None
    if at == len(tokens) or not tokens[at].is_word("ASK"):
        return None
    return replaced_spans(text, [(tokens[at].start, tokens[at].end, "SELECT *")])  # as Oxigraph parses an ASK


def add_using(text: str, default_graphs: Sequence[NamedNode], named_graphs: Sequence[NamedNode]) -> str:
    """Apply the protocol's using-graph-uri / using-named-graph-uri to every operation with a WHERE.

    ``DELETE WHERE { P }`` becomes ``DELETE { P } USING ... WHERE { P }`` (the same operation).
    An update that has its own USING or WITH is refused (SPARQL 1.1 Protocol section 2.2.3).
    """
    tokens = tokenize(text)
    if any(token.is_word("USING", "WITH") for token in tokens):
        raise BadRequest("using-graph-uri / using-named-graph-uri cannot be combined with USING or WITH "
                              "in the update")
    clause = " ".join([f"USING {render_term(g)}" for g in default_graphs]
                      + [f"USING NAMED {render_term(g)}" for g in named_graphs])
    pieces, cursor, depth = [], 0, 0
    for index, token in enumerate(tokens):
        if token.value == "{" and token.kind == "punct":
            depth += 1
        elif token.value == "}" and token.kind == "punct":
            depth -= 1
        elif depth == 0 and token.is_word("WHERE"):
            previous = tokens[index - 1] if index else None
            if previous is not None and previous.is_word("DELETE"):
                end = _block_end(tokens, index + 1)
                block = text[tokens[index + 1].start:tokens[end].end]
                pieces.append(text[cursor:token.start] + f"{block} {clause} WHERE {block}")
                cursor = tokens[end].end
            else:
                pieces.append(text[cursor:token.start] + clause + " ")
                cursor = token.start
    pieces.append(text[cursor:])
    return "".join(pieces)


def _block_end(tokens: Sequence[Token], start: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``tokens[start]``."""
    if start >= len(tokens) or tokens[start].value != "{":
        raise BadRequest("malformed DELETE WHERE: expected '{'")
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index].kind == "punct" and tokens[index].value == "{":
            depth += 1
        elif tokens[index].kind == "punct" and tokens[index].value == "}":
            depth -= 1
            if depth == 0:
                return index
    raise BadRequest("malformed DELETE WHERE: unbalanced braces")
