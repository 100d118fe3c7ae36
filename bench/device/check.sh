#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU (H100/H200), build tensorcast with CUDA,
# run the unit and CUDA tests, and time the CUDA GEMM and the training steps against
# PyTorch's (eager and torch.compile). From the repository root:
#
#   bash bench/device/check.sh
#
# .carry/debs holds the Debian packages the build needs (scripts/device-carry.sh downloads
# them, on any Debian 12 machine with network, so that an offline GPU machine can get them
# with the tree); they are unpacked into /tmp/carry-root, never into /. docs/cuda.md,
# "Running the GPU check", says more. Without a GPU (how it is dry-run, on a bare Debian 12
# root) it still builds and runs the tests; the CUDA tests skip, the benchmarks do not run.
#
# Writes $OUT/check.md (the summary, also printed at the end), env.log, build.log, ctest.log
# and bench.log. Each stage has a time limit and the whole stays under CHECK_TIME_LIMIT_S
# (default 540 s); a failed stage is recorded and the next ones still run. Exit status 0
# only if every stage that ran succeeded.
# Environment: OUT (default /tmp/device-check), CHECK_TIME_LIMIT_S, CHECK_TIME_SCALE (an
# integer that multiplies every limit: a dry run on 2 cores builds ~8 times slower),
# CHECK_MODELS (the training benchmarks' models, default all five: mlp mlp-large cnn gpt
# gpt2-small), CHECK_TESTS=0 (no ctest: a second run, which finds the build folder of the
# first, spends its time on benchmarks alone), CHECK_MNIST=0 (no Fashion-MNIST accuracy
# run: the cnn, 5 epochs each in fp32, bf16 and fp16 with a GradScaler).
set -uo pipefail # no -e: a failed stage must not stop the later ones
cd "$(dirname "$0")/../.."

