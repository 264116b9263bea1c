#!/usr/bin/env python3
"""`latlab monitor` for hours under a changing load: does anything grow that should not?

Runs the daemon at a 200 us interval with 10 s windows on every CPU (SCHED_FIFO 95), and beside it
`latlab load` phases that change every few minutes (cpu, memory, io, idle, over and over). Once a
minute it records the daemon's resident memory, open file descriptors and threads, the store's and
its WAL's size, the daemon's CPU time per stored window, and the windows stored against the
windows the elapsed time calls for. At the end it stops the daemon with SIGTERM, runs
`latlab db check` on the store, and writes a JSON result and an SVG plot of the series.

Targets it judges (and says met or not): resident memory growth at most 1 MiB/h after the first
10 minutes (least-squares slope), the WAL bounded (its largest size in the second half no larger
than in the first), CPU per window flat (the last quarter's median within 10 % of the second
quarter's), no window lost, `db check` clean.

Standard library only (Python 3.11). Run as root; a soak is meant to run in the background for
hours (other work on the machine shows in the CPU per window, never in the memory or WAL):
    cargo build --release
    sudo python3 bench/monitor_soak.py --quick         # 6 minutes: checks the script
    sudo python3 bench/monitor_soak.py --hours 2       # the recorded soak
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from benchlib import (REPO, die, every_cpu, free_port, preflight, process_cpu_ns, results_path,
                      run)

SCHEMA = "latlab.bench.monitor_soak"
PHASES = ("cpu", "memory:size=256M", "io:bs=64k", "idle")
MIB = 1024 * 1024


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (bytes) and Threads of `pid` from /proc/PID/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            out["rss_bytes"] = int(value.split()[0]) * 1024
        elif key == "Threads":
            out["threads"] = int(value)
    return out


def file_size(p: Path) -> int:
    try:
        return p.stat().st_size
    except FileNotFoundError:
        return 0


def stored_windows(db: Path) -> tuple[int, int, int]:
    """(windows stored, windows missing between the first and the last stored one, seconds from
    the last stored window's end to now), read through a read-only connection (WAL readers never
    block the daemon's writes). Window indices are consecutive, so a gap is a lost window."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        n, lo, hi, last_end = con.execute(
            "SELECT COALESCE(SUM(windows), 0), MIN(window_index), MAX(last_window_index), "
            "MAX(end_unix_ns) FROM monitor_sets").fetchone()
    finally:
        con.close()
    if n == 0:
        return 0, 0, 0
    return n, (hi - lo + 1) - n, int(time.time() - last_end / 1e9)


def status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as r:
        return json.load(r)


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return None
    mx = statistics.fmean(t for t, _ in points)
    my = statistics.fmean(v for _, v in points)
    den = sum((t - mx) ** 2 for t, _ in points)
    if den == 0:
        return None
    return sum((t - mx) * (v - my) for t, v in points) / den * 3600


def svg_plot(rows: list[dict], title: str) -> str:
    """Small multiples, one panel per recorded series against hours since the start, each from
    0 (a flat line is flat, growth shows as what it is) with its last value in the title."""
    panels = [
        ("rss_mib", "resident memory (MiB)"),
        ("fds", "open file descriptors"),
        ("threads", "threads"),
        ("store_mib", "store (MiB)"),
        ("wal_mib", "WAL (MiB)"),
        ("cpu_ms_per_window", "daemon CPU per window (ms)"),
        ("missing", "windows missing (gaps in the stored indices)"),
        ("behind_s", "seconds since the last stored window ended"),
    ]
    w, ph, left, top, gap = 760, 110, 70, 40, 50
    h = top + len(panels) * (ph + gap) + 10
    hours = [r["t_s"] / 3600 for r in rows]
    x_max = max(hours[-1] if hours else 0, 1e-9)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="15" font-weight="bold">{title}</text>']
    for i, (key, label) in enumerate(panels):
        y0 = top + i * (ph + gap) + 20
        pts = [(hx, r[key]) for hx, r in zip(hours, rows) if r.get(key) is not None]
        hi = max((v for _, v in pts), default=0) * 1.1 or 1.0
        pw = w - left - 20

        def sx(v: float) -> float:
            return left + v / x_max * pw

        def sy(v: float) -> float:
            return y0 + ph - v / hi * ph

        last = f"{pts[-1][1]:.4g}" if pts else "none"
        out.append(f'<text x="{left}" y="{y0 - 6}"><tspan font-weight="bold">{label}</tspan>'
                   f' · last {last}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{pw}" height="{ph}" fill="none" '
                   f'stroke="#bbb"/>')
        out.append(f'<text x="{left - 6}" y="{y0 + 10}" text-anchor="end">{hi:.4g}</text>')
        out.append(f'<text x="{left - 6}" y="{y0 + ph}" text-anchor="end">0</text>')
        if pts:
            path = " ".join(f"{sx(x):.1f},{sy(v):.1f}" for x, v in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="#1f6fb4" '
                       f'stroke-width="1.5"/>')
        out.append(f'<text x="{left + pw}" y="{y0 + ph + 15}" text-anchor="end">'
                   f'{x_max:.2f} h</text>')
        out.append(f'<text x="{left}" y="{y0 + ph + 15}">0 h</text>')
    out.append("</svg>")
    return "\n".join(out)


