#!/usr/bin/env python3
"""Where a periodic wake-up's CPU time goes, for `latlab monitor`, cyclictest and the floor.

`monitor_cost.py` says how much CPU each program spends; this script says what the kernel does
for it. Each program runs alone (the commands of `monitor_cost.py`: one SCHED_FIFO 95 thread
per CPU at the same interval) and, after a warm-up, is observed twice:

- counted (`perf stat -a -A`, in-kernel counters, nothing recorded): per CPU, timer expiries,
  idle entries that stopped the tick (`timer:tick_stop`) and writes of the TSC-deadline MSR
  (`msr:write_msr` with msr 0x6e0: one per timer (re)programming; on a VM each is a VM exit);
  beside them the program's CPU time (schedstat) per wake-up of its measuring threads;
- traced on the first CPU for a short time (`perf record`, itself on the last CPU): for the measuring thread's wake-ups,
  the median time from `hrtimer_start` to the MSR write that follows it in the thread's own
  `clock_nanosleep` (what one timer programming costs), the user-space part (system-call exit to
  the next entry) and the time from switch-in to switch-out. Tracing adds its own cost to
  these; they compare programs with each other, not with the counted run.

Needs root, `perf` (Debian: linux-perf), tracefs and x86 (the MSR tracepoint). Run on an idle
machine, never next to a build or another benchmark:
    cargo build --release
    sudo apt-get install -y rt-tests gcc linux-perf
    sudo python3 bench/wake_anatomy.py                # 3 rounds of 10 s counted + 2 s traced
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import (REPO, build_floor, die, every_cpu, preflight, results_path, run, thread_stats,
                      wake_programs, warmed_up)

WARMUP_S = 3.0
TSC_DEADLINE = "0x6e0"
COUNTED = ("timer:hrtimer_expire_entry", "timer:tick_stop", "msr:write_msr")



def counted(pid: int, seconds: float) -> dict:
    """Per-CPU event rates over `seconds` and the program's CPU time per wake-up."""
    a, t0 = thread_stats(pid), time.monotonic()
    cmd = ["perf", "stat", "-a", "-A", "-x,"]
    for ev in COUNTED:
        cmd += ["-e", ev] + (["--filter", f"msr == {TSC_DEADLINE}"] if ev == "msr:write_msr" else [])
    cmd += ["--", "sleep", str(seconds)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    b, wall = thread_stats(pid), time.monotonic() - t0
    if p.returncode != 0:
        die(f"perf stat failed: {p.stderr.strip().splitlines()[-1:]}", 1)
    per_cpu: dict[str, dict[str, float]] = {}
    for line in p.stderr.splitlines():
        f = line.split(",")
        if len(f) > 3 and f[0].startswith("CPU") and f[1].isdigit():
            per_cpu.setdefault(f[0][3:], {})[f[3].split(":")[1]] = int(f[1]) / wall
    run = sum(b[t][0] - a[t][0] for t in b if t in a)
    # The measuring threads are the ones switched in at every period (thousands per second).
    wakes = sum(b[t][1] - a[t][1] for t in b if t in a and (b[t][1] - a[t][1]) / wall > 100)
    for c in per_cpu.values():
        c["deadline_writes_per_expiry"] = c["write_msr"] / max(c["hrtimer_expire_entry"], 1)
    return {"cpu_per_s": run / 1e9 / wall, "us_per_wake": run / 1e3 / max(wakes, 1),
            "wakes_per_s": wakes / wall, "per_cpu": per_cpu}


LINE = re.compile(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)")


def traced(cpu: str, perf_cpu: str, seconds: float, tmp: str) -> dict:
    """Medians of the measuring thread's steps on `cpu` (see the module docstring); perf itself
    runs on `perf_cpu`."""
    data = f"{tmp}/trace.data"
    events = ["sched:sched_switch", "raw_syscalls:sys_enter", "raw_syscalls:sys_exit",
              "timer:hrtimer_start", "msr:write_msr"]
    cmd = ["taskset", "-c", perf_cpu, "perf", "record", "-q", "-C", cpu, "-o", data]
    for ev in events:
        cmd += ["-e", ev]
    subprocess.run(cmd + ["--", "sleep", str(seconds)], check=True, capture_output=True)
    text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,cpu,time,event,trace",
                           "--ns"], check=True, capture_output=True, text=True).stdout
    evs = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            evs.append((m[2], float(m[4]) * 1e6, m[5], m[6]))
    # The measuring thread: the real-time task most often switched in on this CPU.
    ins: dict[str, int] = {}
    for _, _, ev, tr in evs:
        if ev == "sched:sched_switch":
            m = re.search(r"next_pid=(\d+) next_prio=(\d+)", tr)
            if m and int(m[2]) < 100:
                ins[m[1]] = ins.get(m[1], 0) + 1
    if not ins:
        return {}
    tid = max(ins, key=ins.get)
    write, user, on_cpu = [], [], []
    t_in = t_exit = t_start = None
    for who, t, ev, tr in evs:
        if ev == "sched:sched_switch":
            if f"next_pid={tid} " in tr + " ":
                t_in, t_exit, t_start = t, None, None
            elif f"prev_pid={tid} " in tr and t_in is not None:
                on_cpu.append(t - t_in)
                t_in = None
        elif who != tid or t_in is None:
            continue
        elif ev == "raw_syscalls:sys_exit":
            t_exit = t
        elif ev == "raw_syscalls:sys_enter" and t_exit is not None:
            user.append(t - t_exit)
            t_exit = None
        elif ev == "timer:hrtimer_start":
            t_start = t
        elif ev == "msr:write_msr" and tr.startswith(TSC_DEADLINE[2:]) and t_start is not None:
            write.append(t - t_start)
            t_start = None

    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs), 3) if xs else None

    return {"cpu": cpu, "wakes": len(on_cpu), "deadline_write_us": med(write),
            "user_us": med(user), "on_cpu_us": med(on_cpu)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="counted seconds per run")
    ap.add_argument("--trace-seconds", type=float, default=2.0)
    ap.add_argument("--interval-us", type=int, default=200)
    ap.add_argument("--cpus", default=None, help="default: every online CPU")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.rounds < 1 or a.seconds <= 0 or a.trace_seconds <= 0 or a.interval_us <= 0:
        die("--rounds must be >= 1 and --seconds, --trace-seconds, --interval-us > 0")
    preflight(a.latlab, "SCHED_FIFO, perf on every CPU, tracepoints",
              (("perf", "linux-perf"), ("cyclictest", "rt-tests")))
    tracefs = Path("/sys/kernel/tracing/events")
    if not (tracefs / "msr/write_msr").is_dir() or not (tracefs / "timer/tick_stop").is_dir():
        die("unavailable: this kernel has no msr:write_msr or timer:tick_stop tracepoint "
            "(x86 with tracefs needed)")
    cpus = every_cpu(a.cpus)
    stamp, out_path = results_path("wake_anatomy", a.out)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        floor_bin = build_floor(tmp)
        every = wake_programs(a.latlab, tmp, cpus, a.interval_us,
                              int(WARMUP_S + a.seconds + a.trace_seconds + 30), floor_bin)
        names = ["latlab", "cyclictest", "floor"]
        for i in range(a.rounds):
            for name in names[i % 3:] + names[:i % 3]:
                cmd = every[name]()
                try:
                    with warmed_up(cmd, WARMUP_S) as p:
                        run = {"round": i + 1, "program": name, **counted(p.pid, a.seconds),
                               "traced": traced(cpus.split(",")[0], cpus.split(",")[-1],
                                                 a.trace_seconds, tmp)}
                except RuntimeError as e:
                    die(str(e), 1)
                runs.append(run)
                cpu_txt = "; ".join(
                    f"cpu{c}: {v['tick_stop']:.0f} tick stops/s, "
                    f"{v['deadline_writes_per_expiry']:.2f} deadline writes/expiry"
                    for c, v in sorted(run["per_cpu"].items()) if c in cpus.split(","))
                t = run["traced"]
                print(f"round {i + 1} {name:10} {run['us_per_wake']:.2f} us CPU/wake-up; "
                      f"{cpu_txt}; traced: write {t.get('deadline_write_us')} us, "
                      f"user {t.get('user_us')} us, on CPU {t.get('on_cpu_us')} us", flush=True)
                time.sleep(1)

    def med(name: str, get) -> float | None:
        xs = [v for v in (get(r) for r in runs if r["program"] == name) if v is not None]
        return round(statistics.median(xs), 3) if xs else None

    summary = {}
    for name in names:
        s = {"us_per_wake": med(name, lambda r: r["us_per_wake"])}
        for c in cpus.split(","):
            s[f"cpu{c}_tick_stops_per_s"] = med(name, lambda r, c=c: r["per_cpu"][c]["tick_stop"])
            s[f"cpu{c}_deadline_writes_per_expiry"] = med(
                name, lambda r, c=c: r["per_cpu"][c]["deadline_writes_per_expiry"])
        for k in ("deadline_write_us", "user_us", "on_cpu_us"):
            s[f"traced_{k}"] = med(name, lambda r, k=k: r["traced"].get(k))
        summary[name] = s
    result = {"schema": "latlab.bench.wake_anatomy", "version": 1, "started_at": stamp,
              "cpus": cpus, "interval_us": a.interval_us, "seconds": a.seconds,
              "trace_seconds": a.trace_seconds, "runs": runs, "median": summary}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print("\nmedians:")
    for name, s in summary.items():
        print(f"  {name:10} " + ", ".join(f"{k} {v}" for k, v in s.items()))
    print(f"written: {out_path}")


if __name__ == "__main__":
    run(main)
