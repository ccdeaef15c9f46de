"""``glassgraph``: serve, load, ask, inspect traces and maintain the embedded store.

Exit codes: 0 success, 1 the operation failed (bad file, unknown collection or session, an error
in the answer), 2 usage, 3 the store is held by another process (e.g. a server); each failure is a
typed error (``server.errors``) that :func:`~server.cli.errors.run_tool` turns into its exit code.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from pyoxigraph import NamedNode, RdfFormat

from server import vocab
from server.cli.arguments import add_query_arguments, add_show_source, check_question, explain_wanted, limits_of
from server.cli.display import StreamDisplay, trace_lines
from server.cli.errors import EXIT_OK, CliError, run_tool
from server.config import Config
from server.errors import BadRequest, NotFound, StoreFailed, StoreLocked, Unavailable
from server.explain.trace import MAX_SESSION_OFFSET
from server.rag.retrieval import RetrievalLimits
from server.stages import SESSION
from server.store import GraphStore, store_directory
from server.store_base import StoreBackend

PROG = "glassgraph"
DUMP_FORMATS = {"trig": RdfFormat.TRIG, "nq": RdfFormat.N_QUADS, "ttl": RdfFormat.TURTLE, "nt": RdfFormat.N_TRIPLES}
EXIT_CODES = "exit codes: 0 success, 1 the operation failed, 2 usage, 3 the store is held by another process"
MAX_SESSIONS = 100_000


# --- helpers --------------------------------------------------------------------------------------

def _open(config: Config, sample: bool = False, snapshot: bool = False) -> StoreBackend:
    """The configured store; ``sample`` loads the sample data into an empty store (as the server does).

    ``snapshot`` (commands that only read, and backups): when another process holds the store, read a
    frozen snapshot of it instead of failing. A snapshot holds every write acknowledged before it was
    taken (each is in the store's log first), unflushed ones too.
    """
    from server.bootstrap import connect_store, open_store

    try:
        if sample:
            return open_store(config, progress=sys.stderr.isatty())
        return connect_store(config)
    except StoreLocked as exc:
        if not snapshot:
            raise
        held = exc.message
    except OSError as exc:
        where = Path(config.store_path).resolve() if config.store_path else "(memory)"
        raise StoreFailed(f"cannot open the store at {where}: {exc}") from None
    try:
        store = GraphStore(config.store_path, explain_collection=config.explain_collection, read_only=True)
    except OSError as exc:
        raise StoreLocked(f"{held}; reading a snapshot failed too: {exc}") from None
    print(f"{PROG}: note: {held}; reading a snapshot of it", file=sys.stderr)
    return store


def _open_existing(config: Config, snapshot: bool = False) -> StoreBackend:
    """The store, for commands that need one: an absent or empty directory is an error and stays as it was."""
    path = store_directory(config.store_path)
    if path is not None and not (path.is_dir() and any(path.iterdir())):
        raise NotFound(f"no store at {path.resolve()} (create one with: glassgraph load FILE, or glassgraph serve)")
    return _open(config, snapshot=snapshot)


def _check_arguments(args: argparse.Namespace, config: Config) -> None:
    """Usage errors that depend on the configuration: ``-C`` must name a user collection (the
    explainability graph's name is configured) and ``ask``'s question must fit the limit. ``ask`` and
    ``load`` without ``-C`` take the configured default collection."""
    if args.handler in (cmd_ask, cmd_load, cmd_ingest, cmd_documents) and args.collection is None:
        args.collection = config.default_collection
    collection = getattr(args, "collection", None)
    if collection is not None:
        try:
            vocab.check_collection_name(collection, config.explain_collection)
        except ValueError as exc:
            args.command_parser.error(f"argument -C/--collection: {exc}")
    question = getattr(args, "question", None)
    if question is None:
        return
    if len(question) > config.max_question_chars:
        args.command_parser.error(f"the question has {len(question)} characters, over the limit of "
                                  f"{config.max_question_chars} (GLASSGRAPH_MAX_QUESTION)")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 reach argv as lone surrogates
        args.command_parser.error("the question is not valid text (it holds bytes that are not UTF-8)")


def _int_between(low: int, high: int) -> Callable[[str], int]:
    """argparse type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}: {value}")
        return value

    return parse


def _port(text: str) -> int:
    """argparse type: a TCP port (0 picks a free one); werkzeug would wrap 99999 to another port."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (0-65535): {value}")
    return value


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(value) if value is not None else "" for value in row] for row in rows]
    widths = [max([len(headers[i]), *(len(row[i]) for row in cells)]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _session_iri(text: str) -> str:
    """A session IRI from an explain IRI or a bare session id."""
    return text if text.startswith(vocab.URN) else SESSION.iri(text).value


# --- commands -----------------------------------------------------------------------------------

def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _quiet_requests() -> type:
    """werkzeug's request handler without its access line: the app logs each request once, as JSON."""
    from werkzeug.serving import WSGIRequestHandler

    class QuietRequests(WSGIRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            pass

    return QuietRequests


def cmd_serve(args: argparse.Namespace, config: Config) -> int:
    if args.engine is not None:
        from server.cli.engine_serve import serve_with_engine

        return serve_with_engine(config, args.workers)
    from werkzeug.serving import make_server

    from server.http.app import create_app

    store = _open(config, sample=True)
    app = create_app(config, store=store)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # werkzeug prints why it cannot bind, then exits
            server = make_server(config.host, config.port, app, threaded=True, request_handler=_quiet_requests())
    except (OSError, SystemExit) as exc:
        reason = "; ".join(line.strip() for line in said.getvalue().splitlines() if line.strip()) or str(exc)
        raise Unavailable(f"cannot listen on {config.host}:{config.port}: {reason}") from None
    print(f"Glassgraph console: http://{config.host}:{server.server_port}/  (store: {config.store_path}; "
          "Ctrl-C stops)", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops as cleanly as Ctrl-C
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        store.flush()
    return EXIT_OK


def cmd_load(args: argparse.Namespace, config: Config) -> int:
    from server.ingest.load import LoadError, build_store, format_of, load_file, new_store_directory

    for path in args.files:  # check every file first: a typo in the last one loads nothing
        try:
            format_of(path)
        except LoadError as exc:
            raise CliError(str(exc)) from None
        if not Path(path).is_file():
            raise NotFound(f"{path}: no such file")
    progress = not args.quiet and sys.stderr.isatty()
    pending, total = list(args.files), 0
    target = new_store_directory(config.store_path)
    try:
        if target is not None:
            total = build_store(target, pending[0], args.collection, progress=progress)  # a new store: bulk load
            print(f"{pending.pop(0)}: {total} quads")
        store = _open(config)
        for path in pending:
            count = load_file(store, path, args.collection, progress=progress)
            total += count
            print(f"{path}: {count} quads")
    except LoadError as exc:
        loaded = f" ({total} quads from the files before it are loaded)" if total else ""
        raise CliError(f"{exc}{loaded}") from None
    sizes = {row["collection"]: row for row in store.collections()}
    row = sizes.get(args.collection, {"triples": 0, "source_triples": 0})
    print(f"loaded {total} quads from {len(args.files)} file(s); collection {args.collection!r} now holds "
          f"{row['triples']} triples and {row['source_triples']} source triples")
    return EXIT_OK


def cmd_ingest(args: argparse.Namespace, config: Config) -> int:
    from server.cli.ingest import run_ingest

    return run_ingest(args, config, lambda: _open(config, sample=True))


def cmd_documents(args: argparse.Namespace, config: Config) -> int:
    from server.cli.ingest import run_documents

    return run_documents(args, _open_existing(config, snapshot=not args.delete))


def cmd_ask(args: argparse.Namespace, config: Config) -> int:
    limits = RetrievalLimits(**limits_of(args))
    try:
        limits.check()
    except ValueError as exc:
        args.command_parser.error(str(exc))
    try:
        store = _open(config, sample=True)  # before the pipeline's imports (seconds): a held store fails fast
    except StoreLocked as exc:  # ask records a trace: it writes
        raise StoreLocked(f"{exc.message}; ask that server instead: tg-invoke-graph-rag -u http://HOST:PORT "
                          "-q QUESTION") from None
    from server.answering import make_graph_rag
    from server.explain.trace import read_trace
    from server.rag.passage_index import make_passage_index
    from server.rag.providers import llm_ready

    passages = make_passage_index(store, config) if limits.passages else None
    rag = llm_ready(lambda: make_graph_rag(store, config, passages))
    explainable = explain_wanted(args)
    messages = (message.to_dict() for message in rag.run(args.question, args.collection, explainable, limits))
    display = StreamDisplay(sys.stdout, sys.stderr, lambda iri: read_trace(store, iri), args.format,
                            explainable, args.show_source, passages=bool(limits.passages))
    display.run(messages)
    return EXIT_OK


def cmd_sessions(args: argparse.Namespace, config: Config) -> int:
    from server.explain.retention import prune_sessions
    from server.explain.trace import list_sessions

    if args.prune:
        retention = config.retention
        if not retention.bounded:
            print("nothing to prune: GLASSGRAPH_TRACE_MAX_SESSIONS and GLASSGRAPH_TRACE_MAX_AGE_DAYS are both 0",
                  file=sys.stderr)
            return EXIT_OK
        pruned = prune_sessions(_open_existing(config), retention)
        print(f"pruned {pruned} session(s) (keeping at most {retention.max_sessions or 'any number of'} sessions, "
              f"{f'{retention.max_age_days:g} days' if retention.max_age_days else 'of any age'})", file=sys.stderr)
        return EXIT_OK
    sessions = list_sessions(_open_existing(config, snapshot=True), limit=args.limit, offset=args.offset)
    if args.format == "json":
        _print_json(sessions)
    elif sessions:
        print(_table(("SESSION", "TIME", "QUESTION"), [(s[SESSION.kind], s["time"], s["question"]) for s in sessions]))
    else:
        print("no sessions yet (ask a question: glassgraph ask -q ...)", file=sys.stderr)
    return EXIT_OK


def cmd_explain(args: argparse.Namespace, config: Config) -> int:
    from server.explain.trace import read_trace

    try:
        iri = _session_iri(args.session)
    except ValueError:
        raise CliError(f"not a session IRI or id: {args.session!r}") from None
    trace = read_trace(_open_existing(config, snapshot=True), iri)
    if trace is None:
        raise NotFound(f"no session {args.session} in the store at {config.store_path} "
                       "(list them with: glassgraph sessions)")
    if args.format == "json":
        _print_json(trace)
    else:
        print("\n".join(trace_lines(trace, args.show_source)))
    return EXIT_OK


def cmd_collections(args: argparse.Namespace, config: Config) -> int:
    collections = _open_existing(config, snapshot=True).collections()
    if args.format == "json":
        _print_json(collections)
    else:
        print(_table(("COLLECTION", "TRIPLES", "SOURCE TRIPLES", "GRAPH"),
                     [(c["collection"], c["triples"], c["source_triples"], c["graph"]) for c in collections]))
    return EXIT_OK


def cmd_dump(args: argparse.Namespace, config: Config) -> int:
    fmt = DUMP_FORMATS[args.format]
    graph = None
    if args.graph:
        try:
            graph = NamedNode(args.graph)
        except ValueError:
            args.command_parser.error(f"--graph: not an IRI: {args.graph!r}")
    elif not fmt.supports_datasets:
        args.command_parser.error(f"--format {args.format} holds one graph: name it with --graph IRI "
                                  "(or use trig or nq)")
    store = _open_existing(config, snapshot=True)
    if graph is not None and not store.has_graph(graph):
        raise NotFound(f"no graph <{graph.value}> in the store at {config.store_path}")
    if args.output:
        try:
            store.dump(args.output, fmt, graph)
        except OSError as exc:  # e.g. the directory does not exist
            raise CliError(f"cannot write {args.output}: {exc}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(store.dump(None, fmt, graph) or b"")
        sys.stdout.flush()
    return EXIT_OK


def cmd_backup(args: argparse.Namespace, config: Config) -> int:
    target = Path(args.directory)
    if target.exists():
        raise CliError(f"{target} exists: a backup goes into a new directory")
    store = _open_existing(config, snapshot=True)  # a running server's store: its writes so far
    try:
        store.backup(target)
    except (OSError, ValueError) as exc:
        raise StoreFailed(f"backup to {target} failed: {exc}") from None
    print(f"backed up {config.store_path} to {target}")
    return EXIT_OK


def cmd_reindex(args: argparse.Namespace, config: Config) -> int:
    from server.rag.label_index import LabelIndex
    from server.rag.passage_index import make_passage_index

    store = _open_existing(config)
    names = [c["collection"] for c in store.collections()]
    if args.collection is not None:
        if args.collection not in names:
            raise NotFound(f"no collection {args.collection!r} (collections: {', '.join(names) or 'none'})")
        names = [args.collection]
    index, passages = LabelIndex(store), make_passage_index(store, config)
    if passages.adopt_embedder():
        print(f"the passage index held another model's vectors: every passage is embedded again with "
              f"{passages.embedder.name}", file=sys.stderr)
    rows = []
    for name in names:
        passages.sync(name, force=True)
        rows.append((name, index.rebuild(name), passages.count(name)))
    print(_table(("COLLECTION", "LABELS", "PASSAGES"), rows))
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, config: Config) -> int:
    from server.ingest.migrate import migrate_document_ids

    moved = migrate_document_ids(_open_existing(config))
    print(f"moved {moved} document(s) to their collection's IRIs" if moved else
          "nothing to migrate: every document already has its collection's IRIs", file=sys.stderr)
    return EXIT_OK


# --- the parser ---------------------------------------------------------------------------------

def _command(sub: argparse._SubParsersAction, name: str, handler: Callable[..., int], help_text: str,
             example: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text,
                            epilog=f"example:\n  {example}\n\n{EXIT_CODES}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler, command_parser=parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="glassgraph", description="Explainable GraphRAG server on an embedded Oxigraph store.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  glassgraph serve --port 7878\n  glassgraph load data.ttl -C movies\n"
               "  glassgraph ingest report.pdf -C research\n"
               "  glassgraph ask -x -q \"What is the capital of France?\"\n  glassgraph sessions\n\n"
               f"{EXIT_CODES}\n'glassgraph COMMAND --help' describes each command.")
    parser.add_argument("--store", metavar="PATH|URL",
                        help="store directory, or a SPARQL engine's base URL (http://host:port: a remote store) "
                             "(default: $GLASSGRAPH_STORE or ~/.local/share/glassgraph/store)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = _command(sub, "serve", cmd_serve,
                     "run the server (SPARQL endpoint, API, console): the development server, or with --engine "
                     "the production set-up on one machine",
                     "glassgraph serve --host 0.0.0.0 --port 8080 --token s3cret\n"
                     "  glassgraph serve --engine oxigraph --workers 4")
    serve.add_argument("--host", help="interface to listen on (default: $GLASSGRAPH_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="port (default: $GLASSGRAPH_PORT or 7878)")
    serve.add_argument("--token", help="bearer token required for writes (default: $GLASSGRAPH_TOKEN)")
    serve.add_argument("--read-only", action="store_true", help="refuse every write over HTTP")
    serve.add_argument("--engine", choices=["oxigraph"],
                       help="production set-up: run 'oxigraph serve' on the store directory and gunicorn against it")
    serve.add_argument("--workers", type=_int_between(1, 64), default=2,
                       help="gunicorn workers with --engine (default 2)")

    load = _command(sub, "load", cmd_load, "load RDF files (ttl, nt, nq, trig, rdf; optionally .gz) into a collection",
                    "glassgraph load movies.ttl people.nt.gz -C movies")
    load.add_argument("files", nargs="+", metavar="FILE", help="RDF files, each loaded in one transaction")
    load.add_argument("-C", "--collection",
                      help="collection to load into (default: $GLASSGRAPH_COLLECTION, else default)")
    load.add_argument("--quiet", action="store_true", help="no progress bar")

    ingest = _command(sub, "ingest", cmd_ingest,
                      "ingest documents (text, Markdown, HTML, PDF) into a collection: their text, the facts an LLM "
                      "extracts from them and the provenance of every fact; a file already ingested is skipped",
                      "glassgraph ingest report.pdf notes.md -C research --workers 8")
    ingest.add_argument("files", nargs="+", metavar="FILE", help="documents, each ingested in one transaction")
    ingest.add_argument("-C", "--collection",
                        help="collection to ingest into (default: $GLASSGRAPH_COLLECTION, else default)")
    ingest.add_argument("--title", help="the document's title (one file only; default: its own title, else its "
                                        "file name)")
    ingest.add_argument("--chunk-size", type=_int_between(1, 1_000_000), default=2000,
                        help="characters per chunk (default: %(default)s)")
    ingest.add_argument("--chunk-overlap", type=_int_between(0, 999_999), default=100,
                        help="characters consecutive chunks share, less than the chunk size (default: %(default)s)")
    ingest.add_argument("--workers", type=_int_between(1, 64), default=4,
                        help="chunks sent to the LLM at once (default: %(default)s)")
    ingest.add_argument("--replace", action="store_true",
                        help="extract files already ingested again, replacing them (after an offline or failed "
                             "ingest, or with another model)")
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")

    documents = _command(sub, "documents", cmd_documents,
                         "list the documents of a collection (id, title, media type, counts), or delete one",
                         "glassgraph documents -C research --delete 20adaab9e964fbc5d0ad-5e4f1b2a")
    documents.add_argument("-C", "--collection",
                           help="the collection (default: $GLASSGRAPH_COLLECTION, else default)")
    documents.add_argument("--delete", metavar="ID", help="delete this document (its id as listed, or its IRI): its "
                                                          "text, its provenance and the facts no other document "
                                                          "states")
    documents.add_argument("--format", choices=("text", "json"), default="text", help="output format")

    ask = _command(sub, "ask", cmd_ask, "answer a question in-process on the embedded store (GraphRAG)",
                   "glassgraph ask --explainable -q \"What is the capital of France?\" > answer.txt")
    add_query_arguments(ask, asdict(RetrievalLimits()))

    sessions = _command(sub, "sessions", cmd_sessions, "list the recorded GraphRAG sessions, newest first",
                        "glassgraph sessions --limit 5")
    sessions.add_argument("--limit", type=_int_between(1, MAX_SESSIONS), default=20,
                          help=f"sessions to list, 1 to {MAX_SESSIONS} (default: %(default)s)")
    sessions.add_argument("--offset", type=_int_between(0, MAX_SESSION_OFFSET), default=0,
                          help="sessions to skip (default: %(default)s)")
    sessions.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    sessions.add_argument("--prune", action="store_true",
                          help="delete the traces past GLASSGRAPH_TRACE_MAX_SESSIONS and GLASSGRAPH_TRACE_MAX_AGE_DAYS "
                               "(--trace-max-sessions, --trace-max-age-days)")
    sessions.add_argument("--trace-max-sessions", type=_int_between(0, 10**9), default=None,
                          help="with --prune: sessions to keep, newest first (0: any number)")
    sessions.add_argument("--trace-max-age-days", type=float, default=None,
                          help="with --prune: delete sessions older than this many days (0: any age)")

    explain = _command(sub, "explain", cmd_explain, "show the whole trace of a session, with source chains",
                       f"glassgraph explain {SESSION.iri('6f1c...').value}  (or just the id after '{SESSION.infix}')")
    explain.add_argument("session", help="session IRI (any explain IRI of the session works) or session id")
    explain.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    add_show_source(explain)

    collections = _command(sub, "collections", cmd_collections, "list the collections with their triple counts",
                           "glassgraph collections --format json")
    collections.add_argument("--format", choices=("text", "json"), default="text", help="output format")

    dump = _command(sub, "dump", cmd_dump, "write the store, or one graph, as RDF (stdout unless -o)",
                    "glassgraph dump --format ttl --graph urn:trustgraph:graph:default -o default.ttl")
    dump.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")
    dump.add_argument("--graph", metavar="IRI", help="only this named graph (required for ttl and nt)")
    dump.add_argument("--format", choices=DUMP_FORMATS, default="trig", help="RDF format (default: %(default)s)")

    backup = _command(sub, "backup", cmd_backup, "copy the store consistently into a new directory",
                      "glassgraph backup /var/backups/glassgraph-$(date +%F)")
    backup.add_argument("directory", metavar="DIR", help="target directory (must not exist)")

    _command(sub, "migrate", cmd_migrate,
             "give documents ingested before ids included the collection their collection's IRIs (the server "
             "does it when it opens the store; running it again changes nothing)", "glassgraph migrate")

    reindex = _command(sub, "reindex", cmd_reindex,
                       "rebuild the label index (entity lookup) of one or every collection and bring its passage "
                       "index (document RAG) in step with the store, embedding what it lacks, and report their "
                       "sizes; the label index lives in each process's memory, so a running server keeps its "
                       "own, rebuilt after every load",
                       "glassgraph reindex -C movies")
    reindex.add_argument("-C", "--collection", help="only this collection (default: all)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "ask":
        check_question(args.command_parser, args)
    return run_tool(PROG, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    """The command, with the configuration from the environment and the flags."""
    overrides = {"store_path": args.store}
    if args.command == "serve":
        overrides.update(host=args.host, port=args.port, token=args.token, read_only=args.read_only or None)
    if args.command == "sessions":
        overrides.update(trace_max_sessions=args.trace_max_sessions, trace_max_age_days=args.trace_max_age_days)
    try:
        config = Config.from_env(**overrides)
    except ValueError as exc:  # a malformed GLASSGRAPH_* variable
        raise BadRequest(f"bad configuration: {exc}") from None
    _check_arguments(args, config)
    return args.handler(args, config)


if __name__ == "__main__":
    sys.exit(main())
