"""SELECT answers written by pyoxigraph within the byte and row limits (server/http/solution_bytes.py): the rows
counted from the bytes as the solutions are, whatever the literals hold; the limits exact at their edge, the row
limit named when both are passed; the same solutions as the Python writer that the in-process path keeps (and
that writes XML, whose whitespace it keeps)."""
from __future__ import annotations

import random
import xml.etree.ElementTree as ElementTree

import pytest
from pyoxigraph import BlankNode, Literal, NamedNode, Quad, QueryResultsFormat, Store, Triple, parse_query_results

from server.errors import LimitExceeded
from server.http.results import write_solutions
from server.http.solution_bytes import FORMATS, MIN_JSON_ROW_BYTES, json_rows, serialized_solutions

EX = "http://example.org/"
# Literals that look like the structure each count reads: JSON row boundaries and keys, XML elements, line
# and record ends, quotes and tabs, and nothing at all.
TRICKY = ['},{', '"":[', '}},{"x":{', '<result>', '</result><result>', 'a\nb', 'a\r\nb', '"', '\\', '\t',
          'x,y', '', 'é 漢字 😀', ']}}', '{}']


def _term(rng: random.Random) -> object:
    kind = rng.randrange(6)
    if kind == 0:
        return None
    if kind == 1:
        return NamedNode(f"{EX}n{rng.randrange(5)}")
    if kind == 2:
        return BlankNode(f"b{rng.randrange(5)}")
    if kind == 3:
        return Literal(rng.choice(TRICKY), language="en") if rng.random() < 0.3 else Literal(rng.choice(TRICKY))
    if kind == 4:
        return Literal(str(rng.randrange(100)), datatype=NamedNode("http://www.w3.org/2001/XMLSchema#integer"))
    return Triple(NamedNode(EX + "s"), NamedNode(EX + "p"), Literal(rng.choice(TRICKY)))


def _rows(rng: random.Random, width: int, count: int) -> list[tuple[object, ...]]:
    return [tuple(_term(rng) for _ in range(width)) for _ in range(count)]


def _solutions(store: Store, width: int, rows: list[tuple[object, ...]]) -> object:
    """A query whose solutions are ``rows``: each row stored as a subject with a column per bound value, read
    back in order with an OPTIONAL per column (unbound where the row has None)."""
    store.clear()
    variables = [f"v{i}" for i in range(width)]
    for number, row in enumerate(rows):
        subject = NamedNode(f"{EX}row{number:06d}")
        for column, term in enumerate(row):
            if term is not None:
                store.add(Quad(subject, NamedNode(f"{EX}c{column}"), term))
        store.add(Quad(subject, NamedNode(EX + "row"), Literal(number)))
    optional = " ".join(f"OPTIONAL {{ ?r <{EX}c{i}> ?v{i} }}" for i in range(width))
    return store.query(f"SELECT {' '.join('?' + v for v in variables) or '*'} WHERE {{ ?r <{EX}row> ?n {optional} }}"
                       " ORDER BY ?n")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("seed", range(6))
