"""Traces that reach the passage: chunk spans and texts in source chains, the chunks that mention an
edge's entities, and how the CLIs show them (``--show-source``), on an ingest-shaped store built with the
vocab builders."""
from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from in_process import Calling
from live_server import LiveServer, serve
from pyoxigraph import Literal, Quad, Triple
from test_cli import GLASSGRAPH, TG_INVOKE, blocks, invoke, run

from server import stages, vocab
from server.cli.display import edge_lines, excerpt
from server.explain.recorder import ExplainRecorder
from server.explain.trace import read_trace
from server.provenance import format_chain, mention_chains_many, source_chains
from server.sparql_templates import template_limit
from server.stages import Answered, EdgesRetrieved, EdgesSelected, SessionStarted
from server.store import GraphStore
from server.vocab import ENTITY, RDFS, RELATION

CAPITAL = Triple(ENTITY.france, RELATION.capital, ENTITY.paris)
CURRENCY = Triple(ENTITY.france, RELATION.currency, ENTITY.euro)
BORDER = Triple(ENTITY.andorra, RELATION.borders, ENTITY.spain)
LABELS = {ENTITY.france: "France", ENTITY.paris: "Paris", ENTITY.euro: "Euro", ENTITY.andorra: "Andorra",
          ENTITY.spain: "Spain", RELATION.capital: "capital", RELATION.currency: "currency",
          RELATION.borders: "borders"}
DOC_ID, TITLE = "atlas", "Atlas of Europe"
# Page texts, each a run of chunks; page 2's first chunk starts at character 120.
CHUNKS = {
    (1, 1): "The euro is the currency of France since 2002.",
    (1, 2): "Coins of the Euro carry a common side.",
    (2, 3): ("France is a republic in Western Europe whose territory reaches from the North Sea to the "
             "Mediterranean. Its capital is Paris,\n  on the Seine, and the city has been the seat of the "
             "government since the tenth century, with brief interruptions in wartime."),
    (2, 4): "The republic is also a member of the European Union.",
}
PAGE_HEADS = {1: "", 2: "Part two: the countries of Western Europe, each with its government and money.".ljust(120)}
# Which chunks mention which entities (ingest records every entity whose label a chunk contains).
MENTIONS = {(1, 1): [ENTITY.france, ENTITY.euro], (1, 2): [ENTITY.euro], (2, 3): [ENTITY.france, ENTITY.paris],
            (2, 4): [ENTITY.france]}
QUESTION = "What is the capital of France?"


def chunk(page: int, index: int) -> str:
    return vocab.chunk_iri(DOC_ID, page, index).value


def page_text(page: int) -> str:
    return PAGE_HEADS[page] + " ".join(text for (p, _), text in CHUNKS.items() if p == page)


def offset_of(page: int, index: int) -> int:
    return page_text(page).index(CHUNKS[(page, index)])


def span(page: int, index: int) -> str:
    start = offset_of(page, index)
    return f"(chars {start}-{start + len(CHUNKS[(page, index)])})"


@pytest.fixture
def atlas(store: GraphStore) -> GraphStore:
    return fill_atlas(store)


def fill_atlas(store: GraphStore) -> GraphStore:
    """One ingested PDF in the default collection: two pages, four chunks with spans, one subgraph stating
    ``France capital Paris`` (chunk 3), mentions; ``France currency Euro`` and ``Andorra borders Spain``
    are in the knowledge graph with no source."""
    kg, src = vocab.collection_graph("default"), vocab.source_graph("default")
    quads = [Quad(t.subject, t.predicate, t.object, kg) for t in (CAPITAL, CURRENCY, BORDER)]
    quads += [Quad(term, RDFS.label, Literal(label), kg) for term, label in LABELS.items()]
    doc = vocab.document_iri(DOC_ID)
    quads += vocab.document_quads(src, doc, TITLE, mime_type="application/pdf", sha256="ab" * 32, size=12345)
    for page in (1, 2):
        page_node = vocab.page_iri(DOC_ID, page)
        quads += vocab.page_quads(src, page_node, f"Page {page}", doc, number=page)
        quads += vocab.content_quads(page_node, page_text(page))
    for (page, index), text in CHUNKS.items():
        node = vocab.chunk_iri(DOC_ID, page, index)
        quads += vocab.chunk_quads(src, node, f"Chunk {index}", vocab.page_iri(DOC_ID, page),
                                   span=(index, offset_of(page, index), len(text)))
        quads += vocab.content_quads(node, text)
        quads += vocab.mention_quads(src, node, MENTIONS[(page, index)])
    quads += vocab.subgraph_quads(src, vocab.subgraph_iri(DOC_ID, 2, 3), vocab.chunk_iri(DOC_ID, 2, 3), [CAPITAL],
                                  activity=vocab.activity_iri(DOC_ID))
    store.extend(quads)
    store.notify_loaded("default")
    return store


