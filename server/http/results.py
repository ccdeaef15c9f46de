"""SPARQL query results (SELECT rows, ASK booleans) written as SPARQL JSON, XML, CSV and TSV.

pyoxigraph can only serialize a whole ``QuerySolutions`` iterator, which leaves no room to check a
deadline between rows: where the server evaluates a query itself (an in-memory store, a remote
engine's answer) it pulls the rows and writes them here; so does a query worker for XML and CSV,
which pyoxigraph writes wrongly (``solution_bytes.py`` writes JSON and TSV there). Written in the
same shapes as Oxigraph (RDF 1.2 triple terms included: ``{"type": "triple", ...}`` in JSON,
``<triple>`` in XML, ``<<( s p o )>>`` in TSV).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from xml.sax.saxutils import escape, quoteattr

from pyoxigraph import BlankNode, Literal, NamedNode, Triple

from server.vocab import XSD

Row = Sequence[object]  # one value (term or None) per variable
_BATCH = 500
_XSD_STRING = XSD.string.value


def _json_term(term: object) -> dict:
    if isinstance(term, NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, Triple):
        return {"type": "triple", "value": {"subject": _json_term(term.subject),
                                            "predicate": _json_term(term.predicate),
                                            "object": _json_term(term.object)}}
    assert isinstance(term, Literal)
    out = {"type": "literal", "value": term.value}
    if term.language:
        out["xml:lang"] = term.language
    elif term.datatype.value != _XSD_STRING:
        out["datatype"] = term.datatype.value
    return out


_XML_WHITESPACE = {"\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}  # as characters, a reader may trim them


def _xml_text(value: str) -> str:
    return escape(value, _XML_WHITESPACE)


def _xml_term(term: object) -> str:
    if isinstance(term, NamedNode):
        return f"<uri>{_xml_text(term.value)}</uri>"
    if isinstance(term, BlankNode):
        return f"<bnode>{_xml_text(term.value)}</bnode>"
    if isinstance(term, Triple):
        return (f"<triple><subject>{_xml_term(term.subject)}</subject><predicate>{_xml_term(term.predicate)}"
                f"</predicate><object>{_xml_term(term.object)}</object></triple>")
    assert isinstance(term, Literal)
    if term.language:
        return f"<literal xml:lang={quoteattr(term.language)}>{_xml_text(term.value)}</literal>"
    if term.datatype.value != _XSD_STRING:
        return f"<literal datatype={quoteattr(term.datatype.value)}>{_xml_text(term.value)}</literal>"
    return f"<literal>{_xml_text(term.value)}</literal>"


def _tsv_term(term: object) -> str:
    if term is None:
        return ""
    if isinstance(term, Triple):
        return f"<<( {_tsv_term(term.subject)} {_tsv_term(term.predicate)} {_tsv_term(term.object)} )>>"
    return str(term)


def _csv_value(term: object) -> str:
    if term is None:
        return ""
    if isinstance(term, Triple):
        text = " ".join(_csv_value(t) for t in (term.subject, term.predicate, term.object))
    elif isinstance(term, BlankNode):
        text = "_:" + term.value
    else:
        text = term.value  # type: ignore[union-attr]
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


class _Memo(dict):
    """Each distinct term rendered once per result (predicates and hubs repeat on many rows)."""

    def __init__(self, render: Callable[[object], str]) -> None:
        super().__init__()
        self.render = render

    def __missing__(self, term: object) -> str:
        text = self[term] = self.render(term)
        return text


def _json_fragment(term: object) -> str:
    return json.dumps(_json_term(term), ensure_ascii=False, separators=(",", ":"))


def _batched(rows: Sequence[Row]) -> Iterator[Sequence[Row]]:
    for start in range(0, len(rows), _BATCH):
        yield rows[start:start + _BATCH]


def _lines(rows: Sequence[Row], line: Callable[[Row], str], separator: str = "") -> Iterator[bytes]:
    first = True
    for batch in _batched(rows):
        text = separator.join(line(row) for row in batch)
        yield ((separator if not first else "") + text).encode()
        first = False


def write_solutions(fmt: str, variables: Sequence[str], rows: Sequence[Row]) -> Iterator[bytes]:
    """The SELECT result in ``fmt`` ("json", "xml", "csv", "tsv"), in chunks."""
    if fmt == "json":
        head = json.dumps({"head": {"vars": list(variables)}}, separators=(",", ":"))
        yield (head[:-1] + ',"results":{"bindings":[').encode()
        keys, memo = [json.dumps(v) + ":" for v in variables], _Memo(_json_fragment)
        yield from _lines(rows, lambda row: "{" + ",".join(k + memo[t] for k, t in zip(keys, row, strict=True)
                                                           if t is not None) + "}", ",")
        yield b"]}}"
    elif fmt == "xml":
        head = "".join(f"<variable name={quoteattr(v)}/>" for v in variables)
        yield (f'<?xml version="1.0"?><sparql xmlns="http://www.w3.org/2005/sparql-results#"><head>{head}'
               f"</head><results>").encode()
        keys, memo = [f"<binding name={quoteattr(v)}>" for v in variables], _Memo(_xml_term)
        yield from _lines(rows, lambda row: "<result>" + "".join(k + memo[t] + "</binding>" for k, t in zip(
            keys, row, strict=True) if t is not None) + "</result>")
        yield b"</results></sparql>"
    elif fmt == "csv":
        yield (",".join(variables) + "\r\n").encode()
        memo = _Memo(_csv_value)
        yield from _lines(rows, lambda row: ",".join(memo[t] for t in row) + "\r\n")
    else:
        yield ("\t".join("?" + v for v in variables) + "\n").encode()
        memo = _Memo(_tsv_term)
        yield from _lines(rows, lambda row: "\t".join(memo[t] for t in row) + "\n")


def write_boolean(fmt: str, value: bool) -> bytes:
    """The ASK result in ``fmt``."""
    text = "true" if value else "false"
    if fmt == "json":
        return json.dumps({"head": {}, "boolean": value}).encode()
    if fmt == "xml":
        return (f'<?xml version="1.0"?><sparql xmlns="http://www.w3.org/2005/sparql-results#"><head/>'
                f"<boolean>{text}</boolean></sparql>").encode()
    return (text + ("\r\n" if fmt == "csv" else "\n")).encode()
