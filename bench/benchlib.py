"""Helpers shared by the benchmark scripts (standard library only)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def thread_stats(pid: int) -> dict[str, tuple[int, int]]:
    """Per thread of `pid`: (CPU time in ns, times switched in) from schedstat (exact ns;
    /proc/<pid>/stat's ticks under-count timer-synchronised work). Threads that exit while being
    read are skipped."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run, _, slices = (int(x) for x in (task / "schedstat").read_text().split())
            out[task.name] = (run, slices)
        except (OSError, ValueError):
            pass
    return out


def process_cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` in ns (see `thread_stats`)."""
    return sum(run for run, _ in thread_stats(pid).values())


def free_port() -> int:
    """A loopback TCP port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def warmed_up(cmd: list[str] | None, warmup_s: float):
    """Run `cmd` (output discarded) and yield its Popen after `warmup_s` seconds, so start-up
    work is not measured; stop it with SIGINT (SIGKILL after 30 s) on leaving. `cmd` None waits
    and yields None (the idle machine). Raises RuntimeError if the program exits during the
    warm-up."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if cmd else None
    try:
        time.sleep(warmup_s)
        if p and p.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited early (exit {p.returncode}): {' '.join(cmd)}")
        yield p
    finally:
        if p:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def build_floor(tmp: str) -> str:
    """Compile `bench/ref/wakeloop.c` (the bare wake-up loop) into `tmp`; its path."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise FileNotFoundError("no C compiler for bench/ref/wakeloop.c (apt-get install gcc)")
    out = f"{tmp}/wakeloop"
    subprocess.run([cc, "-O2", "-pthread", "-o", out, str(REPO / "bench/ref/wakeloop.c")],
                   check=True)
    return out


def wake_programs(latlab: str, tmp: str, cpus: str, interval_us: int, seconds: int,
                  floor_bin: str) -> dict:
    """The programs the monitor benchmarks compare, as functions returning a fresh command line
    (each call of the daemon's gets a new free port): one SCHED_FIFO 95 thread per listed CPU
    at `interval_us`, memory locked, PM QoS left alone. `seconds` bounds cyclictest's run."""
    n = len(cpus.split(","))

    def daemon(*extra: str) -> list[str]:
        return [latlab, "monitor", "--db", f"{tmp}/m.db", "--name", "cost", "--cpus", cpus,
                "-i", f"{interval_us}us", "-p", "95", "--listen", f"127.0.0.1:{free_port()}",
                *extra]

    return {
        "latlab": daemon,
        "latlab-stagger": lambda: daemon("--stagger"),
        # -d0: one interval for every thread (without it each further thread's interval is
        # 500 us longer); --default-system: leave PM QoS alone, as the daemon does.
        "cyclictest": lambda: ["cyclictest", "-q", "-m", "-p", "95", "-i", str(interval_us),
                               "-d", "0", "-a", cpus, "-t", str(n), "--default-system",
                               "-D", str(seconds)],
        "floor": lambda: [floor_bin, str(interval_us), "95", *cpus.split(",")],
    }


def run(main) -> None:
    """Run a benchmark's `main`; Ctrl-C exits with 130 once its own clean-up has run."""
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
