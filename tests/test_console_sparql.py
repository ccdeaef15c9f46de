"""The SPARQL console's editor and results in a real Chromium against the real server (fixtures in
console_browser): error marks from the server's parser at the right line and column, completion that
adds PREFIX lines, a paged, sortable and filterable table over 1,000 rows, the raw response, downloads
only after a success, and a query too long for an address that still runs, reloads and downloads."""
from __future__ import annotations

from pathlib import Path

from console_browser import requires_chromium, run_query, screenshot, set_query

pytestmark = requires_chromium

MARK = "#editor .cm-lintRange-error"
# 1,000 rows, n = 0..999, with a label column first: the columns must come in the query's order
THOUSAND = """SELECT ?row ?n WHERE {
  VALUES ?a { 0 1 2 3 4 5 6 7 8 9 } VALUES ?b { 0 1 2 3 4 5 6 7 8 9 } VALUES ?c { 0 1 2 3 4 5 6 7 8 9 }
  BIND(?a * 100 + ?b * 10 + ?c AS ?n)
  BIND(CONCAT("row ", STR(?n)) AS ?row)
}
ORDER BY ?n"""


def marked_line(page: object) -> int:
    """The line number (from 1) of the editor line holding the error mark."""
    return page.evaluate("""() => {
        const root = document.querySelector('#editor').shadowRoot;
        const lines = [...root.querySelectorAll('.cm-line')];
        return lines.findIndex((line) => line.querySelector('.cm-lintRange-error')) + 1;
    }""")


def accept_completion(page: object, label: str) -> None:
    """Waits for the completion list to offer ``label`` selected, then takes it with Enter (CodeMirror
    ignores Enter for its first 75 ms, so that a list that just opened is not taken by accident)."""
    page.locator("#editor .cm-tooltip-autocomplete li[aria-selected]", has_text=label).first.wait_for()
    page.wait_for_timeout(150)
    page.keyboard.press("Enter")


def editor_text(page: object) -> str:
    return page.input_value("#query")  # the hidden textarea the editor keeps in step


def column_cells(page: object, column: int) -> list[str]:
    """The shown cells of a column, literals without their datatype (``5^^xsd:integer`` -> ``5``)."""
    cells = page.locator(f"#results tbody tr td:nth-child({column})").all_inner_texts()
    return [cell.split("^^")[0] for cell in cells]