OUT=${OUT:-/tmp/device-check}
scale=${CHECK_TIME_SCALE:-1}
time_limit=$((${CHECK_TIME_LIMIT_S:-540} * scale))
build="build-device"
carry_root=/tmp/carry-root
models=${CHECK_MODELS:-mlp mlp-large cnn gpt gpt2-small}
work=/tmp/device-check-work # raw benchmark lines, kept out of $OUT (which holds only the report and logs)
mkdir -p "$OUT" "$work"
rm -f "$OUT"/{check.md,env.log,build.log,ctest.log,bench.log} "$work"/*
touch "$work/tc_gemm.txt" "$work/torch_gemm.txt" "$work/tc_train.txt" "$work/torch_train.txt" "$work/tc_mnist.txt"
t_start=$SECONDS

# The GPU machine's python3 (a venv holding PyTorch) may be the only place CMake and ninja are
# installed (pip packages): put its bin folder on PATH, and nvcc's.
py_bin=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null) && PATH=$PATH:$py_bin
[ -x /usr/local/cuda/bin/nvcc ] && PATH=$PATH:/usr/local/cuda/bin
export PATH PYTHONUNBUFFERED=1

# --- recording -------------------------------------------------------------------------
names=() results=() secs=() notes=()
record() { names+=("$1") results+=("$2") secs+=("$3") notes+=("$4"); }

# stage NAME LIMIT LOG CMD...: runs CMD with LIMIT seconds (times the scale, and no more than
# the total time limit leaves, less $reserve seconds kept for later stages), appending its output to
# LOG (and to $copy when set); records the result.
stage() {
  local name=$1 limit=$(($2 * scale)) log=$3
  shift 3
  local left=$((time_limit - (SECONDS - t_start) - 10 - ${reserve:-0} * scale)) # 10 s for the report
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    record "$name" skipped 0 "no time left of the ${time_limit} s limit"
    return 1
  fi
  echo "== $name (limit ${limit} s): $*" >>"$log"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log" ${copy:+"$copy"} >/dev/null
  rc=${PIPESTATUS[0]}
  local took=$((SECONDS - t0))
  echo "== $name: exit $rc after $took s" >>"$log"
  if [ "$rc" -eq 0 ]; then
    record "$name" ok "$took" "${note:-}"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    record "$name" "TIMED OUT" "$took" "limit ${limit} s; $(basename "$log")"
  else
    record "$name" FAILED "$took" "exit $rc; $(basename "$log")"
  fi
  echo "check: $name: ${results[-1]} (${took} s)"
  report
  [ "$rc" -eq 0 ]
}

# --- the report (rewritten after every stage, so a run cut short still leaves one) -------
gemm_table() { # the benchmark lines of both, joined on dtype (either spelling) and shape
  awk -v tc_file="$work/tc_gemm.txt" '
       function short(d) { return d == "bfloat16" ? "bf16" : d ~ /^(float16|f16|half)$/ ? "fp16" : d ~ /^(float32|f32|float)$/ ? "fp32" : d }
       $1 == "gemm" && NF == 6 {
         key = short($2) " " $3 " " $4 " " $5
         if (FILENAME == tc_file) tc[key] = $6; else torch[key] = $6
         if (!(key in seen)) { seen[key] = 1; all[++m] = key } }
       END {
         print "| shape (M x N x K) | dtype | tensorcast TFLOP/s | torch TFLOP/s | ratio |"
         print "| --- | --- | ---: | ---: | ---: |"
         for (i = 1; i <= m; i++) {
           split(all[i], f, " ")
           t = (all[i] in tc) ? tc[all[i]] : "-"; p = (all[i] in torch) ? torch[all[i]] : "-"
           r = (t != "-" && p != "-" && p > 0) ? sprintf("%.2f", t / p) : "-"
           printf "| %s x %s x %s | %s | %s | %s | %s |\n", f[2], f[3], f[4], f[1], t, p, r } }' \
    "$work/tc_gemm.txt" "$work/torch_gemm.txt"
}

train_table() { # KIND (train or infer): bench_cuda_train's lines beside torch_train.py's (eager and compile)
  awk -v kind="$1" -v tc_file="$work/tc_train.txt" '
       $1 == kind && NF >= 5 {
         key = $2 " " $3 " " $4
         if (FILENAME == tc_file) { tc[key] = $5; tcm[key] = $6 }
         else if ($7 == "compile") comp[key] = $5
         else { eager[key] = $5; em[key] = $6 }
         if (!(key in seen)) { seen[key] = 1; all[++m] = key } }
       function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
       END {
         mem = kind == "train"
         printf "| model | precision | batch | tensorcast ms | torch eager ms | torch.compile ms | tc / eager | tc / compile |%s\n", mem ? " peak MiB tc | peak MiB torch |" : ""
         printf "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |%s\n", mem ? " ---: | ---: |" : ""
         for (i = 1; i <= m; i++) {
           k = all[i]; split(k, f, " ")
           printf "| %s | %s | %s | %s | %s | %s | %s | %s |", f[1], f[2], f[3],
             (k in tc) ? tc[k] : "-", (k in eager) ? eager[k] : "-", (k in comp) ? comp[k] : "-",
             ratio(tc[k], eager[k]), ratio(tc[k], comp[k])
           if (mem) printf " %s | %s |", (k in tcm) ? tcm[k] : "-", (k in em) ? em[k] : "-"
           printf "\n" } }' \
    "$work/tc_train.txt" "$work/torch_train.txt"
  if [ "$1" = train ] && grep -q '^mfu ' "$work/tc_train.txt"; then
    echo
    echo "Model FLOPs utilization of tensorcast's step (llm.c's count, over the bf16 dense peak of 990 TFLOP/s, for every precision):"
    echo
    awk '$1 == "mfu" { printf "- %s %s: %s%%\n", $2, $3, $4 }' "$work/tc_train.txt"
  fi
  if [ "$1" = train ] && grep -q '^# ' "$work/tc_train.txt" "$work/torch_train.txt"; then
    echo
    grep -h '^# ' "$work/tc_train.txt" "$work/torch_train.txt" | sed 's/^# /- failed: /'
  fi
}

ctest_summary() {
  local log=$OUT/ctest.log
  [ -s "$log" ] || return 0
  grep -E 'tests passed|Total Test time' "$log"
  echo "skipped: $(grep -c '\*\*\*Skipped' "$log")"
  # Whether the CUDA tests ran or skipped, at a glance: those with cuda in their name.
  awk '$2 == "Test" && tolower($4) ~ /cuda/ {
         r = $0; sub(/.*\.\.\.+ */, "", r); sub(/\*\*\*/, "", r); split(r, w, " "); n[w[1]]++ }
       END { s = ""; for (k in n) s = s sprintf(" %s %d", k, n[k]); if (s != "") print "tests named *cuda*:" s }' "$log"
  sed -n '/^Label Time Summary:/,/^$/p' "$log" | sed '/^$/d'
  if grep -q 'The following tests FAILED' "$log"; then
    sed -n '/The following tests FAILED/,$p' "$log" | grep -E '^\s+[0-9]+ - ' | head -40
  fi
}

