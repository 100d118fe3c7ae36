#!/usr/bin/env bash
# Installs what tensorcast needs from Debian's packages, only what is missing (idempotent,
# and quick when everything is there). Needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libdnnl-dev           # oneDNN: CPU GEMM, convolution, pooling
  ocl-icd-opencl-dev    # only recommended by libdnnl-dev, but its dnnl-config.cmake requires OpenCL
  libgtest-dev          # unit tests
  libbenchmark-dev      # kernel benchmarks
  zlib1g-dev            # gzip-compressed IDX datasets
  dataset-fashion-mnist # the default training data (/usr/share/datasets/fashion-mnist)
  libopenmpi-dev        # data parallelism (tc::dist): MPI headers and library
  openmpi-bin           # mpirun, for multi-process training and its tests
  iproute2              # `ip netns`: the two-host test's network namespaces
)
# `deps.sh format`: also what scripts/check-format needs.
if [ "${1:-}" = format ]; then
  PACKAGES+=(clang-format-14)
fi
# `deps.sh docs`: also what `./run.sh docs` needs (the API reference from the headers).
if [ "${1:-}" = docs ]; then
  PACKAGES+=(doxygen)
fi
# `deps.sh fuzz`: also what scripts/fuzz.sh needs (libFuzzer comes with clang's runtime).
if [ "${1:-}" = fuzz ]; then
  PACKAGES+=(
    clang-14            # libFuzzer is clang's
    libclang-rt-14-dev  # libFuzzer, ASan and UBSan runtimes
    libomp-14-dev       # OpenMP for clang (GCC's libgomp is not clang's runtime)
  )
fi

# `deps.sh package`: also what `./run.sh package` needs (CPack's DEB generator runs `file`).
if [ "${1:-}" = package ]; then
  PACKAGES+=(file)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
