#!/usr/bin/env bash
# Acceptance 2: a run resumed from a checkpoint written at step k gives bit-identical
# losses and final weights to an uninterrupted run (bf16, fp16 with its GradScaler state,
# bf16-pure with its Kahan compensation, and fp8 with delayed scaling's amax histories),
# across an epoch boundary.
source "$(dirname "$0")/lib.sh"
make_idx_dataset data 256 64   # 16 batches of 16 per epoch

# metrics without the wall-clock field
losses() { sed -E 's/, "seconds": [^,}]*//' "$@"; }

for spec in bf16 fp16 bf16-pure "fp8 --fp8-recipe delayed"; do
  read -r -a words <<< "$spec"  # the precision, then its own flags
  precision="${words[0]}"
  common=(--data data --model mlp --batch-size 16 --epochs 3 --precision "${words[@]}" --log-every 1 --no-progress)
  "$TC" train "${common[@]}" --max-steps 24 --metrics full.jsonl --checkpoint full > /dev/null
  "$TC" train "${common[@]}" --max-steps 10 --metrics a.jsonl --checkpoint part --checkpoint-every 4 > /dev/null
  # Resume from the step-8 checkpoint (checkpoint.prev) as well as the final one (step 10).
  cp -r part part8 && mv part8/checkpoint.prev.safetensors part8/checkpoint.safetensors
  "$TC" train --resume part --epochs 3 --log-every 1 --max-steps 24 --metrics b.jsonl --checkpoint part > resume.log
  grep -q "resumed from part at step 10" resume.log || { cat resume.log; fail "no resume message"; }
  "$TC" train --resume part8 --epochs 3 --log-every 1 --max-steps 24 --metrics c.jsonl --checkpoint part8 > /dev/null

  [ "$(losses full.jsonl | wc -l)" = 24 ] || fail "expected 24 metrics records"
  diff <(losses full.jsonl) <(losses a.jsonl b.jsonl) || fail "$precision: resumed losses (from step 10) differ"
  diff <(losses full.jsonl) <(losses a.jsonl | head -8; losses c.jsonl) || fail "$precision: resumed losses (from step 8) differ"
  cmp full/model.safetensors part/model.safetensors || fail "$precision: final weights differ (resumed at step 10)"
  cmp full/model.safetensors part8/model.safetensors || fail "$precision: final weights differ (resumed at step 8)"
  pass "$spec: resume at steps 8 and 10 of 24 is bit-identical (losses and model.safetensors)"
  rm -rf full part part8 ./*.jsonl
done
