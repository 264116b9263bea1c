#!/usr/bin/env bash
# Build latlab's Debian package: the binary, man pages and shell completions generated from the
# CLI definitions (latlab gen-docs), the latlab-monitor systemd unit, the built-in profiles and
# the Grafana dashboard. Needs cargo-deb (cargo install cargo-deb --locked).
#
#   scripts/build-deb.sh                  release build, package in target/debian/
#   PROFILE=dev scripts/build-deb.sh      the debug build (faster; what the tests use)
#   NO_BUILD=1 scripts/build-deb.sh       package what is already built
# Further arguments go to cargo deb (e.g. --output DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo deb --version >/dev/null 2>&1; then
  echo "build-deb: cargo-deb is not installed (cargo install cargo-deb --locked)" >&2
  exit 1
fi
profile="${PROFILE:-release}"
case "$profile" in
  release) dir=release ;;
  dev) dir=debug ;;
  *) dir="$profile" ;;
esac
target="${CARGO_TARGET_DIR:-target}"

if [ -z "${NO_BUILD:-}" ]; then
  cargo build --locked -p latlab --profile "$profile"
fi
rm -rf "$target/$dir/latlab-docs"
"$target/$dir/latlab" gen-docs "$target/$dir/latlab-docs" >/dev/null
gzip -9n "$target/$dir/latlab-docs"/man/*.1
cargo deb -p latlab --no-build --profile "$profile" "$@"
