#!/bin/bash
# Compare what two latlab binaries write for the same inputs: every capture in
# crates/latlab-import/tests/data imported into a fresh store, then each run exported in every
# format, `db list`, `compare` and a report of all runs in every format. Prints the files that
# differ; exit 0 when none does. For refactors that must not change any output:
#   git worktree add /tmp/old REV && (cd /tmp/old && cargo build -p latlab)
#   scripts/same-outputs.sh /tmp/old/target/debug/latlab target/debug/latlab
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_LATLAB NEW_LATLAB" >&2; exit 2; }
data="$(cd "$(dirname "$0")/.." && pwd)/crates/latlab-import/tests/data"
old=$(realpath "$1")
new=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
outputs() {
    local bin=$1 out=$2
    mkdir -p "$out"
    for f in "$data"/*; do "$bin" import "$f" --db "$out/s.db" >/dev/null 2>&1 || true; done
    local n
    n=$("$bin" db list --db "$out/s.db" 2>/dev/null | tail -n +2 | wc -l)
    local runs=()
    for i in $(seq 1 "$n"); do
        runs+=("$i")
        for fmt in json csv histogram-csv windows-csv spikes-csv cyclictest-json cyclictest-hist; do
            "$bin" export "$i" --format "$fmt" --db "$out/s.db" >"$out/run$i.$fmt" 2>&1 || true
        done
    done
    for fmt in text markdown json csv; do
        "$bin" report "${runs[@]}" --db "$out/s.db" --format "$fmt" >"$out/report.$fmt" 2>&1 || true
    done
    (cd "$out" && "$bin" report "${runs[@]}" --db s.db --format html -o report.html >/dev/null 2>&1 || true)
    "$bin" db list --db "$out/s.db" >"$out/list.txt" 2>&1 || true
    "$bin" compare 1 2 --db "$out/s.db" >"$out/compare.txt" 2>&1 || true
    rm -f "$out/s.db"
    echo "$n runs, $(ls "$out" | wc -l) files"
}
echo "old: $(outputs "$old" "$work/old")"
echo "new: $(outputs "$new" "$work/new")"
if diff -rq "$work/old" "$work/new"; then echo "identical"; else exit 1; fi
