#!/usr/bin/env bash
# The one entry point:
#   ./run.sh            install what is missing, build, run the main job (`tensorcast train`: the CNN on Fashion-MNIST)
#   ./run.sh test       install what is missing, build, run the whole test suite
#   ./run.sh test-asan  the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   ./run.sh test-tsan  the unit tests under ThreadSanitizer (a bounded subset; TC_TSAN_FULL=1: all)
#   ./run.sh test-torch the libtorch adapter's tests against a PyTorch installed with pip (docs/libtorch.md):
#                       TC_TORCH_PYTHON (default /var/cache/tensorcast-torchenv/bin/python) must import torch
#   ./run.sh build      install what is missing and build only
#   ./run.sh docs       the API reference from include/tensorcast (Doxygen, docs/Doxyfile) in
#                       build-docs/html/ (DOCS_DIR: elsewhere); fails on any warning
#   ./run.sh package    the Debian packages tensorcast_<version>_amd64.deb and tensorcast-dev_<version>_amd64.deb
#                       (the CPU build under /usr, cmake/package.cmake) in build-package/
# BUILD_DIR (default build) and JOBS (default: all cores) may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")"

cmd="${1:-main}"
shift || true
JOBS="${JOBS:-$(nproc)}"
export CCACHE_BASEDIR="$PWD"

build() {  # build DIR [cmake args...]
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

bash scripts/deps.sh
case "$cmd" in
  main)
    build "${BUILD_DIR:-build}"
    "${BUILD_DIR:-build}/apps/tensorcast/tensorcast" train "$@"
    ;;
  build)
    build "${BUILD_DIR:-build}" "$@"
    ;;
  test)
    dir="${BUILD_DIR:-build}"
    build "$dir"
    # Slow tests run too, in their bounded form (TC_SLOW_BOUNDED is the default).
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "$@"
    ;;
  package)
    dir="${BUILD_DIR:-build-package}"
    bash scripts/deps.sh package
    build "$dir" -DCMAKE_INSTALL_PREFIX=/usr -DTC_CUDA=OFF -DTC_TORCH=OFF -DTC_BUILD_TESTS=OFF -DTC_BUILD_BENCH=OFF \
      -DTC_BUILD_EXAMPLES=OFF "$@"
    rm -f "$dir"/*.deb
    (cd "$dir" && cpack -G DEB > cpack.log 2>&1) || { cat "$dir/cpack.log" >&2; exit 1; }
    for deb in "$dir"/*.deb; do
      echo "$deb: $(dpkg-deb -f "$deb" Depends)"
    done
    ;;
  docs)
    bash scripts/deps.sh docs
    out="${DOCS_DIR:-build-docs}"
    mkdir -p "$out"
    version=$(sed -nE 's/^project\(tensorcast VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
    # The Doxyfile, then what this run sets; Doxygen exits non-zero after any warning.
    { cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out"; echo "PROJECT_NUMBER = $version"; } | doxygen -
    echo "run.sh docs: $out/html/index.html"
    ;;
  test-asan)
    dir="${BUILD_DIR:-build-asan}"
    build "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTC_SANITIZE=ON -DTC_BUILD_BENCH=OFF -DTC_BUILD_EXAMPLES=OFF
    # oneDNN's JIT and OpenMP runtime are not instrumented; leaks inside them are not ours.
    # The data-parallel tests (label dist: hooks, the communication thread) run too.
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L '^(unit|dist)$' "$@"
    ;;
  test-tsan)
    dir="${BUILD_DIR:-build-tsan}"
    # Only the unit tests run here, so nothing of tc::dist (MPI) or the command line is built.
    build "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTC_SANITIZE=thread -DTC_BUILD_BENCH=OFF -DTC_BUILD_EXAMPLES=OFF \
      -DTC_DIST=OFF
    # oneDNN is not instrumented: tests/tsan.supp names what comes from it (docs/design.md,
    # "Sanitizers"). Any other report fails the test.
    # TSan makes the unit tests several times slower; left out unless TC_TSAN_FULL=1 are those
    # that only rerun kernels the others already run on the same threads: the per-dtype
    # gradchecks of pooling and convolution (test_op_db's entries for them; the channels-last
    # and JIT-shape tests run the same kernels threaded), the op table's CUDA cases (skipped
    # without CUDA), two long training runs, a throughput measurement (the plain and ASan
    # runs keep them).
    skip='^(Ops/OpDb\.Checks/(conv2d|max_pool2d|avg_pool2d|adaptive_avg_pool2d)_.*|Ops/OpDb\.[^ ]*_cuda( .*)?|Dtypes/(Pool|Conv)ChannelsLast\.Gradcheck/.*|AmpTraining\..*|GPT\.TrainsOnRepeatedBytesInBf16Autocast|Throughput\..*)$'
    if [[ "${TC_TSAN_FULL:-0}" == 1 ]]; then skip='^$'; fi
    TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp second_deadlock_stack=1" \
      ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L unit -E "$skip" "$@"
    ;;
  test-torch)
    dir="${BUILD_DIR:-build-torch}"
    py="${TC_TORCH_PYTHON:-/var/cache/tensorcast-torchenv/bin/python}"
    if ! prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2> /dev/null); then
      echo "run.sh test-torch: $py cannot import torch; make a venv with 'python3 -m venv DIR &&" \
        "DIR/bin/pip install torch numpy' and set TC_TORCH_PYTHON=DIR/bin/python" >&2
      exit 1
    fi
    # The adapter links libtorch, not the core.
    cmake -S . -B "$dir" -G Ninja -DTC_TORCH=ON -DCMAKE_PREFIX_PATH="$prefix" -DTC_TORCH_PYTHON="$py" \
      -DTC_BUILD_BENCH=OFF > /dev/null
    # The adapter's targets; what `cmake --install` puts beside them for the installed torch
    # component's consumer test (the core, tc::dist, the command); the AMP recipes and their
    # libtorch port, which the label's tests compare with PyTorch's; tc_float8_codes, whose
    # 8-bit float casts one of them compares with PyTorch's.
    cmake --build "$dir" -j "$JOBS" --target tensorcast_torch test_torch_amp libtorch_amp tensorcast tensorcast_dist \
      tensorcast_cli amp_recipes amp_recipes_torch tc_float8_codes
    ctest --test-dir "$dir" --output-on-failure -L torch "$@"
    ;;
  *)
    echo "usage: ./run.sh [main|test|test-asan|test-tsan|test-torch|build|package|docs] [args...]" >&2
    exit 2
    ;;
esac
