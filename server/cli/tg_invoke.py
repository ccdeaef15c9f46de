"""``tg-invoke-graph-rag`` and ``tg-invoke-document-rag``: ask a Glassgraph server a question over HTTP
(GraphRAG, or document RAG from the passages of its documents), streaming the answer.

Exit codes: 0 success, 1 the server reported an error, 2 usage, 3 cannot connect.
Imports neither the store nor the retriever: it needs only ``requests``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

import requests
import urllib3

from server.cli.arguments import add_query_arguments, check_question, explain_wanted, limits_of
from server.cli.display import StreamDisplay, TraceUnavailable, error_text
from server.cli.errors import EXIT_OK, run_tool
from server.errors import CannotConnect, RemoteFailed
from server.rag.messages import GraphRagResponse

PROG = "tg-invoke-graph-rag"
DEFAULT_URL = "http://127.0.0.1:7878"
_READ_BYTES = 64 * 1024  # the most of a streamed answer read at once (less when less has arrived)
# A one-shot answer lists its explain IRIs in the order a stream sends them, one per stage.

EPILOG = """\
examples:
  tg-invoke-graph-rag -q "What is the capital of France?"
  tg-invoke-graph-rag --explainable -q "What is the capital of France?" > answer.txt
  tg-invoke-graph-rag --show-source -q "What is the capital of France?"
  tg-invoke-graph-rag -u http://kg.example:7878 -C movies -e 20 --format json -q "Who directed Alien?"

With --explainable the explain events ([session], [retrieval], [selection] with the selected
edges, their reasoning and source chains, [answer]) go to stderr as they arrive; the answer alone
goes to stdout. An edge without a source chain lists the passages that mention its entities
("Mentioned in:"); --show-source quotes each passage around the fact.

exit codes: 0 success, 1 the server reported an error, 2 usage, 3 cannot connect to the server
environment: GLASSGRAPH_URL (default server URL), GLASSGRAPH_TOKEN (bearer token)
"""


DOCUMENT_PROG = "tg-invoke-document-rag"
DOCUMENT_EPILOG = """\
examples:
  tg-invoke-document-rag -C notes -q "When was the Suez Canal completed?"
  tg-invoke-document-rag -C notes --explainable -q "When was the Suez Canal completed?"

