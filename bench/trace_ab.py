#!/usr/bin/env python3
"""Two latlab builds' tracers side by side: each traces beside the same `latlab load messaging`
(every message a wake-up and a context switch, the tracer's worst case), the builds alternated
(A B, B A, ...). Per run: the load's rate and the BPF programs' run time per run, from the
trace's own cost. For a change to the BPF programs: build the old commit into a second binary
and pass both.

    sudo python3 bench/trace_ab.py --a /tmp/latlab-old --b target/release/latlab --pairs 6
"""
import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import benchlib


def run(binary, load_binary, seconds, out):
    tracer = subprocess.Popen(
        [binary, "trace", "-D", f"{seconds + 2}s", "-q", "--json", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.5)  # attached before the load starts
    load = subprocess.run(
        [load_binary, "load", "-D", f"{seconds}s", "messaging", "--json"],
        capture_output=True, text=True, check=True,
    ).stdout
    tracer.wait()
    rate = json.loads(load)["reports"][0]["throughput"][0]["rate"]
    cost = json.loads(out.read_text())["trace"]["cost"]
    return rate, cost["run_time_ns"] / max(cost["run_count"], 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="the first latlab (e.g. the old build)")
    p.add_argument("--b", required=True, help="the second latlab (e.g. this build)")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--duration", type=int, default=10, help="seconds of load per run")
    args = p.parse_args()
    benchlib.preflight(args.a, "loading BPF programs")
    benchlib.preflight(args.b, "loading BPF programs")
    bins = {"a": args.a, "b": args.b}
    runs = {"a": [], "b": []}
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.pairs):
            for name in (["a", "b"] if i % 2 == 0 else ["b", "a"]):
                rate, ns = run(bins[name], args.b, args.duration, Path(d) / f"{name}.json")
                runs[name].append({"rate": rate, "ns_per_run": ns})
                print(f"pair {i + 1} {name}: {rate:.0f}/s, {ns:.1f} ns per program run", flush=True)
    diffs = [b["ns_per_run"] - a["ns_per_run"] for a, b in zip(runs["a"], runs["b"])]
    for name in ("a", "b"):
        print(f"{name}: median {statistics.median(r['rate'] for r in runs[name]):.0f}/s, "
              f"median {statistics.median(r['ns_per_run'] for r in runs[name]):.1f} ns per run")
    print(f"b - a per pair: median {statistics.median(diffs):+.1f} ns per run "
          f"({', '.join(f'{d:+.1f}' for d in diffs)})")
    _, out = benchlib.results_path("trace_ab", None)
    out.write_text(json.dumps({"a": args.a, "b": args.b, "duration_s": args.duration,
                               "runs": runs, "b_minus_a_ns": diffs}, indent=1) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    benchlib.run(main)
