#!/usr/bin/env python3
"""`latlab monitor`'s own CPU time against cyclictest's at the same operating point.

Rounds in rotating order: the daemon (`latlab monitor`, every sampler, the store and the web
server included), `cyclictest`, `bench/ref/wakeloop.c` (the floor: the same wake-ups with nothing
else), the idle machine and, with --stagger, the daemon with staggered phases. Each program has
one SCHED_FIFO 95 thread per CPU at the same interval, memory locked, PM QoS left alone. Two costs per run, both between two reads DURATION seconds apart
after a warm-up (so start-up work is not counted):
- process: the sum of the program's threads' `/proc/<pid>/task/*/schedstat` run time (exact ns);
- machine: the measured CPUs' time not idle (`/proc/stat`; with NO_HZ idle time is clocked at
  idle entry and exit), which also counts interrupts and whatever else the program makes the
  kernel do. An idle machine's share is measured too, so it can be subtracted.

Standard library only (Python 3.11). Run as root on an idle machine, never next to a build:
    cargo build --release
    sudo apt-get install -y rt-tests
    sudo python3 bench/monitor_cost.py --quick        # 1 round of 10 s: checks the script
    sudo python3 bench/monitor_cost.py                # 6 rounds of 60 s at 200 us
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import (REPO, build_floor, die, every_cpu, preflight, process_cpu_ns, results_path, run,
                      wake_programs, warmed_up)

WARMUP_S = 3.0



def idle_s(cpus: list[str]) -> float:
    """Seconds the listed CPUs have spent idle or in iowait since boot (`/proc/stat`)."""
    tick = os.sysconf("SC_CLK_TCK")
    idle = 0
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f[0].startswith("cpu") and f[0][3:] in cpus:
            idle += int(f[4]) + int(f[5])
    return idle / tick


def measure(cmd: list[str] | None, duration: float, cpus: list[str]) -> dict:
    """CPU seconds per second of `cmd` (process) and of the CPUs (machine) over `duration`;
    `cmd` None measures the idle machine."""
    try:
        with warmed_up(cmd, WARMUP_S) as p:
            a, i0, t0 = process_cpu_ns(p.pid) if p else 0, idle_s(cpus), time.monotonic()
            time.sleep(duration)
            b, i1, t1 = process_cpu_ns(p.pid) if p else 0, idle_s(cpus), time.monotonic()
    except RuntimeError as e:
        die(str(e), 1)
    wall = t1 - t0
    return {"process": (b - a) / 1e9 / wall, "machine": (len(cpus) * wall - (i1 - i0)) / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds measured per run")
    ap.add_argument("--interval-us", type=int, default=200)
    ap.add_argument("--cpus", default=None, help="default: every online CPU")
    ap.add_argument("--waker-us", type=int, default=0,
                    help="control: a SCHED_OTHER thread per CPU waking at this period beside every "
                         "program (cyclictest's main thread wakes every 10000 us)")
    ap.add_argument("--stagger", action="store_true",
                    help="also run the daemon with --stagger (CPUs' timers half a period apart "
                         "on 2 CPUs instead of one phase)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    preflight(a.latlab, "SCHED_FIFO, mlockall", (("cyclictest", "rt-tests"),))
    if a.quick:
        a.rounds, a.duration = 1, 10.0
    cpus = every_cpu(a.cpus)
    stamp, out_path = results_path("monitor_cost", a.out)

    cpu_list = cpus.split(",")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        floor_bin = build_floor(tmp)
        every = wake_programs(a.latlab, tmp, cpus, a.interval_us,
                              int(a.duration + WARMUP_S + 30), floor_bin)
        programs = {k: every[k] for k in ("latlab", "cyclictest", "floor")}
        programs["idle"] = lambda: None
        if a.stagger:
            programs["latlab-stagger"] = every["latlab-stagger"]
        names = list(programs)
        waker = None
        if a.waker_us:
            waker = subprocess.Popen([floor_bin, str(a.waker_us), "0", *cpu_list])
        try:
            for i in range(a.rounds):
                order = names[i % len(names):] + names[:i % len(names)]
                rnd = {}
                for name in order:
                    rnd[name] = measure(programs[name](), a.duration, cpu_list)
                    time.sleep(1)
                for cost in ("process", "machine"):
                    rnd[f"ratio_{cost}"] = rnd["latlab"][cost] / rnd["cyclictest"][cost]
                runs.append(rnd)
                print(f"round {i + 1}: " + ", ".join(
                    f"{k} {rnd[k]['process']:.4f}/{rnd[k]['machine']:.4f}" for k in names)
                    + f" CPU (process/machine); latlab/cyclictest {rnd['ratio_process']:.3f}"
                    f"/{rnd['ratio_machine']:.3f}", flush=True)
        finally:
            if waker:
                waker.kill()
                waker.wait()

    def med(key: str, cost: str) -> float:
        return statistics.median(r[key][cost] for r in runs)

    result = {
        "schema": "latlab.bench.monitor_cost", "version": 2, "started_at": stamp, "cpus": cpus,
        "interval_us": a.interval_us, "duration_s": a.duration, "waker_us": a.waker_us,
        "runs": runs,
        "median": {k: {c: med(k, c) for c in ("process", "machine")} for k in names},
    }
    for cost in ("process", "machine"):
        ratios = [r[f"ratio_{cost}"] for r in runs]
        result[f"ratio_{cost}"] = {"median": statistics.median(ratios), "min": min(ratios),
                                   "max": max(ratios)}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print("\nmedians, CPU per second (process / machine): " + ", ".join(
        f"{k} {result['median'][k]['process']:.4f} / {result['median'][k]['machine']:.4f}"
        for k in names))
    for cost in ("process", "machine"):
        r = result[f"ratio_{cost}"]
        print(f"latlab/cyclictest ({cost}): median {r['median']:.3f} "
              f"({r['min']:.3f}-{r['max']:.3f})")
    print(f"written: {out_path}")


if __name__ == "__main__":
    run(main)
