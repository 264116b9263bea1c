#!/usr/bin/env python3
"""The dashboard's hand-written latency chart against uPlot, drawing the same data in Chromium.

The dashboard (crates/latlab-monitor/src/assets/app.js) draws its charts itself, as SVG paths.
uPlot (a charting library made for large time series, drawn on a canvas) might serve better at
fleet size; this measures both on a real store instead of guessing. It serves the store with
`latlab serve`, takes the page's own answers for each range (status, series, timeline, worst
windows), and loads the real index.html and app.js in headless Chromium with those answers in
place of the network. Then, in one page, it draws the latency chart N times with each library,
alternating which goes first. Two times per draw: the draw itself (the script, uPlot's queued
microtask, and the style and layout it forces) and until it is on screen (two animation frames
later: paint and compositing too, but rounded up to the display's frames). Two layouts: the
dashboard's own (the 8 worst CPUs, maximum and p99.9: 16 lines) and every CPU (2 lines per CPU:
what a faster library could allow).

Chromium is driven over its DevTools pipe (--remote-debugging-pipe), in real time (no virtual
time: under it the page's clock does not advance). uPlot comes from the npm registry
(`npm pack uplot`), into a cache beside this script. Standard library only. Writes a JSON result.

    python3 bench/dashboard_charts.py --db /var/tmp/m256.db --series m256 -n 30
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from benchlib import REPO, die, free_port, results_path, run, store_args

ASSETS = REPO / "crates/latlab-monitor/src/assets"
CACHE = Path(__file__).resolve().parent / ".cache"
HOUR_MS = 3_600_000


def uplot() -> tuple[Path, str]:
    """uPlot's directory (dist/) and version, fetched once with npm."""
    CACHE.mkdir(exist_ok=True)
    tgz = sorted(CACHE.glob("uplot-*.tgz"))
    if not tgz:
        subprocess.run(["npm", "pack", "uplot", "--silent"], cwd=CACHE, check=True,
                       stdout=subprocess.DEVNULL)
        tgz = sorted(CACHE.glob("uplot-*.tgz"))
    dest = CACHE / tgz[-1].name.removesuffix(".tgz")
    if not dest.is_dir():
        with tarfile.open(tgz[-1]) as t:
            t.extractall(dest, filter="data")
    version = json.loads((dest / "package/package.json").read_text())["version"]
    return dest / "package/dist", version


def get_json(port: int, path: str):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        die(f"GET {path}: HTTP {r.status}")
    return json.loads(body)


