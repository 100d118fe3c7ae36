#!/usr/bin/env bash
# Bad flags, missing/wrong/corrupt data and bad checkpoints: ONE clear line on stderr,
# a non-zero exit (2 usage, 1 runtime), and nothing overwritten.
source "$(dirname "$0")/lib.sh"

# ---- flags (exit 2)
expect_fail 2 "^tensorcast: --epochs expects a positive integer, got 'x'" -- "$TC" train --epochs x
expect_fail 2 "^tensorcast: --epochs expects a positive integer, got '0'" -- "$TC" train --epochs 0
expect_fail 2 "^tensorcast: --lr expects a positive number, got '1e-3x'" -- "$TC" train --lr 1e-3x
expect_fail 2 "^tensorcast: --epochs expects a value" -- "$TC" train --epochs
expect_fail 2 "^tensorcast: unknown flag --epoch for 'train'.*--help" -- "$TC" train --epoch 3
expect_fail 2 "^tensorcast: --precision expects one of auto\|fp32\|bf16\|fp16\|bf16-pure\|fp8, got 'fp4'" -- "$TC" train --precision fp4
expect_fail 2 "^tensorcast: --fp8-recipe applies to --precision fp8 only" -- "$TC" train --fp8-recipe delayed
expect_fail 2 "^tensorcast: --fp8-recipe expects one of tensorwise\|delayed\|rowwise\|mxfp8, got 'block'" -- \
  "$TC" train --precision fp8 --fp8-recipe block
expect_fail 2 "^tensorcast: --weight-update applies to --precision bf16-pure only" -- "$TC" train --weight-update nearest
expect_fail 2 "^tensorcast: --optimizer expects one of adamw\|sgd, got 'adam'" -- "$TC" train --optimizer adam
expect_fail 2 "^tensorcast: --numerics-every expects a positive integer, got '0'" -- "$TC" train --numerics-every 0
expect_fail 2 "^tensorcast: --loss-weight expects a positive number, got '0'" -- "$TC" train --loss-weight 0
expect_fail 1 "^tensorcast: error: \[cli\] --numerics-json /nonexistent/x.json: directory /nonexistent does not exist" -- \
  "$TC" train --numerics-json /nonexistent/x.json
expect_fail 1 "^tensorcast: error: \[cli\] --device expects cpu, cuda or cuda:N, got 'gpu'" -- "$TC" train --device gpu
expect_fail 1 "^tensorcast: error: \[cli\] --device expects cpu, cuda or cuda:N, got 'cuda:x'" -- "$TC" bench --device cuda:x
# cuda:99 exists on no machine: without a GPU (or a CUDA build) the reason is the driver's, with one the count.
expect_fail 1 "^tensorcast: error: \[cli\] --device cuda:99: (no usable CUDA device \(.+\); train on the CPU|this machine has [0-9]+ CUDA device)" -- \
  "$TC" train --device cuda:99
expect_fail 1 "^tensorcast: error: \[cli\] --device expects cpu, cuda or cuda:N, got 'tpu'" -- "$TC" report --device tpu
expect_fail 2 "^tensorcast: --model expects one of" -- "$TC" bench --model resnet
expect_fail 2 "^tensorcast: --steps expects a positive integer, got '-1'" -- "$TC" bench --steps -1
expect_fail 2 "^tensorcast: unexpected argument 'extra'" -- "$TC" train extra
expect_fail 2 "^tensorcast: unknown command 'trian'" -- "$TC" trian
expect_fail 2 "^tensorcast: missing command" -- "$TC"
expect_fail 2 "^tensorcast: 'inspect' needs FILE" -- "$TC" inspect
expect_fail 2 "^tensorcast: --checkpoint-every needs --checkpoint" -- "$TC" train --checkpoint-every 5
# Through files: grep -q stops reading at the match, and a help text longer than one stdio
# buffer would then end with SIGPIPE (a failing pipeline under pipefail).
"$TC" train --help > help.txt && grep -q -- "--max-steps" help.txt || fail "train --help lists no --max-steps"
"$TC" bench --help > help.txt && grep -q -- "--inference" help.txt || fail "bench --help lists no --inference"
pass "--help"