def test_rows_are_counted_from_the_bytes_whatever_the_literals_hold(fmt: str, seed: int) -> None:
    rng = random.Random(seed)
    store = Store()
    width, count = rng.randrange(0, 4), rng.randrange(0, 40)
    rows = _rows(rng, width, count)
    body = serialized_solutions(_solutions(store, width, rows), fmt, 10**6, count)  # exactly at the limit: kept
    assert body == _solutions(store, width, rows).serialize(format=FORMATS[fmt])
    if count:
        with pytest.raises(LimitExceeded, match="GLASSGRAPH_MAX_ROWS"):
            serialized_solutions(_solutions(store, width, rows), fmt, 10**6, count - 1)
    if fmt == "json":
        assert json_rows(body) == count
        assert len(body) >= MIN_JSON_ROW_BYTES * count  # the bound that lets short answers skip the count


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_row_limit_is_exact_at_its_edge_even_for_the_shortest_rows(fmt: str) -> None:
    """Rows with nothing bound are the shortest a format writes: the count must run for them at the limit."""
    store = Store()
    query = "SELECT ?x WHERE { VALUES ?n { 1 2 3 4 5 6 7 8 9 10 } }"
    assert len(serialized_solutions(store.query(query), fmt, 10_000, 10)) > 0
    with pytest.raises(LimitExceeded, match="GLASSGRAPH_MAX_ROWS"):
        serialized_solutions(store.query(query), fmt, 10_000, 9)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_answer_over_both_limits_names_the_row_limit(fmt: str) -> None:
    """10^6 rows of nothing against a limit of 10 rows and 200 bytes: the rows are what is wrong with it."""
    digits = "VALUES ?%s { 0 1 2 3 4 5 6 7 8 9 }"
    query = "SELECT ?x WHERE { " + " ".join(digits % name for name in "abcdef") + " }"
    with pytest.raises(LimitExceeded, match="GLASSGRAPH_MAX_ROWS"):
        serialized_solutions(Store().query(query), fmt, 200, 10)


def test_an_answer_over_its_byte_limit_stops_while_it_is_written() -> None:
    store = Store()
    store.extend([Quad(NamedNode(f"{EX}s{i}"), NamedNode(EX + "p"), Literal("x" * 100)) for i in range(2_000)])
    whole = store.query("SELECT * WHERE { ?s ?p ?o }").serialize(format=QueryResultsFormat.JSON)
    assert len(serialized_solutions(store.query("SELECT * WHERE { ?s ?p ?o }"), "json", len(whole), 10**6)) == \
        len(whole)
    with pytest.raises(LimitExceeded, match="GLASSGRAPH_MAX_RESULT_BYTES"):
        serialized_solutions(store.query("SELECT * WHERE { ?s ?p ?o }"), "json", len(whole) - 1, 10**6)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_same_solutions_as_the_python_writer(fmt: str) -> None:
    rng = random.Random(7)
    store = Store()
    rows = _rows(rng, 3, 30)
    variables = ["v0", "v1", "v2"]
    ours = serialized_solutions(_solutions(store, 3, rows), fmt, 10**6, 10**6)
    theirs = b"".join(write_solutions(fmt, variables, [tuple(s) for s in _solutions(store, 3, rows)]))
    assert [tuple(s) for s in parse_query_results(ours, format=FORMATS[fmt])] == \
        [tuple(s) for s in parse_query_results(theirs, format=FORMATS[fmt])]


def test_the_python_xml_writer_keeps_whitespace_for_any_xml_reader() -> None:
    """A tab, newline or carriage return in a literal, read back by a plain XML parser (which normalizes raw line
    ends and may drop whitespace-only text), is what was stored."""
    values = ["\t", "a\r\nb\rc", " \n ", "x\ty"]
    body = b"".join(write_solutions("xml", ["v"], [(Literal(v),) for v in values]))
    literals = ElementTree.fromstring(body).iter("{http://www.w3.org/2005/sparql-results#}literal")
    assert [element.text for element in literals] == values


@pytest.mark.parametrize("seed", range(4))
def test_the_first_rows_of_a_tsv_answer_are_its_rows_to_the_one_whatever_follows(seed: int) -> None:
    rng, store = random.Random(seed), Store()
    width, count = rng.randrange(1, 4), rng.randrange(5, 40)
    rows = _rows(rng, width, count)
    whole = list(parse_query_results(serialized_solutions(_solutions(store, width, rows), "tsv", 10**7, count),
                                     format=QueryResultsFormat.TSV))
    first = rng.randrange(1, count)
    cut = serialized_solutions(_solutions(store, width, rows), "tsv", 10**7, count - 1, first_rows=first)
    assert list(parse_query_results(cut, format=QueryResultsFormat.TSV)) == whole[:first]
    with pytest.raises(LimitExceeded):  # more rows asked for than the limit: the limit holds
        serialized_solutions(_solutions(store, width, rows), "tsv", 10**7, first - 1, first_rows=first)
