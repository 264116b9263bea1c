#!/usr/bin/env python3
"""Side-by-side comparison of `latlab measure` and `cyclictest` (rt-tests).

Follows a fair side-by-side method: same operating point
(all online CPUs, one pinned thread per CPU, SCHED_FIFO 90, mlockall, PM QoS 0 held by both),
runs interleaved and never overlapping (A B, B A, ...), a quiet-system gate before each run,
steal recorded per run, and the same counters for both tools' overhead (schedstat CPU per
wake-up, VmHWM, callgrind instructions per loop).

Standard library only (Python 3.11). Needs root, cyclictest, stress-ng and valgrind.
See bench/README.md for usage and for what every number means.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = "rt-tests stress-ng valgrind"
INSTALL_CMD = f"apt-get install -y {PACKAGES}"
RESULT_SCHEMA = "latlab.bench.measure_vs_cyclictest"

# Quiet gate (section 11.3): busy < 12 % over 2 s, waiting at most 20 s.
GATE_BUSY_PCT = 12.0
GATE_WINDOW_S = 2.0
GATE_TIMEOUT_S = 20.0
# cyclictest histogram range in µs (1 µs buckets).
CT_HIST_US = 100000
RT_PRIO = 90
# Enough loops that per-run constants (start-up, end-of-run statistics) cancel out.
CALLGRIND_LOOPS = (2000, 12000)
CALLGRIND_INTERVAL_US = 1000

# Every child process still running; killed (whole process group) on any exit path.
_LIVE: list[subprocess.Popen] = []


class RunFailed(Exception):
    """A tool run failed; the message carries the tool's stderr."""


# --------------------------------------------------------------------------------------------
# Processes


def spawn(cmd: list[str], stdout: Path | None, stderr: Path) -> subprocess.Popen:
    """Start `cmd` in its own session (so its whole group can be killed), output to files."""
    with open(stderr, "wb") as err:
        if stdout is None:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        else:
            with open(stdout, "wb") as out:
                p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
    _LIVE.append(p)
    return p


def stop(p: subprocess.Popen, grace: float = 3.0) -> None:
    """End a child and its whole process group: SIGTERM, then SIGKILL after `grace` seconds."""
    try:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # The leader may be gone while workers of its group live on (stress-ng).
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    finally:
        if p in _LIVE:
            _LIVE.remove(p)


def stop_all() -> None:
    for p in list(_LIVE):
        stop(p, grace=2.0)


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


# --------------------------------------------------------------------------------------------
# System counters


def online_cpus() -> tuple[list[int], str]:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    cpus: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.extend(range(int(a), int(b) + 1))
        elif part:
            cpus.append(int(part))
    return cpus, text


def proc_stat() -> dict[str, int]:
    """Aggregate `cpu` line of /proc/stat, in USER_HZ ticks."""
    with open("/proc/stat") as f:
        first = f.readline().split()
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    vals = [int(x) for x in first[1:9]]
    vals += [0] * (len(names) - len(vals))
    return dict(zip(names, vals))


def stat_delta(a: dict[str, int], b: dict[str, int]) -> dict[str, float]:
    """Busy % (user+nice+system+irq+softirq), idle %, steal % of all CPU time between a and b."""
    d = {k: b[k] - a[k] for k in a}
    total = sum(d.values())
    if total <= 0:
        return {"busy_pct": 0.0, "steal_pct": 0.0, "idle_pct": 100.0, "ticks": 0}
    busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
    return {
        "busy_pct": 100.0 * busy / total,
        "steal_pct": 100.0 * d["steal"] / total,
        "idle_pct": 100.0 * (d["idle"] + d["iowait"]) / total,
        "ticks": total,
    }


def cpuidle_usage() -> dict[str, int]:
    """Entries per cpuidle state name, summed over CPUs (to verify PM QoS: 0 keeps CPUs in POLL)."""
    out: dict[str, int] = {}
    for state in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpuidle/state[0-9]*"):
        try:
            name = (state / "name").read_text().strip()
            usage = int((state / "usage").read_text())
        except (OSError, ValueError):
            continue
        out[name] = out.get(name, 0) + usage
    return out


