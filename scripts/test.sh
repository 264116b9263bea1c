#!/usr/bin/env bash
# latlab's whole test suite: installs what the tests need, then runs formatting, lints and every
# test. CI runs exactly this (.ci/run). As root the real-time tests run with SCHED_FIFO; without
# root they run with SCHED_OTHER and skip what needs privileges, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests use: setpriv drops privileges in the capability tests; cyclictest,
# stress-ng and jitterdebugger produce real output for the import tests; chromium renders the
# HTML report and the dashboard; prometheus scrapes the monitor's /metrics; unshare, nsenter and
# the ext4 tools give the monitor's fault tests a file system of their own to fill and break;
# junitparser reads --junit files; curl is the TLS client of the --web-config tests.
need=()
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v findmnt >/dev/null 2>&1 || need+=(util-linux)
command -v debugfs >/dev/null 2>&1 || need+=(e2fsprogs)
command -v cyclictest >/dev/null 2>&1 || need+=(rt-tests)
command -v stress-ng >/dev/null 2>&1 || need+=(stress-ng)
command -v jitterdebugger >/dev/null 2>&1 || need+=(jitterdebugger)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v curl >/dev/null 2>&1 || need+=(curl)
# buildah builds the container image from scratch; podman (with runc, for hosts whose hybrid
# cgroup hierarchy crun refuses) runs it.
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
/usr/bin/python3 -c 'import junitparser' >/dev/null 2>&1 || need+=(python3-junitparser)
# clang and llvm-strip rebuild the committed BPF object to check it matches its C source.
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v llvm-strip >/dev/null 2>&1 || need+=(llvm)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "note: not installing ${need[*]} (needs root and apt-get); dependent tests will skip"
  fi
fi

# Toolchain components for the checks.
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# cargo-deb builds the .deb whose contents the packaging test checks.
if ! command -v cargo-deb >/dev/null 2>&1; then
  cargo install cargo-deb --version 3.8.0 --locked --quiet \
    || echo "note: cargo-deb could not be installed; the packaging test will skip"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
