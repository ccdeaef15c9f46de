"""Reading documents into pages: real files of each format built here, and every kind of refusal."""
from __future__ import annotations

import io
import zipfile

import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from server.errors import UnreadableDocument, UnsupportedDocument
from server.ingest import formats
from server.ingest.formats import Document, Page, media_type_of_name, read_document

PAGES = ["Alpha is the first page of the report.", "Beta holds the second page's findings.",
         "Gamma closes the report on page three."]


def make_pdf(texts: list[str], title: str | None = None) -> bytes:
    """A real PDF with one page per text (an empty text makes a page with nothing on it)."""
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("helvetica", size=12)
    for text in texts:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def written_pdf(reader: PdfReader | None = None, password: str | None = None) -> bytes:
    writer = PdfWriter(clone_from=reader) if reader else PdfWriter()
    if password is not None:
        writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# Plain text

def test_plain_text_is_one_page_with_line_ends_made_lf() -> None:
    document = read_document(b"first line\r\nsecond line\rthird\n", name="notes.txt")
    assert document == Document("text/plain", None, [Page(1, None, "first line\nsecond line\nthird\n")])


def test_text_without_a_declaration_or_known_name_is_plain_text() -> None:
    assert read_document("caf\u00e9 \u2014 ok".encode()).pages == [Page(1, None, "caf\u00e9 \u2014 ok")]
    assert read_document(b"hello", name="README").media_type == "text/plain"
    assert read_document(b"hello", declared="application/octet-stream").media_type == "text/plain"


def test_a_utf8_byte_order_mark_is_dropped_and_utf16_with_one_is_read() -> None:
    assert read_document(b"\xef\xbb\xbfbom text").pages[0].text == "bom text"
    for encoding in ("utf-16-le", "utf-16-be"):
        data = "\ufeffUTF-16 text \u00e9\r\n".encode(encoding)
        assert read_document(data, name="windows.txt").pages[0].text == "UTF-16 text \u00e9\n"


def test_tabs_and_form_feeds_are_text() -> None:
    assert read_document(b"a\tb\fc").pages[0].text == "a\tb\fc"


# Markdown

MARKDOWN = """Preamble before any heading.

# Main Title

Intro paragraph.

```python
# a comment, not a heading
x = 1
```

## Details ##
~~~
## also not a heading
~~~
Detail text with a #hashtag.
####### seven hashes is text
### Last
"""


def test_markdown_sections_are_pages_of_raw_markdown() -> None:
    document = read_document(MARKDOWN.encode(), name="guide.md")
    assert document.media_type == "text/markdown"
    assert document.title == "Main Title"
    assert [(page.number, page.title) for page in document.pages] == [
        (1, None), (2, "Main Title"), (3, "Details"), (4, "Last")]
    assert "".join(page.text for page in document.pages) == MARKDOWN  # each page is an exact slice
    assert document.pages[1].text.startswith("# Main Title\n")
    assert "# a comment, not a heading" in document.pages[1].text
    assert "## also not a heading" in document.pages[2].text
    assert "####### seven hashes is text" in document.pages[2].text


def test_markdown_blank_preamble_is_no_page_and_line_ends_are_lf() -> None:
    document = read_document(b"\r\n  \r\n## Only\r\ntext\r\n", declared="text/markdown; charset=utf-8")
    assert document.title is None  # no H1
    assert document.pages == [Page(1, "Only", "## Only\ntext\n")]


def test_setext_headings_start_pages_and_a_rule_after_a_blank_line_does_not() -> None:
    text = ("httplib2\n========\n\nA library.\n\nInstallation\n------------\npip install httplib2\n\n"
            "```\nnot\n---\n```\n\nUsage\n---\nCall it.\n\n---\n\nAfter a rule.\n")
    document = read_document(text.encode(), name="README.md")
    assert document.title == "httplib2"
    assert [page.title for page in document.pages] == ["httplib2", "Installation", "Usage"]
    assert "".join(page.text for page in document.pages) == text and "After a rule." in document.pages[2].text


def test_an_unclosed_fence_hides_the_headings_after_it() -> None:
    document = read_document(b"# One\n````\n# not\n```\n# still not\n", declared="text/markdown")
    assert [page.title for page in document.pages] == ["One"]


def test_backticks_in_the_info_string_make_no_fence() -> None:
    document = read_document(b"# One\n```inline `code` here\n# Two\n", declared="text/markdown")
    assert [page.title for page in document.pages] == ["One", "Two"]


# HTML

