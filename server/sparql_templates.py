"""The SPARQL templates in ``sparql/``: loading them and binding parameters safely.

One way to bind, and never string formatting of user input: ``values``, lists of rows for an empty
``VALUES`` block written in the template, e.g. ``VALUES (?s ?p ?o) { }`` (a single parameter is a
one-row block; ``None`` is ``UNDEF``). Rows are rendered by pyoxigraph's own escaped N-Triples
serialization, which every SPARQL engine reads, so a template runs unchanged on the embedded store and on
a remote engine. Triple terms are spelled in the store's dialect (:data:`DIALECTS`): RDF 1.2's
``<<( s p o )>>``, RDF-star's ``<< s p o >>``, or ``reification``'s statement IRI (``server/dialects``);
a dialect's template variants (``sparql/{dialect}/{name}.rq``) replace the common template where they exist.

A variant may mark a group ``#each ?x`` ... ``#end`` (SPARQL comments: the text parses as it is): the group
is repeated once per row of ``?x``, each copy's ``VALUES`` filled with its row, and the copies joined with
``UNION``: a per-row ``LIMIT`` in plain SPARQL 1.1, where the common template says ``LATERAL``. A group may
hold groups of other variables: a group ends at the first ``#end`` indented exactly as its ``#each``, and a
group inside it is indented deeper (``check_groups`` refuses a template otherwise, when it is read); each copy
holds the inner groups repeated in turn (one branch per relation inside each entity's branch: decision 32). A
group given no rows is kept once with its ``VALUES`` empty: no solutions.

A template's ``LIMIT n`` is its cap; ``limit`` (an ``int``, written as digits) lowers it per call,
since SPARQL has no parameter for LIMIT.

A template is Jinja once, when it is read: the templates that walk a trace's chain of stages are written from the
stages' declaration (``stages``: ``server.stages.chain()``, the session first). Only that declaration is ever
rendered into a template, never a request's data.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path

import jinja2
from pyoxigraph import BlankNode, Literal, NamedNode, Triple

from server.config import SPARQL_DIR
from server.dialects import reification
from server.stages import chain
from server.vocab import Term

ValuesKey = str | tuple[str, ...]
RDF12, RDF_STAR, REIFICATION = "rdf12", "rdf-star", reification.NAME
# how triple terms are written: RDF 1.2 engines, RDF-star engines (Jena, GraphDB, ...), engines with neither
# (Virtuoso 7, Neptune: rdf:Statement nodes)
DIALECTS = (RDF12, RDF_STAR, REIFICATION)

_EMPTY_VALUES = re.compile(r"VALUES\s*(\?\w+|\(\s*(?:\?\w+\s*)+\))\s*\{\s*\}", re.IGNORECASE)
_LIMIT = re.compile(r"\bLIMIT\s+(\d+)", re.IGNORECASE)
_GROUP_VARIABLES = r"\?\w+(?:[ \t]+\?\w+)*"  # of a ``#each`` line: the renderer and ``check_groups`` read it alike
# a group ends at the first ``#end`` indented as its ``#each``: a group nested in it is indented deeper
_EACH = re.compile(rf"^([ \t]*)#each[ \t]+({_GROUP_VARIABLES})[ \t]*\n(.*?)^\1#end[ \t]*(?:\n|\Z)", re.S | re.M)
_GROUP_LINE = re.compile(r"^[ \t]*#(?:each|end)\b.*$", re.M)  # a line meant as a group's
_GROUP_GRAMMAR = re.compile(rf"([ \t]*)#(?:(each)[ \t]+{_GROUP_VARIABLES}|(end))[ \t]*")  # such a line, well formed
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")  # where a filled VALUES block goes (no template holds NUL)


class TemplateError(LookupError):
    """A template is missing, or a parameter does not fit it."""


def render_term(term: Term | BlankNode, blank_nodes: bool = False, dialect: str = RDF12) -> str:
    """Serialize a term in pyoxigraph's escaped N-Triples form, triple terms as ``<<( s p o )>>``
    (``dialect`` rdf12), ``<< s p o >>`` (rdf-star) or their statement IRI (reification).

    Blank nodes cannot be bound in a VALUES block; ``blank_nodes`` allows them as ``_:id``, for
    data written with ``INSERT DATA``.
    """
    if isinstance(term, Triple):
        if dialect == REIFICATION:
            return str(reification.statement_iri(term))
        parts = (render_term(t, blank_nodes, dialect) for t in (term.subject, term.predicate, term.object))
        return ("<<( {} {} {} )>>" if dialect == RDF12 else "<< {} {} {} >>").format(*parts)
    if isinstance(term, (NamedNode, Literal)) or (blank_nodes and isinstance(term, BlankNode)):
        return str(term)
    if isinstance(term, BlankNode):
        raise TemplateError("blank nodes cannot be bound as parameters")
    if term is None:
        return "UNDEF"
    raise TemplateError(f"not an RDF term: {term!r}")


def data_line(terms: Sequence[Term | BlankNode], dialect: str = RDF12, describe: bool = True) -> str:
    """One statement of ``INSERT DATA`` or N-Quads: its terms (blank nodes allowed) in ``dialect``, then ``.``;
    in the reification dialect followed (``describe``) by the description of each statement node it names."""
    line = " ".join(render_term(term, True, dialect) for term in terms) + " ."
    if dialect != REIFICATION or not describe:
        return line
    return "\n".join([line, *(data_line(more, dialect, False) for more in reification.descriptions(terms))])


def _key_vars(key: ValuesKey) -> tuple[str, ...]:
    names = (key,) if isinstance(key, str) else key
    return tuple(name.lstrip("?") for name in names)


def _block_vars(header: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\?(\w+)", header))


def _in_comment(text: str, position: int) -> bool:
    """Whether ``position`` is on a comment line (template headers may spell ``VALUES ?x { }``)."""
    line_start = text.rfind("\n", 0, position) + 1
    return text[line_start:position].lstrip().startswith("#")


def _mentions(text: str, names: tuple[str, ...]) -> bool:
    """Whether ``text`` has an empty ``VALUES`` block or a ``#each`` group for the variables ``names``."""
    return any(_block_vars(match.group(1)) == names for match in _EMPTY_VALUES.finditer(text)) or any(
        _block_vars(match.group(2)) == names for match in _EACH.finditer(text))


