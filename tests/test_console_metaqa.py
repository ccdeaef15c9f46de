"""The explanation graph of a 3-hop question over a graph loaded as a user loads one, in Debian's Chromium: a
MetaQA extract (``tests/metaqa``) with its own IRIs and ``rdfs:label``s in the collection ``metaqa``; the
question "who acted in the films directed by the director of Bookies" asked on the Ask page with a path length
of 3. The selected path must read left to right, one column per hop: the film, its director, the director's
other film, its actors."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from console_browser import (
    FIRST_NODES,
    LAYOUT,
    SIZES,
    assert_context_opens,
    assert_readable,
    graph,
    requires_chromium,
    screenshot,
    serve_console,
)

from bench.metaqa_load import user_entity, user_relation, write_ntriples
from server.explain.trace import read_trace
from server.ingest.load import load_file
from server.store import GraphStore

pytestmark = requires_chromium

EXTRACT = Path(__file__).with_name("metaqa") / "bookies_kb.txt"
QUESTION = "who acted in the films directed by the director of Bookies"
HOPS = {"Bookies": 0, "Mark Illsley": 1, "Happy, Texas": 2,
        "William H. Macy": 3, "Steve Zahn": 3, "Ally Walker": 3, "Jeremy Northam": 3}  # gold: the last four


@pytest.fixture(scope="module")
def metaqa_store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    folder = tmp_path_factory.mktemp("metaqa")
    data = folder / "bookies.nt.gz"
    write_ntriples(EXTRACT, data, user_entity, user_relation)
    store = GraphStore(folder / "store")
    load_file(store, data, "metaqa", progress=False)
    return store


@pytest.fixture(scope="module")
def console_url(metaqa_store: GraphStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app over the MetaQA extract (this module's ``page`` fixture uses it)."""
    yield from serve_console(metaqa_store, tmp_path_factory)


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_a_three_hop_answer_reads_left_to_right_one_column_per_hop(page: object, console_url: str,
                                                                   metaqa_store: GraphStore, width: int,
                                                                   height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{console_url}/console/ask")
    page.click("details.options summary")
    page.select_option("#collection", "metaqa")
    page.fill("#max_path_length", "3")
    page.fill("#question", QUESTION)
    page.click("#ask-button")
    page.locator("#live[data-done]").wait_for()
    trace = read_trace(metaqa_store, page.get_attribute("#live", "data-session"))
    names = {user_entity(name).value: name for name in HOPS}
    assert {names.get(e["o"]) for e in trace["edges"]} >= {"William H. Macy", "Steve Zahn", "Ally Walker",
                                                           "Jeremy Northam"}
    drawn = graph(page, "ask-graph", LAYOUT)
    assert len(drawn["nodes"]) == len(HOPS) + 1 <= FIRST_NODES  # the path and Bookies' "+N retrieved"
    x = {names[n["iri"]]: n["x"] for n in drawn["nodes"] if n["iri"] in names}
    assert set(x) == set(HOPS)  # the whole path is drawn
    columns = sorted({round(x[name]) for name in HOPS})
    assert len(columns) == 4 and all(columns.index(round(x[name])) == hop for name, hop in HOPS.items())
    [seed] = [n for n in drawn["nodes"] if n["seed"]]
    assert names[seed["iri"]] == "Bookies"
    [context] = [n for n in drawn["nodes"] if n["context"]]  # what was retrieved around Bookies, collapsed
    assert_readable(drawn)
    if width == SIZES[0][0]:
        page.locator("#graph-card").scroll_into_view_if_needed()
        screenshot(page, "ask-metaqa-3hop-graph")
    assert_context_opens(page, "ask-graph", drawn, context)