# ---- data (exit 1), and a failing run leaves existing outputs alone
echo '{"keep": true}' > summary.json
expect_fail 1 "^tensorcast: error: \[data\] dataset directory /nonexistent/fmnist does not exist; .*--data DIR" -- \
  "$TC" train --data /nonexistent/fmnist --summary-json summary.json
touch plainfile
expect_fail 1 "^tensorcast: error: \[data\] plainfile is not a directory" -- "$TC" train --data plainfile
mkdir empty
expect_fail 1 "^tensorcast: error: \[data\] cannot open empty/train-images-idx3-ubyte.*pass --data DIR" -- \
  "$TC" train --data empty --summary-json summary.json
make_idx_dataset data 64 32
cp -r data truncated && head -c 5000 data/train-images-idx3-ubyte > truncated/train-images-idx3-ubyte
expect_fail 1 "^tensorcast: error: \[data\] .*truncated/train-images-idx3-ubyte.*" -- \
  "$TC" train --data truncated --model mlp --summary-json summary.json
cp -r data badmagic && { printf 'GARBAGE!'; tail -c +9 data/t10k-labels-idx1-ubyte; } > badmagic/t10k-labels-idx1-ubyte
expect_fail 1 "^tensorcast: error: \[data\] .*badmagic/t10k-labels-idx1-ubyte" -- "$TC" train --data badmagic --model mlp
expect_fail 1 "^tensorcast: error: \[data\] text file /nonexistent.txt does not exist" -- "$TC" train --model gpt --data /nonexistent.txt
[ "$(cat summary.json)" = '{"keep": true}' ] || fail "a failing run overwrote --summary-json"
pass "failed runs left summary.json alone"

# ---- output paths
expect_fail 1 "^tensorcast: error: \[cli\] --metrics no/such/dir/m.jsonl: directory .* does not exist" -- \
  "$TC" train --data data --model mlp --metrics no/such/dir/m.jsonl
expect_fail 1 "^tensorcast: error: \[cli\] --summary-json data is a directory" -- "$TC" train --data data --model mlp --summary-json data

# ---- checkpoints: a good one, then runs that must not touch it
"$TC" train --data data --model mlp --batch-size 16 --max-steps 2 --checkpoint ck > /dev/null
sum_before=$(cat ck/* | md5sum)
expect_fail 1 "already holds a checkpoint of another run; pass --resume ck" -- "$TC" train --data data --model mlp --checkpoint ck
expect_fail 1 "^tensorcast: error: \[data\]" -- "$TC" train --data truncated --model mlp --checkpoint ck --overwrite
expect_fail 1 "^tensorcast: error: \[data\]" -- "$TC" train --resume ck --data truncated --checkpoint ck
expect_fail 1 "the checkpoint was written with --model mlp, not cnn" -- "$TC" train --resume ck --model cnn
[ "$(cat ck/* | md5sum)" = "$sum_before" ] || fail "a failing run changed the checkpoint"
pass "failed runs left the checkpoint alone"
expect_fail 1 "^tensorcast: error: \[cli\] --resume nock: no such directory" -- "$TC" train --resume nock
mkdir emptyck
expect_fail 1 "^tensorcast: error: \[cli\] --resume emptyck holds no checkpoint.safetensors" -- "$TC" train --resume emptyck
mkdir badck && head -c 100 ck/checkpoint.safetensors > badck/checkpoint.safetensors
expect_fail 1 "^tensorcast: error: \[io\]" -- "$TC" train --resume badck

# ---- inspect
expect_fail 1 "^tensorcast: error: \[cli\] nofile.safetensors does not exist" -- "$TC" inspect nofile.safetensors
expect_fail 1 "^tensorcast: error: \[io\]" -- "$TC" inspect plainfile
expect_fail 1 "^tensorcast: error: \[io\]" -- "$TC" inspect badck
echo "all error cases pass"