With --explainable the explain events go to stderr: [retrieval] with each passage's chain and scores,
[selection] with the passages used (Used 2 passage(s): #1, #3), [answer] with the marks that cite
them (Used 2 passage(s): #1 as [1], #3 as [2]: known once the answer is) and each cited sentence's span
(Passage [1]: Chunk 4 (chars 120-388) → Page 2 → "Title") and the sentence quoted.

exit codes: 0 success, 1 the server reported an error, 2 usage, 3 cannot connect to the server
environment: GLASSGRAPH_URL (default server URL), GLASSGRAPH_TOKEN (bearer token)
"""


def build_parser(documents: bool = False) -> argparse.ArgumentParser:
    """The parser of ``tg-invoke-graph-rag``, or with ``documents`` of ``tg-invoke-document-rag``."""
    parser = argparse.ArgumentParser(
        prog=DOCUMENT_PROG if documents else PROG,
        description="Ask a Glassgraph server a question " + ("from its documents' passages." if documents
                                                            else "with GraphRAG."),
        epilog=DOCUMENT_EPILOG if documents else EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-u", "--url", default=os.environ.get("GLASSGRAPH_URL") or DEFAULT_URL,
                        help=f"server URL (default: $GLASSGRAPH_URL or {DEFAULT_URL})")
    add_query_arguments(parser, documents=documents)
    parser.add_argument("--no-streaming", action="store_true", help="wait for the whole answer in one response")
    parser.add_argument("-t", "--token", default=os.environ.get("GLASSGRAPH_TOKEN") or None,
                        help="bearer token (default: $GLASSGRAPH_TOKEN)")
    return parser


def _reason(exc: BaseException) -> str:
    """The useful end of a requests/urllib3 connection error: ``Connection refused``."""
    text = str(exc)
    found = re.findall(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if found:
        return found[-1].strip()
    if isinstance(exc, requests.Timeout):
        return "timed out"
    return " ".join(text.split())[-200:]


class Client:
    """The HTTP API of one server."""

    def __init__(self, url: str, token: str | None = None, timeout: tuple[float, float] = (10.0, 600.0)) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.trace_note: str | None = None  # the last answer's Glassgraph-Trace header: why no trace was recorded
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def _request(self, method: str, path: str, **kwargs: object) -> requests.Response:
        try:
            response = self.session.request(method, self.url + path, timeout=self.timeout, **kwargs)
        except requests.ConnectionError as exc:
            raise CannotConnect(f"cannot connect to {self.url} ({_reason(exc)})") from None
        except requests.RequestException as exc:
            raise RemoteFailed(f"no answer from {self.url} ({_reason(exc)})") from None
        if response.status_code >= 400:
            raise RemoteFailed(self._http_error(response))
        return response

    @staticmethod
    def _http_error(response: requests.Response) -> str:
        status = f"HTTP {response.status_code} {response.reason or ''}".strip()
        try:
            body = response.json()
        except ValueError:  # an HTML error page says no more than its status
            html = response.headers.get("Content-Type", "").startswith("text/html")
            text = "" if html else " ".join(response.text.split())[:200]
            return f"{status}: {text}" if text else status
        detail = body.get("error") or body.get("message") if isinstance(body, dict) else None
        if isinstance(detail, dict) and detail.get("message"):  # {"error": {"type", "message"}}
            detail = detail["message"]
        return f"{status}: {error_text(detail)}" if detail else status

    def graph_rag(self, question: str, collection: str | None, streaming: bool,
                  limits: dict[str, int], path: str = "/api/graph-rag") -> Iterator[dict]:
        """The messages of one GraphRAG query (a non-streaming answer is turned into messages too);
        ``collection`` None asks the server's default collection; ``path`` ``/api/document-rag`` asks
        the documents instead. It is always asked as explainable: the server records a trace only for such
        a question (whether its explain messages are shown is the display's choice)."""
        body = {"query": question, "explainable": True, "streaming": streaming, **limits}
        if collection is not None:
            body["collection"] = collection
        accept = "application/x-ndjson" if streaming else "application/json"
        response = self._request("POST", path, json=body, headers={"Accept": accept}, stream=streaming)
        self.trace_note = response.headers.get("Glassgraph-Trace")
        content_type = response.headers.get("Content-Type", "")
        if not streaming or content_type.startswith("application/json"):
            yield from self._answer_messages(self._json(response))
            return
        try:
            parse = _sse if content_type.startswith("text/event-stream") else _ndjson
            yield from parse(_lines(response))
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            raise RemoteFailed(f"lost the connection to {self.url} ({_reason(exc)})") from None
        finally:
            response.close()

    @staticmethod
    def _json(response: requests.Response) -> dict:
        try:
            return response.json()
        except ValueError:
            raise RemoteFailed(f"the server sent no JSON: {response.text[:200]!r}") from None

    @staticmethod
    def _answer_messages(answer: dict) -> Iterator[dict]:
        """``{"answer", "session", "explain_ids", "explain_kinds", "explain_collection", "error"}`` as stream
        messages."""
        if answer.get("error"):
            yield GraphRagResponse("chunk", error=answer["error"], end_of_stream=True, end_of_session=True).to_dict()
            return
        for iri, kind in zip(answer.get("explain_ids") or [], answer.get("explain_kinds") or [], strict=False):
            yield GraphRagResponse("explain", explain_id=iri, explain_collection=answer.get("explain_collection"),
                                   explain_kind=kind).to_dict()
        yield GraphRagResponse("chunk", answer.get("answer") or "", end_of_stream=True, end_of_session=True,
                               outcome=answer.get("outcome")).to_dict()

    def trace(self, iri: str) -> dict | None:
        """The trace of the session ``iri`` belongs to (``GET /api/explain``, which takes any explain IRI
        of a session), None if there is none."""
        try:
            response = self.session.get(self.url + "/api/explain", params={"id": iri},
                                        headers={"Accept": "application/json"}, timeout=self.timeout)
        except requests.RequestException as exc:
            raise TraceUnavailable(f"cannot reach {self.url} ({_reason(exc)})") from None
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise TraceUnavailable(self._http_error(response))
        try:
            return response.json()
        except ValueError:
            raise TraceUnavailable("the server sent no JSON") from None


def _message(text: str) -> dict:
    try:
        message = json.loads(text)
    except ValueError:
        raise RemoteFailed(f"the server sent an invalid message: {text[:200]!r}") from None
    if not isinstance(message, dict):
        raise RemoteFailed(f"the server sent an invalid message: {text[:200]!r}")
    return message


def _lines(response: requests.Response) -> Iterator[str]:
    """The body's lines as they arrive, each byte scanned once (requests' ``iter_lines`` joins every 512-byte
    read to the line so far: quadratic on an explain message of megabytes)."""
    pending = bytearray()
    while chunk := response.raw.read1(_READ_BYTES, decode_content=True):
        scanned = len(pending)
        pending += chunk
        end = pending.rfind(b"\n", scanned)
        if end >= 0:
            for line in pending[:end].split(b"\n"):
                yield line.rstrip(b"\r").decode("utf-8")
            del pending[:end + 1]
    if pending:
        yield pending.decode("utf-8")


def _ndjson(lines: Iterator[str]) -> Iterator[dict]:
    for line in lines:
        if line.strip():
            yield _message(line)


def _sse(lines: Iterator[str]) -> Iterator[dict]:
    """Server-sent events: ``data:`` lines up to a blank line make one message."""
    data: list[str] = []
    for line in lines:
        if not line.strip():
            if data:
                yield _message("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield _message("\n".join(data))


def main(argv: list[str] | None = None, documents: bool = False) -> int:
    parser = build_parser(documents)
    args = parser.parse_args(argv)
    check_question(parser, args)
    parts = urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        parser.error(f"not an http(s) URL: {args.url!r}")
    return run_tool(parser.prog, lambda: _ask(args, documents))


def main_documents(argv: list[str] | None = None) -> int:
    """``tg-invoke-document-rag``."""
    return main(argv, documents=True)


def _ask(args: argparse.Namespace, documents: bool) -> int:
    """Ask the server and display its answer."""
    client = Client(args.url, args.token)
    explainable = explain_wanted(args)
    display = StreamDisplay(sys.stdout, sys.stderr, client.trace, args.format, explainable, args.show_source,
                            passages=documents or bool(args.passages), edges=not documents)
    display.run(client.graph_rag(args.question, args.collection, not args.no_streaming,
                                 limits_of(args), "/api/document-rag" if documents else "/api/graph-rag"))
    if client.trace_note:
        print(f"[trace] {client.trace_note}: this answer cannot be traced later", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
