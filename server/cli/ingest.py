"""``glassgraph ingest FILE...``: documents into a collection, one transaction per file, with a progress bar.

Every file is read and checked before anything is written, so a bad file in the list ingests
nothing. Files already in the collection (the same bytes) are skipped: running the same command
again after an interruption resumes where it stopped.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from server import vocab
from server.cli.errors import CliError
from server.config import Config
from server.errors import NotFound, UnreadableDocument, UnsupportedDocument
from server.ingest.catalog import existing_document
from server.ingest.documents import Ingester, IngestOptions, IngestReport, document_id
from server.ingest.formats import read_document
from server.rag.label_index import LabelIndex
from server.store_base import StoreBackend

MAX_WARNINGS_SHOWN = 5  # per file; the rest are counted
LIBRARY_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai")  # an INFO line for every request


def quiet_libraries() -> None:
    """The HTTP and openai libraries log warnings only, unless ``OPENAI_LOG`` asks for more."""
    if "OPENAI_LOG" not in os.environ:
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def check_files(paths: list[str], limit: int, collection: str) -> list[str]:
    """Every file readable as a document within ``limit`` bytes, before anything is written (exit 1 on the
    first bad one); returns their document ids in ``collection``. The bytes are read again when each file is ingested: a
    batch is not held in memory."""
    ids = []
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise NotFound(f"{name}: no such file")
        size = path.stat().st_size
        if size > limit:
            raise CliError(f"{name}: {size} bytes, over the limit of {limit} bytes (GLASSGRAPH_MAX_DOCUMENT); "
                           "nothing was ingested")
        data = path.read_bytes()
        try:
            read_document(data, name=path.name)
        except (UnsupportedDocument, UnreadableDocument) as exc:
            raise type(exc)(f"{name}: {exc.message}; nothing was ingested") from None
        ids.append(document_id(data, collection)[0])
    return ids


def run_ingest(args: argparse.Namespace, config: Config, open_store: Callable[[], StoreBackend]) -> int:
    """Ingest ``args.files`` into ``args.collection``; prints one line per file and a summary. The
    arguments, the files and the LLM's settings are checked before the store is opened."""
    if args.title and len(args.files) > 1:
        args.command_parser.error("--title names one document: give one file with it")
    try:
        options = IngestOptions(title=args.title, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap,
                                workers=args.workers, replace=args.replace)
    except ValueError as exc:
        args.command_parser.error(str(exc))
    ids = check_files(args.files, config.max_document_bytes, args.collection)
    from server.rag.passage_index import make_passage_index
    from server.rag.providers import llm_ready, make_extractor

    quiet_libraries()
    llm = llm_ready(lambda: make_extractor(config))
    if llm is None:
        print("note: no LLM configured (GLASSGRAPH_LLM=offline): documents are stored and their chunks linked to "
              "the entities they mention; no new relationships are extracted", file=sys.stderr)
    store = open_store()
    ingester = Ingester(store, LabelIndex(store), llm, make_passage_index(store, config))
    done_before = sum(existing_document(store, args.collection, doc_id) is not None for doc_id in ids)
    if done_before and done_before < len(args.files) and not args.replace:
        print(f"resuming: {done_before} of {len(args.files)} file(s) are already in collection {args.collection!r}",
              file=sys.stderr)
    reports: list[IngestReport] = []
    for number, name in enumerate(args.files):
        try:
            reports.append(_ingest_one(ingester, name, Path(name).read_bytes(), args, options))
        except KeyboardInterrupt:
            committed = existing_document(store, args.collection, ids[number]) is not None
            _say_what_was_left(args.files[number + 1:] if committed else args.files[number:], name, committed)
            raise
    new = [r for r in reports if not r.unchanged]
    print(f"ingested {len(new)} document(s) into collection {args.collection!r}: {sum(r.chunks for r in new)} "
          f"chunks, {sum(r.facts for r in new)} facts, {sum(r.mentions for r in new)} mentions"
          + (f"; {len(reports) - len(new)} unchanged" if len(new) < len(reports) else ""))
    return 0


def _say_what_was_left(left: list[str], current: str, committed: bool) -> None:
    """After Ctrl-C: whether the file in hand was committed (whole) or not at all, and the files left."""
    state = "was committed before the interrupt" if committed else "was not ingested: nothing of it was committed"
    print(f"interrupted: {current} {state}", file=sys.stderr)
    if left:
        print(f"interrupted: {len(left)} file(s) left: {', '.join(left)}; run the same command again to resume",
              file=sys.stderr)


def _ingest_one(ingester: Ingester, name: str, data: bytes, args: argparse.Namespace,
                options: IngestOptions) -> IngestReport:
    progress = not args.quiet and sys.stderr.isatty()
    with tqdm(desc=Path(name).name, unit="chunk", disable=not progress, leave=False) as bar:
        def total(count: int) -> None:
            bar.reset(total=count)

        report = ingester.ingest(data, args.collection, name=Path(name).name, options=options,
                                 progress=bar.update, total=total)
    if report.unchanged:
        print(f"{name}: unchanged (already ingested as {report.iri}; --replace extracts it again)")
        return report
    revision = f"; a new version of {', '.join(report.revision_of)}" if report.revision_of else ""
    print(f"{name}: {report.iri} \"{report.title}\" ({report.media_type}): {report.pages} page(s), "
          f"{report.chunks} chunk(s), {report.facts} fact(s), {report.mentions} mention(s){revision}")
    for warning in report.warnings[:MAX_WARNINGS_SHOWN]:
        print(f"{name}: warning: {warning}", file=sys.stderr)
    if len(report.warnings) > MAX_WARNINGS_SHOWN:
        print(f"{name}: {len(report.warnings) - MAX_WARNINGS_SHOWN} more warning(s)", file=sys.stderr)
    return report


DOCUMENT_COLUMNS = ("id", "title", "media type", "contents")  # the header of `glassgraph documents`


def run_documents(args: argparse.Namespace, store: StoreBackend) -> int:
    """``glassgraph documents``: the documents of a collection, or delete one (``--delete ID``)."""
    from server.ingest.catalog import delete_document, document_of_id, list_documents

    if args.delete:
        doc = document_of_id(args.delete.removeprefix(vocab.document_iri("").value))  # an id, or the IRI
        if doc is None or not delete_document(store, args.collection, doc):
            raise NotFound(f"no document {args.delete!r} in collection {args.collection!r}")
        print(f"deleted {doc.value} from collection {args.collection!r} (with the facts no other document states)")
        return 0
    store.require_collection(args.collection)  # as over HTTP: an unknown collection is an error, not an empty list
    documents = list_documents(store, args.collection)
    if args.format == "json":
        print(json.dumps(documents, indent=2, ensure_ascii=False))
        return 0
    if documents:
        print("\t".join(DOCUMENT_COLUMNS))
    for doc in documents:
        counts = ("loaded as RDF" if doc["chunks"] is None
                  else f"{doc['pages']} page(s), {doc['chunks']} chunk(s), {doc['facts']} fact(s)")
        print("\t".join([doc["id"], doc["title"] or "", doc["media_type"] or "", counts]))
    if not documents:
        print(f"no documents in collection {args.collection!r}", file=sys.stderr)
    return 0
