"""Oxigraph's own server (``oxigraph serve``, from the ``oxigraph`` wheel on PyPI) as a subprocess on
127.0.0.1: the federation tests' remote endpoint, the remote store's engine (``conftest.engine``) and
the conformance comparison (``bench/w3c_conformance.py``)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import requests
from production_server import free_port

_START_TIMEOUT_S = 60.0


def oxigraph_cli() -> str:
    cli = shutil.which("oxigraph", path=str(Path(sys.executable).parent)) or shutil.which("oxigraph")
    if cli is None:
        raise RuntimeError("the oxigraph CLI is missing: pip install -e '.[test]' installs it")
    return cli


class OxigraphServer:
    """``oxigraph serve --location LOCATION`` on a free port until ``close()``; ``url`` is its root,
    ``url + "/query"`` its query endpoint, ``/update`` and ``/store`` the others. Output goes to
    ``LOCATION/../oxigraph.log``. With ``memory=True`` the engine keeps its data in memory (LOCATION is
    then only where the log goes)."""

    def __init__(self, location: Path, *options: str, memory: bool = False) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = location.parent / "oxigraph.log"
        where = [] if memory else ["--location", str(location)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen([oxigraph_cli(), "serve", *where, "--bind",
                                             self.url.removeprefix("http://"), *options], stdout=log, stderr=log)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"oxigraph serve did not start; see {self.log_path}")
            try:
                if requests.get(self.url + "/query", params={"query": "ASK {}"}, timeout=5).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.1)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
