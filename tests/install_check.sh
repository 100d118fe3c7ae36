#!/usr/bin/env bash
# Installs the build tree into a temporary prefix as a user would, then checks what is there:
# the installed `tensorcast` command runs from the prefix; examples/consumer (an outside
# CMake project, find_package(tensorcast COMPONENTS dist)) builds against it and trains, as
# one process and, where mpirun is, as two; a component the build lacks fails find_package
# with a message naming it; every pkg-config file resolves.
#   tests/install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$1"; src_dir="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
prefix="$work/prefix"
quiet cmake --install "$build_dir" --prefix "$prefix"

# No LD_LIBRARY_PATH from here on: the installed files find each other by their RPATH.
"$prefix/bin/tensorcast" --version
"$prefix/bin/tensorcast" --help > "$work/help" && grep -q "train" "$work/help"

quiet cmake -S "$src_dir/examples/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix"
quiet cmake --build "$work/build"
"$work/build/consumer"
if command -v mpirun > /dev/null; then
  timeout 120 mpirun --oversubscribe --allow-run-as-root -np 2 "$work/build/consumer" 2>&1 |
    tee "$work/mpi.log"
  [[ $(grep -c "rank . of 2: .* parameters equal" "$work/mpi.log") == 2 ]]
fi

# A component that does not exist, and the torch component where the build has no adapter:
# find_package fails and says which and how to get it.
refused() {  # refused COMPONENT EXPECTED_MESSAGE
  mkdir -p "$work/missing-$1"
  printf '%s\n' "cmake_minimum_required(VERSION 3.25)" "project(missing LANGUAGES CXX)" \
    "find_package(tensorcast REQUIRED COMPONENTS $1)" > "$work/missing-$1/CMakeLists.txt"
  if cmake -S "$work/missing-$1" -B "$work/missing-$1/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/log" 2>&1; then
    echo "find_package(tensorcast COMPONENTS $1) succeeded" >&2; exit 1
  fi
  tr -s ' \n' '  ' < "$work/log" | grep -qF "$2" || { cat "$work/log"; exit 1; }  # CMake wraps lines
  echo "find_package(tensorcast COMPONENTS $1): refused: $2"
}
refused nosuch "tensorcast has no component 'nosuch'"
if [[ -z $(find "$prefix" -name tensorcastTorchTargets.cmake) ]]; then
  refused torch "tensorcast component 'torch' is not installed: build tensorcast with -DTC_TORCH=ON"
fi

libdir="$(dirname "$(find "$prefix" -name 'libtensorcast.so' | head -1)")"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
for pc in "$libdir"/pkgconfig/*.pc; do
  name=$(basename "$pc" .pc)
  pkg-config --exists --print-errors "$name >= 0.1"
  echo "pkg-config $name: $(pkg-config --cflags --libs "$name")"
done
# The consumer again, built by pkg-config's flags alone.
# shellcheck disable=SC2046
c++ -O1 -o "$work/consumer-pc" "$src_dir/examples/consumer/main.cpp" $(pkg-config --cflags --libs tensorcast-dist)
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc"
