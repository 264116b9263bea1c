#!/usr/bin/env python3
"""What `latlab trace` costs: throughput of loads and wake-up latency with and without tracing.

For each load (messaging, matrix) it runs `latlab load` for --duration seconds alone and beside
`latlab trace` of every event group, in alternating pairs (A B, B A, ...), and reports the
throughput loss per pair, its median and mean (target: under 3 %), and the BPF run time the
tracer reported for itself. Then it runs `latlab measure` alone and beside `latlab trace`, in
the same alternation, and reports the shift of the wake-up latency's p50 and p99; and the same
for `latlab measure --trace --spike 100us` (tracer, ring and spike stories in-process) against
a plain `latlab measure`.

Standard library only (Python 3.11). Needs root and a built latlab (`cargo build --release`).
Run it on an otherwise idle machine, never next to a build or another benchmark.

    sudo python3 bench/trace_overhead.py --quick        # 1 pair, 5 s: checks the script
    sudo python3 bench/trace_overhead.py                # 5 pairs, 30 s per run
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import REPO, die, preflight, results_path, run

SCHEMA = "latlab.bench.trace_overhead"
LOADS = ("messaging", "matrix")



def run_json(cmd: list[str]) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        die(f"{' '.join(cmd)} failed: {p.stderr.strip()}", 1)
    return json.loads(p.stdout)


class Tracing:
    """`latlab trace` of every event group in the background, stopped with SIGINT."""

    def __init__(self, latlab: str, tmp: Path, n: int):
        self.json = tmp / f"trace-{n}.json"
        self.proc = subprocess.Popen(
            [latlab, "trace", "-q", "--json", str(self.json)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Attached once it says what it traces.
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        if "tracing" not in line:
            self.proc.kill()
            die(f"latlab trace did not start: {line.strip()}", 1)

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        if self.proc.returncode != 0:
            die(f"latlab trace failed (exit {self.proc.returncode})", 1)
        cost = json.loads(self.json.read_text())["trace"]["cost"]
        return {
            "run_time_ns": cost["run_time_ns"],
            "run_count": cost["run_count"],
            "cpu_fraction": cost["cpu_fraction"],
        }


def throughput(latlab: str, load: str, duration: int) -> float:
    out = run_json([latlab, "load", "-D", f"{duration}s", "--json", load])
    return float(out["reports"][0]["throughput"][0]["rate"])


def wakeup(latlab: str, duration: int, extra: tuple[str, ...] = ()) -> dict:
    policy = ["--policy", "fifo", "-p", "90"]
    out = run_json([latlab, "measure", "-D", f"{duration}s", "-q", "--no-samplers", *policy,
                    *extra, "--json", "-"])
    s = out["overall"]["stats"]
    w = {"p50_ns": s["p50"], "p99_ns": s["p99"], "max_ns": s["max"], "count": s["count"]}
    if out.get("trace"):
        c = out["trace"]["cost"]
        w["cost"] = {"run_time_ns": c["run_time_ns"], "run_count": c["run_count"],
                     "cpu_fraction": c["cpu_fraction"]}
        kept = out["spikes"]["kept"]
        w["spikes"] = len(kept)
        w["stories"] = sum(1 for k in kept if k.get("story"))
    return w


def wakeup_pairs(a, label: str, traced_run) -> dict:
    """Pairs of a plain `latlab measure` and a traced one (`traced_run()` gives its result)."""
    runs = []
    for i, order in pairs(a.pairs):
        pair = {}
        for traced in order:
            w = traced_run() if traced else wakeup(a.latlab, a.duration)
            pair["traced" if traced else "plain"] = w
            time.sleep(1)
        pair["p50_shift_ns"] = pair["traced"]["p50_ns"] - pair["plain"]["p50_ns"]
        pair["p99_shift_ns"] = pair["traced"]["p99_ns"] - pair["plain"]["p99_ns"]
        runs.append(pair)
        print(f"{label} pair {i + 1}: p50 {pair['plain']['p50_ns'] / 1e3:.1f} -> "
              f"{pair['traced']['p50_ns'] / 1e3:.1f} us, p99 "
              f"{pair['plain']['p99_ns'] / 1e3:.1f} -> "
              f"{pair['traced']['p99_ns'] / 1e3:.1f} us", flush=True)
    return {
        "runs": runs,
        "p50_shift_ns_median": statistics.median(r["p50_shift_ns"] for r in runs),
        "p99_shift_ns_median": statistics.median(r["p99_shift_ns"] for r in runs),
    }


def pairs(n: int):
    """A B, B A, A B, ...: True means traced."""
    for i in range(n):
        yield (i, (False, True) if i % 2 == 0 else (True, False))


def pct(a: float, b: float) -> float:
    return 100.0 * (a - b) / a if a else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latlab", default=str(REPO / "target/release/latlab"))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=30, help="seconds per run")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--no-measure", action="store_true", help="skip the wake-up latency part")
    ap.add_argument("--quick", action="store_true", help="1 pair of 5 s: checks the script")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    preflight(a.latlab, "tracing and SCHED_FIFO")
    if a.quick:
        a.pairs, a.duration = 1, 5
    stamp, out_path = results_path("trace_overhead", a.out)
    result: dict = {"schema": SCHEMA, "started_at": stamp, "pairs": a.pairs,
                    "duration_s": a.duration, "loads": {}, "wakeup": None}

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        n = 0
        for load in [x for x in a.loads.split(",") if x]:
            runs = []
            for i, order in pairs(a.pairs):
                pair = {}
                for traced in order:
                    n += 1
                    tr = Tracing(a.latlab, tmp, n) if traced else None
                    rate = throughput(a.latlab, load, a.duration)
                    cost = tr.stop() if tr else None
                    pair["traced" if traced else "plain"] = {"rate": rate, "cost": cost}
                    time.sleep(1)
                pair["loss_pct"] = pct(pair["plain"]["rate"], pair["traced"]["rate"])
                runs.append(pair)
                print(f"{load} pair {i + 1}: {pair['plain']['rate']:.1f} -> "
                      f"{pair['traced']['rate']:.1f} /s ({pair['loss_pct']:+.2f} %), BPF "
                      f"{pair['traced']['cost']['cpu_fraction'] * 100:.3f} % CPU", flush=True)
            losses = [r["loss_pct"] for r in runs]
            result["loads"][load] = {
                "runs": runs,
                "loss_pct_median": statistics.median(losses),
                "loss_pct_mean": statistics.fmean(losses),
                "target_met": statistics.median(losses) < 3.0,
            }
        if not a.no_measure:
            counter = [n]

            def beside() -> dict:
                counter[0] += 1
                tr = Tracing(a.latlab, tmp, counter[0])
                w = wakeup(a.latlab, a.duration)
                w["cost"] = tr.stop()
                return w

            # `latlab trace` of every event as a separate process beside the measurement.
            result["wakeup"] = wakeup_pairs(a, "measure beside trace", beside)
            # `latlab measure --trace --spike 100us`: the tracer, its ring of recent events and
            # the story collector in the measuring process.
            result["wakeup_in_process"] = wakeup_pairs(
                a, "measure --trace", lambda: wakeup(a.latlab, a.duration,
                                                     ("--trace", "--spike", "100us")))

    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print()
    for load, r in result["loads"].items():
        print(f"{load:<10} throughput loss with tracing: median {r['loss_pct_median']:+.2f} %, "
              f"mean {r['loss_pct_mean']:+.2f} % (target < 3 %: "
              f"{'met' if r['target_met'] else 'NOT met'})")
    for key, what in (("wakeup", "beside latlab trace"),
                      ("wakeup_in_process", "with measure --trace --spike")):
        w = result.get(key)
        if w:
            print(f"wake-up latency shift {what}: p50 {w['p50_shift_ns_median'] / 1e3:+.1f} us, "
                  f"p99 {w['p99_shift_ns_median'] / 1e3:+.1f} us (medians over pairs)")
    print(f"written: {out_path}")


if __name__ == "__main__":
    run(main)
