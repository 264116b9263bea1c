#!/usr/bin/env python3
"""How long runs beside busy real-time threads (`rt-hog`, seed 002's load) last against how long
they were asked to.

Two binaries take turns: one from before the thread that ends a run ran above the hogs, and
the one to judge. Per round: `latlab measure -D 1s` at SCHED_RR 20 beside ten SCHED_RR 1 hogs on
every CPU (wall time, and how long the load ran, from its JSON), and `latlab load rt-hog -D 1s`
(wall time). The medians per binary are what to compare: at normal priority, the thread that
ends them waits for the kernel's RT throttling, up to a second each time it wakes.

Standard library only (Python 3.11). Run as root on an idle machine, never next to a build:
    cargo build --release
    sudo python3 bench/rt_hog_end.py --before OLD_BINARY               # 5 rounds
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

from benchlib import REPO, preflight, results_path

MEASURE = ["measure", "-D", "1s", "--policy", "rr", "-p", "20",
           "--load", "rt-hog:threads=10", "--no-samplers", "-q", "--json", "-"]
LOAD = ["load", "rt-hog", "-D", "1s", "--json"]


def timed(binary: str, args: list[str]) -> tuple[float, dict]:
    """Wall seconds of one command, and its JSON."""
    t = time.monotonic()
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout
    return time.monotonic() - t, json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a latlab binary from before the change")
    ap.add_argument("--after", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    preflight(a.after, "real-time hogs and measuring threads")
    preflight(a.before, "real-time hogs and measuring threads")
    keys = ("measure_wall_s", "measure_load_ran_s", "load_wall_s")
    runs: dict[str, dict[str, list[float]]] = {s: {k: [] for k in keys} for s in ("before", "after")}
    for r in range(a.rounds):
        for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
            binary = a.before if side == "before" else a.after
            wall, v = timed(binary, MEASURE)
            runs[side]["measure_wall_s"].append(wall)
            runs[side]["measure_load_ran_s"].append(v["loads"]["reports"][0]["elapsed_ns"] / 1e9)
            runs[side]["load_wall_s"].append(timed(binary, LOAD)[0])
    for k in keys:
        med = {s: statistics.median(runs[s][k]) for s in runs}
        print(f"{k:20} before {med['before']:.2f} s, after {med['after']:.2f} s "
              f"(median of {a.rounds}; asked: 1 s)")
    _, path = results_path("rt_hog_end", None)
    path.write_text(json.dumps(runs, indent=1))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
