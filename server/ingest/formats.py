"""Reading a document's bytes into pages of text: plain text, Markdown, HTML and PDF.

The format is decided from the bytes. A declared media type (or, without one, the file name's extension)
only chooses among the text formats, and must agree with the bytes: a PDF declared ``text/plain`` or a
PNG named ``notes.txt`` is refused. ``application/octet-stream`` declares nothing.

Text is UTF-8 (a byte order mark is dropped), or UTF-16 when it starts with a UTF-16 byte order mark:
Windows tools save "Unicode" text that way, and the mark makes it unambiguous (UTF-16 without one is full
of NUL bytes and is refused as binary). A ``charset`` parameter of the declared type is not read. Line
ends become LF once, on reading, so that chunk offsets index the stored text.

Pages: a plain text is one page; Markdown and HTML have a page per section (a heading starts one, the text
before the first heading is a page of its own unless blank; in HTML a heading with nothing under it opens the
next section instead); a PDF has its own pages, those without text kept empty. Every refusal is a typed
error: ``UnsupportedDocument`` (415) for bytes of no format read here
or not of the format declared, ``UnreadableDocument`` (422) for a known format that cannot be read.
"""
from __future__ import annotations

import html
import io
import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePath

from pypdf import PdfReader
from pypdf.errors import LimitReachedError

from server.errors import LimitExceeded, UnreadableDocument, UnsupportedDocument

PLAIN, MARKDOWN, HTML, PDF = "text/plain", "text/markdown", "text/html", "application/pdf"
MEDIA_TYPES = (PLAIN, MARKDOWN, HTML, PDF)
MAX_PDF_PAGES = 10_000
MAX_PAGES = 10_000  # pages (sections) of one document in every format, counted while reading: 2.5 million Markdown
# headings took 15 s and +1.2 GB before a count of the pages made
MAX_PDF_SECONDS = 30.0  # of text extraction, checked between pages (100 x 1 MB read in 7 s); an upload's reader
# is killed at GLASSGRAPH_DOCUMENT_SECONDS whatever it reads (server.http.document_readers)
READ_FORMATS = "plain text, Markdown, HTML and PDF"

_EXTENSIONS = {".txt": PLAIN, ".text": PLAIN, ".md": MARKDOWN, ".markdown": MARKDOWN, ".html": HTML,
               ".htm": HTML, ".pdf": PDF}
