#!/usr/bin/env bash
# Dry run of bench/device/check.sh on a machine without a GPU: on a bare Debian 12 root that
# has only what a typical offline GPU machine has for the build (gcc; CMake and ninja from
# pip in a venv, as PyTorch's python3 environment often holds them; nvcc from the host's
# /usr/local/cuda, mounted read-only), with the tree copied as a plain copy of the checkout
# would be (tracked and untracked-not-ignored files) plus .carry. No GPU there, so the CUDA
# tests skip and the benchmarks do not run; everything else runs as on the GPU machine.
#
#   sudo bash bench/device/dry-run.sh [--head]     --head: the committed HEAD (git archive)
#                                                   and .carry instead of the working tree
# Results in $DRYRUN_DIR/out (check.md, logs), default /tmp/device-dryrun. Needs root
# (chroot, mount) and a base root tarball: scripts/fresh-machine-check's
# /tmp/fresh-machine/bookworm-base.tar (run that once, or set DRYRUN_BASE). The root with
# the tools installed is kept as $DRYRUN_DIR/tools.tar, so later runs need no network.
# Environment: DRYRUN_DIR, DRYRUN_BASE, CHECK_TIME_SCALE (default 8: a 2-core host builds
# about 8 times slower than a 16-core GPU machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { echo "dry-run: $*"; }

dir=${DRYRUN_DIR:-/tmp/device-dryrun}
base=${DRYRUN_BASE:-/tmp/fresh-machine/bookworm-base.tar}
root=$dir/root
[ "$(id -u)" -eq 0 ] || { say "needs root (chroot, mount)" >&2; exit 2; }
[ -s "$base" ] || { say "no base root $base: run scripts/fresh-machine-check once, or set DRYRUN_BASE" >&2; exit 2; }
[ -d .carry/debs ] || { say "no .carry/debs: run scripts/device-carry.sh first" >&2; exit 2; }
cuda=$(readlink -f /usr/local/cuda)
[ -x "$cuda/bin/nvcc" ] || { say "no CUDA toolkit in /usr/local/cuda" >&2; exit 2; }

unmount() {
  for m in usr/local/cuda out dev/pts dev proc; do
    if mountpoint -q "$root/$m"; then umount -l "$root/$m"; fi
  done
}
trap unmount EXIT
unmount
rm -rf --one-file-system "$root" && mkdir -p "$root" "$dir/out"

if [ ! -s "$dir/tools.tar" ]; then
  say "making the root with the GPU machine's tools (once): build-essential python3, a venv with pip's cmake and ninja"
  tar -xf "$base" -C "$root"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # The GPU machine has pip's CMake and ninja (not Debian's): the root gets the same.
  # The wheels are fetched on the host, with its pip and its certificates.
  mkdir -p "$root/tmp/wheels"
  python3 -m pip download -q --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    -d "$root/tmp/wheels" cmake ninja >"$dir/tools.log" 2>&1 || { say "pip download failed: $dir/tools.log" >&2; exit 2; }
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash -c '
    apt-get update -qq && apt-get install -y -qq --no-install-recommends build-essential python3 python3-venv &&
    apt-get clean && python3 -m venv /opt/venv && /opt/venv/bin/pip install -q --no-index /tmp/wheels/*.whl &&
    rm -rf /tmp/wheels' >>"$dir/tools.log" 2>&1 || { say "installing the tools failed: $dir/tools.log" >&2; exit 2; }
  tar -cf "$dir/tools.tar.part" -C "$root" . && mv "$dir/tools.tar.part" "$dir/tools.tar"
else
  tar -xf "$dir/tools.tar" -C "$root"
fi

mkdir -p "$root/src"
if [ "${1:-}" = --head ]; then
  say "copying the committed HEAD $(git log -1 --format='%h %s') and .carry"
  git archive HEAD | tar -x -C "$root/src"
else
  say "copying the working tree (tracked and untracked-not-ignored files) and .carry"
  git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -x -C "$root/src"
fi
cp -a .carry "$root/src/.carry"

mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mkdir -p "$root/usr/local/cuda" "$root/out"
mount --bind -o ro "$cuda" "$root/usr/local/cuda"
mount --bind "$dir/out" "$root/out"

say "running bench/device/check.sh in $root (results: $dir/out)"
rc=0
chroot "$root" /usr/bin/env -i PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  OUT=/out CHECK_TIME_SCALE="${CHECK_TIME_SCALE:-8}" bash -c 'cd /src && bash bench/device/check.sh' || rc=$?
say "check.sh exited $rc"
exit $rc
