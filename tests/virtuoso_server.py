"""Virtuoso 7 (Debian's ``virtuoso-opensource-7-bin``) as a subprocess on 127.0.0.1: the remote store's
engine without triple terms or LATERAL (``conftest``'s ``virtuoso`` backend, the ``reification`` dialect).

The database lives in a temporary directory; the SPARQL endpoint's user is granted updates through
``isql-vt`` once the server is up. Graphs present at start (Virtuoso's own) are kept by :meth:`empty`.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import requests
from production_server import free_port
from pyoxigraph import NamedNode

from server.remote_store import EngineEndpoints
from server.sparql_templates import render_term

_START_TIMEOUT_S = 60.0
INSTALL = "apt-get install -y virtuoso-opensource-7-bin"
DIALECT = "reification"

_INI = """[Database]
DatabaseFile = {dir}/virtuoso.db
ErrorLogFile = {dir}/virtuoso.log
TransactionFile = {dir}/virtuoso.trx
xa_persistent_file = {dir}/virtuoso.pxa
[TempDatabase]
DatabaseFile = {dir}/virtuoso-temp.db
TransactionFile = {dir}/virtuoso-temp.trx
[Parameters]
ServerPort = 127.0.0.1:{sql_port}
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {dirty_buffers}
DirsAllowed = {dir}
[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerThreads = 10
[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryExecutionTime = {timeout_s}
"""


def virtuoso_missing() -> str | None:
    """Why Virtuoso cannot run here (None when it can)."""
    missing = [cli for cli in ("virtuoso-t", "isql-vt") if shutil.which(cli) is None]
    return f"{' and '.join(missing)} not installed: {INSTALL}" if missing else None


class VirtuosoServer:
    """``virtuoso-t +foreground`` with its database in ``directory`` until ``close()``; ``url`` is its root."""

    def __init__(self, directory: Path, timeout_s: int = 60, buffers: int = 10_000,
                 max_rows: int = 1_000_000) -> None:
        """``buffers``: Virtuoso's page cache in 8 kB pages; ``max_rows``: the most rows a SPARQL answer holds
        (beyond it Virtuoso cuts the answer short without an error)."""
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.sql_port = free_port()
        http_port = next(port for port in iter(free_port, None) if port != self.sql_port)
        self.url = f"http://127.0.0.1:{http_port}"
        ini = directory / "virtuoso.ini"
        ini.write_text(_INI.format(dir=directory, sql_port=self.sql_port, http_port=http_port, timeout_s=timeout_s,
                                   buffers=buffers, dirty_buffers=buffers * 3 // 5, max_rows=max_rows))
        self.log_path = directory / "virtuoso.out"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(["virtuoso-t", "+foreground", "+configfile", str(ini)], cwd=directory,
                                            stdout=log, stderr=log)
        self._wait_until_up()
        self.isql('GRANT SPARQL_UPDATE TO "SPARQL";')
        self.own_graphs = set(self.graphs())

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"virtuoso-t did not start; see {self.log_path} and {self.directory}/virtuoso.log")
            try:
                if requests.get(self.url + "/sparql", params={"query": "ASK {}"}, timeout=5).ok:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)

    def isql(self, statement: str, timeout_s: float = 60) -> str:
        """Run SQL statements as dba (the account Virtuoso starts with); returns what isql printed."""
        return subprocess.run(["isql-vt", f"127.0.0.1:{self.sql_port}", "dba", "dba", f"exec={statement}"],
                              check=True, capture_output=True, timeout=timeout_s, text=True).stdout

    @property
    def endpoints(self) -> EngineEndpoints:
        return EngineEndpoints.of(self.url, f"{self.url}/sparql", f"{self.url}/sparql", f"{self.url}/sparql-graph-crud")

    @property
    def settings(self) -> dict[str, str]:
        """The environment that points Glassgraph at this Virtuoso, beside ``--store URL`` or ``GLASSGRAPH_STORE``."""
        return {"GLASSGRAPH_STORE_DIALECT": DIALECT, "GLASSGRAPH_STORE_QUERY_URL": self.endpoints.query,
                "GLASSGRAPH_STORE_UPDATE_URL": self.endpoints.update, "GLASSGRAPH_STORE_DATA_URL": self.endpoints.data}

    def graphs(self) -> list[str]:
        query = "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
        answer = requests.post(self.url + "/sparql", data={"query": query},
                               headers={"Accept": "application/sparql-results+json"}, timeout=60)
        answer.raise_for_status()
        return [row["g"]["value"] for row in answer.json()["results"]["bindings"]]

    def empty(self) -> None:
        """Drop every graph but Virtuoso's own, one by one (Virtuoso 7's ``DROP ALL`` drops its default graph only)."""
        for graph in set(self.graphs()) - self.own_graphs:
            requests.post(self.url + "/sparql", data={"update": f"DROP SILENT GRAPH {render_term(NamedNode(graph))}"},
                          timeout=60).raise_for_status()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
