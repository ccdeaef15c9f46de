"""``multipart/form-data`` bodies: their parts, and a request body as the RDF documents it carries
(itself, or each part: Graph Store Protocol section 5.5 merges the parts into the graph).

Parts are read with python-multipart's streaming parser (the one Starlette and FastAPI read forms
with): a state machine linear in the body that bounds each part's headers, their count and the length
of each line; the number of parts is bounded here. Header parameters (``name``, ``filename``,
``boundary``) are split by its ``parse_options_header``, which neither parses comments nor decodes
RFC 2047 words. The standard library's email parser did both: a ``name=`` followed by 5,000 ``(``
overflowed its recursion (500) and a file name of repeated ``=?utf-8?q?a?=`` took time and memory
quadratic in its length. Each part keeps its own Content-Type whether or not it names a file
(werkzeug's form parser turns a part without a file name into text and drops its type). The body is
already whole in memory, within ``GLASSGRAPH_MAX_BODY``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from server.errors import BadRequest, ContentTooLarge, UnsupportedMediaType

MULTIPART = "multipart/form-data"
MAX_PARTS = 256  # of one body
MAX_PART_HEADERS = 16  # of one part
MAX_HEADER_LINE = 4096  # bytes of one header line of a part


@dataclass
class Part:
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case; values as sent (Latin-1)
    chunks: list[bytes] = field(default_factory=list)

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    @property
    def media_type(self) -> str:
        """The Content-Type's media type in lower case, without parameters ("" without one)."""
        return media_type(self.content_type)

    def _disposition(self, key: bytes) -> str | None:
        value = parse_options_header(self.headers.get("content-disposition", ""))[1].get(key)
        return None if value is None else value.decode("utf-8", "replace")  # header bytes as sent: UTF-8 by RFC 7578

    @property
    def name(self) -> str | None:
        """The form field's name (Content-Disposition's ``name``)."""
        return self._disposition(b"name")

    @property
    def filename(self) -> str | None:
        return self._disposition(b"filename") or None


def media_type(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


def form_parts(content_type: str | None, body: bytes) -> list[Part]:
    """The parts of a ``multipart/form-data`` body sent with ``content_type``: 400 for a body that is not
    one (no boundary, bad framing, a part's header too long or too many), 413 past ``MAX_PARTS`` parts."""
    malformed = ("malformed multipart/form-data body (a boundary parameter, then parts between boundary lines, "
                 "each with at most {} header lines of at most {} bytes){}; nothing was written")
    if len(content_type or "") > MAX_HEADER_LINE:
        raise BadRequest(malformed.format(MAX_PART_HEADERS, MAX_HEADER_LINE, ": its Content-Type is too long"))
    boundary = parse_options_header(content_type or "")[1].get(b"boundary")
    if not boundary:
        raise BadRequest(malformed.format(MAX_PART_HEADERS, MAX_HEADER_LINE, ": the boundary parameter is missing"))
    parts: list[Part] = []
    header: list[bytes] = []
    value: list[bytes] = []
    ended = []

    def part_begin() -> None:
        if len(parts) == MAX_PARTS:
            raise ContentTooLarge(f"the multipart body has more than {MAX_PARTS} parts; nothing was written")
        parts.append(Part())

    def header_end() -> None:
        parts[-1].headers[b"".join(header).decode("latin-1").strip().lower()] = b"".join(value).decode("latin-1")
        header.clear()
        value.clear()

    callbacks = {
        "on_part_begin": part_begin,
        "on_part_data": lambda data, start, end: parts[-1].chunks.append(data[start:end]),
        "on_header_field": lambda data, start, end: header.append(data[start:end]),
        "on_header_value": lambda data, start, end: value.append(data[start:end]),
        "on_header_end": header_end,
        "on_end": lambda: ended.append(True),
    }
    try:
        parser = MultipartParser(boundary, callbacks, max_header_count=MAX_PART_HEADERS,
                                 max_header_size=MAX_HEADER_LINE)
        parser.write(body)
        parser.finalize()
    except FormParserError as error:
        raise BadRequest(malformed.format(MAX_PART_HEADERS, MAX_HEADER_LINE, f": {error}")) from None
    if not ended or not parts:
        raise BadRequest(malformed.format(MAX_PART_HEADERS, MAX_HEADER_LINE, ": it has no closing boundary line"
                                          if parts else ": it has no parts"))
    return parts


@dataclass(frozen=True)
class Document:
    media_type: str  # lower case, without parameters ("" when the request has no Content-Type)
    data: bytes
    label: str  # for messages: "" for a whole body, " (part 2: lastName.ttl)" for a part


def body_parts(content_type: str | None, body: bytes) -> list[Document]:
    """The documents of a body sent with ``content_type``; 400 for a malformed multipart body, 413 for one of
    too many parts, 415 for a part without its Content-Type."""
    if media_type(content_type) != MULTIPART:
        return [Document(media_type(content_type), body, "")]
    documents = []
    for number, part in enumerate(form_parts(content_type, body), 1):
        label = f" (part {number}" + (f": {part.filename})" if part.filename else ")")
        if part.content_type is None:
            raise UnsupportedMediaType(f"the multipart part{label} has no Content-Type: give each part the media "
                                       "type of its RDF document; nothing was written")
        documents.append(Document(part.media_type, part.data, label))
    return documents
