"""Every SPARQL template parses, and parameters bound to templates are data, never SPARQL.

Parameters go one way (server/sparql_templates.py): ``values``, terms rendered by pyoxigraph into an
empty VALUES block (one row for a single parameter, UNDEF for "any"). The property tests bind
arbitrary strings, IRIs and triple terms, as one row and as several, and check that exactly the stored term matches
and that nothing else in the store changes.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyoxigraph import Literal, NamedNode, Quad, QueryBoolean, Store, Triple

from server.sparql_templates import (
    RDF12,
    REIFICATION,
    TemplateError,
    check_groups,
    dialect_template,
    load_template,
    render_limit,
    render_values,
    template_limit,
    template_names,
    template_path,
)
from server.store import GraphStore
from server.vocab import TG, XSD

EMPTY_VALUES = re.compile(r"VALUES\s*(\?\w+|\(\s*(?:\?\w+\s*)+\))\s*\{\s*\}", re.IGNORECASE)
DUMMY = NamedNode("urn:test:dummy")
TEST_TEMPLATES = Path(__file__).parent / "sparql_test_templates"


def with_dummy_rows(text: str) -> str:
    """Fill every empty VALUES block with one row of dummy IRIs, as a caller would."""
    keys = [tuple(re.findall(r"\?(\w+)", m.group(1))) for m in EMPTY_VALUES.finditer(text)]
    if not keys:
        return text
    return render_values(text, {key: [(DUMMY,) * len(key)] for key in keys})


@pytest.mark.parametrize("name", template_names())
def test_every_template_parses_and_runs(name: str) -> None:
    path = template_path(name)
    text = with_dummy_rows(load_template(name))
    if path.suffix == ".rq":
        result = Store().query(text)
        if not isinstance(result, QueryBoolean):
            list(result)
    else:
        Store().update(text)


@pytest.mark.parametrize("name", template_names())
def test_every_template_has_a_header_naming_its_parameters(name: str) -> None:
    header = []
    for line in load_template(name).splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    assert header, f"sparql/{name}: no comment header"
    assert re.search(r"parameters?", "\n".join(header), re.IGNORECASE), f"sparql/{name}: header names no parameters"


def test_template_names_are_checked() -> None:
    with pytest.raises(TemplateError):
        load_template("../server/config")
    with pytest.raises(TemplateError):
        load_template("no_such_template")


def test_a_values_key_without_its_block_is_refused() -> None:
    with pytest.raises(TemplateError):
        render_values("SELECT * WHERE { ?s ?p ?o }", {"s": [DUMMY]})
    with pytest.raises(TemplateError):
        render_values("SELECT * WHERE { VALUES (?s ?p) { } }", {("s", "p"): [(DUMMY,)]})


def test_a_limit_lowers_the_templates_limits_and_nothing_else() -> None:
    text = "# at most LIMIT 100 rows\nSELECT * WHERE { { SELECT * WHERE { ?s ?p ?o } LIMIT 100 } } limit 7"
    assert render_limit(text, 30) == text.replace("} LIMIT 100", "} LIMIT 30").replace("limit 7", "LIMIT 7")
    assert render_limit(text, 500) == text.replace("limit 7", "LIMIT 7")  # a cap is never raised
    for bad in ("30", "30 } DROP ALL {", -1, True, 2.5, None):
        with pytest.raises(TemplateError):
            render_limit(text, bad)  # type: ignore[arg-type]


def test_a_templates_limit_is_read_from_its_text() -> None:
    assert template_limit("rag_hop") == 100
    assert template_limit("console_resource_in") == template_limit("console_resource_out")  # one page, one cap
    with pytest.raises(TemplateError):
        template_limit("graph_counts")  # no LIMIT written


def test_a_limit_reaches_the_store(store: GraphStore) -> None:
    store.extend([Quad(DUMMY, TG.p, Literal(str(i)), store.explain_graph) for i in range(5)])
    with_limit = with_dummy_rows(render_limit(load_template("rag_hop"), 2))
    rows = list(store.raw.query(with_limit, default_graph=store.explain_graph))
    assert len(rows) == 2
    assert len(list(store.raw.query(with_dummy_rows(load_template("rag_hop")), default_graph=store.explain_graph))) == 5


# --- property tests: parameters are matched exactly and never change the query --------------------

TRICKY = ['"', "'", '\\"', "\\", "{", "}", "} DROP ALL {", '" } ; DROP ALL ; INSERT DATA { <a> <b> "',
          "\n", "\r\n", "\t", ">", "<urn:x>", "?o", "$o", "#", "'''", '"""', "é", "日本語", "🙂", "\u2028", "\x00",
          ")>>", "<<( <a> <b> <c> )>>", "UNDEF"]
