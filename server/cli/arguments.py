"""The query flags ``tg-invoke-graph-rag`` and ``glassgraph ask`` share: question, collection,
retrieval limits and display (format, ``--show-source``, which ``glassgraph explain`` takes too)."""
from __future__ import annotations

import argparse
from collections.abc import Mapping

# The retrieval limits by their name in the API and in ``RetrievalLimits``: flags, help.
LIMIT_FLAGS = {
    "entity_limit": (("-e", "--entity-limit"), "seed entities to start from"),
    "triple_limit": (("--triple-limit",), "edges fetched per entity and hop"),
    "max_subgraph_size": (("-s", "--max-subgraph-size"), "edges retrieved at most"),
    "max_path_length": (("-p", "--max-path-length"), "hops from the seed entities"),
    "passages": (("-n", "--passages"), "document passages given to the answer beside the edges (1-50)"),
}
DOCUMENT_LIMIT_FLAGS = {"passages": (("-n", "--passages"), "passages retrieved (1-50)")}


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def add_query_arguments(parser: argparse.ArgumentParser, default_limits: Mapping[str, int] | None = None,
                        documents: bool = False) -> None:
    """Question, collection, retrieval limits (help shows ``default_limits``, else "the server's") and display;
    ``documents``: document RAG's one limit (``--passages``) instead of the graph's."""
    parser.add_argument("-q", "--question", required=True, help="the question to answer")
    parser.add_argument("-C", "--collection", help="collection to query (default: GLASSGRAPH_COLLECTION's)")
    for name, (flags, help_text) in (DOCUMENT_LIMIT_FLAGS if documents else LIMIT_FLAGS).items():
        default = default_limits[name] if default_limits is not None else "the server's"
        parser.add_argument(*flags, dest=name, type=positive_int, help=f"{help_text} (default: {default})")
    parser.add_argument("-x", "--explainable", action="store_true",
                        help="show the explain events (to stderr) as they arrive")
    if not documents:
        add_show_source(parser, "; implies --explainable")
    else:
        parser.set_defaults(show_source=False)
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: answer to stdout, explain blocks to stderr; json: every message as a JSON line")


def add_show_source(parser: argparse.ArgumentParser, note: str = "") -> None:
    """``--show-source``: quote the passage (chunk text) under each source chain."""
    parser.add_argument("--show-source", action="store_true",
                        help=f"quote each source chain's passage around the fact (text format){note}")


def explain_wanted(args: argparse.Namespace) -> bool:
    """Whether to show the explain blocks: ``--explainable``, or ``--show-source`` (whose excerpts are in them)."""
    return args.explainable or args.show_source


def check_question(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """An empty question is a usage error (exit 2)."""
    if not args.question.strip():
        parser.error("the question is empty")


def limits_of(args: argparse.Namespace) -> dict[str, int]:
    """The retrieval limits given on the command line (the rest keep the server's defaults)."""
    return {name: getattr(args, name) for name in {**LIMIT_FLAGS, **DOCUMENT_LIMIT_FLAGS}
            if getattr(args, name, None) is not None}
