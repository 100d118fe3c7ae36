#!/usr/bin/env bash
# tensorcast plan: a step's memory planned on the meta device against the same step's peak
# measured on the CPU (the allocator's count of the bytes the ops ask for), for every model
# of the zoo in every precision, training and inference; the memory-budget search; usage errors.
source "$(dirname "$0")/lib.sh"

# |plan / measured - 1| <= 5% (awk: floating point).
within_5_percent() { awk -v p="$1" -v m="$2" 'BEGIN { r = p / m - 1; if (r < 0) r = -r; exit !(m > 0 && r <= 0.05) }'; }

for model in cnn mlp mlp-large gpt; do
  for mode in "" --inference; do
    "$TC" plan --model "$model" --batch-size 8 --measure --threads 2 --json $mode > p.json 2> /dev/null
    # One object per precision: split the "plans" list on its objects' closing braces.
    for precision in fp32 bf16 fp16; do
      obj=$(grep -o "{\"precision\": \"$precision\"[^}]*}" p.json) || fail "plan $model $mode: no $precision in $(cat p.json)"
      echo "$obj" > one.json
      plan=$(json_field one.json peak_memory_bytes)
      measured=$(json_field one.json measured_peak_memory_bytes)
      within_5_percent "$plan" "$measured" || fail "plan $model $precision ${mode:-training}: planned $plan bytes, measured $measured"
      for key in weights_bytes optimizer_state_bytes gradient_bytes batch_bytes activation_bytes; do
        v=$(json_field one.json "$key")
        [ "$v" -ge 0 ] 2> /dev/null || fail "plan $model $precision: $key is '$v'"
      done
      pass "plan $model $precision ${mode:-training}: planned $plan bytes, measured $measured"
    done
  done
done

# Half the activations: bf16's planned peak for the gpt at a large batch is below fp32's.
"$TC" plan --model gpt --batch-size 32 --precision fp32,bf16 --json > g.json
fp32=$(grep -o '{"precision": "fp32"[^}]*}' g.json | sed -E 's/.*"peak_memory_bytes": ([0-9]+).*/\1/')
bf16=$(grep -o '{"precision": "bf16"[^}]*}' g.json | sed -E 's/.*"peak_memory_bytes": ([0-9]+).*/\1/')
[ "$bf16" -lt "$fp32" ] || fail "gpt bf16 planned $bf16 bytes, not below fp32's $fp32"
pass "gpt at batch 32: bf16 plans $bf16 bytes, fp32 $fp32"

# The text table names every line of the breakdown.
"$TC" plan --model mlp --precision bf16 > t.txt
for line in "weights" "optimizer state" "the batch" "activations" "peak"; do
  grep -q "$line" t.txt || fail "text output lacks '$line': $(cat t.txt)"
done
pass "text output"

# --memory-budget: the largest batch whose planned peak fits; the next one does not.
"$TC" plan --model cnn --precision bf16 --memory-budget 32 --json > m.json
max=$(json_field m.json max_batch_size)
peak=$(json_field m.json peak_memory_bytes)
over=$(json_field m.json over_peak_memory_bytes)
[ "$max" -gt 0 ] && [ "$peak" -le $((32 * 1048576)) ] && [ "$over" -gt $((32 * 1048576)) ] ||
  fail "memory budget: batch $max peak $peak over $over in $(cat m.json)"
pass "memory budget 32 MiB, cnn bf16: batch $max (peak $peak, the next batch needs $over)"

expect_fail 2 "--precision expects a comma-separated list" -- "$TC" plan --precision fp8
expect_fail 2 "does not combine with --batch-size" -- "$TC" plan --memory-budget 64 --batch-size 8
expect_fail 2 "--memory-budget expects a comma-separated list of positive MiB" -- "$TC" plan --memory-budget 0
expect_fail 2 "--max-batch-size only applies" -- "$TC" plan --max-batch-size 8
expect_fail 1 "--vocab applies to gpt only" -- "$TC" plan --model mlp-large --vocab 1000
