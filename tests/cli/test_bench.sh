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