strings = st.one_of(st.sampled_from(TRICKY),
                    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),  # no lone surrogates
                    st.lists(st.sampled_from(TRICKY), min_size=1, max_size=5).map("".join))
literals = st.one_of(
    strings.map(Literal),
    st.tuples(strings, st.sampled_from(["en", "fr", "en-US", "zh-Hant-TW"])).map(
        lambda t: Literal(t[0], language=t[1])),
    st.tuples(strings, st.sampled_from([XSD.integer, XSD.date, NamedNode("http://example.org/dt#x")])).map(
        lambda t: Literal(t[0], datatype=t[1])),
)
iris = strings.map(lambda s: NamedNode("http://example.org/" + quote(s, safe="/:;=&'()!*,$+@~")))
triples = st.tuples(iris, iris, st.one_of(iris, literals)).map(lambda t: Triple(*t))
terms = st.one_of(literals, iris, triples, st.tuples(iris, iris, triples).map(lambda t: Triple(*t)))

G = NamedNode("urn:test:graph")
OTHER = NamedNode("urn:test:other")
S = NamedNode("urn:test:s")
P = NamedNode("urn:test:p")
DECOYS = [Literal("decoy"), Literal("} DROP ALL {"), NamedNode("http://example.org/decoy"),
          Triple(NamedNode("http://example.org/a"), NamedNode("http://example.org/b"), Literal("c"))]
INJECTION = Literal('"} DROP ALL { "')
INJECTION_IRI = NamedNode("http://example.org/" + quote("} DROP ALL {", safe=""))
INJECTION_TRIPLE = Triple(INJECTION_IRI, INJECTION_IRI, Literal("} DROP ALL {\n", language="en"))
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _seed(store: GraphStore, term: object) -> set[Quad]:
    """The store holds the term as an object in two quads, plus decoys; returns its content."""
    store.raw.clear()
    quads = [Quad(S, P, term, G), Quad(S, TG.contains, term, OTHER)]
    quads += [Quad(NamedNode(f"urn:test:decoy{i}"), P, decoy, graph) for i, decoy in enumerate(DECOYS)
              for graph in (G, OTHER) if decoy != term]
    store.extend(quads)
    return set(store.raw)


@PROPERTY
@given(term=terms)
@example(term=INJECTION)
@example(term=INJECTION_IRI)
@example(term=INJECTION_TRIPLE)
def test_a_bound_term_is_matched_exactly(store: GraphStore, term: object) -> None:
    before = _seed(store, term)
    rows = store.select("match_object", values={"o": [term], "g": [None]})
    assert sorted((row["s"].value, row["p"].value, row["g"].value) for row in rows) == [
        (S.value, TG.contains.value, OTHER.value), (S.value, P.value, G.value)]
    assert all(row["o"] == term for row in rows)
    assert [row["s"] for row in store.select("match_object", values={"o": [term], "g": [G]})] == [S]
    assert set(store.raw) == before


@PROPERTY
@given(term=terms)
@example(term=INJECTION)
@example(term=INJECTION_IRI)
@example(term=INJECTION_TRIPLE)
def test_a_term_in_values_is_matched_exactly(store: GraphStore, term: object) -> None:
    before = _seed(store, term)
    rows = store.select("match_objects", values={"o": [term], "g": [None]})
    assert sorted((row["s"].value, row["p"].value, row["g"].value) for row in rows) == [
        (S.value, TG.contains.value, OTHER.value), (S.value, P.value, G.value)]
    assert all(row["o"] == term for row in rows)
    both = store.select("match_objects", values={"g": [G], "o": [term, DECOYS[0]]})
    assert sorted((row["s"].value, row["o"] == term) for row in both) == sorted(
        [(S.value, True)] + ([("urn:test:decoy0", False)] if term != DECOYS[0] else []))
    assert set(store.raw) == before


