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
_PORT_ATTEMPTS = 3


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
        """Up once its own log says it listens on its port and it answers there; on another port if the
        free one was taken before it bound it (``production_server.ProductionServer`` does the same)."""
        self.log_path = location.parent / "oxigraph.log"
        where = [] if memory else ["--location", str(location)]
        for _ in range(_PORT_ATTEMPTS):
            self.url = f"http://127.0.0.1:{free_port()}"
            log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen([oxigraph_cli(), "serve", *where, "--bind",
                                                 self.url.removeprefix("http://"), *options], stdout=log, stderr=log)
            if self._wait_until_up(log_start):
                return
        raise RuntimeError(f"oxigraph serve found no free port in {_PORT_ATTEMPTS} tries; see {self.log_path}")

    def _wait_until_up(self, log_start: int) -> bool:
        """True once up; False if its port was taken (it has exited). Raises if it does not start."""
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            with self.log_path.open("rb") as log:
                log.seek(log_start)
                own = log.read().decode(errors="replace")
            if self.process.poll() is not None and "in use" in own:
                return False
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"oxigraph serve did not start; see {self.log_path}")
            try:
                if (f"Listening for requests at {self.url}" in own
                        and requests.get(self.url + "/query", params={"query": "ASK {}"}, timeout=5).ok):
                    return True
            except requests.ConnectionError:
                pass
            time.sleep(0.1)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