HTML = b"""<!DOCTYPE html>
<html><head><title>  The   Page </title>
<style>body { color: red }</style><script>var hidden = "<p>no</p>";</script>
<meta name="x" content="not text"></head>
<body>
<p>Lead paragraph with <b>bold</b> &amp; an entity.</p>
<noscript><p>enable scripts</p></noscript><template><p>template text</p></template>
<h1>First <i>Section</i></h1>
<p>One<br>Two</p>
<div title="a > b">Quoted attribute</div>
<h2>Second</h2>
<ul><li>item one</li><li>item two</li></ul>
<table><tr><td>cell a</td><td>cell b</td></tr></table>
<pre>keep
  lines</pre>
</body></html>"""


def test_html_visible_text_is_split_into_sections_at_headings() -> None:
    document = read_document(HTML)
    assert document.media_type == "text/html"
    assert document.title == "The Page"
    assert document.pages == [
        Page(1, None, "Lead paragraph with bold & an entity."),
        Page(2, "First Section", "First Section\n\nOne\nTwo\n\nQuoted attribute"),
        Page(3, "Second", "Second\n\nitem one\n\nitem two\n\ncell a cell b\n\nkeep\nlines"),
    ]


def test_html_headings_alone_open_the_next_page_instead_of_making_pages() -> None:
    """A DocBook manual's title page: its authors are headings with nothing under them (each was a page named
    "Joey Hess", "Colin Watson"); a chapter heading right before its first section joins that section too."""
    manual = (b"<html><body><div class='titlepage'><h1 class='title'>dpkg manual</h1>"
              b"<div class='authorgroup'><h3 class='author'>Joey Hess</h3><h3 class='author'>Colin Watson</h3></div>"
              b"<p>Copyright 2026</p></div><h2>1. Triggers</h2><h3>1.1 What a trigger is</h3>"
              b"<p>A trigger is an event.</p><h3>Appendix</h3></body></html>")
    pages = read_document(manual, declared="text/html").pages
    assert [(page.number, page.title) for page in pages] == [(1, "dpkg manual"), (2, "1. Triggers")]
    assert pages[0].text == "dpkg manual\n\nJoey Hess\n\nColin Watson\n\nCopyright 2026"
    assert pages[1].text == "1. Triggers\n\n1.1 What a trigger is\n\nA trigger is an event.\n\nAppendix"


def test_html_without_a_title_takes_its_first_h1() -> None:
    document = read_document(b"<h2>Intro</h2><p>x</p><h1>Heading One</h1><p>y</p>", name="page.htm")
    assert document.title == "Heading One"
    assert [page.title for page in document.pages] == ["Intro", "Heading One"]


def test_html_is_sniffed_only_from_a_doctype_or_html_tag() -> None:
    assert read_document(b"  <html lang='en'><body><p>hi</p></body></html>").media_type == "text/html"
    assert read_document(b"<p>just a paragraph</p>").pages[0].text == "<p>just a paragraph</p>"


def test_malformed_html_is_read_as_far_as_it_makes_sense() -> None:
    document = read_document(b"<p>1 < 2 and a<b</p><p>after <!-- an unclosed comment <p>hidden", declared="text/html")
    assert document.pages[0].text == "1 < 2 and a\n\nafter"
    unclosed_quote = read_document(b'<p>before</p><a href="x>link</a><p>after</p>', declared="text/html")
    assert unclosed_quote.pages[0].text == "before\n\nlink\n\nafter"


def test_deeply_nested_html_does_not_recurse() -> None:
    data = b"<div>" * 200_000 + b"deep text" + b"</div>" * 200_000
    assert read_document(data, declared="text/html").pages[0].text == "deep text"


# PDF

def test_pdf_pages_come_with_their_numbers_text_and_the_title() -> None:
    document = read_document(make_pdf(PAGES, title="Quarterly Report"), name="report.pdf")
    assert document.media_type == "application/pdf"
    assert document.title == "Quarterly Report"
    assert [(page.number, page.title, page.text) for page in document.pages] == [
        (1, None, PAGES[0]), (2, None, PAGES[1]), (3, None, PAGES[2])]


def test_pdf_pages_without_text_are_kept_empty() -> None:
    document = read_document(make_pdf(["Some text.", "", "More text."]), declared="application/pdf")
    assert document.title is None
    assert [page.text for page in document.pages] == ["Some text.", "", "More text."]


def unreadable(data: bytes, **declaration: str) -> str:
    with pytest.raises(UnreadableDocument) as raised:
        read_document(data, **declaration)
    return raised.value.message


def unsupported(data: bytes, **declaration: str) -> str:
    with pytest.raises(UnsupportedDocument) as raised:
        read_document(data, **declaration)
    return raised.value.message


@pytest.mark.parametrize("password", ["", "secret"])
def test_an_encrypted_pdf_is_refused_even_with_an_empty_password(password: str) -> None:
    encrypted = written_pdf(PdfReader(io.BytesIO(make_pdf(PAGES))), password=password)
    assert "encrypted" in unreadable(encrypted)


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_a_truncated_pdf_is_refused(keep: float) -> None:
    data = make_pdf(PAGES)
    assert "truncated" in unreadable(data[:int(len(data) * keep)])
    assert "truncated" in unreadable(data[:-8])  # only the %%EOF line lost


