#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang-14, ASan + UBSan) in build-fuzz and runs each
# for SECONDS (default 30) on a copy of its seed corpus. Exit 1 when any target crashes,
# times out, leaks or runs out of memory: the target, its reproducer and the end of its
# log are printed. docs/fuzzing.md says what each target covers.
#   scripts/fuzz.sh [SECONDS]
# FUZZ_TARGETS (default: all), FUZZ_WORK (default build-fuzz/fuzz-run) and JOBS (build
# jobs, default: all cores) may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
case "$seconds" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;; esac
targets=(${FUZZ_TARGETS:-safetensors idx json text checkpoint cli tfevents})
work="${FUZZ_WORK:-build-fuzz/fuzz-run}"
JOBS="${JOBS:-$(nproc)}"
export CCACHE_BASEDIR="$PWD"

bash scripts/deps.sh fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_SHARED_LIBS=OFF \
  -DTC_FUZZ=ON -DTC_BUILD_TESTS=OFF -DTC_BUILD_BENCH=OFF -DTC_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-fuzz -j "$JOBS" --target "${targets[@]/#/fuzz_}"

# Leaks are reported (none come from oneDNN's or OpenMP's runtimes in these targets).
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"

failed=()
summary=()
for t in "${targets[@]}"; do
  dir="$work/$t"
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"  # the committed seeds stay as they are
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  echo "fuzz: $t for ${seconds}s"
  rc=0
  "build-fuzz/fuzz/fuzz_$t" "$dir/corpus" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$dir/" >"$dir/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log")
  last=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  reproducers=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'leak-*' -o -name 'oom-*' \) | sort)
  status=ok
  if [ "$rc" -ne 0 ] || [ -n "$reproducers" ]; then
    status="FAILED (exit $rc)"
    failed+=("$t")
    echo "fuzz: $t FAILED (exit $rc); log $dir/log"
    for r in $reproducers; do echo "fuzz: reproducer $r  (rerun: build-fuzz/fuzz/fuzz_$t $r)"; done
    tail -n 40 "$dir/log" | sed "s/^/  $t| /"
  fi
  summary+=("$(printf '%-12s %-18s execs %-10s exec/s %-7s cov %-6s ft %s' "$t" "$status" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}")")
done

echo
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
