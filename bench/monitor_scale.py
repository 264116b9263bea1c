#!/usr/bin/env python3
"""`latlab serve` and the store at fleet size: how long each dashboard view and /metrics take.

Given a store holding a monitoring series (written by `latlab fill-monitor`, e.g. 64 CPUs over
30 days), it serves the store with `latlab serve` and asks each item N times (default 50),
recording p50, p95 and max of the answer time: the dashboard's timeline for 6 h, a day, a week,
a month, a year and a custom range (what the page asks: `points` 1500), the worst-windows table,
a window's deep link with its histogram, and /metrics (its first answer apart). Also the
server's resident memory after all that, the store's size per CPU-window, and how long
`latlab report series:NAME`, `latlab db check` (and with --vacuum `latlab db vacuum`) take.
It writes a JSON result.

Standard library only (Python 3.11). Build the store first, e.g.:
    target/release/latlab fill-monitor --db /var/tmp/m64.db --cpus 64 --span 30d --name m64
    python3 bench/monitor_scale.py --db /var/tmp/m64.db --series m64
"""

from __future__ import annotations

import argparse
import http.client
import json
import sqlite3
import statistics
import re
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import die, free_port, results_path, run, store_args


def get(port: int, path: str, timeout: float) -> tuple[int, int, float]:
    """(status, body bytes, seconds) of one GET on a fresh connection."""
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, len(body), time.perf_counter() - t


def summary(times: list[float]) -> dict:
    times = sorted(times)
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    return {"n": len(times), "p50_ms": statistics.median(times) * 1e3, "p95_ms": p95 * 1e3,
            "max_ms": times[-1] * 1e3}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def size_by_age(con: sqlite3.Connection, sid: int) -> dict:
    """What the store spends on each age of window: rows and mean bytes of histogram and
    sampler summary for windows at full resolution, coarsened ones and merged hours; and the
    pages of every table and index (SQLite's dbstat)."""
    tiers = {}
    for name, where in (("full resolution (under a week)", "s.windows = 1 AND w.coarse_shift = 0"),
                        ("coarsened (a week to the retention)",
                         "s.windows = 1 AND w.coarse_shift > 0"),
                        ("merged hours (past the retention)", "s.windows > 1")):
        rows, hist, summ = con.execute(
            "SELECT COUNT(*), AVG(LENGTH(w.histogram)), AVG(LENGTH(w.cpu_summary)) "
            "FROM monitor_windows w JOIN monitor_sets s ON s.series_id = w.series_id "
            f"AND s.start_unix_ns = w.start_unix_ns WHERE w.series_id = ? AND {where}",
            (sid,)).fetchone()
        tiers[name] = {"rows": rows, "histogram_bytes": hist, "summary_bytes": summ}
        print(f"{name:38s} {rows:9d} rows, histogram {hist or 0:6.0f} B, summary "
              f"{summ or 0:4.0f} B", flush=True)
    pages = {name: mib for name, mib in con.execute(
        "SELECT name, SUM(pgsize) / 1048576.0 FROM dbstat GROUP BY name ORDER BY 2 DESC")}
    for name, mib in list(pages.items())[:8]:
        print(f"  {name:40s} {mib:9.1f} MiB", flush=True)
    return {"tiers": tiers, "mib_by_table_or_index": pages}


