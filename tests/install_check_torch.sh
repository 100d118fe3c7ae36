#!/usr/bin/env bash
# Installs the build tree (built with the libtorch adapter) into a temporary prefix and builds
# examples/consumer_torch against it, find_package(tensorcast COMPONENTS torch), then runs it:
# a libtorch model's GradScaler steps through the installed libtensorcast_torch; then the
# same program built with tensorcast-torch.pc's flags alone.
#   tests/install_check_torch.sh BUILD_DIR SOURCE_DIR TORCH_CMAKE_PREFIX
set -euo pipefail
build_dir="$1"; src_dir="$2"; torch_prefix="$3"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
quiet cmake --install "$build_dir" --prefix "$work/prefix"
quiet cmake -S "$src_dir/examples/consumer_torch" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix;$torch_prefix"
quiet cmake --build "$work/build"
"$work/build/consumer_torch"
# The same program built by pkg-config's flags alone (tensorcast-torch.pc).
# shellcheck disable=SC2046
c++ -O1 -o "$work/consumer-pc" "$src_dir/examples/consumer_torch/main.cpp" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs tensorcast-torch)
ldd "$work/consumer-pc" | grep -q "libtensorcast\.so" && { echo "pkg-config linked the core into a libtorch program" >&2; exit 1; }
LD_LIBRARY_PATH="$work/prefix/lib" "$work/consumer-pc"
