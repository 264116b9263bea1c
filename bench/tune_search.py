#!/usr/bin/env python3
"""`latlab tune search` for real, beside an independent A/B of cyclictest with PM QoS held.

1. `latlab tune search --objective p50` (by default only the pm_qos knob; `--knobs all` tries every
   knob this machine supports) with its store in a temporary directory: its table, verdicts and
   own time accounting are recorded as printed.
2. cyclictest (rt-tests) with --laptop (else it holds /dev/cpu_dma_latency at 0 itself), the same
   interval, priority and CPUs, RUNS times with /dev/cpu_dma_latency held at 0 by this script and
   RUNS times without, in alternating order
   (ABBA...), each run's p50 from cyclictest's own histogram; the two sides compared with the
   exact two-sided Mann-Whitney test.

Needs root. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import REPO, die, every_cpu, preflight, results_path, run
from measure_vs_cyclictest import parse_cyclictest

SCHEMA = "latlab.bench.tune_search"


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Exact two-sided p of the rank sum of `a` (mid-ranks for ties), by enumeration."""
    pooled = sorted(a + b)
    rank = {}
    for v in set(pooled):
        idx = [i + 1 for i, x in enumerate(pooled) if x == v]
        rank[v] = sum(idx) / len(idx)
    ranks = [rank[v] for v in a + b]
    n_a, n = len(a), len(a) + len(b)
    mean = n_a * (n + 1) / 2
    seen = abs(sum(ranks[:n_a]) - mean)
    hits = total = 0
    for combo in itertools.combinations(range(n), n_a):
        total += 1
        if abs(sum(ranks[i] for i in combo) - mean) >= seen - 1e-9:
            hits += 1
    return hits / total


def cyclictest_run(tmp: Path, k: int, cpus: str, interval_us: int, seconds: int,
                   pm_qos: bool) -> dict:
    out = tmp / f"ct-{k}.json"
    ncpu = len(cpus.split(","))
    # --laptop: cyclictest otherwise holds /dev/cpu_dma_latency at 0 itself, in both arms.
    cmd = ["cyclictest", "--laptop", "-m", "-p95", f"-i{interval_us}", f"-D{seconds}",
           f"-a{cpus}", f"-t{ncpu}", "-q", "-h1000", f"--json={out}"]
    hold = None
    if pm_qos:
        hold = open("/dev/cpu_dma_latency", "r+b", buffering=0)
        hold.write(struct.pack("i", 0))
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finally:
        if hold is not None:
            hold.close()
    if p.returncode != 0:
        die(f"cyclictest failed: {p.stderr.strip()[-300:]}", 1)
    r = parse_cyclictest(out, interval_us, seconds)
    return {"pm_qos_held": pm_qos, "p50_us": r["p50_us"], "p99_us": r["p99_us"],
            "max_us": r["max_us"], "count": r["count"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--knobs", default="pm_qos", help="knobs of the search, or all")
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", default="30m")
    ap.add_argument("--runs", type=int, default=5, help="cyclictest runs per side")
    ap.add_argument("--interval-us", type=int, default=1000)
    ap.add_argument("--cpus", default=None, help="default: every CPU")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    preflight(a.latlab, "the search applies knobs; cyclictest runs SCHED_FIFO",
              (("cyclictest", "rt-tests"),))
    cpus = every_cpu(a.cpus)
    stamp, out_path = results_path("tune_search", a.out)
    with tempfile.TemporaryDirectory(prefix="latlab-search-") as tmp:
        tmpd = Path(tmp)
        cmd = [a.latlab, "tune", "search", "--objective", "p50", "--cpus", cpus,
               "--interval", f"{a.interval_us}us", "--duration", f"{a.duration}s",
               "--repeats", str(a.repeats), "--budget", a.budget, "--db", str(tmpd / "s.db"),
               "--state-dir", str(tmpd / "state"), "-q"]
        if a.knobs != "all":
            cmd += ["--knobs", a.knobs]
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        search_s = time.monotonic() - t0
        print(p.stdout, flush=True)
        if p.returncode != 0:
            die(f"the search failed ({p.returncode}): {p.stderr.strip()[-500:]}", 1)

        runs = []
        order = [k % 4 in (0, 3) for k in range(2 * a.runs)]  # ABBA: held, free, free, held
        for k, held in enumerate(order):
            r = cyclictest_run(tmpd, k, cpus, a.interval_us, a.duration, held)
            runs.append(r)
            print(f"cyclictest run {k + 1}/{len(order)}: PM QoS {'held at 0' if held else 'free'}"
                  f": p50 {r['p50_us']} us, p99 {r['p99_us']} us, max {r['max_us']} us",
                  flush=True)
    held = [r["p50_us"] for r in runs if r["pm_qos_held"]]
    free = [r["p50_us"] for r in runs if not r["pm_qos_held"]]
    held99 = [r["p99_us"] for r in runs if r["pm_qos_held"]]
    free99 = [r["p99_us"] for r in runs if not r["pm_qos_held"]]
    summary = {
        "p50_median_held_us": statistics.median(held),
        "p50_median_free_us": statistics.median(free),
        "p50_ratio_held_over_free": statistics.median(held) / statistics.median(free),
        "p50_mann_whitney_p": mann_whitney_p(held, free),
        "p99_median_held_us": statistics.median(held99),
        "p99_median_free_us": statistics.median(free99),
        "p99_mann_whitney_p": mann_whitney_p(held99, free99),
    }
    result = {
        "schema": SCHEMA,
        "started_at": stamp,
        "command": cmd,
        "search_seconds": round(search_s, 1),
        "search_stdout": p.stdout,
        "cyclictest": {"interval_us": a.interval_us, "seconds": a.duration, "cpus": cpus,
                       "order": "ABBA (A: PM QoS held at 0)", "runs": runs},
        "summary": summary,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"cyclictest p50: {summary['p50_median_held_us']} us held against "
          f"{summary['p50_median_free_us']} us free (x{summary['p50_ratio_held_over_free']:.2f}, "
          f"p = {summary['p50_mann_whitney_p']:.3f}); p99 {summary['p99_median_held_us']} against "
          f"{summary['p99_median_free_us']} us (p = {summary['p99_mann_whitney_p']:.3f})")
    print(f"result: {out_path}")


if __name__ == "__main__":
    run(main)
