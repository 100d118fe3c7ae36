#!/usr/bin/env bash
# Hostile checkpoints, absurd flags, a diverging run, leftovers of killed saves, empty data
# and files that are not files: each ends with one clear line and a non-zero exit, and
# nothing saved is lost. Damaged checkpoints are made from a good one with $EDIT.
source "$(dirname "$0")/lib.sh"
make_idx_dataset data 64 32

# ---- absurd flags (exit 2, or 1 where only the data tells)
expect_fail 2 "^tensorcast: --threads expects a positive integer up to 1024, got '65536'" -- "$TC" train --threads 65536
expect_fail 2 "^tensorcast: --threads expects a positive integer up to 1024, got '1000000000000'" -- \
  "$TC" train --threads 1000000000000
expect_fail 2 "^tensorcast: --threads expects a positive integer up to 1024, got '32768'" -- "$TC" bench --threads 32768
expect_fail 2 "^tensorcast: --on-nonfinite expects one of stop\|skip\|continue" -- "$TC" train --on-nonfinite ignore
expect_fail 1 "^tensorcast: error: \[cli\] --epochs 4611686018427387904 x 4 steps per epoch overflows a 64-bit step count" -- \
  "$TC" train --data data --model mlp --batch-size 16 --epochs 4611686018427387904

# ---- damaged checkpoints: refused with the key named, the run never starts
"$TC" train --data data --model mlp --batch-size 16 --max-steps 2 --checkpoint ck > /dev/null
damaged() {  # damaged DIR EDIT-FLAGS...: a copy of ck with the edits applied
  local dir="$1"; shift
  mkdir "$dir"
  "$EDIT" ck/checkpoint.safetensors "$dir/checkpoint.safetensors" "$@" || fail "could not craft $dir"
}
damaged seed0 --tensor loader.seed=I64:0:
expect_fail 1 "^tensorcast: error: \[cli\] --resume seed0 \(checkpoint.safetensors\): \[data\] state dict entry 'seed' should hold one value, got shape \(0,\)" -- \
  "$TC" train --resume seed0
"$TC" inspect seed0 | grep -q "step 2" || fail "inspect could not describe the damaged checkpoint"
damaged epochnan --tensor loader.epoch=F64::nan
expect_fail 1 "^tensorcast: error: \[cli\] --resume epochnan \(checkpoint.safetensors\): \[data\] state dict entry 'epoch' is nan, expected an integer" -- \
  "$TC" train --resume epochnan
damaged hugestep --meta step=9223372036854775807
expect_fail 1 "checkpoint step 9223372036854775807 does not match its data loader position \(epoch 0, batch 2 of 4\)" -- \
  timeout 60 "$TC" train --resume hugestep
damaged badbatch --meta batch_size=abc
expect_fail 1 "^tensorcast: error: \[cli\] --resume badbatch: checkpoint metadata 'batch_size' is \"abc\", expected an integer" -- \
  "$TC" train --resume badbatch
damaged badschedule --meta lr_schedule=linear
expect_fail 1 "^tensorcast: error: \[cli\] --resume badschedule: checkpoint metadata 'lr_schedule' is \"linear\", expected cosine or constant; the checkpoint is damaged" -- \
  "$TC" train --resume badschedule
damaged badmodel --meta model=resnet
expect_fail 1 "checkpoint metadata 'model' is \"resnet\", expected cnn, mlp, mlp-large or gpt" -- "$TC" train --resume badmodel
damaged hugeseed --meta seed=99999999999999999999999
expect_fail 1 "checkpoint metadata 'seed' is \"99999999999999999999999\", expected an integer" -- "$TC" train --resume hugeseed
damaged nansecs --meta train_seconds=nan
expect_fail 1 "checkpoint metadata 'train_seconds' is \"nan\", expected a finite non-negative number" -- \
  "$TC" train --resume nansecs
damaged optstep --tensor optim.state.0.step=F64::1e300
expect_fail 1 "^tensorcast: error: \[cli\] --resume optstep \(checkpoint.safetensors\): \[optim\] state dict entry 'state.0.step' is 1e\+300, expected an integer" -- \
  "$TC" train --resume optstep