@pytest.fixture
def session(atlas: GraphStore) -> str:
    """A recorded GraphRAG session that selected the three edges."""
    recorder = ExplainRecorder(atlas)
    selected = [(CAPITAL, "names the capital"), (CURRENCY, "the money"), (BORDER, "")]
    recorder.record(SessionStarted(QUESTION, "offline", "default"))
    recorder.record(EdgesRetrieved([(edge, ("", "", "")) for edge, _ in selected]))
    recorder.record(EdgesSelected(selected))
    recorder.record(Answered("Paris is the capital of France."))
    atlas.flush()
    return stages.SESSION.iri(recorder.session_id).value


@pytest.fixture
def live(atlas: GraphStore) -> Iterator[LiveServer]:
    server = serve(atlas)
    yield server
    server.close()


def chunk_node(page: int, index: int) -> dict:
    text = CHUNKS[(page, index)]
    return {"iri": chunk(page, index), "label": f"Chunk {index}", "type": "Chunk", "title": None,
            "offset": offset_of(page, index), "length": len(text), "text": text}


PAGE_2 = {"iri": vocab.page_iri(DOC_ID, 2).value, "label": "Page 2", "type": "Page", "title": None}
DOCUMENT = {"iri": vocab.document_iri(DOC_ID).value, "label": TITLE, "type": "Document", "title": TITLE}


# --- the trace's JSON --------------------------------------------------------------------------------

def test_source_chains_carry_the_chunk_span_text_and_document_title(atlas: GraphStore) -> None:
    assert source_chains(atlas, CAPITAL) == [[chunk_node(2, 3), PAGE_2, DOCUMENT]]
    node = chunk_node(2, 3)
    assert page_text(2)[node["offset"]:node["offset"] + node["length"]] == node["text"]  # the span is exact
    assert node["offset"] == 120


def test_read_trace_lists_sources_and_mentions_of_each_edge(atlas: GraphStore, session: str) -> None:
    trace = read_trace(atlas, session)
    capital, currency, border = trace["edges"]
    assert capital["sources"] == [[chunk_node(2, 3), PAGE_2, DOCUMENT]]
    # chunks mentioning both entities first, then the object, then the subject; by IRI within; 3 at most
    assert [chain[0]["iri"] for chain in capital["mentions"]] == [chunk(2, 3), chunk(1, 1), chunk(2, 4)]
    assert currency["sources"] == []
    assert [chain[0]["iri"] for chain in currency["mentions"]] == [chunk(1, 1), chunk(1, 2), chunk(2, 3)]
    assert currency["mentions"][1] == [chunk_node(1, 2), {**PAGE_2, "iri": vocab.page_iri(DOC_ID, 1).value,
                                                          "label": "Page 1"}, DOCUMENT]
    assert border["sources"] == [] and border["mentions"] == []
    assert template_limit("prov_mentions") == 3


def test_the_trace_page_shows_labels_and_the_chunks_that_mention_an_edge(atlas: GraphStore, session: str,
                                                                         calling: Calling) -> None:
    """As the CLI shows it: each edge's sources, then the chunks that mention its terms; relation labels that
    are their IRI's local name ("capital") are labels, not prefixed names ("r:capital")."""
    app = calling(atlas)
    page = app.get(app.url + "/console/trace", params={"id": session}, headers={"Accept": "text/html"}).text
    capital, currency, border = page.split('<li class="edge"')[1:]  # the last runs to the end of the page
    assert "r:capital" not in page and re.search(r'<span class="predicate"><a [^>]*>capital</a>', capital)
    assert capital.count("Source: ") == 1 and capital.count("Mentioned in: ") == 2  # chunk (2, 3) is the source
    assert currency.count("Source: ") == 0 and currency.count("Mentioned in: ") == 3
    assert "No recorded source: the chunks above mention its terms." in currency
    assert "Mentioned in" not in border and "No recorded source." in border