report() {
  {
    echo "# Device check, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "$machine"
    echo
    echo "| stage | result | seconds | note |"
    echo "| --- | --- | ---: | --- |"
    for i in "${!names[@]}"; do
      echo "| ${names[$i]} | ${results[$i]} | ${secs[$i]} | ${notes[$i]} |"
    done
    echo "| total | | $((SECONDS - t_start)) | limit ${time_limit} s |"
    if [ -s "$work/tc_gemm.txt" ] || [ -s "$work/torch_gemm.txt" ]; then
      echo
      echo "## GEMM: C = A B, median of 10 after 3 warm-ups (bench.log)"
      echo
      gemm_table
    fi
    if [ -s "$work/tc_train.txt" ] || [ -s "$work/torch_train.txt" ]; then
      echo
      echo "## Training step: AdamW, cross_entropy, mean of 30 steps after 5 warm-ups (gpt2-small: 10 after 3) (bench.log)"
      echo
      train_table train
      echo
      echo "## Inference: forward only, eval mode, no autograd (bench.log)"
      echo
      train_table infer
    fi
    if grep -q '^accuracy ' "$work/tc_mnist.txt"; then
      echo
      echo "## Fashion-MNIST: the cnn trained on the GPU, batch 128, AdamW 1e-3 with cosine decay (bench.log)"
      echo
      echo "| precision | epochs | test accuracy % | seconds |"
      echo "| --- | ---: | ---: | ---: |"
      awk '$1 == "accuracy" { printf "| %s | %s | %s | %s |\n", $3, $4, $5, $6 }' "$work/tc_mnist.txt"
    fi
    if [ -s "$OUT/ctest.log" ]; then
      echo
      echo "## Tests: ctest -R '[Cc]uda' (ctest.log): test_cuda, test_cuda_training and the op table's CUDA cases"
      echo
      echo '```'
      ctest_summary
      echo '```'
    fi
  } >"$OUT/check.md"
}

# --- the machine -------------------------------------------------------------------------
gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
# version PATTERN CMD...: the first version number on CMD's line that matches PATTERN
version() {
  local p=$1 v
  shift
  v=$("$@" 2>/dev/null | grep -m1 -E "$p" | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -1)
  echo "${v:-none}"
}
machine="Machine: ${gpu:-no GPU (nvidia-smi missing or failing): CUDA tests skip, benchmarks do not run}; \
$(nproc) cores; nvcc $(version release nvcc --version); gcc $(version . gcc -dumpfullversion); \
cmake $(version . cmake --version); ninja $(version . ninja --version); \
torch $(version . timeout 60 python3 -c 'import torch; print(torch.__version__)'); \
tree $(git rev-parse --short HEAD 2>/dev/null || echo '(no git)')"
{
  echo "$machine"
  echo
  timeout 30 nvidia-smi 2>&1
  nvcc --version 2>&1
  gcc --version 2>&1 | head -1
  cmake --version 2>&1 | head -1
  echo "ninja $(ninja --version 2>&1)"
  grep PRETTY_NAME /etc/os-release
  free -g
  ls -l .carry/debs 2>&1
} >"$OUT/env.log" 2>&1
echo "check: $machine"