def render_values(text: str, values: dict[ValuesKey, Iterable[Sequence[Term] | Term]], dialect: str = RDF12) -> str:
    """Fill each empty ``VALUES`` block of ``text`` whose variables match a key of ``values`` (a ``#each``
    group once per row: see the module docstring). The template's text is read once: rendered rows are spliced
    in at the end, so a literal that reads like an empty ``VALUES`` block is never filled itself."""
    wanted = {_key_vars(key): list(rows) for key, rows in values.items()}
    blocks: list[str] = []
    placed, found = _place_values(text, wanted, dialect, blocks)
    missing = set(wanted) - found
    if missing:
        raise TemplateError(f"no empty VALUES block for {sorted(missing)}")
    return _PLACEHOLDER.sub(lambda match: blocks[int(match.group(1))], placed)


def _place_values(text: str, wanted: dict[tuple[str, ...], list], dialect: str,
                  blocks: list[str]) -> tuple[str, set[tuple[str, ...]]]:
    """``text`` with its groups repeated and each empty ``VALUES`` block of ``wanted`` variables replaced by a
    placeholder for its filled form (appended to ``blocks``); and the keys whose blocks were found."""
    seen: set[tuple[str, ...]] = set()

    def repeat(match: re.Match[str]) -> str:
        names, group = _block_vars(match.group(2)), match.group(3)
        if names not in wanted or not wanted[names]:
            return group
        seen.add(names)
        inner = {key: rows for key, rows in wanted.items() if key != names and _mentions(group, key)}
        seen.update(inner)
        return "  UNION\n".join(_place_values(group, {**inner, names: [row]}, dialect, blocks)[0]
                                for row in wanted[names])

    text = _EACH.sub(repeat, text)

    def fill(match: re.Match[str]) -> str:
        names = _block_vars(match.group(1))
        if names not in wanted or _in_comment(text, match.start()):
            return match.group(0)
        seen.add(names)
        lines = []
        for row in wanted[names]:
            cells = (row,) if len(names) == 1 and not isinstance(row, (tuple, list)) else tuple(row)
            if len(cells) != len(names):
                raise TemplateError(f"row {row!r} does not fit VALUES {match.group(1)}")
            rendered = " ".join(render_term(cell, dialect=dialect) for cell in cells)
            lines.append(rendered if len(names) == 1 and match.group(1).startswith("?") else f"({rendered})")
        blocks.append(f"VALUES {match.group(1)} {{\n  " + "\n  ".join(lines) + "\n}")
        return f"\x00{len(blocks) - 1}\x00"

    return _EMPTY_VALUES.sub(fill, text), seen


