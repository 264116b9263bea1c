#!/usr/bin/env bash
# Does sampling beside a measurement shift the measured latency? Alternating pairs of
# `latlab measure` with the samplers (the default) and with --no-samplers, same settings, one
# after the other, so slow drift of the machine falls on both. Prints each run's p50/p99/max and
# the medians of each side. Usage: sudo bench/samplers_ab.sh [PAIRS] [SECONDS] [INTERVAL]
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-5}; secs=${2:-10}; interval=${3:-1ms}
bin=target/release/latlab
[ -x "$bin" ] || cargo build --release -p latlab
out=$(mktemp -d)
for i in $(seq 1 "$pairs"); do
  for side in with without; do
    extra=(); [ "$side" = without ] && extra=(--no-samplers)
    "$bin" measure -D "${secs}s" -i "$interval" -q "${extra[@]}" --json "$out/$side-$i.json" >/dev/null
  done
done
python3 - "$out" "$pairs" <<'PY'
import json, statistics, sys, os
d, n = sys.argv[1], int(sys.argv[2])
for side in ("with", "without"):
    rows = [json.load(open(os.path.join(d, f"{side}-{i}.json")))["overall"]["stats"] for i in range(1, n + 1)]
    med = lambda k: statistics.median(r[k] for r in rows) / 1000
    cost = [json.load(open(os.path.join(d, f"{side}-{i}.json"))).get("samples", {}) or {} for i in range(1, n + 1)]
    print(f"{side:8} samplers: median p50 {med('p50'):.1f} us, p99 {med('p99'):.1f} us, max {med('max'):.1f} us"
          + (f", sampler CPU {statistics.median(c['sampler_cpu_time_ns'] for c in cost)/1e6:.2f} ms/run" if cost[0] else ""))
PY
rm -rf "$out"
