#!/usr/bin/env bash
# Acceptance 5 (bench part): every model runs in every precision, training and inference,
# and prints the documented JSON fields.
source "$(dirname "$0")/lib.sh"
for model in cnn mlp mlp-large gpt; do
  for precision in fp32 bf16 fp16; do
    for mode in "" --inference; do
      "$TC" bench --model "$model" --precision "$precision" --batch-size 2 --steps 2 --warmup 1 --json $mode > b.json 2> /dev/null
      for key in model precision batch_size inference ms_per_step peak_memory_bytes; do
        grep -q "\"$key\": " b.json || fail "bench $model $precision $mode: no $key in $(cat b.json)"
      done
      [ "$(json_field b.json model)" = "\"$model\"" ] || fail "bench $model: model field $(json_field b.json model)"
      [ "$(json_field b.json precision)" = "\"$precision\"" ] || fail "bench $model $precision: precision field"
      ms=$(json_field b.json ms_per_step)
      awk -v v="$ms" 'BEGIN { exit !(v > 0) }' || fail "bench $model $precision: ms_per_step $ms"
      pass "bench $model $precision ${mode:-training}: $ms ms"
    done
  done
done
"$TC" bench --model mlp --precision bf16 --batch-size 8 --steps 2 | grep -Eq "ms per step \(median of 2" || fail "text output"
pass "text output"

# --memory-budget: the largest batch whose step's peak tensor memory fits. The counter is
# exact, so the search is deterministic: the reported peak is within the budget and the next
# batch size (the bisection's upper end) is over it; bf16 fits at least as large a batch as fp32.
budget_mib=32
budget=$((budget_mib * 1048576))
for precision in fp32 bf16; do
  "$TC" bench --model cnn --precision "$precision" --memory-budget "$budget_mib" --threads 2 --json > m_$precision.json 2> /dev/null
  for key in memory_budget_bytes max_batch_size peak_memory_bytes over_batch_size over_peak_memory_bytes probes; do
    grep -q "\"$key\": " m_$precision.json || fail "memory budget $precision: no $key in $(cat m_$precision.json)"
  done
  [ "$(json_field m_$precision.json memory_budget_bytes)" = "$budget" ] || fail "memory budget $precision: budget field"
  max=$(json_field m_$precision.json max_batch_size)
  peak=$(json_field m_$precision.json peak_memory_bytes)
  over=$(json_field m_$precision.json over_batch_size)
  over_peak=$(json_field m_$precision.json over_peak_memory_bytes)
  [ "$max" -ge 16 ] || fail "memory budget $precision: max batch $max"
  [ "$peak" -le "$budget" ] || fail "memory budget $precision: peak $peak > budget $budget"
  [ "$over" = $((max + 1)) ] || fail "memory budget $precision: over_batch_size $over, max $max"
  [ "$over_peak" -gt "$budget" ] || fail "memory budget $precision: batch $over needs $over_peak <= budget"
  pass "memory budget $budget_mib MiB, cnn $precision: max batch $max (peak $peak, batch $over needs $over_peak)"
done
max32=$(json_field m_fp32.json max_batch_size)
max16=$(json_field m_bf16.json max_batch_size)
[ "$max16" -ge "$max32" ] || fail "memory budget: bf16 max batch $max16 < fp32 $max32"
pass "memory budget: bf16 $max16 >= fp32 $max32"
# The same batch in a plain bench has the same peak (probes measure what bench measures).
"$TC" bench --model cnn --precision bf16 --batch-size "$max16" --steps 1 --warmup 1 --threads 2 --json > same.json 2> /dev/null
[ "$(json_field same.json peak_memory_bytes)" = "$(json_field m_bf16.json peak_memory_bytes)" ] ||
  fail "memory budget: bench at batch $max16 peaks at $(json_field same.json peak_memory_bytes), the probe said $(json_field m_bf16.json peak_memory_bytes)"
pass "memory budget peak = bench peak at batch $max16"
"$TC" bench --model mlp --precision bf16 --memory-budget 64 --max-batch-size 4 | grep -Eq "largest batch size within 64.0 MiB .*: 4 .*cap 4 fits" ||
  fail "memory budget: text output / cap"
pass "memory budget text output and --max-batch-size cap"
"$TC" bench --model mlp --memory-budget 0.001 --json > tiny.json 2> /dev/null
[ "$(json_field tiny.json max_batch_size)" = 0 ] || fail "memory budget below batch 1: $(cat tiny.json)"
pass "memory budget below batch 1's peak -> max_batch_size 0"
expect_fail 2 "--batch-size does not apply with --memory-budget" -- "$TC" bench --memory-budget 64 --batch-size 8
expect_fail 2 "--max-batch-size only applies with --memory-budget" -- "$TC" bench --max-batch-size 8
expect_fail 2 "--memory-budget expects a positive number" -- "$TC" bench --memory-budget 0
# The 16-bit GEMM kernel is reported, follows TC_CPU_GEMM16, and a bad value is an error.
for mode in native float32; do
  TC_CPU_GEMM16=$mode "$TC" bench --model mlp --precision bf16 --steps 1 --warmup 0 --json > g_$mode.json 2> /dev/null
  got=$(json_field g_$mode.json gemm16)
  # without a native bf16 GEMM on this CPU every product widens
  [ "$got" = "\"$mode\"" ] || [ "$got" = '"float32"' ] || fail "TC_CPU_GEMM16=$mode: bench says gemm16 $got"
  pass "TC_CPU_GEMM16=$mode -> gemm16 $got"
done
"$TC" bench --model mlp --precision fp32 --steps 1 --warmup 0 --json | grep -q '"gemm16"' && fail "fp32 bench reports a gemm16 kernel"
pass "fp32 bench reports no 16-bit kernel"
TC_CPU_GEMM16=fast expect_fail 1 "\[TC_CPU_GEMM16\] expected auto, native or float32, got 'fast'" -- \
  "$TC" bench --model mlp --precision bf16 --steps 1
