#!/usr/bin/env bash
# Downloads the Debian 12 packages that bench/device/check.sh's build needs beyond a
# compiler, CMake, ninja, nvcc and PyTorch into .carry/debs (ignored by git), for check.sh
# to unpack on the GPU machine (docs/cuda.md, "Running the GPU check"). On a GPU machine
# with network, run it there; for one without network, run it on any Debian 12 machine
# and copy .carry with the tree.
#
#   sudo bash scripts/device-carry.sh
#
# Downloads only (apt-get download: nothing is installed here); a package already in
# .carry/debs is skipped, so a second run does nothing. `rm -rf .carry/debs` starts over.
set -euo pipefail
cd "$(dirname "$0")/.."

# What scripts/deps.sh installs for the build, less what check.sh expects on the GPU
# machine (compiler, CMake, ninja) and what check.sh leaves out (MPI: -DTC_DIST=OFF), plus Fashion-MNIST for
# the accuracy run on the GPU (31 MB). Runtime libraries are listed next to their -dev package because
# apt-get download fetches no dependencies.
PACKAGES=(
  libdnnl-dev libdnnl2                  # oneDNN
  ocl-icd-opencl-dev ocl-icd-libopencl1 # dnnl-config.cmake requires OpenCL, and libdnnl.so.2 links libOpenCL.so.1
  opencl-c-headers                      # CL/cl.h, which dnnl's FindOpenCL.cmake looks for
  libgtest-dev                          # unit tests (static libraries; gmock is not used)
  libbenchmark-dev libbenchmark1debian  # benchmarks
  zlib1g-dev zlib1g                     # gzip-compressed IDX datasets; zlib1g for libz.so's target
  dataset-fashion-mnist                 # /usr/share/datasets/fashion-mnist, for bench_cuda_train --fashion-mnist
)

dir=.carry/debs
mkdir -p "$dir"
if ! grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  echo "device-carry: warning: this is not Debian 12 (bookworm); check.sh was tried with bookworm's packages" >&2
fi

missing=()
for p in "${PACKAGES[@]}"; do
  compgen -G "$dir/${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "device-carry: needs root (apt-get update may be needed): sudo bash $0" >&2; exit 1; }
  echo "device-carry: downloading ${missing[*]}"
  # apt-get download runs as the _apt user where it can; it must be able to write here.
  chown _apt "$dir" 2>/dev/null || true
  if ! (cd "$dir" && apt-get download -qq "${missing[@]}"); then
    apt-get update -qq  # stale package lists name versions the mirror no longer has
    (cd "$dir" && apt-get download -qq "${missing[@]}")
  fi
  # Plain file names (apt writes epochs as %3a; Debian versions hold + and ~): letters,
  # digits, '.', '_' and '-' survive any copy tool.
  for f in "$dir"/*.deb; do
    safe=$(basename "$f" | tr -c 'A-Za-z0-9._\n-' '_')
    [ "$safe" = "$(basename "$f")" ] || mv "$f" "$dir/$safe"
  done
fi

echo "device-carry: $(ls "$dir"/*.deb | wc -l) packages in $dir, $(du -sh "$dir" | cut -f1)"
