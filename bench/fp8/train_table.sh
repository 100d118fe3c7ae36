#!/usr/bin/env bash
# The fp8 training table of docs/amp.md (FP8 training, Measured): each model trained in bf16
# and with each fp8 recipe from the same seed and batches, then the mean training loss of the
# last 20 steps, the test metric, the peak tensor memory and the median step time.
#
#   bench/fp8/train_table.sh [BUILD_DIR] [GPT_STEPS] [MLP_EPOCHS] [MODELS]
#
# Defaults: build, 150 gpt steps (batch 16), 2 mlp epochs, "mlp gpt" (about 25 minutes on 2
# cores).
set -euo pipefail
build="${1:-build}"
gpt_steps="${2:-150}"
mlp_epochs="${3:-2}"
models="${4:-mlp gpt}"
tc="$build/apps/tensorcast/tensorcast"
[ -x "$tc" ] || { echo "train_table.sh: $tc not found; build first (./run.sh build)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The mean of the last 20 "loss" values of a --metrics file.
tail_loss() { sed -nE 's/.*"loss": ([-0-9.e+]+).*/\1/p' "$1" | tail -n 20 | awk '{s += $1} END {printf "%.4f", s / NR}'; }
field() { sed -nE "s/.*\"$2\": ([-0-9.e+]+|null).*/\1/p" "$1"; }

run() {  # model label flags...
  local model="$1" label="$2"
  shift 2
  local out="$work/$model-$label"
  "$tc" train --model "$model" --no-progress --log-every 1 --metrics "$out.jsonl" --summary-json "$out.json" "$@" \
    > "$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
  local metric
  if [ "$model" = gpt ]; then
    metric="$(awk -v b="$(field "$out.json" test_bits_per_byte)" 'BEGIN {printf "%.4f bits/byte", b}')"
  else
    metric="$(awk -v a="$(field "$out.json" test_accuracy)" 'BEGIN {printf "%.2f%%", 100 * a}')"
  fi
  printf "| %s | %s | %s | %s | %s | %.1f | %.1f |\n" "$model" "$label" "$(field "$out.json" steps)" \
    "$(tail_loss "$out.jsonl")" "$metric" \
    "$(awk -v b="$(field "$out.json" peak_memory_bytes)" 'BEGIN {print b / 1048576}')" \
    "$(field "$out.json" median_step_ms)"
}

echo "| model | precision | steps | train loss (last 20 steps) | test | peak MiB | median ms/step |"
echo "|---|---|---|---|---|---|---|"
for model in $models; do
  if [ "$model" = gpt ]; then
    length=(--max-steps "$gpt_steps" --epochs 100 --batch-size 16)  # 16 sequences of 128 bytes, as bench's gpt
  else
    length=(--epochs "$mlp_epochs")
  fi
  run "$model" bf16 --precision bf16 "${length[@]}"
  for recipe in tensorwise delayed rowwise mxfp8; do
    run "$model" "fp8 $recipe" --precision fp8 --fp8-recipe "$recipe" "${length[@]}"
  done
done