def render_times(port: int, ranges: dict[str, int]) -> dict:
    """The page in headless Chromium for each range: how long its charts take to draw (the
    page's own `data-render-ms`, from the data's arrival to the last chart drawn)."""
    out = {}
    for name, span in list(ranges.items()) + [("all", "all")]:
        with tempfile.TemporaryDirectory() as profile:
            t = time.perf_counter()
            dom = subprocess.run(
                ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                 f"--user-data-dir={profile}", "--window-size=1280,2000",
                 "--virtual-time-budget=60000", "--dump-dom",
                 f"http://127.0.0.1:{port}/#range={span}"],
                capture_output=True, text=True, timeout=300).stdout
            wall = time.perf_counter() - t
        m = re.search(r'data-render-ms="(\d+)"', dom)
        rows = re.search(r'data-rows="(\d+)"', dom)
        out[name] = {"render_ms": int(m.group(1)) if m else None,
                     "rows": int(rows.group(1)) if rows else None, "chromium_s": wall}
        print(f"page {name:6s} charts drawn in {out[name]['render_ms']} ms "
              f"({out[name]['rows']} time groups; chromium run {wall:.1f} s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=50, help="requests per item")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    ap.add_argument("--browser", action="store_true",
                    help="also time drawing the page in headless Chromium for each range")
    ap.add_argument("--reports", type=int, default=5,
                    help="how many times to time `latlab report series:NAME`")
    ap.add_argument("--vacuum", action="store_true",
                    help="also time `latlab db vacuum` (rewrites the store's file)")
    a = store_args(ap)
    con = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    row = con.execute("SELECT id FROM monitor_series WHERE name = ?", (a.series,)).fetchone()
    if row is None:
        die(f"{a.db}: no series {a.series!r}")
    sid = row[0]
    first, last, sets = con.execute(
        "SELECT MIN(start_unix_ns), MAX(end_unix_ns), COUNT(*) FROM monitor_sets "
        "WHERE series_id = ?", (sid,)).fetchone()
    cpu_windows, cpus = con.execute(
        "SELECT COUNT(*), COUNT(DISTINCT cpu) FROM monitor_windows WHERE series_id = ?",
        (sid,)).fetchone()
    deep = con.execute(
        "SELECT start_unix_ns, cpu FROM monitor_windows WHERE series_id = ? "
        "ORDER BY max_ns DESC LIMIT 1", (sid,)).fetchone()
    by_age = size_by_age(con, sid)
    con.close()
    size = a.db.stat().st_size
    last_ms, first_ms = last // 1_000_000, first // 1_000_000
    hour = 3_600_000
    ranges = {"6h": 6 * hour, "day": 24 * hour, "week": 7 * 24 * hour, "month": 30 * 24 * hour,
              "year": 365 * 24 * hour}
    items: dict[str, str] = {}
    for name, span in ranges.items():
        lo = max(first_ms, last_ms - span)
        items[f"timeline {name}"] = (f"/api/timeline?series={sid}&from={lo}&to={last_ms}"
                                     f"&points=1500")
    mid = (first_ms + last_ms) // 2
    items["timeline custom (3 days mid-series)"] = (
        f"/api/timeline?series={sid}&from={mid - 36 * hour}&to={mid + 36 * hour}&points=1500")
    items["worst table (month)"] = (f"/api/worst?series={sid}&from={last_ms - 30 * 24 * hour}"
                                    f"&to={last_ms}&limit=20")
    items["window deep link"] = f"/api/window?series={sid}&start={deep[0]}&cpu={deep[1]}"
    items["metrics"] = "/metrics"

    port = free_port()
    server = subprocess.Popen([a.latlab, "serve", "--db", str(a.db), "--listen",
                               f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    result: dict = {"schema": "latlab.bench.monitor_scale", "db": str(a.db), "series": a.series,
                    "cpus": cpus, "sets": sets, "cpu_windows": cpu_windows,
                    "span_days": (last - first) / 86_400e9, "store_bytes": size,
                    "bytes_per_cpu_window": size / max(cpu_windows, 1), "by_age": by_age,
                    "items": {}}
    try:
        # How long until the server answers at all (it may read the whole series first).
        t0 = time.time()
        while True:
            try:
                get(port, "/api/status", a.timeout)
                break
            except OSError:
                if time.time() - t0 > a.timeout or server.poll() is not None:
                    die(f"the server did not answer within {a.timeout} s")
                time.sleep(0.2)
        result["first_answer_s"] = time.time() - t0
        print(f"first answer after {result['first_answer_s']:.1f} s", flush=True)
        result["rss_kib_start"] = rss_kib(server.pid)
        status, nbytes, first_metrics = get(port, "/metrics", a.timeout)
        result["metrics_first"] = {"s": first_metrics, "bytes": nbytes, "status": status}
        print(f"/metrics first answer: HTTP {status} after {first_metrics:.2f} s, {nbytes} bytes",
              flush=True)
        for name, path in items.items():
            times, statuses = [], {}
            for _ in range(a.n):
                status, nbytes, t = get(port, path, a.timeout)
                statuses[status] = statuses.get(status, 0) + 1
                times.append(t)
            s = summary(times) | {"bytes": nbytes, "statuses": statuses}
            if set(statuses) != {200}:
                print(f"{name}: answers {statuses}", flush=True)
            result["items"][name] = s
            print(f"{name:40s} p50 {s['p50_ms']:9.1f} ms  p95 {s['p95_ms']:9.1f} ms  "
                  f"max {s['max_ms']:9.1f} ms  {nbytes} B", flush=True)
        result["rss_kib_end"] = rss_kib(server.pid)
        if a.browser:
            result["render"] = render_times(port, ranges)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            result["sigterm_ignored"] = True
            server.kill()
            server.wait()
    # `latlab report series:NAME`, HTML, a few times (each reads the whole series).
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "series.html"
        for _ in range(a.reports):
            t = time.perf_counter()
            rep = subprocess.run([a.latlab, "report", f"series:{a.series}", "--db", str(a.db),
                                  "-o", str(html)], capture_output=True, text=True)
            times.append(time.perf_counter() - t)
            if rep.returncode != 0:
                die(f"latlab report series:{a.series}: {rep.stderr.strip()}")
        result["report_series"] = summary(times) | {"bytes": html.stat().st_size}
    print(f"report series:{a.series} p50 {result['report_series']['p50_ms'] / 1e3:.1f} s, "
          f"max {result['report_series']['max_ms'] / 1e3:.1f} s, "
          f"{result['report_series']['bytes']} B of HTML", flush=True)
    t = time.perf_counter()
    check = subprocess.run([a.latlab, "db", "check", "--db", str(a.db)], capture_output=True,
                           text=True)
    result["db_check"] = {"exit": check.returncode, "s": time.perf_counter() - t}
    if a.vacuum:
        t = time.perf_counter()
        vac = subprocess.run([a.latlab, "db", "vacuum", "--db", str(a.db)], capture_output=True,
                             text=True)
        result["db_vacuum"] = {"exit": vac.returncode, "s": time.perf_counter() - t,
                               "bytes_after": a.db.stat().st_size}
        print(f"db vacuum {result['db_vacuum']['s']:.1f} s (exit {vac.returncode})")
    print(f"server RSS {result['rss_kib_end'] / 1024:.0f} MiB; store {size / 2**20:.0f} MiB, "
          f"{result['bytes_per_cpu_window']:.0f} B per CPU-window; db check "
          f"{result['db_check']['s']:.1f} s (exit {check.returncode})")
    _, out_path = results_path("monitor_scale", a.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"result: {out_path}")


if __name__ == "__main__":
    run(main)
