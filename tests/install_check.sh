#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/install against it with
# find_package(tensorcast) and runs it; also checks the pkg-config file.
set -euo pipefail
build_dir="$1"; src_dir="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
quiet cmake --install "$build_dir" --prefix "$work/prefix"
quiet cmake -S "$src_dir/tests/install" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/build"
libdir="$(dirname "$(find "$work/prefix" -name 'libtensorcast.so' | head -1)")"
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$work/build/consumer"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pkg-config --exists --print-errors "tensorcast >= 0.1"
echo "pkg-config: $(pkg-config --cflags --libs tensorcast)"