def test_mentions_stay_in_the_collection(atlas: GraphStore) -> None:
    assert mention_chains_many(atlas, [CURRENCY], collection="other") == {}
    assert [chain[0]["iri"] for chain in mention_chains_many(atlas, [CURRENCY], collection="default")[CURRENCY]] == [
        chunk(1, 1), chunk(1, 2), chunk(2, 3)]
    assert mention_chains_many(atlas, []) == {}


def test_the_sample_reads_chunk_page_and_quoted_country(sample_store: GraphStore) -> None:
    [chain] = source_chains(sample_store, CAPITAL)
    assert re.fullmatch(r'Chunk \d+ → Page 4 → "France"', format_chain(chain)), format_chain(chain)
    assert chain[0]["offset"] is None and chain[0]["length"] is None and "Paris" in chain[0]["text"]
    assert mention_chains_many(sample_store, [CAPITAL], "default") == {}  # the sample records no mentions


# --- display -------------------------------------------------------------------------------------------

def test_format_chain_shows_the_span_and_quotes_the_title(atlas: GraphStore) -> None:
    [chain] = source_chains(atlas, CAPITAL)
    assert format_chain(chain) == f'Chunk 3 {span(2, 3)} → Page 2 → "{TITLE}"'


def test_excerpt_around_the_label() -> None:
    text = CHUNKS[(2, 3)]
    assert excerpt(text, ["paris", "France"]) == (
        "“…whose territory reaches from the North Sea to the Mediterranean. Its capital is Paris, on the Seine, "
        "and the city has been the seat of the government since the tenth…”")
    assert excerpt(text, ["Madrid", "France"]) == (
        "“France is a republic in Western Europe whose territory reaches from the North Sea to…”")
    assert excerpt("Short: the  euro\nis used.", ["EURO"]) == "“Short: the euro is used.”"
    long = "Europe is large. " + "Some words between. " * 10 + "There the euro is used."
    assert excerpt(long, ["Euro"]) == ("“…between. Some words between. Some words between. Some words between. "
                                       "There the euro is used.”")  # whole words: not the "Euro" of "Europe"
    assert excerpt(text, ["Euro", "France"]).startswith("“France is")
    assert excerpt(text, ["Madrid", "Spain"]).startswith("“France is a republic") and len(excerpt(text, [])) < 170


def test_edge_lines_with_sources_mentions_and_excerpts(atlas: GraphStore, session: str) -> None:
    capital, currency, border = read_trace(atlas, session)["edges"]
    assert edge_lines(capital) == ["      Edge: (France, capital, Paris)", "        Reason: names the capital",
                                   f'        Source: Chunk 3 {span(2, 3)} → Page 2 → "{TITLE}"',
                                   # the other chunks that mention France (the source chunk is not repeated)
                                   f'        Mentioned in: Chunk 1 {span(1, 1)} → Page 1 → "{TITLE}"',
                                   f'        Mentioned in: Chunk 4 {span(2, 4)} → Page 2 → "{TITLE}"']
    assert edge_lines(currency, show_source=True) == [
        "      Edge: (France, currency, Euro)", "        Reason: the money",
        "        Source: (no extraction provenance)",
        f'        Mentioned in: Chunk 1 {span(1, 1)} → Page 1 → "{TITLE}"',
        "          “The euro is the currency of France since 2002.”",
        f'        Mentioned in: Chunk 2 {span(1, 2)} → Page 1 → "{TITLE}"',
        "          “Coins of the Euro carry a common side.”",
        f'        Mentioned in: Chunk 3 {span(2, 3)} → Page 2 → "{TITLE}"',
        "          “France is a republic in Western Europe whose territory reaches from the North Sea to…”"]
    assert edge_lines(border, show_source=True) == ["      Edge: (Andorra, borders, Spain)",
                                                    "        Source: (no extraction provenance)"]


# --- the command-line tools ----------------------------------------------------------------------------

CAPITAL_EXCERPT = ("“…whose territory reaches from the North Sea to the Mediterranean. Its capital is Paris, "
                   "on the Seine, and the city has been the seat of the government since the tenth…”")


