"""A request body as the RDF documents it carries: itself, or each part of a ``multipart/form-data``
body (Graph Store Protocol section 5.5: the parts are merged into the graph).

Parts are read with the standard library's MIME parser, which keeps each part's own Content-Type
whether or not it names a file (werkzeug's form parser turns a part without a file name into text
and drops its type). The body is already whole in memory, within ``GLASSGRAPH_MAX_BODY``.
"""
from __future__ import annotations

from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP

from server.errors import BadRequest, UnsupportedMediaType

MULTIPART = "multipart/form-data"


@dataclass(frozen=True)
class Document:
    media_type: str  # lower case, without parameters ("" when the request has no Content-Type)
    data: bytes
    label: str  # for messages: "" for a whole body, " (part 2: lastName.ttl)" for a part


def _media_type(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


def body_parts(content_type: str | None, body: bytes) -> list[Document]:
    """The documents of a body sent with ``content_type``; 400 for a malformed multipart body, 415 for
    a part without its Content-Type."""
    media = _media_type(content_type)
    if media != MULTIPART:
        return [Document(media, body, "")]
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", errors="replace")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    parts = list(message.iter_parts()) if message.is_multipart() else []
    if message.defects or not parts:
        raise BadRequest("malformed multipart/form-data body (a boundary parameter, then parts between "
                         "boundary lines); nothing was written")
    documents = []
    for number, part in enumerate(parts, 1):
        label = f" (part {number}" + (f": {part.get_filename()})" if part.get_filename() else ")")
        if part.get("Content-Type") is None:
            raise UnsupportedMediaType(f"the multipart part{label} has no Content-Type: give each part the media "
                                       "type of its RDF document; nothing was written")
        documents.append(Document(part.get_content_type(), part.get_payload(decode=True) or b"", label))
    return documents