def render_limit(text: str, limit: int) -> str:
    """``text`` with each ``LIMIT n`` outside comments lowered to ``limit`` where that is smaller."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise TemplateError(f"a limit is a non-negative int, not {limit!r}")

    def lower(match: re.Match[str]) -> str:
        if _in_comment(text, match.start()):
            return match.group(0)
        return f"LIMIT {min(limit, int(match.group(1)))}"

    return _LIMIT.sub(lower, text)


def template_limit(name: str) -> int:
    """The smallest ``LIMIT`` written in template ``name``: the one definition of that cap, which
    code that lowers or reports it reads from here."""
    text = load_template(name)
    limits = [int(m.group(1)) for m in _LIMIT.finditer(text) if not _in_comment(text, m.start())]
    if not limits:
        raise TemplateError(f"template {name!r} has no LIMIT")
    return min(limits)


def template_path(name: str, directory: Path = SPARQL_DIR) -> Path:
    """``name`` without extension; ``.rq`` (query) is tried before ``.ru`` (update)."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise TemplateError(f"bad template name {name!r}")
    for suffix in (".rq", ".ru"):
        path = directory / (name + suffix)
        if path.exists():
            return path
    raise TemplateError(f"no template sparql/{name}.rq or .ru")


_JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


@cache
def load_template(name: str, directory: Path = SPARQL_DIR) -> str:
    """The text of template ``name``, read and rendered with the stages once: a query then costs no file-system
    look-up."""
    text = _JINJA.from_string(template_path(name, directory).read_text(encoding="utf-8")).render(stages=chain())
    check_groups(text, name)
    return text


def check_groups(text: str, name: str) -> None:
    """TemplateError unless every ``#each`` of ``text`` is closed by an ``#end`` indented as it is, a group
    inside another indented deeper, each on a line of its own (``#each ?x ?y`` or ``#end``, nothing after):
    otherwise a group would silently not repeat (one LIMIT for every row)."""
    open_groups: list[str] = []
    for line in _GROUP_LINE.finditer(text):
        match = _GROUP_GRAMMAR.fullmatch(line.group(0))
        if match is None:
            raise TemplateError(f"template {name!r}: {line.group(0).strip()!r} is neither '#each ?x ...' nor '#end'")
        indent, word = match.group(1), match.group(2) or match.group(3)
        if word == "each":
            if open_groups and len(indent) <= len(open_groups[-1]):
                raise TemplateError(f"template {name!r}: a #each inside another must be indented deeper")
            open_groups.append(indent)
        elif not open_groups or open_groups.pop() != indent:
            raise TemplateError(f"template {name!r}: an #end is not indented as the #each it closes")
    if open_groups:
        raise TemplateError(f"template {name!r}: a #each has no #end")


def dialect_template(name: str, dialect: str = RDF12) -> str:
    """Template ``name`` as ``dialect`` runs it: its variant in ``sparql/{dialect}/`` if there is one."""
    variants = SPARQL_DIR / dialect
    if dialect != RDF12 and ((variants / f"{name}.rq").exists() or (variants / f"{name}.ru").exists()):
        return load_template(name, variants)
    return load_template(name)


def template_names(directory: Path = SPARQL_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.r[qu]"))