_UNDECLARED = {"", "application/octet-stream"}
_BINARY_SIGNATURES = (  # for a clearer refusal of common formats that are not read
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (or a format built on ZIP, such as .docx, .xlsx, .odt or .epub)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Microsoft Office file (.doc, .xls or .ppt)"),
    (b"\x1f\x8b", "a gzip archive"),
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")  # C0 controls but tab, LF, FF and CR
_CONTROL_BYTE = re.compile(_CONTROL.pattern.encode())
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_HTML_START = re.compile(r"\s*<(?:!doctype\s+html|html)[\s>]", re.IGNORECASE)
_EOF_WINDOW = 1024  # a PDF's %%EOF marker must be within its last KB
_PYPDF_MISSING_OBJECT = "Object %(idnum)d %(generation)d not defined."  # the template pypdf logs
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class Page:
    number: int  # 1-based
    title: str | None  # the section heading (Markdown/HTML), None for a PDF page or plain text
    text: str  # the page's text; chunk offsets index into exactly this string


@dataclass(frozen=True)
class Document:
    media_type: str  # one of MEDIA_TYPES
    title: str | None  # PDF /Title, the first Markdown H1, HTML <title> (else its first h1)
    pages: list[Page]


def media_type_of_name(name: str) -> str | None:
    """The media type a file name's extension stands for, None for an extension not read here."""
    return _EXTENSIONS.get(PurePath(name).suffix.lower())


def read_document(data: bytes, declared: str | None = None, name: str | None = None) -> Document:
    """The pages of ``data``. ``declared`` is a media type such as a Content-Type (parameters allowed);
    without it, ``name``'s extension declares one. Raises ``UnsupportedDocument`` or ``UnreadableDocument``."""
    media_type = checked_declaration(data, declared, name)
    if data.startswith(b"%PDF-"):
        return _read_pdf(data)
    text = _decode_text(data)
    if not text.strip():
        raise UnreadableDocument("the document is empty (only white space)")
    if media_type is None:
        media_type = HTML if _HTML_START.match(text) else PLAIN
    if media_type == HTML:
        return _read_html(text)
    if media_type == MARKDOWN:
        return _read_markdown(text)
    return Document(PLAIN, None, [Page(1, None, text)])


def checked_declaration(data: bytes, declared: str | None = None, name: str | None = None) -> str | None:
    """The media type declared for ``data`` (by ``declared``, else ``name``'s extension; None: no claim), once
    its first bytes are seen to agree with it (a PDF is one); ``UnsupportedDocument`` or ``UnreadableDocument``.
    Cheap: it reads no more of the document than its start."""
    media_type, claim = _declaration(declared, name)
    if not data:
        raise UnreadableDocument("the document is empty (0 bytes)")
    if data.startswith(b"%PDF-") and media_type not in (None, PDF):
        raise UnsupportedDocument(f"the document is a PDF, but {claim}")
    if not data.startswith(b"%PDF-") and media_type == PDF:
        raise UnsupportedDocument(f"the document is not a PDF (it does not start with %PDF-), but {claim}")
    return media_type


def _declaration(declared: str | None, name: str | None) -> tuple[str | None, str]:
    """The media type claimed for the document (None for no claim) and who claims it, for messages."""
    media_type = (declared or "").split(";")[0].strip().lower()
    if media_type not in _UNDECLARED:
        if media_type not in MEDIA_TYPES:
            raise UnsupportedDocument(f"documents of type {media_type!r} are not read; ingest reads "
                                      f"{READ_FORMATS} ({', '.join(MEDIA_TYPES)})")
        return media_type, f"it is declared {media_type}"
    by_name = media_type_of_name(name) if name is not None else None
    return by_name, f"its name {PurePath(name or '').name!r} says {by_name}"


def _decode_text(data: bytes) -> str:
    """UTF-8 (or UTF-16 with a byte order mark) text with LF line ends, or ``UnsupportedDocument``."""
    for signature, what in _BINARY_SIGNATURES:
        if data.startswith(signature):
            raise UnsupportedDocument(f"the document is {what}, not one of the formats ingest reads: {READ_FORMATS}")
    utf16 = data.startswith(_UTF16_BOMS)
    # In UTF-8 a byte below 0x80 is always that character, so controls are found before decoding: binary
    # bytes are called binary rather than bad UTF-8. UTF-16 is looked at once decoded.
    if not utf16:
        _refuse_controls(_CONTROL_BYTE.search(data), "byte")
    try:
        text = data.decode("utf-16" if utf16 else "utf-8-sig")
    except UnicodeDecodeError as error:
        raise UnsupportedDocument(
            f"the document is neither a PDF nor {'UTF-16' if utf16 else 'UTF-8'} text: the bytes at offset "
            f"{error.start} are not valid ({error.reason}); ingest reads {READ_FORMATS}") from None
    if utf16:
        _refuse_controls(_CONTROL.search(text), "character")
    return _lf_line_ends(text)


def _refuse_controls(control: re.Match | None, unit: str) -> None:
    if control:
        raise UnsupportedDocument(
            f"the document is binary, not text: it holds the control character U+{ord(control.group()):04X} at "
            f"{unit} {control.start()}; ingest reads {READ_FORMATS}")


def _lf_line_ends(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _read_pdf(data: bytes) -> Document:
    if b"%%EOF" not in data[-_EOF_WINDOW:]:
        raise UnreadableDocument("the PDF is truncated or corrupt: it has no %%EOF marker at its end")
    try:
        with _pypdf_warnings() as warnings:
            reader, texts = _pdf_page_texts(data)
            title = _pdf_title(reader)
    except UnreadableDocument:
        raise
    except LimitReachedError as error:
        raise UnreadableDocument(f"the PDF is too complex to read safely ({error})") from None
    except Exception as error:  # pypdf raises many kinds of errors on a corrupt file
        raise UnreadableDocument(f"the PDF is corrupt and cannot be read ({type(error).__name__}: {error})") from None
    missing = [record.getMessage() for record in warnings if record.msg == _PYPDF_MISSING_OBJECT]
    if missing:  # pypdf carries on without it, and a partial document would pass for the whole
        raise UnreadableDocument(f"the PDF is corrupt: some of its content is missing ({missing[0]})")
    if not texts:
        raise UnreadableDocument("the PDF has no pages")
    if not any(text.strip() for text in texts):
        raise UnreadableDocument("the PDF has no text layer (a scanned document?): none of its pages has text "
                                 "to extract")
    return Document(PDF, title, [Page(number, None, text) for number, text in enumerate(texts, 1)])


def _pdf_page_texts(data: bytes) -> tuple[PdfReader, list[str]]:
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise UnreadableDocument("the PDF is encrypted; ingest does not open encrypted PDFs, even those that "
                                 "open without a password: save an unencrypted copy and ingest that")
    _check_page_count(reader.root_object["/Pages"].get("/Count", 0))  # cheap, before the page tree is read
    _check_page_count(len(reader.pages))  # the page tree, which /Count may belie
    started, texts = time.monotonic(), []
    for number, page in enumerate(reader.pages, start=1):
        texts.append(_pdf_page_text(page.extract_text()))
        if time.monotonic() - started > MAX_PDF_SECONDS:
            raise UnreadableDocument(f"reading the PDF's text took more than {MAX_PDF_SECONDS:g} s (page {number} of "
                                     f"{len(reader.pages)}): it is too costly to read")
    return reader, texts


class _ThreadRecords(logging.Handler):
    """The records logged in the thread that made it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.records.append(record)


@contextmanager
def _pypdf_warnings() -> Iterator[list[logging.LogRecord]]:
    """The warnings pypdf logs (what it repaired or did without) while this thread reads a PDF."""
    handler = _ThreadRecords()
    logger = logging.getLogger("pypdf")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def _check_page_count(count: object) -> None:
    if isinstance(count, int) and count > MAX_PDF_PAGES:
        raise UnreadableDocument(f"the PDF has {count} pages, more than the {MAX_PDF_PAGES} ingest reads")


def _pdf_title(reader: PdfReader) -> str | None:
    title = reader.metadata.title if reader.metadata else None
    return (title.strip() or None) if isinstance(title, str) else None


def _pdf_page_text(text: str) -> str:
    """Extracted text with LF line ends, a lone surrogate (from a broken font map) made U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", _lf_line_ends(text))


# Markdown: ATX headings, setext headings (a line underlined by = or -) and the code fences that hide them,
# found line by line at once by one pattern.
_MARKDOWN_LINE = re.compile(
    r"^ {0,3}(?:(?P<hashes>#{1,6})(?:[ \t](?P<heading>.*))?|(?P<fence>`{3,}|~{3,})(?P<info>.*)"
    r"|(?P<setext>[^\n]*\S[^\n]*)\n {0,3}(?P<under>=+|-+)[ \t]*)$", re.MULTILINE)


def _read_markdown(text: str) -> Document:
    """Sections start at headings (ATX or setext) outside fenced code; a page's text is the section's raw
    Markdown."""
    starts: list[tuple[int, str | None]] = [(0, None)]
    title = None
    fence = ""
    for match in _MARKDOWN_LINE.finditer(text):
        if match["fence"]:
            if not fence and not (match["fence"][0] == "`" and "`" in match["info"]):
                fence = match["fence"]
            elif fence and match["fence"][0] == fence[0] and len(match["fence"]) >= len(fence) \
                    and not match["info"].strip():
                fence = ""
        elif (match["hashes"] or match["setext"]) and not fence:
            if len(starts) > MAX_PAGES:  # each heading starts a page (its line is not blank)
                raise _too_many_pages()
            heading = _heading_text(match["heading"] or "") if match["hashes"] else match["setext"].strip()
            starts.append((match.start(), heading))
            if title is None and (match["hashes"] == "#" or (match["under"] or "")[:1] == "="):
                title = heading
    bounds = [start for start, _ in starts[1:]] + [len(text)]
    sections = [(heading, text[start:end]) for (start, heading), end in zip(starts, bounds, strict=True)]
    return Document(MARKDOWN, title, _numbered(sections))


def _heading_text(line: str) -> str | None:
    """An ATX heading's text: without its optional closing sequence of ``#`` (preceded by a space)."""
    text = line.strip()
    unclosed = text.rstrip("#")
    if unclosed != text and (not unclosed or unclosed[-1] in " \t"):
        text = unclosed.rstrip()
    return text or None


def _too_many_pages() -> LimitExceeded:
    return LimitExceeded(f"the document has more than the {MAX_PAGES} pages (sections) one document may have")


def _numbered(sections: list[tuple[str | None, str]]) -> list[Page]:
    """The sections that are not blank, as pages numbered from 1."""
    kept = [(heading, text) for heading, text in sections if text.strip()]
    return [Page(number, heading, text) for number, (heading, text) in enumerate(kept, 1)]


def _read_html(text: str) -> Document:
    visible = _VisibleText()
    for kind, value in _html_tokens(text):
        if kind == "data":
            visible.data(value)
        elif kind == "start":
            visible.start(value)
        else:
            visible.end(value)
    visible.end_document()
    if not any(section_text.strip() for _, section_text in visible.sections):
        raise UnreadableDocument("the HTML document has no visible text")
    return Document(HTML, visible.title or visible.first_h1, _numbered(visible.sections))


# A small HTML tokenizer in place of html.parser, whose handling of malformed input is quadratic on older
# Pythons (3.11.7: "</" a million times took minutes). Each scan here starts where the last one ended.
# The name ends where a lookahead says, so that a failed match does not try every split of name and rest.
_MARKUP = re.compile(r"<[a-zA-Z/!?]")
_TAG_OPEN = re.compile(r"</?[a-zA-Z]")
_TAG_QUOTED = re.compile(r"<(/?)([a-zA-Z][^\s/>]*)(?=[\s/>])[^\"'>]*(?:(?:\"[^\"]*\"|'[^']*')[^\"'>]*)*>")
_TAG_PLAIN = re.compile(r"<(/?)([a-zA-Z][^\s/>]*)(?=[\s/>])[^>]*>")  # after an unclosed quote: the first > ends it
_RAW_TEXT = {"script", "style", "title", "textarea", "noscript"}  # their text runs to their end tag


def _html_tokens(text: str) -> Iterator[tuple[str, str]]:
    """``("start"|"end", tag name)`` and ``("data", text with character references decoded)``, in order."""
    tag_pattern = _TAG_QUOTED
    position = data_start = 0
    length = len(text)
    while markup := _MARKUP.search(text, position):  # a "<" that opens nothing is text
        less, tag = markup.start(), None
        if _TAG_OPEN.match(text, less):
            tag = tag_pattern.match(text, less)
            if tag is None and tag_pattern is _TAG_QUOTED:
                tag_pattern = _TAG_PLAIN  # an unclosed quote: so as not to scan past it again, quotes stop counting
                tag = tag_pattern.match(text, less)
        if less > data_start:
            yield "data", html.unescape(text[data_start:less])
        if tag:
            name = tag[2].lower()
            yield ("end" if tag[1] else "start"), name
            position = tag.end()
            if name in _RAW_TEXT and not tag[1]:
                close = re.compile(rf"</{name}[\s/>]", re.IGNORECASE).search(text, position)
                end = close.start() if close else length
                yield "data", text[position:end] if name in ("script", "style") else html.unescape(text[position:end])
                position = end
        elif text.startswith("<!--", less):
            close = text.find("-->", less + 4)
            position = length if close < 0 else close + 3
        else:  # a declaration, processing instruction, bogus comment or a tag with no end: to the next >
            close = text.find(">", less + 1)
            position = length if close < 0 else close + 1
        data_start = position
    if data_start < length:
        yield "data", html.unescape(text[data_start:])


_HIDDEN = {"script", "style", "template", "noscript", "title"}
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = _HEADINGS | {
    "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr", "li", "main", "menu", "nav",
    "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot", "thead", "tr", "ul"}
_CELLS = {"td", "th"}
_HTML_SPACE = re.compile(r"[ \t\n\r\f]+")


class _VisibleText:
    """The visible text of an HTML document as sections ``(heading, text)``: block elements end a
    paragraph, ``<br>`` a line, headings start a section. It keeps counts, not a stack of open elements,
    so nesting depth costs nothing."""

    def __init__(self) -> None:
        self.sections: list[tuple[str | None, str]] = []
        self.title: str | None = None
        self.first_h1: str | None = None
        self._hidden = 0  # depth inside script, style, template, noscript, title
        self._in_head = False
        self._title_parts: list[str] | None = None  # collecting <title>
        self._heading_parts: list[str] | None = None  # collecting the heading that starts this section
        self._heading_tag = ""
        self._section_heading: str | None = None
        self._lines: list[str] = []
        self._carried: list[str] = []  # bare headings waiting for the next section's text
        self._line: list[str] = []
        self._paragraph_ended = False
        self._pre = 0

    def start(self, tag: str) -> None:
        if tag == "title" and self.title is None:
            self._title_parts = []
        if tag in _HIDDEN:
            self._hidden += 1
        elif tag == "head":
            self._in_head = True
        elif tag == "body":
            self._in_head = False
        if self._hidden or self._in_head:
            return
        if tag in _HEADINGS:
            self.end_section()
            self._heading_parts, self._heading_tag = [], tag
        if tag == "br":
            self._end_line()
        elif tag in _BLOCKS:
            self._end_paragraph()
        elif tag in _CELLS:
            self._line.append(" ")
        if tag == "pre":
            self._pre += 1

    def end(self, tag: str) -> None:
        if tag == "title" and self._title_parts is not None:
            self.title = _HTML_SPACE.sub(" ", "".join(self._title_parts)).strip() or None
            self._title_parts = None
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "head":
            self._in_head = False
        if self._hidden or self._in_head:
            return
        if tag == self._heading_tag and self._heading_parts is not None:
            heading = _HTML_SPACE.sub(" ", "".join(self._heading_parts)).strip() or None
            self._section_heading, self._heading_parts = heading, None
            if tag == "h1" and self.first_h1 is None:
                self.first_h1 = heading
        if tag in _BLOCKS:
            self._end_paragraph()
        if tag == "pre":
            self._pre = max(0, self._pre - 1)

    def data(self, data: str) -> None:
        if self._title_parts is not None:
            self._title_parts.append(data)
        if self._hidden or self._in_head:
            return
        if self._heading_parts is not None:
            self._heading_parts.append(data)
        if not self._pre:
            self._line.append(data)
            return
        first, *rest = data.split("\n")
        self._line.append(first)
        for line in rest:
            self._end_line()
            self._line.append(line)

    def _end_line(self) -> None:
        line = _HTML_SPACE.sub(" ", "".join(self._line)).strip()
        self._line = []
        if line:
            if self._paragraph_ended and self._lines:
                self._lines.append("")
            self._lines.append(line)
            self._paragraph_ended = False

    def _end_paragraph(self) -> None:
        self._end_line()
        self._paragraph_ended = True

    def end_section(self) -> None:
        """Close the section being read (at a heading, and at the end of the document). A section that is only
        its heading (an author's name on a title page, a chapter's heading right before its first section) is
        no page: its line opens the next section's text, and the first such heading names that page."""
        self._end_line()
        if self._section_heading is not None and self._lines == [self._section_heading]:
            self._carried.append(self._section_heading)
            self._section_heading, self._lines, self._paragraph_ended = None, [], False
            return
        text = "\n\n".join(self._carried + ["\n".join(self._lines)]) if self._lines else ""
        if text.strip():  # a blank section is no page
            if len(self.sections) == MAX_PAGES:
                raise _too_many_pages()
            self.sections.append((self._carried[0] if self._carried else self._section_heading, text))
            self._carried = []
        self._section_heading, self._lines, self._paragraph_ended = None, [], False

    def end_document(self) -> None:
        """The last section, and any bare headings before the end: on the last page (or one of their own)."""
        self.end_section()
        if not self._carried:
            return
        if self.sections:
            heading, text = self.sections[-1]
            self.sections[-1] = (heading, "\n\n".join([text, *self._carried]))
        else:
            self.sections.append((self._carried[0], "\n\n".join(self._carried)))