def test_a_pdf_with_a_missing_part_is_refused_not_read_in_part() -> None:
    data = make_pdf(PAGES)
    first_page_content = data.index(b"4 0 obj")  # fpdf2 writes page 1's content stream as object 4
    damaged = data[:first_page_content] + b" " * 200 + data[first_page_content + 200:]
    message = unreadable(damaged)
    assert "corrupt" in message and "missing" in message


def test_a_pdf_that_is_garbage_inside_is_corrupt() -> None:
    assert "corrupt" in unreadable(b"%PDF-1.7\n" + b"garbage " * 100 + b"\n%%EOF\n")


def test_a_pdf_with_no_pages_is_refused() -> None:
    assert "no pages" in unreadable(written_pdf())


def test_a_pdf_without_a_text_layer_is_refused() -> None:
    assert "no text layer" in unreadable(make_pdf(["", ""]))


def test_a_pdf_over_the_page_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "MAX_PDF_PAGES", 2)
    data = make_pdf(PAGES)
    assert "3 pages, more than the 2" in unreadable(data)
    assert data.count(b"/Count 3") == 1
    understated = data.replace(b"/Count 3", b"/Count 1")  # the page tree's count lies; its pages do not
    assert "3 pages, more than the 2" in unreadable(understated)


# Refusals

def test_an_empty_document_is_unreadable() -> None:
    assert "empty (0 bytes)" in unreadable(b"", name="empty.txt")
    assert "empty (only white space)" in unreadable(b" \r\n\t\n", declared="text/markdown")
    assert "empty" in unreadable(b"\xef\xbb\xbf  \n")


def test_binary_bytes_named_txt_are_unsupported() -> None:
    message = unsupported(bytes(range(256)) * 4, name="data.txt")
    assert "binary" in message and "U+0000" in message


def test_bytes_that_are_not_utf8_are_unsupported() -> None:
    message = unsupported("caf\u00e9".encode("latin-1"), name="latin1.txt")
    assert "UTF-8" in message and "offset 3" in message


def test_a_pdf_declared_or_named_as_text_is_unsupported() -> None:
    data = make_pdf(PAGES)
    assert unsupported(data, declared="text/plain") == "the document is a PDF, but it is declared text/plain"
    assert "its name 'paper.md' says text/markdown" in unsupported(data, name="paper.md")


def test_text_declared_as_pdf_is_unsupported() -> None:
    assert "not a PDF" in unsupported(b"plain words", declared="application/pdf")
    assert "not a PDF" in unsupported(b"plain words", name="fake.pdf")


def test_a_zip_and_a_png_are_unsupported_by_name() -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("word/document.xml", "<w:document/>")
    assert "ZIP archive" in unsupported(archive.getvalue(), name="report.docx")
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(17)
    assert "PNG image" in unsupported(png, name="picture.txt")


@pytest.mark.parametrize("declared", ["application/msword", "image/png; q=1", "text/csv"])
def test_a_declared_type_that_is_not_read_is_unsupported(declared: str) -> None:
    message = unsupported(b"whatever the bytes", declared=declared)
    assert repr(declared.split(";")[0]) in message and "text/plain, text/markdown" in message


def test_unsupported_and_unreadable_map_to_415_and_422() -> None:
    assert (UnsupportedDocument("x").status, UnsupportedDocument("x").type.exit_code) == (415, 1)
    assert (UnreadableDocument("x").status, UnreadableDocument("x").type.exit_code) == (422, 1)


@pytest.mark.parametrize(("name", "media_type"), [
    ("a.txt", "text/plain"), ("dir/b.TEXT", "text/plain"), ("c.md", "text/markdown"),
    ("d.Markdown", "text/markdown"), ("e.html", "text/html"), ("f.HTM", "text/html"), ("g.pdf", "application/pdf"),
    ("h.docx", None), ("README", None), (".md", None), ("archive.pdf.zip", None),
])
def test_media_type_of_name(name: str, media_type: str | None) -> None:
    assert media_type_of_name(name) == media_type


def test_a_pdf_whose_text_takes_too_long_to_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extraction budget is checked after each page: with none left, the first page is the last."""
    from server.ingest import formats

    data = make_pdf([f"Page {n} of a long report." for n in range(1, 31)])
    assert len(read_document(data).pages) == 30
    monkeypatch.setattr(formats, "MAX_PDF_SECONDS", 0.0)
    with pytest.raises(UnreadableDocument, match=r"took more than 0 s \(page 1 of 30\)"):
        read_document(data)