class Chromium:
    """Headless Chromium over the DevTools pipe: NUL-separated JSON on fds 3 (in) and 4 (out)."""

    def __init__(self, profile: str):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():
            # Copies first: a pipe may already sit on 3 or 4, and dup2 onto itself would keep
            # its close-on-exec flag.
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--window-size=1400,1200", "--allow-file-access-from-files", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0

    def call(self, method: str, params: dict | None = None, session: str | None = None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    die("chromium closed its DevTools pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    die(f"chromium: {method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, session: str, expr: str):
        r = self.call("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                           "returnByValue": True}, session)
        if "exceptionDetails" in r:
            die(f"page: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def close(self):
        self.proc.kill()
        self.proc.wait()


# Injected before app.js: the page's network answers, recorded from `latlab serve`.
STUB = """<script>
window.__answers = __ANSWERS__;
window.fetch = async (url) => {
  const u = String(url);
  const key = Object.keys(window.__answers).find((k) => u.startsWith(k));
  return new Response(JSON.stringify(key ? window.__answers[key] : { error: 'no answer' }),
    { status: key ? 200 : 404, headers: { 'content-type': 'application/json' } });
};
</script>
<link rel="stylesheet" href="uPlot.min.css">
<script src="uPlot.iife.min.js"></script>
"""

# The same chart as app.js's drawLatency (the same CPUs, values and colours), drawn by uPlot.
BENCH_JS = r"""
let uplotChart = null;
function drawLatencyUplot(data, from, to) {
  const cpus = lineCpus(data);
  const rows = rowsOf(data);
  const cols = [rows.map((r) => (r.t0 + r.t1) / 2000)];
  const series = [{}];
  cpus.forEach((cpu, i) => {
    const color = cpuColor(i);
    cols.push(rows.map((r) => r.cpu[cpu] ? r.cpu[cpu].max / 1000 : null));
    series.push({ label: 'cpu' + cpu, stroke: color, width: 1.5 });
    cols.push(rows.map((r) => r.cpu[cpu] ? r.cpu[cpu].p999 / 1000 : null));
    series.push({ label: 'cpu' + cpu + ' p99.9', stroke: color, width: 1.5, dash: [4, 3] });
  });
  const box = $('chart-latency');
  if (uplotChart) { uplotChart.destroy(); uplotChart = null; }
  box.textContent = '';
  uplotChart = new uPlot({
    width: widthOf(box), height: 260, legend: { show: false },
    scales: { x: { time: true, min: from / 1000, max: to / 1000 }, y: { distr: 3 } },
    series: series,
  }, cols, box);
}
function drawLatencyHand(data, from, to) {
  if (uplotChart) { uplotChart.destroy(); uplotChart = null; }
  drawLatency(data, from, to);
}
const frames = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
window.benchCharts = async (n, everyCpu) => {
  const original = window.lineCpus;
  if (everyCpu) window.lineCpus = (data) => data.cpus;
  const draw = { hand: drawLatencyHand, uplot: drawLatencyUplot };
  const times = { hand: [], uplot: [] }, screen = { hand: [], uplot: [] };
  const [from, to] = st.range;
  for (let i = 0; i < n; i++) {
    const order = i % 2 ? ['uplot', 'hand'] : ['hand', 'uplot'];
    for (const k of order) {
      await frames();
      const t = performance.now();
      draw[k](st.data, from, to);
      // uPlot draws in a microtask it queued; then force style and layout.
      await Promise.resolve();
      void $('chart-latency').getBoundingClientRect().height;
      void document.body.offsetHeight;
      times[k].push(performance.now() - t);
      await frames();
      screen[k].push(performance.now() - t);
    }
  }
  const shown = { svgPaths: document.querySelectorAll('#chart-latency path.series').length };
  drawLatencyHand(st.data, from, to);
  window.lineCpus = original;
  return { times: times, screen: screen, rows: st.data.rows.length, cpus: st.data.cpus.length,
           lines: everyCpu ? 2 * st.data.cpus.length : 2 * lineCpus(st.data).length, shown: shown };
};
"""


def page(dir_: Path, dist: Path, answers: dict) -> Path:
    for f in ("app.js", "style.css"):
        shutil.copy(ASSETS / f, dir_ / f)
    for f in ("uPlot.iife.min.js", "uPlot.min.css"):
        shutil.copy(dist / f, dir_ / f)
    (dir_ / "bench.js").write_text(BENCH_JS)
    html = (ASSETS / "index.html").read_text()
    stub = STUB.replace("__ANSWERS__", json.dumps(answers))
    html = html.replace('<script src="app.js"></script>',
                        stub + '<script src="app.js"></script>\n<script src="bench.js"></script>')
    out = dir_ / "index.html"
    out.write_text(html)
    return out


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": statistics.median(ms), "max_ms": max(ms),
            "min_ms": min(ms)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="draws per library and layout")
    a = store_args(ap)
    if shutil.which("chromium") is None or shutil.which("npm") is None:
        die("needs chromium and npm (scripts/test.sh installs both)")
    dist, version = uplot()
    stamp, out = results_path("dashboard_charts", a.out)
    port = free_port()
    server = subprocess.Popen([a.latlab, "serve", "--db", str(a.db), "--listen",
                               f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    result = {"stamp": stamp, "db": str(a.db), "series": a.series, "uplot": version,
              "bytes": {"uPlot.iife.min.js": (dist / "uPlot.iife.min.js").stat().st_size,
                        "app.js": (ASSETS / "app.js").stat().st_size},
              "ranges": {}}
    try:
        for _ in range(100):
            try:
                get_json(port, "/api/status")
                break
            except OSError:
                time.sleep(0.2)
        series = get_json(port, "/api/series")
        s = next((x for x in series if x["name"] == a.series), None)
        if s is None:
            die(f"{a.db}: no series {a.series!r}")
        ranges = {"6h": 6 * HOUR_MS, "month": 30 * 24 * HOUR_MS}
        for name, span in ranges.items():
            last, first = s["last_ms"], s["first_ms"]
            lo = max(first, last - span)
            q = f"series={s['id']}&from={lo}&to={last}"
            answers = {
                "api/status": get_json(port, "/api/status"),
                "api/series": series,
                "api/timeline": get_json(port, f"/api/timeline?{q}&points=1500"),
                "api/worst": get_json(port, f"/api/worst?{q}&limit=20"),
                "api/experiments": get_json(port, "/api/experiments"),
            }
            with tempfile.TemporaryDirectory() as tmp:
                html = page(Path(tmp), dist, answers)
                chrome = Chromium(str(Path(tmp) / "profile"))
                try:
                    target = chrome.call("Target.createTarget",
                                         {"url": f"file://{html}#range={span}"})["targetId"]
                    session = chrome.call("Target.attachToTarget",
                                          {"targetId": target, "flatten": True})["sessionId"]
                    for _ in range(600):
                        if chrome.evaluate(session, "document.body && document.body.dataset.done"):
                            break
                        time.sleep(0.1)
                    else:
                        die("the page did not finish loading")
                    errors = chrome.evaluate(session, "document.body.dataset.errors || ''")
                    if errors:
                        die(f"the page reported: {errors}")
                    got = {}
                    for layout, every in (("8 worst CPUs", False), ("every CPU", True)):
                        r = chrome.evaluate(session, f"benchCharts({a.n}, {str(every).lower()})")
                        g = {"lines": r["lines"], "rows": r["rows"]}
                        for k in ("hand", "uplot"):
                            g[k] = {"draw": summary(r["times"][k]),
                                    "to_screen": summary(r["screen"][k])}
                        h, u = g["hand"]["draw"]["p50_ms"], g["uplot"]["draw"]["p50_ms"]
                        g["draw_ratio_uplot_to_hand"] = u / h if h else None
                        hs, us = (g[k]["to_screen"]["p50_ms"] for k in ("hand", "uplot"))
                        got[layout] = g
                        print(f"{name:6s} {layout:13s} {r['lines']:4d} lines x {r['rows']:4d} "
                              f"points: draw p50 hand-written {h:6.1f} ms, uPlot {u:6.1f} ms "
                              f"(uPlot/hand {u / h:.2f}); to screen {hs:6.1f} / {us:6.1f} ms",
                              flush=True)
                    result["ranges"][name] = got
                finally:
                    chrome.close()
    finally:
        server.terminate()
        server.wait()
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    run(main)
