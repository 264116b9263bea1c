"""Helpers shared by the benchmark scripts (standard library only)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def die(msg: str, code: int = 2) -> None:
    """Stop the benchmark with a one-line error prefixed by its script's name."""
    print(f"{Path(sys.argv[0]).stem}: {msg}", file=sys.stderr)
    sys.exit(code)


def preflight(latlab: str, root_for: str, tools: tuple[tuple[str, str], ...] = ()) -> None:
    """Refuse to start without root (saying what it is for), without a latlab binary at
    `latlab`, or without each `(tool, Debian package)` of `tools`."""
    if os.geteuid() != 0:
        die(f"needs root ({root_for})")
    for tool, pkg in tools:
        if not shutil.which(tool):
            die(f"{tool} not found (apt-get install {pkg})")
    if not Path(latlab).is_file():
        die(f"{latlab} not found (cargo build --release)")


def results_path(name: str, out: Path | None) -> tuple[str, Path]:
    """The UTC start stamp and where the results go: `out`, or
    `bench/results/NAME-STAMP.json`."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return stamp, out or REPO / "bench/results" / f"{name}-{stamp}.json"


def every_cpu(cpus: str | None) -> str:
    """`cpus`, or every CPU this process may run on, as a kernel list."""
    return cpus or ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))


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
    """Compile `bench/ref/wakeloop.c` (the bare wake-up loop) into `tmp`; its path. Without a
    C compiler the benchmark stops, saying so."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        die("no C compiler for bench/ref/wakeloop.c (apt-get install gcc)")
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


def store_args(ap) -> object:
    """Parse a store benchmark's arguments: --latlab, --db, --series and --out beside `ap`'s
    own, checking the binary and the store exist."""
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--series", required=True, help="name of the series to ask about")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if not Path(a.latlab).is_file():
        die(f"{a.latlab} not found (cargo build --release)")
    if not a.db.is_file():
        die(f"{a.db}: no store (write one with latlab fill-monitor)")
    return a
