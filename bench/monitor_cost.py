#!/usr/bin/env python3
"""`latlab monitor`'s own CPU time against cyclictest's at the same operating point.

Alternating pairs (A B, B A, ...): the daemon (`latlab monitor`, every sampler, the store and
the web server included) and `cyclictest`, each with one SCHED_FIFO 95 thread per CPU at the same
interval, memory locked, PM QoS left alone. Each process's CPU time is the sum of its threads'
`/proc/<pid>/task/*/schedstat` run time (exact ns) between two reads DURATION seconds apart,
taken after a warm-up so start-up work (loading, the first store write) is not counted.

Standard library only (Python 3.11). Run as root on an idle machine, never next to a build:
    cargo build --release
    sudo apt-get install -y rt-tests
    sudo python3 bench/monitor_cost.py --quick        # 1 pair of 10 s: checks the script
    sudo python3 bench/monitor_cost.py                # 5 pairs of 60 s at 200 us
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WARMUP_S = 3.0


def die(msg: str, code: int = 2) -> None:
    print(f"monitor_cost: {msg}", file=sys.stderr)
    sys.exit(code)


def cpu_ns(pid: int) -> int:
    ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return ns


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(cmd: list[str], duration: float) -> float:
    """CPU seconds per second of `cmd` over `duration` after the warm-up."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(WARMUP_S)
        if p.poll() is not None:
            die(f"{cmd[0]} exited early (exit {p.returncode}): {' '.join(cmd)}", 1)
        a, t0 = cpu_ns(p.pid), time.monotonic()
        time.sleep(duration)
        b, t1 = cpu_ns(p.pid), time.monotonic()
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    return (b - a) / 1e9 / (t1 - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds measured per run")
    ap.add_argument("--interval-us", type=int, default=200)
    ap.add_argument("--cpus", default=None, help="default: every online CPU")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        die("needs root (SCHED_FIFO, mlockall)")
    if not Path(a.latlab).is_file():
        die(f"{a.latlab} not found (cargo build --release)")
    if not shutil.which("cyclictest"):
        die("cyclictest not found (apt-get install rt-tests)")
    if a.quick:
        a.pairs, a.duration = 1, 10.0
    cpus = a.cpus or ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    n = len(cpus.split(","))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_path = a.out or REPO / "bench/results" / f"monitor_cost-{stamp}.json"

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        def latlab() -> float:
            return measure([a.latlab, "monitor", "--db", f"{tmp}/m.db", "--name", "cost",
                            "--cpus", cpus, "-i", f"{a.interval_us}us", "-p", "95",
                            "--listen", f"127.0.0.1:{free_port()}"], a.duration)

        def cyclictest() -> float:
            # -d0: one interval for every thread (without it each further thread's interval is
            # 500 us longer); --default-system: leave PM QoS alone, as the daemon does.
            return measure(["cyclictest", "-q", "-m", "-p", "95", "-i", str(a.interval_us),
                            "-d", "0", "-a", cpus, "-t", str(n), "--default-system",
                            "-D", str(int(a.duration + WARMUP_S + 30))], a.duration)

        for i in range(a.pairs):
            order = (latlab, cyclictest) if i % 2 == 0 else (cyclictest, latlab)
            pair = {}
            for f in order:
                pair[f.__name__] = f()
                time.sleep(1)
            pair["ratio"] = pair["latlab"] / pair["cyclictest"]
            runs.append(pair)
            print(f"pair {i + 1}: latlab monitor {pair['latlab']:.4f} CPU, cyclictest "
                  f"{pair['cyclictest']:.4f} CPU, ratio {pair['ratio']:.3f}", flush=True)

    ratios = [r["ratio"] for r in runs]
    result = {
        "schema": "latlab.bench.monitor_cost", "started_at": stamp, "cpus": cpus,
        "interval_us": a.interval_us, "duration_s": a.duration, "runs": runs,
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "latlab_median": statistics.median(r["latlab"] for r in runs),
        "cyclictest_median": statistics.median(r["cyclictest"] for r in runs),
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nCPU per second (median): latlab monitor {result['latlab_median']:.4f}, cyclictest "
          f"{result['cyclictest_median']:.4f}; ratio median {result['ratio_median']:.3f} "
          f"({result['ratio_min']:.3f}-{result['ratio_max']:.3f})")
    print(f"written: {out_path}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
