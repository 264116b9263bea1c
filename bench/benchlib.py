"""Helpers shared by the benchmark scripts (standard library only)."""

from __future__ import annotations

import socket
from pathlib import Path


def process_cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` from schedstat (exact ns; /proc/<pid>/stat's ticks
    under-count timer-synchronised work). Threads that exit while being read are skipped."""
    ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return ns


def free_port() -> int:
    """A loopback TCP port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