# A GradScaler state with NaN / huge counters (an fp16 run's checkpoint).
"$TC" train --data data --model mlp --batch-size 16 --max-steps 2 --precision fp16 --checkpoint ck16 > /dev/null
mkdir scalernan && "$EDIT" ck16/checkpoint.safetensors scalernan/checkpoint.safetensors --tensor scaler.growth_interval=F64::nan
expect_fail 1 "^tensorcast: error: \[cli\] --resume scalernan \(checkpoint.safetensors\): \[GradScaler\] state dict entry 'growth_interval' is nan, expected an integer" -- \
  "$TC" train --resume scalernan
mkdir scalerhuge && "$EDIT" ck16/checkpoint.safetensors scalerhuge/checkpoint.safetensors --tensor scaler._growth_tracker=F64::1e19
expect_fail 1 "^tensorcast: error: \[cli\] --resume scalerhuge \(checkpoint.safetensors\): \[GradScaler\] state dict entry '_growth_tracker' is 1e\+19, expected an integer" -- \
  "$TC" train --resume scalerhuge

# ---- a diverging run without a scaler stops loudly; the last good checkpoint stays
expect_fail 1 "^tensorcast: error: \[train\] step 2: the loss is (nan|inf).*stopped before applying that step \(the last checkpoint in div is untouched\)" -- \
  "$TC" train --data data --model mlp --batch-size 16 --lr 1e30 --checkpoint div --checkpoint-every 1
"$TC" inspect div | grep -q "step 1 " || fail "the diverging run's checkpoint is not the step-1 one: $("$TC" inspect div | head -3)"
pass "diverging run kept the step-1 checkpoint"
"$TC" train --data data --model mlp --batch-size 16 --lr 1e30 --epochs 1 --on-nonfinite skip --summary-json skip.json > skip.out ||
  fail "--on-nonfinite skip failed"
[ "$(json_field skip.json skipped_steps)" = 3 ] || fail "--on-nonfinite skip: expected 3 of 4 steps skipped, got $(json_field skip.json skipped_steps)"
pass "--on-nonfinite skip dropped the 3 non-finite steps"
"$TC" train --data data --model mlp --batch-size 16 --lr 1e30 --epochs 1 --on-nonfinite continue > /dev/null ||
  fail "--on-nonfinite continue failed"
pass "--on-nonfinite continue trains on"

# ---- leftovers of killed saves go at the next save; live writers' and other files stay
sleep 0.1 & dead=$!; wait $dead  # a pid that no longer runs
cp ck/checkpoint.safetensors "ck/.checkpoint.safetensors.tmp-$dead-0-123"
cp ck/checkpoint.safetensors "ck/.model.safetensors.tmp-$dead-7-9"
touch "ck/.checkpoint.safetensors.tmp-$$-0-1" ck/notes.tmp-1-2-3 ck/.hidden.tmp-x
"$TC" train --resume ck --checkpoint ck --max-steps 3 > /dev/null
[ ! -e "ck/.checkpoint.safetensors.tmp-$dead-0-123" ] && [ ! -e "ck/.model.safetensors.tmp-$dead-7-9" ] ||
  fail "leftovers of a killed save were not removed: $(ls -a ck)"
[ -e "ck/.checkpoint.safetensors.tmp-$$-0-1" ] && [ -e ck/notes.tmp-1-2-3 ] && [ -e ck/.hidden.tmp-x ] ||
  fail "the next save removed files that were not a dead writer's: $(ls -a ck)"
pass "stale temporary files removed, others kept"

# ---- empty data, unwritable outputs, files that are not files
make_idx_dataset empty0 0 8
expect_fail 1 "^tensorcast: error: \[cli\] empty0: the training set has 0 examples" -- "$TC" train --data empty0 --model mlp
expect_fail 1 "^tensorcast: error: \[cli\] --summary-json /proc/tc-summary.json: cannot create files in /proc" -- \
  "$TC" train --data data --model mlp --summary-json /proc/tc-summary.json
mkfifo fifo
expect_fail 1 "^tensorcast: error: \[io\] cannot read fifo: it is a FIFO" -- timeout 20 "$TC" inspect fifo
cp -r data fifodata && rm fifodata/train-labels-idx1-ubyte && mkfifo fifodata/train-labels-idx1-ubyte
expect_fail 1 "^tensorcast: error: \[data\] cannot read fifodata/train-labels-idx1-ubyte: it is a FIFO" -- \
  timeout 20 "$TC" train --data fifodata --model mlp
mkfifo text.fifo
expect_fail 1 "^tensorcast: error: \[data\] cannot read text.fifo: it is a FIFO" -- timeout 20 "$TC" train --model gpt --data text.fifo
echo "all hostile cases pass"
