"""The production serving command (README) as a subprocess on 127.0.0.1, for tests and benchmarks.

``ProductionServer(store_path, env={...})`` starts ``gunicorn -w 1 -k server.http.asgi.Worker
server.asgi:app`` on a free port over the store at ``store_path``, waits until ``/healthz``
answers and serves until ``close()``. The environment is this process's without its
``GLASSGRAPH_*`` and ``OPENAI_*`` variables, plus an empty-store, offline-LLM, unrated configuration with
``TOKEN`` as the write token, plus ``env``. gunicorn's output goes to ``log_path``.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import requests

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOKEN = "production-test-token"
WORKER = "server.http.asgi.Worker"
_START_TIMEOUT_S = 60.0
_STOP_GRACE_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def production_command(port: int, workers: int = 1) -> list[str]:
    """The README's serving command, bound to 127.0.0.1:``port`` (more than one worker: a remote store only)."""
    gunicorn = Path(sys.executable).with_name("gunicorn")
    return [str(gunicorn), "-w", str(workers), "-k", WORKER, "-b", f"127.0.0.1:{port}", "server.asgi:app"]


def _environment(store_path: Path | str, runtime_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("GLASSGRAPH_", "OPENAI_"))}
    return {**inherited, "GLASSGRAPH_STORE": str(store_path), "GLASSGRAPH_LOAD_SAMPLE": "false",
            "GLASSGRAPH_TOKEN": TOKEN, "GLASSGRAPH_LLM": "offline", "GLASSGRAPH_QUESTION_RATE": "0",
            "XDG_RUNTIME_DIR": str(runtime_dir),  # gunicorn's control socket: not the user's
            **env}


class ProductionServer:
    """The production command serving ``store_path``; ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, store_path: Path | str, env: Mapping[str, str] | None = None, log_path: Path | None = None,
                 workers: int = 1) -> None:
        """``store_path``: the store directory, or a remote engine's URL (then ``log_path`` is required)."""
        self.port, self.workers = free_port(), workers
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or Path(store_path).parent / "gunicorn.log"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(production_command(self.port, workers), cwd=PROJECT_ROOT,
                                            env=_environment(store_path, self.log_path.parent, env or {}),
                                            # a process group: close() can end the workers too
                                            stdout=log, stderr=log, start_new_session=True)
        try:
            self._wait_until_up()
        except BaseException:
            self.close()
            raise

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if requests.get(self.url + "/healthz", timeout=5).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server did not answer /healthz in {_START_TIMEOUT_S:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        """Stop gracefully (SIGTERM to gunicorn); past ``_STOP_GRACE_S``, kill the process group."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
