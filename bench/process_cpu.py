"""Where a benchmark's CPU goes: the CPU seconds of a server's process tree, by role, and of the client (this
process), read from ``/proc`` (Linux) before and after a phase.

A server's processes are told apart by their command line: ``server.http.query_workers`` are the query
workers, everything else in the tree is the server itself (gunicorn's master and worker, ``oxigraph serve``).
A process that ended during the phase is not counted (a killed runaway query's worker).
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CLIENT, SERVER, QUERY_WORKERS = "client", "server", "query workers"
ROLES = (CLIENT, SERVER, QUERY_WORKERS)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first); None when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent pid."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _role(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return SERVER
    return QUERY_WORKERS if b"server.http.query_workers" in command else SERVER


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds so far: each process of a server's tree (pid -> (role, seconds)) and this process's."""

    processes: dict[int, tuple[str, float]]
    client: float

    @classmethod
    def of(cls, root: int | None) -> CpuSnapshot:
        processes = {}
        if root is not None:
            children, tree = _children(), [root]
            while tree:
                pid = tree.pop()
                fields = _stat_fields(pid)
                if fields is not None:
                    processes[pid] = (_role(pid), (int(fields[11]) + int(fields[12])) / _TICKS)
                tree += children.get(pid, [])
        times = os.times()
        return cls(processes, times.user + times.system)

    def spent_since(self, before: CpuSnapshot) -> dict[str, float]:
        """CPU seconds per role between ``before`` and this snapshot (a process new since then from 0)."""
        spent = Counter({CLIENT: self.client - before.client})
        for pid, (role, seconds) in self.processes.items():
            spent[role] += seconds - before.processes.get(pid, (role, 0.0))[1]
        return {role: spent[role] for role in ROLES}
