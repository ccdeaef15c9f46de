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
_PORT_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def production_command(port: int, workers: int = 1) -> list[str]:
    """The README's serving command, bound to 127.0.0.1:``port`` (more than one worker: a remote store only)."""
    gunicorn = Path(sys.executable).with_name("gunicorn")
    return [str(gunicorn), "-w", str(workers), "-k", WORKER, "-b", f"127.0.0.1:{port}", "server.asgi:app"]


def production_environment(store_path: Path | str, runtime_dir: Path,
                           env: Mapping[str, str]) -> dict[str, str]:
    """The environment the production command runs in for tests: offline, the test token, no sample."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("GLASSGRAPH_", "OPENAI_"))}
    return {**inherited, "GLASSGRAPH_STORE": str(store_path), "GLASSGRAPH_LOAD_SAMPLE": "false",
            "GLASSGRAPH_TOKEN": TOKEN, "GLASSGRAPH_LLM": "offline", "GLASSGRAPH_QUESTION_RATE": "0",
            "XDG_RUNTIME_DIR": str(runtime_dir),  # gunicorn's control socket: not the user's
            **env}


class PortTaken(Exception):
    """The free port was taken before the server bound it: start again on another."""


class ProductionServer:
    """The production command serving ``store_path``; ``url`` is ``http://127.0.0.1:PORT``.

    A free port is free only until someone binds it (another test's server, a client's own port): the
    server counts as up once its own log says it listens there and ``/healthz`` answers, and it starts
    again on another port if the one it was given was taken meanwhile."""

    def __init__(self, store_path: Path | str, env: Mapping[str, str] | None = None, log_path: Path | None = None,
                 workers: int = 1) -> None:
        """``store_path``: the store directory, or a remote engine's URL (then ``log_path`` is required)."""
        self.workers = workers
        self.log_path = log_path or Path(store_path).parent / "gunicorn.log"
        for attempt in range(_PORT_ATTEMPTS):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(production_command(self.port, workers), cwd=PROJECT_ROOT,
                                                env=production_environment(store_path, self.log_path.parent,
                                                                           env or {}),
                                                # a process group: close() can end the workers too
                                                stdout=log, stderr=log, start_new_session=True)
            try:
                self._wait_until_up()
                return
            except PortTaken:
                self.close()
                if attempt == _PORT_ATTEMPTS - 1:
                    raise
            except BaseException:
                self.close()
                raise

    def own_log(self) -> str:
        """What this start of the server has logged (the log file may hold earlier starts')."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        listening = f"Listening at: {self.url} ({self.process.pid})"
        while time.monotonic() < deadline:
            log = self.own_log()
            if "Connection in use" in log:
                raise PortTaken(self.url)
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if listening in log and requests.get(self.url + "/healthz", timeout=5).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server did not answer /healthz in {_START_TIMEOUT_S:g} s:\n{self.log_tail()}")

    def query_worker_cpu(self) -> dict[int, float]:
        """CPU seconds (user + system) of each of the server's query worker processes alive now, from /proc."""
        found = {}
        for worker in _children(self.process.pid):
            for pid in _children(worker):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if b"server.http.query_workers" in cmdline and fields[0] not in ("Z", "X"):
                    found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return found

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


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]
    except OSError:
        return []


def answered_status(response: requests.Response) -> int:
    """The status Glassgraph answered: TrustGraph's REST forms carry an error with 200 and the status in
    ``X-Glassgraph-Status`` (as TrustGraph's gateway does, whose client reads errors from a 200 only)."""
    return int(response.headers.get("X-Glassgraph-Status", response.status_code))