@PROPERTY
@given(term=terms, other=terms)
@example(term=INJECTION, other=INJECTION_TRIPLE)
@example(term=INJECTION_TRIPLE, other=INJECTION)
def test_an_update_with_values_writes_exactly_its_rows(store: GraphStore, term: object, other: object) -> None:
    """Updates take parameters only through VALUES (test-only templates, run like GraphStore.update)."""
    before = _seed(store, other)
    insert = render_values(load_template("insert_quads", TEST_TEMPLATES), {("s", "p", "o", "g"): [(S, P, term, G)]})
    with store.writing() as raw:
        raw.update(insert)
    assert set(store.raw) == before | {Quad(S, P, term, G)}
    delete = render_values(load_template("delete_objects", TEST_TEMPLATES), {"o": [term]})
    with store.writing() as raw:
        raw.update(delete)
    assert set(store.raw) == {q for q in before | {Quad(S, P, term, G)} if q.object != term}


# --- dialect variants (sparql/{dialect}/) ------------------------------------------------------------------

REIFICATION_DIR = Path(__file__).parent.parent / "sparql" / "reification"
VARIANTS = sorted(p.stem for p in REIFICATION_DIR.glob("*.r[qu]"))
TRIPLE_TERM_SYNTAX = re.compile(r"<<|\bLATERAL\b|\bisTRIPLE\b|\b(SUBJECT|PREDICATE|OBJECT|TRIPLE)\s*\(", re.IGNORECASE)


@pytest.mark.parametrize("name", VARIANTS)
def test_each_reification_variant_replaces_a_template_in_plain_sparql_11_and_runs(name: str) -> None:
    """A variant has the common template's name and none of RDF 1.2 or Oxigraph's extensions, and runs
    (its ``#each`` groups expanded for two rows)."""
    assert name in template_names()
    text = load_template(name, REIFICATION_DIR)
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert not TRIPLE_TERM_SYNTAX.search(code), TRIPLE_TERM_SYNTAX.search(code)
    assert dialect_template(name, REIFICATION) == text and dialect_template(name, RDF12) == load_template(name)
    keys = {tuple(re.findall(r"\?(\w+)", m.group(1))) for m in EMPTY_VALUES.finditer(text)}
    filled = render_values(text, {key: [(DUMMY,) * len(key), (TG.other,) * len(key)] for key in keys},
                           REIFICATION)
    if name.endswith(("hop", "focus", "mentions")):
        assert "#each" in text and "UNION" in filled
    if template_path(name).suffix == ".rq":
        result = Store().query(filled)
        if not isinstance(result, QueryBoolean):
            list(result)
    else:
        Store().update(filled)


def test_an_each_group_keeps_its_limit_per_row() -> None:
    """``rag_hop`` without LATERAL: each frontier entity has its own LIMIT, in the frontier's order."""
    store = Store()
    hub, quiet = NamedNode("urn:test:hub"), NamedNode("urn:test:quiet")
    store.extend([Quad(hub, TG.link, NamedNode(f"urn:test:n{i}")) for i in range(10)] +
                 [Quad(quiet, TG.link, NamedNode("urn:test:only"))])
    text = render_limit(dialect_template("rag_hop", REIFICATION), 3)
    rows = [(row["s"], row["o"]) for row in store.query(render_values(text, {"e": [hub, quiet]}, REIFICATION))]
    assert [s for s, _ in rows] == [hub] * 3 + [quiet] and rows[-1][1] == NamedNode("urn:test:only")
    assert list(store.query(render_values(text, {"e": []}, REIFICATION))) == []


