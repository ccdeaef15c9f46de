"""The W3C SPARQL 1.1 Protocol and Graph Store Protocol test manifests (``tests/w3c/``) read into
plain objects: each test, the data it loads first, and its HTTP requests with what each response
must be. The manifests' vocabulary: ``mf:`` (test manifest), ``ht:`` (HTTP in RDF), ``cnt:``
(content as text), ``hts:`` (status codes), ``ut:graphData`` (data files loaded into named graphs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pyoxigraph import BlankNode, NamedNode, RdfFormat, Store, parse

W3C_DIR = Path(__file__).resolve().parent / "w3c"
PROTOCOL_MANIFEST = W3C_DIR / "protocol" / "manifest.ttl"
GRAPH_STORE_MANIFEST = W3C_DIR / "graph-store-protocol" / "manifest.ttl"

_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_MF = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#"
_HT = "http://www.w3.org/2011/http#"
_CNT = "http://www.w3.org/2011/content#"
_HTS = "http://www.w3.org/2011/http-statusCodes#"
_UT = "http://www.w3.org/2009/sparql/tests/test-update#"
_STATUS = {"OK": (200,), "Created": (201,), "NoContent": (204,), "NotFound": (404,),
           **{f"StatusCode{n}xx": tuple(range(n * 100, n * 100 + 100)) for n in range(1, 6)}}

Node = NamedNode | BlankNode


@dataclass(frozen=True)
class Expected:
    """What one response must be: its status among ``statuses``; optionally a boolean result, a kind
    of result (``"boolean"``, ``"tabular"`` or ``"RDF"``), response headers, an RDF body (Turtle) and
    a ``Location`` to remember under a template name."""

    statuses: frozenset[int]
    boolean: bool | None = None
    result_format: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    location_variable: str | None = None


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # the manifest's ht:absolutePath, for the authority www.example
    headers: dict[str, str]
    body: bytes | None
    expected: Expected


@dataclass(frozen=True)
class ManifestTest:
    name: str  # the local name of the test's IRI, e.g. "query_post_form"
    title: str  # mf:name
    listed: bool  # in mf:entries (head_non_existing_direct is defined but not listed)
    graph_data: list[tuple[Path, str]]  # (data file, the named graph to load it into), in order
    requests: list[Request]


class _Graph:
    """A manifest file (and the files it includes) as a queryable set of triples."""

    def __init__(self, path: Path) -> None:
        self.store = Store()
        self.files = self._load(path)

    def _load(self, path: Path) -> list[Path]:
        self.store.bulk_extend(parse(path=str(path), format=RdfFormat.TURTLE, base_iri=path.as_uri()))
        files = [path]
        for included in self.objects(NamedNode(path.as_uri()), _MF + "include"):
            for item in self.items(included):
                files += self._load(Path(item.value.removeprefix("file://")))
        return files

    def objects(self, subject: Node, predicate: str) -> list:
        return [q.object for q in self.store.quads_for_pattern(subject, NamedNode(predicate), None)]

    def one(self, subject: Node, predicate: str) -> object | None:
        values = self.objects(subject, predicate)
        assert len(values) <= 1, f"{subject} has {len(values)} {predicate}"
        return values[0] if values else None

    def text(self, subject: Node, predicate: str) -> str | None:
        value = self.one(subject, predicate)
        return None if value is None else value.value

    def items(self, head: object) -> list:
        """The members of an RDF list."""
        members = []
        while head != NamedNode(_RDF + "nil"):
            members.append(self.one(head, _RDF + "first"))
            head = self.one(head, _RDF + "rest")
        return members

    def subjects_of_type(self, type_iri: str) -> list[Node]:
        return [q.subject for q in self.store.quads_for_pattern(None, NamedNode(_RDF + "type"), NamedNode(type_iri))]


def _headers(graph: _Graph, node: Node) -> dict[str, str]:
    headers_list = graph.one(node, _HT + "headers")
    if headers_list is None:
        return {}
    return {graph.text(h, _HT + "fieldName"): graph.text(h, _HT + "fieldValue") for h in graph.items(headers_list)}


def _body(graph: _Graph, node: Node) -> tuple[str | None, str]:
    """The body's characters and their encoding."""
    body = graph.one(node, _HT + "body")
    if body is None:
        return None, "UTF-8"
    return graph.text(body, _CNT + "chars"), graph.text(body, _CNT + "characterEncoding") or "UTF-8"


def _expected(graph: _Graph, response: Node) -> Expected:
    statuses = frozenset(code for status in graph.objects(response, _MF + "expectedStatus")
                         for code in _STATUS[status.value.removeprefix(_HTS)])
    boolean = graph.one(response, _MF + "expectedBoolean")
    body, _ = _body(graph, response)
    return Expected(statuses, None if boolean is None else boolean.value == "true",
                    graph.text(response, _MF + "expectedFormat"), _headers(graph, response), body,
                    graph.text(response, _MF + "expectedLocation"))


def _request(graph: _Graph, node: Node) -> Request:
    chars, encoding = _body(graph, node)
    return Request(graph.text(node, _HT + "methodName"), graph.text(node, _HT + "absolutePath"),
                   _headers(graph, node), None if chars is None else chars.encode(encoding),
                   _expected(graph, graph.one(node, _HT + "resp")))


def read_manifest(path: Path, test_type: str) -> list[ManifestTest]:
    """Every test of ``test_type`` (``ProtocolTest`` or ``GraphStoreProtocolTest``) defined in the
    manifest at ``path`` and the manifests it includes: the listed ones in manifest order, then any
    defined but not listed."""
    graph = _Graph(path)
    listed = [test for file in graph.files for entries in graph.objects(NamedNode(file.as_uri()), _MF + "entries")
              for test in graph.items(entries)]
    unlisted = sorted(set(graph.subjects_of_type(_MF + test_type)) - set(listed), key=str)
    tests = []
    for node in listed + unlisted:
        connection = graph.one(node, _MF + "action")
        data = [(Path(graph.text(d, _UT + "graph").removeprefix("file://")), graph.text(d, _RDFS + "label"))
                for d in graph.objects(node, _UT + "graphData")]
        tests.append(ManifestTest(node.value.rpartition("#")[2], graph.text(node, _MF + "name"), node in listed,
                                  sorted(data, key=lambda item: item[0].name),
                                  [_request(graph, r) for r in graph.items(graph.one(connection, _HT + "requests"))]))
    return tests