def test_the_editor_marks_an_error_at_its_line_and_column(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    set_query(page, "PREFIX e: <https://trustgraph.ai/e/>\nSELECT ?capital WHERE {\n  e:france r:capital ?capital\n}")
    mark = page.locator(MARK)
    mark.wait_for()
    assert mark.inner_text() == "r:capital"
    assert marked_line(page) == 3
    assert page.inner_text("#check").startswith("line 3, column 12: unknown prefix r:")
    screenshot(page, "sparql-editor-error")
    # declaring the prefix clears the mark; an unclosed bracket is marked where it opens
    set_query(page, "PREFIX r: <https://trustgraph.ai/r/>\nSELECT ?capital WHERE {\n  ?c r:capital ?capital .\n"
                    "  FILTER(STRSTARTS(STR(?c), \"x\")\n}")
    page.locator(MARK, has_text="}").wait_for()
    assert marked_line(page) == 5
    assert page.inner_text("#check") == "line 5, column 1: this '}' closes a '('."
    set_query(page, "SELECT ?s WHERE {\n  ?s ?p ?o\n}\nLIMT 3")  # the parser reads this one to its end
    page.locator(MARK, has_text="LIMT").wait_for()
    assert marked_line(page) == 4
    set_query(page, "PREFIX r: <https://trustgraph.ai/r/>\nSELECT ?capital WHERE { ?c r:capital ?capital }")
    page.locator('#editor[data-check="done"]').wait_for(state="attached")
    assert page.locator(MARK).count() == 0 and page.inner_text("#check") == ""


def test_completion_adds_the_prefix_line(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    set_query(page, "SELECT ?country ?capital WHERE {\n  ?country ")
    page.keyboard.type("r:capi")
    option = page.locator("#editor .cm-tooltip-autocomplete li", has_text="r:capital")
    option.first.wait_for()
    assert "triples" in option.first.inner_text()  # a predicate of the store, with its use count
    accept_completion(page, "r:capital")
    assert editor_text(page) == ("PREFIX r: <https://trustgraph.ai/r/>\nSELECT ?country ?capital WHERE {\n"
                                 "  ?country r:capital")
    page.keyboard.type(" ?capital ; rdfs")
    accept_completion(page, "rdfs:")
    assert editor_text(page).startswith("PREFIX r: <https://trustgraph.ai/r/>\n"
                                        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\nSELECT")
    assert editor_text(page).endswith("?country r:capital ?capital ; rdfs:")
    page.keyboard.type("label ?name }\nLIM")  # keywords complete too
    accept_completion(page, "LIMIT")
    page.keyboard.type(" 5")
    assert editor_text(page).endswith("}\nLIMIT 5")
    page.keyboard.press("Control+Enter")
    page.locator("#result-title", has_text="5 rows").wait_for()


def test_a_thousand_rows_page_sort_and_filter(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    run_query(page, THOUSAND)
    page.locator("#result-title", has_text="1,000 rows").wait_for()
    assert page.locator("#results thead th").all_inner_texts() == ["?row", "?n"]
    assert column_cells(page, 2) == [str(n) for n in range(50)]
    assert page.inner_text("#page-info") == "Rows 1–50 of 1,000"
    assert page.locator("#prev-page").is_disabled()
    page.click("#next-page")
    assert column_cells(page, 2) == [str(n) for n in range(50, 100)]
    assert page.inner_text("#page-info") == "Rows 51–100 of 1,000"
    screenshot(page, "sparql-results")
    page.click("#results th button:text('?n')")  # ascending, from the first page
    page.click("#results th button:text('?n')")  # descending
    assert page.get_attribute("#results th:nth-child(2)", "aria-sort") == "descending"
    assert column_cells(page, 2) == [str(n) for n in range(999, 949, -1)]
    page.click("#results th button:text('?row')")  # text in natural order: "row 2" before "row 10"
    assert column_cells(page, 1)[:3] == ["row 0", "row 1", "row 2"]
    page.fill("#filter", "row 99")
    matching = sorted([99] + list(range(990, 1000)))
    assert column_cells(page, 2) == [str(n) for n in matching]
    assert page.inner_text("#page-info") == f"Rows 1–{len(matching)} of {len(matching)} matching (1,000 in all)"
    assert page.locator("#next-page").is_disabled()
    page.click("#tab-raw")
    raw = page.locator("#raw-view")
    assert raw.is_visible() and not page.locator("#results").is_visible()
    assert '"vars": [\n      "row",\n      "n"\n    ]' in raw.inner_text()
    page.click("#tab-table")
    assert page.locator("#results").is_visible() and not raw.is_visible()


def test_downloads_are_hidden_after_an_error(page: object, console_url: str) -> None:
    page.goto(console_url + "/console/sparql")
    run_query(page, "SELECT ?s WHERE { ?s ?p ?o } LIMIT 3")
    page.locator("#result-title", has_text="3 rows").wait_for()
    assert page.locator("#downloads a").count() == 4 and page.locator("#downloads").is_visible()
    page.click("#tab-raw")
    run_query(page, "SELECT ?s WHERE { ?s ?p ?o } LIMIT x")
    page.locator("#error").wait_for()
    assert page.inner_text("#result-title") == "Error"
    assert not page.locator("#downloads").is_visible() and not page.locator("#result-views").is_visible()
    assert not page.locator("#raw-view").is_visible()  # no empty raw view from the run before
    assert page.inner_text("#error .error-message").startswith("malformed query: line 1, column 36: unexpected 'x'")


def test_a_long_query_runs_reloads_and_downloads_without_the_address(page: object, console_url: str) -> None:
    values = " ".join(f"<http://example.org/item/{n:05d}>" for n in range(400))
    query = f"SELECT ?item WHERE {{\n  VALUES ?item {{ {values} }}\n}}"
    assert len(query) > 8 * 1024
    longest: list[int] = [0]
    page.on("request", lambda request: longest.__setitem__(0, max(longest[0], len(request.url))))
    page.goto(console_url + "/console/sparql")
    run_query(page, query)
    page.locator("#result-title", has_text="400 rows").wait_for()
    assert "query=" not in page.url and not page.locator("#share").is_visible()
    page.wait_for_load_state("networkidle")  # a reload aborts what is still loading (the favicon): a failed request
    page.reload()
    page.locator("#result-title", has_text="400 rows").wait_for()  # the reload runs it again
    assert editor_text(page) == query
    with page.expect_download() as info:
        page.click("#downloads a:text('CSV')")
    lines = Path(info.value.path()).read_text(encoding="utf-8").splitlines()
    assert lines[0].strip() == "item" and len(lines) == 401
    assert longest[0] < 2100, f"a request carried the query in its address ({longest[0]} characters)"