# --- unpack the carried packages -----------------------------------------------------------
# shellcheck disable=SC2317 # run by `bash -c unpack` under the stage's time limit
unpack() {
  set -e
  ls .carry/debs/*.deb >/dev/null 2>&1 ||
    { echo "no .carry/debs/*.deb: run 'sudo bash scripts/device-carry.sh' and copy .carry with the tree"; exit 1; }
  rm -rf "$carry_root" && mkdir -p "$carry_root"
  for deb in .carry/debs/*.deb; do
    echo "$deb"
    dpkg -x "$deb" "$carry_root"
  done
  # Some links are absolute (zlib1g-dev's libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13):
  # point them into the carry root, not at the machine's own files.
  find "$carry_root" -type l -lname '/*' | while read -r link; do
    ln -sfn "$carry_root$(readlink "$link")" "$link"
    echo "relinked $link -> $(readlink "$link")"
  done
}
export -f unpack
export carry_root
note="$(ls .carry/debs/*.deb 2>/dev/null | wc -l) packages" stage unpack 60 "$OUT/build.log" bash -c unpack

# oneDNN, OpenCL and Google Benchmark are shared libraries from the carry (and cuDNN may be
# PyTorch's, below): the build runs the tests (gtest_discover_tests) and ctest runs them,
# so both need them on the path. Not exported to PyTorch's stage: its own libraries must
# not meet the carried ones.
carry_libs=$carry_root/usr/lib/x86_64-linux-gnu

# cuDNN (conv2d on CUDA tensors): the toolkit's when /usr/local/cuda has it, else the pip
# package nvidia-cudnn-cu13's (PyTorch's; its lib/ may hold only libcudnn.so.9, which
# cmake/cuda.cmake finds). cuDNN loads its sub-libraries (libcudnn_cnn.so.9, ...) by name,
# so that lib/ goes on the library path of everything that runs tensorcast. Neither: the
# build goes without cuDNN and the conv2d CUDA tests skip.
cudnn_args=() cudnn_lib=""
if [ ! -f /usr/local/cuda/include/cudnn.h ]; then
  cudnn_root=$(timeout 60 python3 -c 'import nvidia.cudnn as m, os
print(os.path.dirname(m.__file__) if getattr(m, "__file__", None) else list(m.__path__)[0])' 2>/dev/null)
  if [ -n "$cudnn_root" ] && [ -f "$cudnn_root/include/cudnn.h" ]; then
    cudnn_args=(-DTC_CUDNN_ROOT="$cudnn_root")
    cudnn_lib=$cudnn_root/lib
  fi
fi
cudnn_note="cuDNN: ${cudnn_root:-/usr/local/cuda}"
[ -f /usr/local/cuda/include/cudnn.h ] || [ -n "$cudnn_lib" ] || cudnn_note="no cuDNN found: conv2d CUDA tests skip"
echo "$cudnn_note" >>"$OUT/env.log"
carry_libs=$carry_libs${cudnn_lib:+:$cudnn_lib}

# --- configure and build -----------------------------------------------------------------
# CUDA for Hopper (sm_90) only: the fastest build for the one GPU it runs on. No MPI on that
# machine (TC_DIST=OFF); no examples (they want the dataset and add build time).
note=$cudnn_note stage configure 90 "$OUT/build.log" env LD_LIBRARY_PATH="$carry_libs" \
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTC_CUDA=ON -DTC_DIST=OFF \
  -DTC_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$carry_root/usr" "${cudnn_args[@]}"
# Only what runs here: the CUDA tests and the benchmarks (CI runs the CPU suite of the
# same build); -k 0: past a file that fails to compile, so what did build still runs.
stage build 300 "$OUT/build.log" env LD_LIBRARY_PATH="$carry_libs" \
  cmake --build "$build" -j "$(nproc)" --target test_cuda test_cuda_training test_op_db bench_cuda_gemm bench_cuda_train -- -k 0

# --- tests ---------------------------------------------------------------------------------
# 8 tests at a time with 2 OpenMP threads each: CI's 2-core machine runs the CPU tests on
# 2 threads, and 8 processes x 2 threads stay within the 16 cores.
# With a GPU, 200 s are kept for the benchmarks: a slow test run must not crowd them out.
jobs=$(($(nproc) < 8 ? $(nproc) : 8))
if [ "${CHECK_TESTS:-1}" = 0 ]; then
  record ctest skipped 0 "CHECK_TESTS=0"
else
reserve=$([ -n "$gpu" ] && echo 200 || echo 0) stage ctest 180 "$OUT/ctest.log" env LD_LIBRARY_PATH="$carry_libs" OMP_NUM_THREADS=2 \
  ctest --test-dir "$build" -R '[Cc]uda' -j "$jobs" --timeout 120 --output-on-failure --no-tests=error
fi

# --- benchmarks (GPU only) -----------------------------------------------------------------
if [ -z "$gpu" ]; then
  record benchmarks skipped 0 "no GPU"
elif [ ! -x "$build/bench/bench_cuda_gemm" ]; then
  record bench_cuda_gemm skipped 0 "$build/bench/bench_cuda_gemm was not built"
else
  copy=$work/tc_gemm.txt stage bench_cuda_gemm 30 "$OUT/bench.log" \
    env LD_LIBRARY_PATH="$carry_libs" "$build/bench/bench_cuda_gemm"
fi
if [ -n "$gpu" ]; then
  copy=$work/torch_gemm.txt stage torch_gemm 30 "$OUT/bench.log" python3 bench/device/torch_gemm.py
  if [ -x "$build/bench/bench_cuda_train" ]; then
    # shellcheck disable=SC2086 # the model list splits into words
    copy=$work/tc_train.txt stage bench_cuda_train 90 "$OUT/bench.log" \
      env LD_LIBRARY_PATH="$carry_libs" "$build/bench/bench_cuda_train" $models
  fi
  # shellcheck disable=SC2086
  copy=$work/torch_train.txt stage torch_train 150 "$OUT/bench.log" python3 bench/device/torch_train.py $models
  mnist=$carry_root/usr/share/datasets/fashion-mnist
  if [ "${CHECK_MNIST:-1}" = 0 ]; then
    record fashion_mnist skipped 0 "CHECK_MNIST=0"
  elif [ ! -d "$mnist" ]; then
    record fashion_mnist skipped 0 "no $mnist (scripts/device-carry.sh brings dataset-fashion-mnist)"
  elif [ -x "$build/bench/bench_cuda_train" ]; then
    copy=$work/tc_mnist.txt stage fashion_mnist 120 "$OUT/bench.log" \
      env LD_LIBRARY_PATH="$carry_libs" "$build/bench/bench_cuda_train" --fashion-mnist "$mnist" --epochs 5
  fi
fi

report
echo
cat "$OUT/check.md"
for r in "${results[@]}"; do
  case $r in ok | skipped) ;; *) exit 1 ;; esac
done
exit 0