def plot_title(r: dict) -> str:
    return (f"latlab monitor soak, {r['hours']:g} h, {r['interval']} interval, "
            f"{r['window_s']} s windows, CPUs {r['cpus']}")


def judge(rows: list[dict], window_s: float, lost: int, check_ok: bool) -> dict:
    """The targets, each with its figure and whether it is met."""
    settled = [(r["t_s"], r["rss_mib"]) for r in rows if r["t_s"] >= 600]
    rss_slope = slope_per_hour(settled)
    half = len(rows) // 2
    wal_first = max((r["wal_mib"] for r in rows[:half]), default=0.0)
    wal_second = max((r["wal_mib"] for r in rows[half:]), default=0.0)
    per_window = [r["cpu_ms_per_window"] for r in rows if r["cpu_ms_per_window"] is not None]
    q = len(per_window) // 4
    second_q = statistics.median(per_window[q:2 * q]) if q else None
    last_q = statistics.median(per_window[-q:]) if q else None
    cpu_ratio = last_q / second_q if second_q else None
    return {
        "rss_growth_mib_per_h": {"value": rss_slope, "target": "<= 1 after 10 min",
                                 "met": rss_slope is not None and rss_slope <= 1.0},
        # SQLite checkpoints the WAL at 1000 pages (about 4 MiB), and a checkpoint can finish a
        # few frames later: bounded means the second half stays within 5 % of the first.
        "wal_mib_max": {"first_half": wal_first, "second_half": wal_second,
                        "target": "second half within 5 % of the first (or of 4 MiB)",
                        "met": wal_second <= max(wal_first, 4.0) * 1.05},
        "cpu_per_window_ms": {"second_quarter_median": second_q, "last_quarter_median": last_q,
                              "ratio": cpu_ratio, "target": "ratio within 0.9..1.1",
                              "met": cpu_ratio is not None and 0.9 <= cpu_ratio <= 1.1},
        "windows_lost": {"value": lost, "target": 0, "met": lost == 0},
        "db_check": {"met": check_ok},
        "window_s": window_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--interval", default="200us")
    ap.add_argument("--window", type=int, default=10, help="window length, seconds")
    ap.add_argument("--phase-minutes", type=float, default=3.0,
                    help="length of each load phase (cpu, memory, io, idle)")
    ap.add_argument("--every", type=float, default=60.0, help="seconds between records")
    ap.add_argument("--cpus", default=None, help="default: every CPU")
    ap.add_argument("--quick", action="store_true", help="6 minutes, 1-minute phases")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--plot-only", type=Path, metavar="RESULT",
                    help="only draw RESULT.json's plot again (RESULT.svg)")
    ap.add_argument("--rejudge", action="store_true",
                    help="with --plot-only: judge RESULT.json's rows against the targets again")
    a = ap.parse_args()
    if a.plot_only:
        r = json.loads(a.plot_only.read_text())
        a.plot_only.with_suffix(".svg").write_text(svg_plot(r["rows"], plot_title(r)))
        if a.rejudge:
            rows = r["rows"]
            elapsed = rows[-1]["t_s"] if rows else 0.0
            lost = max(rows[-1]["missing"] if rows else 0,
                       rows[-1]["windows_lost_said"] if rows else 0,
                       int(elapsed // r["window_s"]) - 1 - r["windows_stored"])
            r["targets"] = judge(rows, r["window_s"], lost, r["db_check"]["exit"] == 0)
            a.plot_only.write_text(json.dumps(r, indent=1) + "\n")
            for name, t in r["targets"].items():
                if isinstance(t, dict):
                    print(f"{name}: {'met' if t['met'] else 'NOT met'}")
        return
    if a.quick:
        a.hours, a.phase_minutes, a.every = 0.1, 1.0, 20.0
    if a.hours <= 0 or a.window <= 0 or a.phase_minutes <= 0 or a.every <= 0:
        die("--hours, --window, --phase-minutes and --every must be > 0")
    preflight(a.latlab, "SCHED_FIFO, mlockall")
    cpus = every_cpu(a.cpus)
    stamp, out_path = results_path("monitor_soak", a.out)
    seconds = a.hours * 3600
    phase_s = int(a.phase_minutes * 60)
    schedule = ", ".join(f"{p} {phase_s}s" for p in PHASES)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_suffix(".partial.json")

    with tempfile.TemporaryDirectory(prefix="latlab-soak-") as tmp:
        db = Path(tmp) / "soak.db"
        port = free_port()
        daemon = subprocess.Popen(
            [a.latlab, "monitor", "--db", str(db), "--name", "soak", "--cpus", cpus,
             "-i", a.interval, "--window", f"{a.window}s", "-p", "95",
             "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / "daemon.log", "w"))
        load: subprocess.Popen | None = None
        rows: list[dict] = []
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 30:
                try:
                    status(port)
                    break
                except OSError:
                    if daemon.poll() is not None:
                        die(f"the daemon exited with {daemon.returncode}: "
                            f"{(Path(tmp) / 'daemon.log').read_text()[-500:]}")
                    time.sleep(0.5)
            start = time.monotonic()
            cpu_mark, windows_mark = process_cpu_ns(daemon.pid), 0
            next_record = start + a.every
            while True:
                now = time.monotonic()
                if load is None or load.poll() is not None:
                    # One pass of the phases; the next pass starts when it ends.
                    load = subprocess.Popen([a.latlab, "load", "--schedule", schedule],
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, cwd=tmp)
                if now >= next_record:
                    t_s = now - start
                    st = proc_status(daemon.pid)
                    stored, gaps, behind_s = stored_windows(db)
                    cpu = process_cpu_ns(daemon.pid)
                    live = status(port)
                    new_windows = stored - windows_mark
                    rows.append({
                        "t_s": round(t_s, 1),
                        "rss_mib": st["rss_bytes"] / MIB,
                        "threads": st["threads"],
                        "fds": len(os.listdir(f"/proc/{daemon.pid}/fd")),
                        "store_mib": file_size(db) / MIB,
                        "wal_mib": file_size(Path(f"{db}-wal")) / MIB,
                        "stored": stored,
                        "missing": gaps,
                        "behind_s": behind_s,
                        "windows_lost_said": live.get("windows_lost", 0),
                        "cpu_ms_per_window": ((cpu - cpu_mark) / 1e6 / new_windows
                                              if new_windows > 0 else None),
                    })
                    cpu_mark, windows_mark = cpu, stored
                    # What is recorded so far survives an interrupted soak.
                    partial.write_text(json.dumps({"schema": SCHEMA, "started_at": stamp,
                                                   "rows": rows}) + "\n")
                    r = rows[-1]
                    print(f"{t_s / 60:6.1f} min  rss {r['rss_mib']:6.1f} MiB  fds {r['fds']:3d}  "
                          f"threads {r['threads']:3d}  store {r['store_mib']:7.2f} MiB  "
                          f"wal {r['wal_mib']:6.2f} MiB  windows {stored} ({gaps} missing, "
                          f"last ends {behind_s} s ago)",
                          flush=True)
                    next_record += a.every
                if now - start >= seconds:
                    break
                if daemon.poll() is not None:
                    die(f"the daemon exited early with {daemon.returncode}")
                time.sleep(1.0)
        finally:
            if load is not None and load.poll() is None:
                load.send_signal(signal.SIGTERM)
                load.wait(timeout=30)
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=60)
        elapsed = rows[-1]["t_s"] if rows else 0.0
        final, gaps, _ = stored_windows(db)
        check = subprocess.run([a.latlab, "db", "check", "--db", str(db)],
                               capture_output=True, text=True)
        log_tail = (Path(tmp) / "daemon.log").read_text()[-2000:]
    # A lost window is a gap in the stored indices, or windows the daemon said it lost, or (at
    # the end) fewer windows than the recorded time calls for.
    lost = max(gaps, rows[-1]["windows_lost_said"] if rows else 0,
               int(elapsed // a.window) - 1 - final)
    result = {
        "schema": SCHEMA,
        "started_at": stamp,
        "hours": a.hours,
        "interval": a.interval,
        "window_s": a.window,
        "cpus": cpus,
        "load_schedule": schedule,
        "daemon_exit": daemon.returncode,
        "windows_stored": final,
        "db_check": {"exit": check.returncode, "output": check.stdout[-1000:]},
        "daemon_log_tail": log_tail,
        "rows": rows,
        "targets": judge(rows, a.window, lost, check.returncode == 0),
    }
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    partial.unlink(missing_ok=True)
    svg = out_path.with_suffix(".svg")
    svg.write_text(svg_plot(rows, plot_title(result)))
    for name, t in result["targets"].items():
        if isinstance(t, dict):
            print(f"{name}: {'met' if t['met'] else 'NOT met'}  "
                  f"{ {k: v for k, v in t.items() if k not in ('met', 'target')} }")
    print(f"result: {out_path}\nplot:   {svg}")


if __name__ == "__main__":
    run(main)
