#!/bin/bash
# User-space instructions per loop of the measuring thread with and without spikes kept, for two
# latlab binaries side by side (before and after a change), as BENCHMARKS.md counts them:
# (Ir(LONG loops) - Ir(SHORT loops)) / (LONG - SHORT), one CPU, SCHED_OTHER, no samplers.
#
#   bench/spike_callgrind.sh BEFORE AFTER [ROUNDS] [CONDITION...]
#
# Conditions (all unless named): `none`, no --spike; `spike-1ms`, --spike 1ns at 1ms (every
# sample kept, below a window's room of 1024); `spike-250us`, --spike 1ns at 250us (4000 a
# window: past the room, where the smallest kept gives way). Both with --spike-limit 100000, so
# the run's limit (its largest kept at the end) is not reached and the count is the loop's.
# `futex`: the futex method at 1ms, no --spike; the count is of both threads (the waker and the
# woken thread), per period.
# Rounds alternate the order of the binaries. Prints one line per condition, binary and round.
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
wanted=("${@:4}")
short=2000 long=12000
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ir() { # binary loops args...
  local bin=$1 loops=$2; shift 2
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$bin" measure -a 0 -l "$loops" \
    --policy other --no-mlock -q --no-samplers "$@" >/dev/null 2>"$tmp/err"
  callgrind_annotate "$tmp/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
per_loop() { # binary args...
  local a b
  a=$(ir "$1" $short "${@:2}"); b=$(ir "$1" $long "${@:2}")
  echo $(( (b - a) / (long - short) ))
}
lim="--spike 1ns --spike-limit 100000"
for cond in "none|-i 1ms" "spike-1ms|-i 1ms $lim" "spike-250us|-i 250us $lim" \
  "futex|-m futex -i 1ms"; do
  name=${cond%%|*}; args=${cond#*|}
  if (( ${#wanted[@]} )) && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
  for r in $(seq 1 "$rounds"); do
    if (( r % 2 )); then order="before after"; else order="after before"; fi
    for which in $order; do
      bin=$before; [ "$which" = after ] && bin=$after
      # shellcheck disable=SC2086
      echo "$name round $r $which $(per_loop "$bin" $args)"
    done
  done
done
