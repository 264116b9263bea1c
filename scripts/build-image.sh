#!/usr/bin/env bash
# latlab's OCI image, built from scratch: the latlab binary, the shared libraries it links (from
# this machine's Debian packages) and the directories it writes, nothing else. No base image is
# pulled from any registry. buildah (Debian package) commits the image; without buildah, or with
# --rootfs-only, only the root file system is made (it runs under chroot the same way).
#
# Usage: scripts/build-image.sh [--binary PATH] [--tag NAME] [--rootfs DIR] [--rootfs-only]
#                               [--oci-archive FILE]
#   --binary PATH      the latlab to put in (default: cargo build --release, target/release/latlab)
#   --tag NAME         the image name (default: localhost/latlab:VERSION, also :latest)
#   --rootfs DIR       make the root file system in DIR (default: a temporary directory)
#   --rootfs-only      stop after the root file system
#   --oci-archive FILE also write the image as an OCI archive (to push or load elsewhere)
#
# Default command: `latlab monitor --db /var/lib/latlab/monitor.db` on every CPU the container
# sees. What it needs from the host is in the README (Fleet: the container image).
set -euo pipefail
cd "$(dirname "$0")/.."

binary="" tag="" rootfs="" rootfs_only=0 archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --rootfs) rootfs="$2"; shift 2 ;;
    --rootfs-only) rootfs_only=1; shift ;;
    --oci-archive) archive="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown option $1 (accepted: --binary PATH, --tag NAME, --rootfs DIR, --rootfs-only, --oci-archive FILE)" >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  cargo build --release --locked -p latlab
  binary=target/release/latlab
fi
[ -x "$binary" ] || { echo "build-image.sh: $binary is not an executable latlab" >&2; exit 2; }
version=$("$binary" --version | awk '{print $2}')
tag=${tag:-localhost/latlab:$version}

made_rootfs=0
if [ -z "$rootfs" ]; then
  rootfs=$(mktemp -d -t latlab-rootfs.XXXXXX)
  made_rootfs=1
fi
ctr=""
cleanup() {
  if [ -n "$ctr" ]; then buildah rm "$ctr" >/dev/null 2>&1 || true; fi
  if [ "$made_rootfs" = 1 ] && [ "$rootfs_only" = 0 ]; then rm -rf "$rootfs"; fi
}
trap cleanup EXIT
mkdir -p "$rootfs"
if [ -n "$(ls -A "$rootfs")" ]; then
  echo "build-image.sh: --rootfs $rootfs is not empty (accepted: a new or empty directory)" >&2
  exit 2
fi

# The binary (without its debug sections where strip is installed) and what the dynamic
# loader needs to start it: every library ldd lists, at the path it lists, and the loader.
install -d -m 0755 "$rootfs/usr/bin"
cp "$binary" "$rootfs/usr/bin/latlab"
if command -v strip >/dev/null 2>&1; then strip --strip-debug "$rootfs/usr/bin/latlab"; fi
ldd "$binary" | awk '/=>/ { print $3 } !/=>/ && $1 ~ /^\// { print $1 }' | while read -r lib; do
  [ -n "$lib" ] || continue
  install -d -m 0755 "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
# The loader's path as the binary names it (/lib64 on x86-64), also where the system has it
# through a symlink.
interp=$(ldd "$binary" | awk '!/=>/ && $1 ~ /^\// { print $1 }')
if [ -n "$interp" ] && [ ! -e "$rootfs$interp" ]; then
  install -d -m 0755 "$rootfs$(dirname "$interp")"
  cp -L "$interp" "$rootfs$interp"
fi
# What latlab writes or reads at fixed places: the store and tuning journal, temporary files,
# user profiles; the mount points of /proc, /sys and /dev; a passwd for the user name checks.
install -d -m 0755 "$rootfs/var/lib/latlab" "$rootfs/etc/latlab/profiles" \
  "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
install -d -m 1777 "$rootfs/tmp"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$rootfs/etc/group"
echo "build-image.sh: root file system in $rootfs ($(du -sh "$rootfs" | cut -f1))"
[ "$rootfs_only" = 1 ] && exit 0

if ! command -v buildah >/dev/null 2>&1; then
  echo "build-image.sh: buildah not found (apt-get install buildah); the root file system is in $rootfs (--rootfs-only keeps it)" >&2
  exit 1
fi
ctr=$(buildah from scratch)
buildah copy --quiet "$ctr" "$rootfs" / >/dev/null
buildah config \
  --entrypoint '["/usr/bin/latlab"]' \
  --cmd '["monitor", "--db", "/var/lib/latlab/monitor.db"]' \
  --env LATLAB_DB=/var/lib/latlab/monitor.db \
  --volume /var/lib/latlab \
  --port 9464/tcp \
  --label org.opencontainers.image.title=latlab \
  --label org.opencontainers.image.description="The Linux latency lab" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.licenses="$(awk -F'"' '/^license *=/ { print $2; exit }' Cargo.toml)" \
  "$ctr"
buildah commit --quiet "$ctr" "$tag" >/dev/null
if [ "${tag##*:}" != latest ]; then buildah tag "$tag" "${tag%:*}:latest"; fi
if [ -n "$archive" ]; then buildah push --quiet "$tag" "oci-archive:$archive:$tag"; fi
echo "build-image.sh: image $tag ($(buildah images --format '{{.ID}} {{.Size}}' "$tag" | head -1))"
