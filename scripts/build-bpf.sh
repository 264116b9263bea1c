#!/usr/bin/env bash
# Rebuild latlab's BPF objects from their C sources (crates/latlab-trace/bpf/*.bpf.c) into the
# committed objects beside them, reproducibly: fixed flags, paths relative to the source
# directory, DWARF and the compiler's ident string stripped (BTF and CO-RE relocations kept).
#
#   scripts/build-bpf.sh           rebuild the committed objects
#   scripts/build-bpf.sh --check   rebuild into a temporary directory and compare the bytes:
#                                  exit 0 when they agree, 1 when they differ, 3 when the
#                                  compiler is missing or not the one recorded in toolchain.txt
#                                  (bytes are only reproducible with the same compiler)
#
# Needs clang and llvm-strip (Debian 12: apt-get install clang llvm). No kernel or libbpf
# headers: the sources declare what they use.
set -euo pipefail

CLANG=${CLANG:-clang}
STRIP=${LLVM_STRIP:-llvm-strip}
bpf_dir="$(cd "$(dirname "$0")/../crates/latlab-trace/bpf" && pwd)"
mode=build
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! command -v "$CLANG" >/dev/null 2>&1 || ! command -v "$STRIP" >/dev/null 2>&1; then
  echo "build-bpf: $CLANG or $STRIP not found (Debian: apt-get install clang llvm)" >&2
  [ "$mode" = check ] && exit 3
  exit 1
fi
version="$("$CLANG" --version | head -n 1)"
if [ "$mode" = check ]; then
  recorded="$(head -n 1 "$bpf_dir/toolchain.txt")"
  if [ "$version" != "$recorded" ]; then
    echo "build-bpf: compiler is \"$version\", the objects were built with \"$recorded\"" >&2
    exit 3
  fi
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
else
  out="$bpf_dir"
fi

flags=(
  -target bpfel -mcpu=v3 -O2 -g
  -Wall -Werror -Wno-unused-function
  -fno-ident -fno-stack-protector
  -ffile-prefix-map="$bpf_dir"=. -fdebug-prefix-map="$bpf_dir"=.
  -nostdinc -I.
)

status=0
cd "$bpf_dir"
for src in *.bpf.c; do
  obj="${src%.c}.o"
  tmp="$(mktemp "${TMPDIR:-/tmp}/latlab-bpf.XXXXXX")"
  "$CLANG" "${flags[@]}" -c "$src" -o "$tmp"
  # Keep .BTF and .BTF.ext (CO-RE relocations, map and global layouts); drop DWARF.
  "$STRIP" --strip-debug --remove-section=.comment --remove-section=.llvm_addrsig \
    "$tmp" -o "$out/$obj"
  rm -f "$tmp"
  if [ "$mode" = check ]; then
    if cmp -s "$out/$obj" "$bpf_dir/$obj"; then
      echo "build-bpf: $obj agrees with $src"
    else
      echo "build-bpf: $obj differs from a rebuild of $src (run scripts/build-bpf.sh)" >&2
      status=1
    fi
  else
    echo "build-bpf: built $obj"
  fi
done
if [ "$mode" = build ]; then
  echo "$version" > "$bpf_dir/toolchain.txt"
fi
exit $status
