#!/usr/bin/env python3
"""What a measurement's start costs since it scans /proc for other processes' real-time threads.

Every `latlab measure` (each cell of `latlab run`, each run of `tune search`, a monitor's start)
reads the `stat` of every thread on the machine, and the `status` of the real-time ones, before
it starts its threads. This times the shortest measurement (`-l 1`, one period) with two
binaries taking turns, the one before the scan and the one after, on the machine as it is and
beside a process holding THREADS sleeping threads (a busy host has thousands). The medians of
wall time per binary are what to compare.

Standard library only (Python 3.11). Run as root on an idle machine, never next to a build:
    cargo build --release
    sudo python3 bench/start_scan.py --before OLD_BINARY              # 20 rounds, 0 and 4000 threads
    sudo python3 bench/start_scan.py --before OLD_BINARY --rounds 40 --threads 0,1000,8000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

from benchlib import REPO, die, preflight, results_path

HOLDER = """
import threading, time, sys
n = int(sys.argv[1])
ev = threading.Event()
for _ in range(n):
    threading.Thread(target=ev.wait, daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""


def one(binary: str) -> float:
    """Seconds one `measure -l 1` takes, start to exit."""
    t = time.monotonic()
    subprocess.run(
        [binary, "measure", "-l", "1", "-i", "1ms", "-a", "0", "--no-samplers", "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the latlab binary before the scan")
    ap.add_argument("--after", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--threads", default="0,4000", help="comma-separated holder sizes")
    a = ap.parse_args()
    preflight(a.after, "real-time measuring threads")
    preflight(a.before, "real-time measuring threads")
    try:
        sizes = [int(x) for x in a.threads.split(",")]
    except ValueError:
        die(f"--threads {a.threads!r}: expected comma-separated counts, e.g. 0,4000")
    results = []
    for size in sizes:
        holder = None
        if size:
            holder = subprocess.Popen(["python3", "-c", HOLDER, str(size)], stdout=subprocess.PIPE, text=True)
            if holder.stdout is None or holder.stdout.readline().strip() != "ready":
                die(f"the holder of {size} threads did not start")
        try:
            times: dict[str, list[float]] = {"before": [], "after": []}
            for r in range(a.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for side in order:
                    times[side].append(one(a.before if side == "before" else a.after))
        finally:
            if holder:
                holder.kill()
                holder.wait()
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        print(f"{size:6} extra threads: before {med['before']:.1f} ms, after {med['after']:.1f} ms "
              f"(median of {a.rounds}), after - before {med['after'] - med['before']:+.1f} ms")
        results.append({"extra_threads": size, "rounds": a.rounds, "median_ms": med,
                        "runs_s": times})
    _, path = results_path("start_scan", None)
    path.write_text(json.dumps(results, indent=1))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