def foreign_rt_tasks(exclude: set[int]) -> list[str]:
    """User-space tasks with SCHED_FIFO/RR/DEADLINE (kernel threads are ignored)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in exclude:
            continue
        try:
            for t in (d / "task").iterdir():
                raw = (t / "stat").read_text()
                comm = raw[raw.index("(") + 1:raw.rindex(")")]
                f = raw[raw.rindex(")") + 2:].split()
                flags, policy = int(f[6]), int(f[38])
                if flags & 0x00200000:  # PF_KTHREAD
                    break
                if policy in (1, 2, 6):
                    found.append(f"{comm}[{t.name}] policy={policy}")
        except (OSError, ValueError, IndexError):
            continue
    return found


def quiet_gate(log, exclude: set[int]) -> dict:
    """Wait until the system is < GATE_BUSY_PCT busy over GATE_WINDOW_S (at most GATE_TIMEOUT_S)."""
    t0 = time.monotonic()
    last = None
    while True:
        a = proc_stat()
        time.sleep(GATE_WINDOW_S)
        last = stat_delta(a, proc_stat())
        waited = time.monotonic() - t0
        if last["busy_pct"] < GATE_BUSY_PCT:
            quiet = True
            break
        if waited + GATE_WINDOW_S > GATE_TIMEOUT_S:
            quiet = False
            log(f"  WARNING: system still {last['busy_pct']:.1f} % busy after {waited:.0f} s; "
                "running anyway (recorded as not quiet)")
            break
    rt = foreign_rt_tasks(exclude)
    if rt:
        log(f"  WARNING: foreign real-time tasks present: {', '.join(rt[:5])}")
    return {"quiet": quiet, "busy_pct": round(last["busy_pct"], 2),
            "waited_s": round(time.monotonic() - t0, 1), "foreign_rt_tasks": rt}


def task_snapshot(pid: int) -> dict | None:
    """CPU time (schedstat field 1, ns) and name of every thread of `pid`, plus VmHWM/VmRSS."""
    tasks = {}
    base = Path(f"/proc/{pid}/task")
    try:
        tids = [t.name for t in base.iterdir()]
    except OSError:
        return None
    for tid in tids:
        try:
            ns = int((base / tid / "schedstat").read_text().split()[0])
            comm = (base / tid / "comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        tasks[int(tid)] = {"ns": ns, "comm": comm}
    status = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                status[k] = int(v.split()[0])  # kB
    except (OSError, ValueError):
        pass
    return {"t": time.monotonic(), "tasks": tasks, "status": status}


# --------------------------------------------------------------------------------------------
# Result parsing


def nearest_rank(hist: list[tuple[int, int]], total: int, q: float):
    """Nearest-rank percentile over `total` samples; samples beyond the histogram rank above it.

    Returns the bucket (whole µs) or None when the rank falls among the overflows."""
    if total <= 0:
        return None
    rank = max(1, math.ceil(q / 100.0 * total))
    seen = 0
    for bucket, count in hist:
        seen += count
        if seen >= rank:
            return bucket
    return None


def parse_cyclictest(path: Path, interval_us: int, duration_s: float) -> dict:
    d = json.loads(path.read_text())
    threads = d["thread"]
    summed: dict[int, int] = {}
    per_thread = []
    cycles = overflows = 0
    tmax = 0
    for key in sorted(threads, key=int):
        t = threads[key]
        hsum = 0
        for b, c in t.get("histogram", {}).items():
            summed[int(b)] = summed.get(int(b), 0) + int(c)
            hsum += int(c)
        ovf = int(t["cycles"]) - hsum
        expected = int(duration_s * 1e6 / interval_us)
        per_thread.append({"thread": int(key), "cpu": t.get("cpu"), "cycles": t["cycles"],
                           "min_us": t.get("min"), "avg_us": t.get("avg"), "max_us": t["max"],
                           "overflows": ovf, "expected_cycles": expected,
                           "missed": max(0, expected - int(t["cycles"]))})
        cycles += int(t["cycles"])
        overflows += ovf
        tmax = max(tmax, int(t["max"]))
    hist = sorted(summed.items())
    return {
        "p50_us": nearest_rank(hist, cycles, 50.0),
        "p99_us": nearest_rank(hist, cycles, 99.0),
        "p99_9_us": nearest_rank(hist, cycles, 99.9),
        "max_us": tmax,
        "count": cycles,
        "overflows": overflows,
        "missed": sum(t["missed"] for t in per_thread),
        "expected": sum(t["expected_cycles"] for t in per_thread),
        "threads": per_thread,
        "histogram_us": {str(b): c for b, c in hist},
        "version": d.get("rt_test_version:"),
        "return_code": d.get("return_code"),
    }


def parse_latlab(path: Path, ncpu: int, cpus: list[int], interval_us: int,
                 problems: list[str]) -> dict:
    d = json.loads(path.read_text())
    where = f"latlab {path.name}"
    if d.get("schema") != "latlab.run":
        raise RunFailed(f"{where}: schema is {d.get('schema')!r}, expected 'latlab.run'")
    ov = d["overall"]["stats"]
    threads = []
    for t in d["threads"]:
        threads.append({"label": t.get("label"), "cpu": t.get("cpu"), "tid": t.get("tid"),
                        "count": t["stats"]["count"], "missed": t.get("missed", 0),
                        "expected_periods": t.get("expected_periods"),
                        "cpu_time_ns": t.get("cpu_time_ns"),
                        "p50_ns": t["stats"]["p50"], "p99_ns": t["stats"]["p99"],
                        "max_ns": t["stats"]["max"]})
    cfg, env = d.get("config", {}), d.get("environment", {})

    def problem(msg):
        problems.append(f"{where}: {msg}")

    # Does the result say it ran at the operating point asked for?
    if cfg.get("interval_ns") != interval_us * 1000:
        problem(f"config.interval_ns = {cfg.get('interval_ns')}, asked {interval_us * 1000}")
    if cfg.get("policy") != "fifo" or cfg.get("priority") != RT_PRIO:
        problem(f"config policy/priority = {cfg.get('policy')}/{cfg.get('priority')}, asked fifo/90")
    if cfg.get("cpus") not in (None, cpus) or cfg.get("threads") != ncpu:
        problem(f"config cpus/threads = {cfg.get('cpus')}/{cfg.get('threads')}, asked {cpus}/{ncpu}")
    if env.get("pm_qos_held_us") != 0:
        problem(f"environment.pm_qos_held_us = {env.get('pm_qos_held_us')}, expected 0")
    if not env.get("memory_locked"):
        problem(f"memory not locked: {env.get('mlock_error')}")
    for w in env.get("warnings") or []:
        problem(f"warning: {w}")
    if len(threads) != ncpu:
        problem(f"{len(threads)} threads in result, expected {ncpu}")
    if sorted(t["cpu"] for t in threads if t["cpu"] is not None) != sorted(cpus):
        problem(f"thread CPUs {[t['cpu'] for t in threads]}, expected {cpus}")
    tcount = sum(t["count"] for t in threads)
    if ov.get("count") != tcount:
        problem(f"overall.stats.count {ov.get('count')} != sum of threads' counts {tcount}")
    for t in threads:
        if t["expected_periods"] is not None and t["count"] + t["missed"] != t["expected_periods"]:
            problem(f"{t['label']}: count {t['count']} + missed {t['missed']} != "
                    f"expected_periods {t['expected_periods']}")
        if t["cpu_time_ns"] is None:
            problem(f"{t['label']}: cpu_time_ns missing")
    if d.get("stop", {}).get("reason") != "duration":
        problem(f"stop reason {d.get('stop')}")
    return {
        "p50_ns": ov["p50"], "p99_ns": ov["p99"], "p99_9_ns": ov.get("p99_9"), "max_ns": ov["max"],
        # Whole µs, truncated: cyclictest's resolution, so both tools' numbers are compared alike.
        "p50_us": ov["p50"] // 1000, "p99_us": ov["p99"] // 1000,
        "p99_9_us": (ov["p99_9"] // 1000) if ov.get("p99_9") is not None else None,
        "max_us": ov["max"] // 1000,
        "count": tcount,
        "missed": sum(t["missed"] for t in threads),
        "overall_missed": d["overall"].get("missed"),
        "expected": sum(t["expected_periods"] or 0 for t in threads) or None,
        "overflows": 0,  # latlab's histogram has no overflow: every value is kept
        "corrected": {k: d["overall"]["corrected"].get(k) for k in ("count", "p50", "p99", "max")},
        "threads": threads,
        "environment": env,
        "version": d.get("latlab_version"),
        "elapsed_ns": d.get("elapsed_ns"),
    }


def cpu_accounting(tool: str, pid: int, s1: dict, s2: dict, interval_us: int, ncpu: int,
                   measuring_tids: set[int] | None) -> dict:
    """schedstat CPU deltas between two snapshots, split into measuring threads and the rest."""
    dt_ns = (s2["t"] - s1["t"]) * 1e9
    wakeups = dt_ns / (interval_us * 1000) * ncpu
    meas = other = 0
    per = []
    for tid, t2 in s2["tasks"].items():
        before = s1["tasks"].get(tid, {}).get("ns", 0)
        delta = t2["ns"] - before
        if measuring_tids is not None:
            is_meas = tid in measuring_tids
        elif tool == "latlab":
            is_meas = re.fullmatch(r"latlab-cpu\d+", t2["comm"]) is not None
        else:  # cyclictest: the main thread has tid == pid, every other thread measures
            is_meas = tid != pid
        if is_meas:
            meas += delta
        else:
            other += delta
        per.append({"tid": tid, "comm": t2["comm"], "measuring": is_meas, "cpu_ns": delta,
                    "new": tid not in s1["tasks"]})
    total = meas + other
    return {
        "window_s": round(dt_ns / 1e9, 3),
        "wakeups_est": round(wakeups),
        "cpu_ns_per_wakeup": total / wakeups if wakeups else None,
        "measuring_ns_per_wakeup": meas / wakeups if wakeups else None,
        "main_ns_per_wakeup": other / wakeups if wakeups else None,
        "cpu_pct_of_one_cpu": 100.0 * total / dt_ns if dt_ns else None,
        "main_pct_of_one_cpu": 100.0 * other / dt_ns if dt_ns else None,
        "threads": per,
        "vmhwm_kb": s2["status"].get("VmHWM"),
        "vmrss_kb": s2["status"].get("VmRSS"),
    }


# --------------------------------------------------------------------------------------------
# One run


def snapshot_times(duration: int) -> tuple[float, float]:
    if duration >= 15:
        return 5.0, duration - 3.0
    return 0.2 * duration, 0.8 * duration  # --quick and other short runs


def run_tool(tool: str, args, latlab: Path, interval_us: int, load: str, ncpu: int,
             cpus: list[int], cpus_text: str, tmp: Path, tag: str, log, problems: list[str]) -> dict:
    dur = args.duration
    out_json = tmp / f"{tag}.{tool}.json"
    out_json.unlink(missing_ok=True)
    if tool == "cyclictest":
        aff = "-a" if cpus == list(range(ncpu)) else f"-a{cpus_text}"
        cmd = ["cyclictest", "-m", f"-t{ncpu}", aff, "-d0", f"-p{RT_PRIO}", f"-i{interval_us}",
               f"-D{dur}", "-q", "-h", str(CT_HIST_US), f"--json={out_json}"]
    else:
        cmd = [str(latlab), "measure", "-i", f"{interval_us}us", "-D", f"{dur}s", "-a", cpus_text,
               "-p", str(RT_PRIO), "--policy", "fifo", "--pm-qos", "0", "-q", "--json", str(out_json)]

    stress = None
    own = {os.getpid()}
    gate = quiet_gate(log, own)  # before stress-ng: its load is expected under `cpu`
    try:
        if load == "cpu":
            stress = spawn(["stress-ng", "--cpu", str(ncpu), "--cpu-method", "matrixprod"],
                           tmp / "stress.out", tmp / "stress.err")
            time.sleep(1.0)
            if stress.poll() is not None:
                raise RunFailed("stress-ng exited at start: "
                                + (tmp / "stress.err").read_text(errors="replace"))
        err_path = tmp / f"{tag}.{tool}.stderr"
        out_path = tmp / f"{tool}.stdout"  # cyclictest prints 100 000 histogram rows: not kept
        st0, idle0 = proc_stat(), cpuidle_usage()
        p = spawn(cmd, out_path, err_path)
        t0 = time.monotonic()
        snaps = []
        for at in snapshot_times(dur):
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            if p.poll() is not None:
                break
            s = task_snapshot(p.pid)
            if s is not None:
                snaps.append(s)
        try:
            rc = p.wait(timeout=dur + 60)
        except subprocess.TimeoutExpired:
            stop(p)
            raise RunFailed(f"{tool} did not end within {dur + 60} s: {' '.join(cmd)}\n"
                            + err_path.read_text(errors="replace"))
        wall = time.monotonic() - t0
        st1, idle1 = proc_stat(), cpuidle_usage()
        if p in _LIVE:
            _LIVE.remove(p)
        stderr = err_path.read_text(errors="replace")
        if rc != 0 or not out_json.exists():
            raise RunFailed(f"{tool} failed (exit {rc}): {' '.join(cmd)}\n--- stderr ---\n{stderr}")
        if len(snaps) < 2:
            raise RunFailed(f"{tool} ended before both /proc snapshots were taken "
                            f"(after {wall:.1f} s): {' '.join(cmd)}\n{stderr}")
    finally:
        if stress is not None:
            stop(stress)

    if tool == "cyclictest":
        res = parse_cyclictest(out_json, interval_us, dur)
        meas_tids = None
    else:
        res = parse_latlab(out_json, ncpu, cpus, interval_us, problems)
        meas_tids = {t["tid"] for t in res["threads"] if t.get("tid")}
        seen = set(snaps[-1]["tasks"])
        if not meas_tids <= seen:
            problems.append(f"latlab {tag}: thread tids {sorted(meas_tids)} in the JSON are not "
                            f"all among the process's tasks {sorted(seen)}")
            meas_tids = None
        names = {snaps[-1]["tasks"][t]["comm"] for t in meas_tids or ()}
        if meas_tids and not all(re.fullmatch(r"latlab-cpu\d+", n) for n in names):
            problems.append(f"latlab {tag}: measuring threads are named {sorted(names)}, "
                            "expected latlab-cpuN")
    acct = cpu_accounting(tool, p.pid, snaps[0], snaps[-1], interval_us, ncpu, meas_tids)
    if tool == "latlab":
        # Cross-check latlab's own thread CPU time against schedstat.
        own_ns = sum(t["cpu_time_ns"] or 0 for t in res["threads"])
        periods = sum(t["count"] + t["missed"] for t in res["threads"])
        if own_ns and periods and acct["measuring_ns_per_wakeup"]:
            own_per = own_ns / periods
            acct["self_reported_ns_per_wakeup"] = own_per
            r = own_per / acct["measuring_ns_per_wakeup"]
            if not 0.7 <= r <= 1.3:
                problems.append(f"latlab {tag}: threads' cpu_time_ns per period {own_per:.0f} ns vs "
                                f"schedstat {acct['measuring_ns_per_wakeup']:.0f} ns per wake-up")
    stat = stat_delta(st0, st1)
    idle = {k: idle1.get(k, 0) - idle0.get(k, 0) for k in idle1}
    idle_total = sum(idle.values())
    return {
        "tool": tool, "cmd": cmd, "pid": p.pid, "wall_s": round(wall, 2), "gate": gate,
        "steal_pct": round(stat["steal_pct"], 2), "busy_pct": round(stat["busy_pct"], 2),
        "cpuidle_entries": idle,
        "poll_share": (idle.get("POLL", 0) / idle_total) if idle_total else None,
        "stderr": stderr.strip()[-2000:],
        "result": res, "cpu": acct,
    }


# --------------------------------------------------------------------------------------------
# Ratios and reporting

RATIOS = [("p50", "p50"), ("p99", "p99"), ("max", "max"), ("cpu_per_wakeup", "CPU/wake"),
          ("rss", "RSS")]


def _ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def pair_ratios(lat: dict, ct: dict) -> dict:
    L, C = lat["result"], ct["result"]
    return {
        "p50": _ratio(L["p50_us"], C["p50_us"]),
        "p99": _ratio(L["p99_us"], C["p99_us"]),
        "max": _ratio(L["max_us"], C["max_us"]),
        "cpu_per_wakeup": _ratio(lat["cpu"]["cpu_ns_per_wakeup"], ct["cpu"]["cpu_ns_per_wakeup"]),
        "measuring_cpu_per_wakeup": _ratio(lat["cpu"]["measuring_ns_per_wakeup"],
                                           ct["cpu"]["measuring_ns_per_wakeup"]),
        "rss": _ratio(lat["cpu"]["vmhwm_kb"], ct["cpu"]["vmhwm_kb"]),
    }


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def summarize(values: list) -> dict:
    v = [x for x in values if x is not None]
    if not v:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def fmt_summary(s: dict) -> str:
    if s["median"] is None:
        return "n/a"
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"


def pair_line(cond: str, k: int, order: list[str], lat: dict, ct: dict, r: dict) -> str:
    L, C = lat["result"], ct["result"]
    o = "".join("L" if t == "latlab" else "C" for t in order)
    return (f"{cond} pair {k + 1} [{o}]  latlab/cyclictest: "
            f"p50 {fmt(r['p50'])} ({L['p50_us']}/{C['p50_us']} µs)  "
            f"p99 {fmt(r['p99'])} ({L['p99_us']}/{C['p99_us']})  "
            f"max {fmt(r['max'])} ({L['max_us']}/{C['max_us']})  "
            f"CPU/wake {fmt(r['cpu_per_wakeup'])} "
            f"({fmt(lat['cpu']['cpu_ns_per_wakeup'] and lat['cpu']['cpu_ns_per_wakeup'] / 1000, 1)}/"
            f"{fmt(ct['cpu']['cpu_ns_per_wakeup'] and ct['cpu']['cpu_ns_per_wakeup'] / 1000, 1)} µs)  "
            f"RSS {fmt(r['rss'])} ({lat['cpu']['vmhwm_kb']}/{ct['cpu']['vmhwm_kb']} kB)  "
            f"| missed L {L['missed']} C {C['missed']}, overflows C {C['overflows']}  "
            f"| steal L {lat['steal_pct']:.1f}% C {ct['steal_pct']:.1f}%")


# --------------------------------------------------------------------------------------------
# Callgrind


def callgrind_ir(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split(":", 1)[1].split()[0])
    raise RunFailed(f"no summary:/totals: line in {path}")


def run_callgrind(latlab: Path, tmp: Path, log, raw: Path | None = None) -> dict:
    log("\n== callgrind: user-space instructions per loop (1 CPU, SCHED_OTHER, 1000 µs) ==")
    out = {}
    for tool in ("cyclictest", "latlab"):
        irs = {}
        for loops in CALLGRIND_LOOPS:
            cg = tmp / f"callgrind.{tool}.{loops}.out"
            if tool == "cyclictest":
                # --default-system: no PM QoS here (it only changes set-up, which cancels out).
                cmd = ["cyclictest", "-t1", "-a0", f"-i{CALLGRIND_INTERVAL_US}", f"-l{loops}", "-q",
                       "--default-system"]
            else:
                cmd = [str(latlab), "measure", "-a", "0", "-i", f"{CALLGRIND_INTERVAL_US // 1000}ms",
                       "-l", str(loops), "--policy", "other", "--no-mlock", "-q"]
            full = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}"] + cmd
            err = tmp / f"callgrind.{tool}.{loops}.stderr"
            p = spawn(full, None, err)
            try:
                rc = p.wait(timeout=loops * CALLGRIND_INTERVAL_US / 1e6 * 20 + 120)
            except subprocess.TimeoutExpired:
                stop(p)
                raise RunFailed(f"callgrind {tool} {loops} loops timed out")
            _LIVE.remove(p)
            if rc != 0 or not cg.exists():
                raise RunFailed(f"callgrind run failed (exit {rc}): {' '.join(full)}\n--- stderr ---\n"
                                + err.read_text(errors="replace")[-4000:])
            irs[loops] = callgrind_ir(cg)
            if raw is not None:  # for callgrind_annotate
                raw.mkdir(parents=True, exist_ok=True)
                shutil.copy(cg, raw)
        lo, hi = CALLGRIND_LOOPS
        per = (irs[hi] - irs[lo]) / (hi - lo)
        out[tool] = {"ir": {str(k): v for k, v in irs.items()}, "ir_per_loop": per,
                     "cmd": cmd}
        log(f"  {tool:10s} Ir({lo}) {irs[lo]:>12,}  Ir({hi}) {irs[hi]:>12,}  "
            f"→ {per:,.0f} instructions per loop")
    out["ratio"] = _ratio(out["latlab"]["ir_per_loop"], out["cyclictest"]["ir_per_loop"])
    log(f"  latlab/cyclictest: {fmt(out['ratio'])}  (cyclictest needs ≈ 190 per loop on the development VM)")
    return out


# --------------------------------------------------------------------------------------------
# Main


def check_prereqs() -> None:
    missing = [t for t in ("cyclictest", "stress-ng", "valgrind") if shutil.which(t) is None]
    need_root = os.geteuid() != 0
    if missing or need_root:
        what = []
        if missing:
            what.append(f"missing {', '.join(missing)}: install with `{INSTALL_CMD}`")
        if need_root:
            what.append("run as root (SCHED_FIFO, mlockall, /dev/cpu_dma_latency, /proc of root tasks)")
        print("measure_vs_cyclictest: " + "; ".join(what), file=sys.stderr)
        sys.exit(2)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--latlab", type=Path, default=REPO / "target/release/latlab",
                    help="latlab binary")
    ap.add_argument("--intervals", default="1000,100", help="intervals in µs, comma-separated")
    ap.add_argument("--loads", default="idle,cpu", help="idle and/or cpu (stress-ng matrixprod)")
    ap.add_argument("--pairs", type=int, default=5, help="pairs of runs per condition")
    ap.add_argument("--duration", type=int, default=60, help="seconds per run")
    ap.add_argument("--out", type=Path, default=None,
                    help="result JSON [default: bench/results/measure_vs_cyclictest[-quick]-<timestamp>.json]")
    ap.add_argument("--keep-raw", action="store_true",
                    help="also keep the tools' JSON and callgrind files in <out minus .json>.raw/")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 pair, 5 s, interval 1000, idle only")
    ap.add_argument("--callgrind", action="store_true", help="only the callgrind measurement")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the callgrind measurement")
    ap.add_argument("--install", action="store_true",
                    help=f"first run `apt-get update && {INSTALL_CMD}`")
    a = ap.parse_args(argv)
    if a.quick:
        a.pairs, a.duration, a.intervals, a.loads = 1, 5, "1000", "idle"
    try:
        a.interval_list = [int(x) for x in a.intervals.split(",") if x.strip()]
    except ValueError:
        ap.error("--intervals takes whole µs, e.g. 1000,100")
    a.load_list = [x.strip() for x in a.loads.split(",") if x.strip()]
    if any(x not in ("idle", "cpu") for x in a.load_list):
        ap.error("--loads takes idle and/or cpu")
    if a.duration < 5 or a.pairs < 1:
        ap.error("--duration must be >= 5 and --pairs >= 1")
    if a.callgrind and a.no_callgrind:
        ap.error("--callgrind and --no-callgrind exclude each other")
    if not a.latlab.is_absolute():
        a.latlab = (Path.cwd() / a.latlab).resolve()
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.install:
        if os.geteuid() != 0:
            print("measure_vs_cyclictest: --install needs root", file=sys.stderr)
            return 2
        rc = subprocess.call(["sh", "-c", f"apt-get update && {INSTALL_CMD}"])
        if rc != 0:
            print(f"measure_vs_cyclictest: installing failed (exit {rc})", file=sys.stderr)
            return 2
    check_prereqs()
    if not (args.latlab.is_file() and os.access(args.latlab, os.X_OK)):
        print(f"measure_vs_cyclictest: no latlab binary at {args.latlab} "
              "(build it with `cargo build --release`, or pass --latlab PATH)", file=sys.stderr)
        return 2

    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    kind = "-quick" if args.quick else "-callgrind" if args.callgrind else ""
    out_path = args.out or REPO / "bench/results" / f"measure_vs_cyclictest{kind}-{stamp}.json"
    raw_dir = out_path.with_suffix(".raw")
    cpus, cpus_text = online_cpus()
    ncpu = len(cpus)
    problems: list[str] = []
    record = {
        "schema": RESULT_SCHEMA, "schema_version": 1,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {"kernel": platform.release(), "machine": platform.machine(),
                 "node": platform.node(), "cpus_online": cpus_text, "ncpu": ncpu},
        "settings": {"intervals_us": args.interval_list, "loads": args.load_list,
                     "pairs": args.pairs, "duration_s": args.duration, "quick": args.quick,
                     "priority": RT_PRIO, "pm_qos_us": 0, "cyclictest_hist_us": CT_HIST_US,
                     "snapshots_s": snapshot_times(args.duration),
                     "gate": {"busy_pct": GATE_BUSY_PCT, "window_s": GATE_WINDOW_S,
                              "timeout_s": GATE_TIMEOUT_S},
                     "latlab": str(args.latlab)},
        "conditions": [], "callgrind": None, "problems": problems, "error": None,
    }

    def log(msg=""):
        print(msg, flush=True)

    def save():
        out_path.parent.mkdir(parents=True, exist_ok=True)
        record["ended_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        out_path.write_text(json.dumps(record, indent=1) + "\n")

    # Ctrl-C, kill and a lost terminal all end in the same clean-up (even if SIGINT was ignored
    # by whoever started us, as a non-interactive shell does for background jobs).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGHUP, _on_sigterm)
    tmpdir = tempfile.TemporaryDirectory(prefix="latlab-bench-")
    tmp = Path(tmpdir.name)
    rc = 0
    try:
        if not args.callgrind:
            n_runs = len(args.interval_list) * len(args.load_list) * args.pairs * 2
            est = n_runs * (args.duration + 5)
            log(f"latlab vs cyclictest: {ncpu} CPUs ({cpus_text}), FIFO {RT_PRIO}, mlockall, "
                f"PM QoS 0; {n_runs} runs of {args.duration} s "
                f"(≈{f'{est / 60:.0f} min' if est >= 120 else f'{est} s'} plus quiet gates)")
            for interval in args.interval_list:
                for load in args.load_list:
                    cond = f"I={interval}us load={load}"
                    log(f"\n== {cond} ==")
                    c = {"interval_us": interval, "load": load, "pairs": []}
                    record["conditions"].append(c)
                    for k in range(args.pairs):
                        order = ["latlab", "cyclictest"] if k % 2 == 0 else ["cyclictest", "latlab"]
                        runs = {}
                        for tool in order:
                            tag = f"i{interval}-{load}-p{k + 1}"
                            runs[tool] = run_tool(tool, args, args.latlab, interval, load, ncpu,
                                                  cpus, cpus_text, tmp, tag, log, problems)
                            if args.keep_raw:
                                raw_dir.mkdir(parents=True, exist_ok=True)
                                shutil.copy(tmp / f"{tag}.{tool}.json", raw_dir)
                        r = pair_ratios(runs["latlab"], runs["cyclictest"])
                        c["pairs"].append({"order": order, "latlab": runs["latlab"],
                                           "cyclictest": runs["cyclictest"], "ratios": r})
                        log(pair_line(cond, k, order, runs["latlab"], runs["cyclictest"], r))
                        for tool, run in runs.items():
                            ps = run["poll_share"]
                            if ps is not None and ps < 0.9 and sum(run["cpuidle_entries"].values()) > 100:
                                problems.append(f"{tool} {cond} pair {k + 1}: only {ps:.0%} of idle "
                                                "entries in POLL: PM QoS 0 may not be held")
                        save()
                    c["summary"] = {name: summarize([p["ratios"][name] for p in c["pairs"]])
                                    for name in [n for n, _ in RATIOS] + ["measuring_cpu_per_wakeup"]}
                    for tool in ("latlab", "cyclictest"):
                        c["summary"][f"{tool}_p50_us"] = summarize(
                            [p[tool]["result"]["p50_us"] for p in c["pairs"]])
                        c["summary"][f"{tool}_p99_us"] = summarize(
                            [p[tool]["result"]["p99_us"] for p in c["pairs"]])
            log("\n== summary: latlab/cyclictest, median (min–max) over pairs ==")
            for c in record["conditions"]:
                s = c["summary"]
                log(f"I={c['interval_us']}us load={c['load']} ({len(c['pairs'])} pairs): "
                    + "  ".join(f"{label} {fmt_summary(s[name])}" for name, label in RATIOS)
                    + f"  | p50 µs L {fmt_summary(s['latlab_p50_us'])} "
                      f"C {fmt_summary(s['cyclictest_p50_us'])}")
            log("\nMarkdown for BENCHMARKS.md (ratio latlab/cyclictest, median (min–max)):\n")
            log("| interval | load | pairs | p50 | p99 | max | CPU per wake-up | RSS |")
            log("|---|---|---|---|---|---|---|---|")
            for c in record["conditions"]:
                s = c["summary"]
                log(f"| {c['interval_us']} µs | {c['load']} | {len(c['pairs'])} | "
                    + " | ".join(fmt_summary(s[name]) for name, _ in RATIOS) + " |")
            save()
        if not args.no_callgrind:
            record["callgrind"] = run_callgrind(args.latlab, tmp, log,
                                                raw_dir if args.keep_raw else None)
            save()
        if problems:
            log(f"\n{len(problems)} problem(s) seen:")
            for p in problems:
                log(f"  - {p}")
    except RunFailed as e:
        record["error"] = str(e)
        print(f"\nRUN FAILED: {e}", file=sys.stderr)
        rc = 1
    except KeyboardInterrupt:
        record["error"] = "interrupted"
        print("\ninterrupted: children stopped", file=sys.stderr)
        rc = 130
    finally:
        stop_all()
        try:
            save()
            print(f"\nresults: {out_path}")
        except OSError as e:
            print(f"cannot write {out_path}: {e}", file=sys.stderr)
        tmpdir.cleanup()
    return rc


if __name__ == "__main__":
    sys.exit(main())