def test_glassgraph_explain_show_source_quotes_each_passage(atlas: GraphStore, session: str) -> None:
    store = str(atlas.path)
    shown = run(GLASSGRAPH, "--store", store, "explain", "--show-source", session)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    source = lines.index(f'        Source: Chunk 3 {span(2, 3)} → Page 2 → "{TITLE}"')
    assert lines[source + 1] == f"          {CAPITAL_EXCERPT}"
    assert sum(line.startswith("        Mentioned in: ") for line in lines) == 3 + 2  # currency 3, capital 2
    assert sum(line.startswith("          “") for line in lines) == 4 + 2

    plain = run(GLASSGRAPH, "--store", store, "explain", session)
    assert plain.returncode == 0, plain.stderr
    assert [line for line in lines if not line.startswith("          “")] == plain.stdout.splitlines()

    as_json = json.loads(run(GLASSGRAPH, "--store", store, "explain", "--format", "json", session).stdout)
    assert as_json["edges"] == read_trace(atlas, session)["edges"]


def test_glassgraph_ask_show_source_shows_the_blocks_with_passages(tmp_path: Path) -> None:
    store = fill_atlas(GraphStore(tmp_path / "store"))
    store.flush()
    del store  # the store's lock goes with it: ask opens the store itself
    gc.collect()
    asked = run(GLASSGRAPH, "--store", str(tmp_path / "store"), "ask", "--show-source", "-q", QUESTION)
    assert asked.returncode == 0, asked.stderr
    selection = blocks(asked.stderr)[2][2]
    source = selection.index(f'Source: Chunk 3 {span(2, 3)} → Page 2 → "{TITLE}"')
    assert selection[source + 1] == CAPITAL_EXCERPT
    assert "Paris" in asked.stdout and "“" not in asked.stdout


def test_tg_invoke_show_source_reads_the_passage_from_the_trace(live: LiveServer, atlas: GraphStore) -> None:
    result = invoke("-u", live.url, "--show-source", "-q", QUESTION)  # --show-source implies -x
    assert result.returncode == 0, result.stderr
    found = blocks(result.stderr)
    assert [kind for kind, _, _ in found] == ["session", "retrieval", "selection", "answer"]
    selection = found[2][2]
    source = selection.index(f'Source: Chunk 3 {span(2, 3)} → Page 2 → "{TITLE}"')
    assert selection[source - 3] == "Edge: (France, capital, Paris)" and selection[source - 2].startswith("Reason:")
    assert selection[source - 1].startswith("Chosen by:")
    assert selection[source + 1] == CAPITAL_EXCERPT
    assert "Paris" in result.stdout and "“" not in result.stdout

    trace = requests.get(f"{live.url}/api/explain", params={"id": found[0][1]}, timeout=30).json()
    [capital] = [edge for edge in trace["edges"] if edge["p"] == RELATION.capital.value]
    assert capital["sources"][0][0] == chunk_node(2, 3)
    assert [chain[0]["iri"] for chain in capital["mentions"]] == [chunk(2, 3), chunk(1, 1), chunk(2, 4)]


def test_tg_invoke_shows_the_passages_that_mention_an_unsourced_edge(live: LiveServer) -> None:
    result = invoke("-u", live.url, "-x", "--show-source", "-q", "What currency does France use?")
    assert result.returncode == 0, result.stderr
    selection = blocks(result.stderr)[2][2]
    start = selection.index("Edge: (France, currency, Euro)")
    following = selection[start + 1:]
    following = [line for line in following if not line.startswith(("Reason:", "Chosen by:"))]
    assert following[:3] == ["Source: (no extraction provenance)",
                             f'Mentioned in: Chunk 1 {span(1, 1)} → Page 1 → "{TITLE}"',
                             "“The euro is the currency of France since 2002.”"]


def test_show_source_is_offered_by_the_three_commands() -> None:
    for command in (TG_INVOKE, [*GLASSGRAPH, "ask"], [*GLASSGRAPH, "explain"]):
        shown = run(command, "--help")
        assert shown.returncode == 0 and "--show-source" in shown.stdout, shown.stdout



def test_the_console_trace_page_shows_the_chunk_span(live: LiveServer, session: str) -> None:
    page = requests.get(f"{live.url}/console/trace", params={"id": session}, timeout=30)
    assert page.status_code == 200
    assert re.search(rf">Chunk 3 {re.escape(span(2, 3))}</a>", page.text), page.text
