"""``glassgraph serve --engine oxigraph --workers N``: the single-machine production set-up.

``oxigraph serve`` (the ``oxigraph`` wheel: ``pip install 'glassgraph[engine]'``) runs on the store
directory on a loopback port, with ``--timeout-s`` at ``GLASSGRAPH_DEADLINE`` so that a runaway query
really stops; gunicorn runs N app workers against it (``GLASSGRAPH_STORE`` = the engine's URL). A new
store directory is first built from the sample data by the bulk loader, as ``glassgraph serve`` does.
Ctrl-C or SIGTERM stops gunicorn, then the engine.
"""
from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from server.config import SAMPLE_DATA, Config
from server.errors import BadRequest, Unavailable
from server.ingest.load import build_store, new_store_directory
from server.store import store_directory

ENGINES = ("oxigraph",)
_START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tool(name: str, package: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        raise Unavailable(f"'{name}' is not installed: pip install {package}")
    return found


def _wait_for(url: str, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Unavailable(f"{what} exited with code {process.returncode} before it answered")
        try:
            if requests.get(url, timeout=5).ok:
                return
        except requests.ConnectionError:
            time.sleep(0.1)
    raise Unavailable(f"{what} did not answer in {_START_TIMEOUT_S:g} s")


def _stop(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_with_engine(config: Config, workers: int) -> int:
    """Run the engine and the app workers until interrupted; 0 on a clean stop."""
    directory = store_directory(config.store_path)
    if directory is None:
        raise BadRequest("--engine runs the engine on a store directory: GLASSGRAPH_STORE (--store) must be one")
    target = new_store_directory(directory)
    if target is not None and config.load_sample and SAMPLE_DATA.exists():
        build_store(target, SAMPLE_DATA, config.default_collection, progress=sys.stderr.isatty())
    directory.mkdir(parents=True, exist_ok=True)
    engine_url = f"http://127.0.0.1:{_free_port()}"
    engine = app = None
    stop = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops both as cleanly as Ctrl-C
    try:
        engine = subprocess.Popen([_tool("oxigraph", "'glassgraph[engine]'"), "serve", "--location", str(directory),
                                   "--bind", engine_url.removeprefix("http://"),
                                   "--timeout-s", str(max(1, math.ceil(config.query_deadline_s)))])
        _wait_for(engine_url + "/query?query=ASK%7B%7D", engine, f"oxigraph serve on {directory}")
        env = {**os.environ, "GLASSGRAPH_STORE": engine_url, "GLASSGRAPH_LOAD_SAMPLE": "false",
               "GLASSGRAPH_READ_ONLY": "true" if config.read_only else "false",
               **({"GLASSGRAPH_TOKEN": config.token} if config.token else {})}
        bind = f"{config.host}:{config.port}"
        app = subprocess.Popen([_tool("gunicorn", "gunicorn"), "-w", str(workers), "-k", "server.http.asgi.Worker",
                                "-b", bind, "server.asgi:app"], env=env)
        _wait_for(f"http://{bind}/healthz", app, "gunicorn")
        print(f"Glassgraph console: http://{bind}/  (store: {directory} through oxigraph serve at {engine_url}; "
              f"{workers} workers; Ctrl-C stops)", flush=True)
        app.wait()
    except KeyboardInterrupt:
        pass
    finally:
        _stop(app)
        _stop(engine)
        signal.signal(signal.SIGTERM, stop)
    return 0
