#!/usr/bin/env bash
# Training end to end on small data: the loss falls (mlp on a tiny IDX set, gpt on a text
# file in bf16: acceptance 5), the metrics and summary files hold the documented fields,
# inspect reads the checkpoint, and report writes its Markdown and plots.
source "$(dirname "$0")/lib.sh"
make_idx_dataset data 512 128

# ---- mlp: metrics + summary
"$TC" train --data data --model mlp --batch-size 32 --epochs 2 --precision bf16 --log-every 1 \
  --metrics m.jsonl --summary-json s.json --checkpoint ck > train.log
grep -q "epoch 2 " train.log || { cat train.log; fail "no epoch 2 line"; }
[ "$(wc -l < m.jsonl)" = 32 ] || fail "expected 32 metrics records, got $(wc -l < m.jsonl)"
for key in step epoch loss loss_scale skipped lr seconds; do
  grep -q "\"$key\": " <(head -1 m.jsonl) || fail "metrics record without $key"
done
for key in model precision epochs steps skipped_steps final_loss_scale test_accuracy train_seconds peak_memory_bytes; do
  grep -q "\"$key\": " s.json || fail "summary without $key: $(cat s.json)"
done
[ "$(json_field s.json steps)" = 32 ] || fail "summary steps $(json_field s.json steps)"
[ "$(json_field s.json epochs)" = 2 ] || fail "summary epochs"
pass "mlp metrics and summary"

# ---- bf16-pure: weights + AdamW state take 8 bytes per parameter against fp32's 12 (4 + m, v);
# the numerics report and the TensorBoard file come out
"$TC" train --data data --model mlp --batch-size 32 --epochs 1 --precision bf16-pure --numerics-json nr.json \
  --numerics-every 2 --tensorboard tb --summary-json p.json > pure.log
n=$(json_field s.json parameters)
[ "$(json_field s.json weight_state_bytes)" = $((12 * n)) ] || fail "fp32 weights + state: $(json_field s.json weight_state_bytes), expected $((12 * n))"
[ "$(json_field p.json weight_state_bytes)" = $((8 * n)) ] || fail "bf16-pure weights + state: $(json_field p.json weight_state_bytes), expected $((8 * n))"
[ "$(json_field p.json weight_update)" = '"kahan"' ] || fail "bf16-pure summary: weight_update $(json_field p.json weight_update)"
grep -q "numerics report (gradients against fp16's range)" pure.log || fail "no numerics table: $(cat pure.log)"
for key in '"name": "1.weight", "kind": "param_grad"' '"name": "1 Linear", "kind": "output_grad"' bf16_update_lost fp16_subnormal overflow_steps; do
  grep -q "$key" nr.json || fail "numerics JSON without $key: $(cat nr.json)"
done
ls tb/events.out.tfevents.* > /dev/null || fail "no TensorBoard event file in tb/"
pass "bf16-pure memory, numerics report, TensorBoard file"

# ---- fp8: the numerics report and TensorBoard hold per linear layer and quantized tensor the
# amax, the scale (one per tensor or a range) and the shares saturated and flushed to zero
for recipe in tensorwise mxfp8; do
  "$TC" train --data data --model mlp --batch-size 32 --max-steps 4 --precision fp8 --fp8-recipe $recipe \
    --numerics-every 2 --numerics-json n8-$recipe.json --log-every 2 --tensorboard tb8-$recipe > fp8-$recipe.log
  grep -q "^fp8 layer  *tensor  *amax  *scale  *satur%  *flush%" fp8-$recipe.log || fail "no fp8 table: $(cat fp8-$recipe.log)"
  for key in '"layer": "1", "tensor": "input", "quantizations": 2' '"layer": "5", "tensor": "grad_output"' \
    '"scale_min": ' '"saturated": ' '"flushed": '; do
    grep -q "$key" n8-$recipe.json || fail "$recipe numerics JSON without $key: $(cat n8-$recipe.json)"
  done
  scale_tags="fp8_scale/1.weight"
  [ $recipe = mxfp8 ] && scale_tags="fp8_scale_min/1.weight fp8_scale_max/1.weight"
  for tag in fp8_amax/3.input fp8_saturated/5.grad_output fp8_flushed/1.weight $scale_tags; do
    grep -aq "$tag" tb8-$recipe/events.out.tfevents.* || fail "$recipe TensorBoard file without $tag"
  done
done
pass "fp8 statistics in the numerics report and TensorBoard"

# ---- inspect
"$TC" inspect ck > inspect.txt
grep -q "0.weight\|1.weight" inspect.txt || { cat inspect.txt; fail "inspect lists no weights"; }
grep -qi "step" inspect.txt || fail "inspect shows no step"
"$TC" inspect ck/model.safetensors | grep -q "F32" || fail "inspect model.safetensors"
pass "inspect"

# ---- gpt in bf16: the loss falls
python_free_text() {  # ~24 KB of English-like text, no dependencies
  local i
  for ((i = 0; i < 300; i++)); do
    echo "The quick brown fox jumps over the lazy dog; mixed precision keeps master weights in fp32 ($i)."
  done
}
python_free_text > text.txt
"$TC" train --model gpt --data text.txt --precision bf16 --batch-size 8 --max-steps 12 --epochs 5 --log-every 1 \
  --metrics g.jsonl --summary-json gs.json > gpt.log
first=$(head -3 g.jsonl | sed -E 's/.*"loss": ([^,]*).*/\1/' | awk '{ s += $1 } END { print s / NR }')
last=$(tail -3 g.jsonl | sed -E 's/.*"loss": ([^,]*).*/\1/' | awk '{ s += $1 } END { print s / NR }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "gpt loss did not fall: $first -> $last"
grep -q '"test_bits_per_byte": ' gs.json || fail "gpt summary without bits per byte"
pass "gpt bf16 loss falls: $first -> $last"

# ---- report on the tiny set
"$TC" report --data data --model mlp --max-steps 6 --batch-size 32 --bench-steps 2 --out rep > report.log 2> /dev/null
for f in report.md loss.svg loss_scale.svg zero_grads.svg step_time.svg memory.svg accuracy.svg; do
  [ -s "rep/$f" ] || fail "report did not write $f"
done
grep -q "without a GradScaler: what happened" rep/report.md || fail "report says nothing on fp16 without a scaler"
grep -q "Where fp16 without a scaler fails: a smaller loss" rep/report.md || fail "report has no smaller-loss section"
grep -q "| output of 1 Linear |" rep/report.md || fail "report has no per-layer numerics table"
grep -q "<polyline" rep/loss.svg || fail "loss.svg has no curve"
pass "report"