def test_each_groups_nest_a_branch_per_relation_in_each_entitys_and_keep_its_limit() -> None:
    """``rag_focus`` without LATERAL: inside each frontier entity's branch, one branch per relation (a group
    nested in the entity's, indented deeper); the entity's LIMIT holds over all its relations together, and
    where no limit binds the rows are the common template's."""
    store = Store()
    hub, quiet = NamedNode("urn:test:hub"), NamedNode("urn:test:quiet")
    store.extend([Quad(hub, TG.link, NamedNode(f"urn:test:n{i}")) for i in range(10)]
                 + [Quad(hub, TG.other, NamedNode(f"urn:test:m{i}")) for i in range(10)]
                 + [Quad(quiet, TG.link, NamedNode("urn:test:only")), Quad(DUMMY, TG.other, quiet),
                    Quad(quiet, TG.unasked, NamedNode("urn:test:never"))])
    values = {"e": [hub, quiet], "p": [TG.link, TG.other]}
    text = dialect_template("rag_focus", REIFICATION)
    filled = render_values(render_limit(text, 3), values, REIFICATION)
    code = "\n".join(line for line in filled.splitlines() if not line.lstrip().startswith("#"))
    assert code.count("VALUES ?p") == 2 * 2 * 2 and "#e" not in code  # every group expanded, none left
    rows = [(row["s"], row["p"], row["o"]) for row in store.query(filled)]
    assert len([row for row in rows if hub in (row[0], row[2])]) == 3  # over both relations
    assert {row for row in rows if quiet in (row[0], row[2])} == {
        (quiet, TG.link, NamedNode("urn:test:only")), (DUMMY, TG.other, quiet)}
    common = {(row["s"], row["p"], row["o"]) for row in store.query(render_values(load_template("rag_focus"), values))}
    assert {(row["s"], row["p"], row["o"]) for row in store.query(render_values(text, values, REIFICATION))} == common
    assert len(common) == 22


@pytest.mark.parametrize("text", [
    "SELECT * WHERE {\n  #each ?e\n  { VALUES ?e { } ?e ?p ?o }\n    #end\n}\n",  # #end deeper than its #each
    "SELECT * WHERE {\n  #each ?e\n  #each ?p\n  { VALUES ?e { } VALUES ?p { } ?e ?p ?o }\n  #end\n  #end\n}\n",
    "SELECT * WHERE {\n  #each ?e\n  { VALUES ?e { } ?e ?p ?o }\n}\n",  # never closed
    "SELECT * WHERE {\n  { ?s ?p ?o }\n  #end\n}\n",  # closes nothing
    "SELECT * WHERE {\n  #each ?e  # per entity\n  { VALUES ?e { } ?e ?p ?o }\n  #end\n}\n",  # more on its line
    "SELECT * WHERE {\n  #each ?e\n  { VALUES ?e { } ?e ?p ?o }\n  #end-of-group\n}\n",
])
def test_a_template_whose_groups_do_not_pair_by_indentation_is_refused(text: str) -> None:
    """A group that would not repeat (its LIMIT then one for every row) is an error when the template is read."""
    with pytest.raises(TemplateError, match="#e"):
        check_groups(text, "bad")


def test_a_group_closed_on_the_last_line_repeats() -> None:
    """An ``#end`` with no newline after it (the file's last line) still closes its group."""
    text = "SELECT * WHERE {\n  #each ?e\n  { SELECT * WHERE { VALUES ?e { } ?e ?p ?o } LIMIT 1 }\n  #end"
    check_groups(text, "last line")
    assert render_values(text, {"e": [DUMMY, TG.other]}).count("LIMIT 1") == 2


def test_a_rendered_literal_that_reads_like_an_empty_values_block_is_left_as_it_is() -> None:
    """Rows are spliced in after the template's text is read: a literal in the data spelling ``VALUES ?x { }``
    (an edge's object in a ``#each`` row, then a block of ``?x`` later in the text) is not filled itself."""
    text = "SELECT * WHERE {\n  #each ?s ?o\n  { VALUES (?s ?o) { } ?s ?p ?o }\n  #end\n  VALUES ?x { }\n}\n"
    tricky = Literal("VALUES ?x { }")
    store = Store()
    store.add(Quad(DUMMY, TG.says, tricky))
    filled = render_values(text, {("s", "o"): [(DUMMY, tricky)], "x": [TG.other]})
    assert [row["o"] for row in store.query(filled)] == [tricky]
