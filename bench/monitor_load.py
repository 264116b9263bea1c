#!/usr/bin/env python3
"""`latlab monitor` under many HTTP clients, and its own cost beside cyclictest's.

Three phases of equal length with one daemon running: quiet, N concurrent clients polling
/metrics and the dashboard API as fast as they can, quiet again. Per phase it reports the windows
stored (none may be missing), the median of the per-window p99 and the worst window maximum of
each CPU (a shift under load beyond the quiet phases' spread would show the web server disturbing
the measurement), and the HTTP answers (all must be 200). Then it runs cyclictest at the same
interval and CPUs for one phase length and compares CPU time per second of both tools (latlab's
from the store's per-window cost, cyclictest's from /proc/<pid>/stat).

Standard library only (Python 3.11). Run as root on an idle machine, never next to a build:
    cargo build --release
    sudo python3 bench/monitor_load.py --quick        # 3 x 10 s, 20 clients: checks the script
    sudo python3 bench/monitor_load.py                # 3 x 120 s, 200 clients
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import free_port, process_cpu_ns

REPO = Path(__file__).resolve().parent.parent


def wait_http(port: int, timeout: float = 20.0) -> None:
    t = time.time()
    while time.time() - t < timeout:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/api/status")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("monitor_load: the daemon did not start serving")


class Clients:
    """N threads, each with a keep-alive connection, alternating /metrics and the API."""

    def __init__(self, port: int, n: int, series: int):
        self.port, self.n, self.series = port, n, series
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.bad: dict[str, int] = {}
        self.times: list[float] = []

    def worker(self, i: int) -> None:
        paths = ["/metrics", f"/api/timeline?series={self.series}&points=400",
                 f"/api/worst?series={self.series}&limit=20", "/api/status"]
        conn = None
        k = i
        while not self.stop.is_set():
            path = paths[k % len(paths)]
            k += 1
            t = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                conn = None
            dt = time.perf_counter() - t
            with self.lock:
                if status == 200:
                    self.ok += 1
                    self.times.append(dt)
                else:
                    self.bad[str(status)] = self.bad.get(str(status), 0) + 1

    def run(self, seconds: float) -> dict:
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(self.n)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        self.stop.set()
        for t in threads:
            t.join(timeout=35)
        q = statistics.quantiles(self.times, n=100) if len(self.times) > 2 else [0.0] * 99
        return {"clients": self.n, "ok": self.ok, "errors": self.bad,
                "requests_per_s": round(self.ok / seconds, 1),
                "p50_ms": round(q[49] * 1e3, 2), "p99_ms": round(q[98] * 1e3, 2)}


def windows(db: Path, t0: float, t1: float) -> dict:
    """Per CPU: windows, median p99 and worst max (µs) of the windows inside [t0, t1)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT w.cpu, w.p99_ns, w.max_ns, w.count, w.missed, s.cost_cpu_time_ns, s.end_unix_ns - s.start_unix_ns "
        "FROM monitor_windows w JOIN monitor_sets s USING (series_id, start_unix_ns) "
        "WHERE s.start_unix_ns >= ? AND s.end_unix_ns <= ?",
        (int(t0 * 1e9), int(t1 * 1e9))).fetchall()
    con.close()
    out: dict = {}
    for cpu in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == cpu]
        out[f"cpu{cpu}"] = {
            "windows": len(mine),
            "p99_us_median": round(statistics.median(r[1] for r in mine) / 1e3, 1),
            "max_us_worst": round(max(r[2] for r in mine) / 1e3, 1),
            "missed": sum(r[4] for r in mine),
        }
    costs = {}
    for r in rows:
        costs[(r[5], r[6])] = True
    cpu_s = sum(c for c, _ in costs if c) / 1e9
    wall_s = sum(w for _, w in costs) / 1e9
    out["latlab_cpu_per_s"] = round(cpu_s / wall_s, 5) if wall_s else None
    return out


def cyclictest_cost(seconds: float, interval_us: int, cpus: str) -> float | None:
    if not shutil.which("cyclictest"):
        return None
    # Same operating point as the daemon: one thread per CPU at the same interval (-d0: without
    # it cyclictest lengthens each further thread's interval by 500 us), FIFO 95, mlockall, and
    # PM QoS left alone (latlab monitor does not hold /dev/cpu_dma_latency).
    p = subprocess.Popen(["cyclictest", "-q", "-m", "-p", "95", "-i", str(interval_us), "-d", "0",
                          "-a", cpus, "-t", str(len(cpus.split(","))), "--default-system",
                          "-D", f"{int(seconds) + 1}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    # latlab's per-window cost is exact too (CLOCK_PROCESS_CPUTIME_ID).
    ns = process_cpu_ns(p.pid)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    return round(ns / 1e9 / seconds, 5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--phase", type=float, default=120.0, help="seconds per phase")
    ap.add_argument("--window", default="5s")
    ap.add_argument("--interval", default="200us")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.quick:
        a.clients, a.phase = 20, 10.0
    if os.geteuid() != 0:
        print("monitor_load: needs root (SCHED_FIFO measuring threads)", file=sys.stderr)
        return 2
    if not Path(a.latlab).exists():
        print(f"monitor_load: no latlab binary at {a.latlab} (cargo build --release)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="latlab-monitor-load-"))
    db = tmp / "m.db"
    port = free_port()
    ncpu = os.cpu_count() or 1
    cpus = ",".join(str(c) for c in range(ncpu))
    d = subprocess.Popen([a.latlab, "monitor", "--db", str(db), "--name", "load", "--window", a.window,
                          "--interval", a.interval, "--listen", f"127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=open(tmp / "daemon.log", "w"))
    result: dict = {"clients": a.clients, "phase_s": a.phase, "window": a.window, "interval": a.interval}
    try:
        wait_http(port)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/api/status")
        series = json.loads(c.getresponse().read())["live"]["series_id"]
        marks = [time.time()]
        time.sleep(a.phase)
        marks.append(time.time())
        result["http"] = Clients(port, a.clients, series).run(a.phase)
        marks.append(time.time())
        time.sleep(a.phase)
        marks.append(time.time())
    finally:
        d.send_signal(signal.SIGINT)
        d.wait(timeout=60)
    names = ["quiet_before", "loaded", "quiet_after"]
    for i, n in enumerate(names):
        result[n] = windows(db, marks[i], marks[i + 1])
    win_s = float(a.window.rstrip("s"))
    result["expected_windows_per_phase"] = int(a.phase // win_s) - 1
    result["cyclictest_cpu_per_s"] = cyclictest_cost(min(a.phase, 60.0), int(a.interval.rstrip("us")), cpus)
    text = json.dumps(result, indent=2)
    print(text)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(a.out) if a.out else REPO / "bench/results" / f"monitor_load-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(f"written: {out}")
    shutil.rmtree(tmp, ignore_errors=True)
    bad = result["http"]["errors"] or any(
        result[n][k]["windows"] < result["expected_windows_per_phase"]
        for n in names for k in result[n] if k.startswith("cpu"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
