#!/usr/bin/env bash
# `mpirun -np N tensorcast train/bench` on this machine: N processes follow one process's
# trajectory, rank 0 alone prints and writes, checkpoints resume on the same and on another
# world size, and a failing, killed or stopped rank ends the whole job within seconds.
source "$(dirname "$0")/lib.sh"
command -v mpirun > /dev/null || { echo "skipped: no mpirun (scripts/deps.sh installs openmpi-bin)"; exit 77; }
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(timeout 120 mpirun --oversubscribe --allow-run-as-root)
make_idx_dataset data 384 120 1  # 6 global batches of 64 per epoch; fixed pixels (below)

losses() { sed -E 's/, "seconds": [^,}]*//' "$@"; }
common=(--data data --model mlp --batch-size 64 --epochs 2 --precision fp32 --log-every 1 --no-progress --threads 1)

# 1. N processes on batch 64/N follow one process on batch 64: the logged loss is the
# global batch's (averaged over ranks), equal up to fp32 summation order. With SGD: Adam
# turns last-bit differences in a near-zero gradient into lr-sized steps (sign(g)), so on
# some random datasets its trajectories part by 1e-3 within 14 steps while SGD's stay
# within 3e-6 (measured on 30 datasets); test_dist.cpp shows DDP's AdamW steps are bitwise
# those of one process accumulating the same shards. Even SGD's parted by 1e-4 on one
# random dataset in a CI run (a ReLU whose input lies within the summation orders' last
# bits flips its derivative), so the pixels are fixed: on these the trajectories stay
# within 4e-8, the same on every run.
"$TC" train "${common[@]}" --optimizer sgd --metrics one.jsonl > one.log
for np in 2 3; do
  [ "$np" = 3 ] && bs=(--batch-size 63 --optimizer sgd) || bs=(--optimizer sgd)
  if [ "$np" = 3 ]; then "$TC" train "${common[@]}" "${bs[@]}" --metrics one3.jsonl > /dev/null; ref=one3.jsonl; else ref=one.jsonl; fi
  "${MPI[@]}" -np "$np" "$TC" train "${common[@]}" "${bs[@]}" --metrics np$np.jsonl > np$np.log
  [ "$(grep -c '^tensorcast train:' np$np.log)" = 1 ] || { cat np$np.log; fail "-np $np: expected one header (rank 0 prints)"; }
  grep -q "data parallel: $np processes" np$np.log || fail "-np $np: no data-parallel line"
  paste <(grep -o '"loss": [^,]*' $ref | cut -d' ' -f2) <(grep -o '"loss": [^,]*' np$np.jsonl | cut -d' ' -f2) |
    awk -v np="$np" '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) { print "step " NR ": " $1 " vs " $2; bad = 1 } }
                     END { if (NR < 12) { print "expected at least 12 steps, got " NR; bad = 1 } exit bad }' ||
    fail "-np $np: losses differ from one process"
  [ "$(wc -l < $ref)" = "$(wc -l < np$np.jsonl)" ] || fail "-np $np: another number of steps than one process"
  pass "-np $np: $(wc -l < np$np.jsonl) steps with the losses of one process (within 1e-4), one header"
done

# 2. Resume (AdamW: its state is in the checkpoint): on the same world size bit-identically;
# on another, the epoch restarts.
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --metrics full.jsonl --checkpoint full > /dev/null
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --max-steps 4 --checkpoint part --metrics a.jsonl > /dev/null
"${MPI[@]}" -np 2 "$TC" train --resume part --epochs 2 --log-every 1 --no-progress --threads 1 --checkpoint part \
  --metrics b.jsonl > resume.log
grep -q "resumed from part at step 4" resume.log || { cat resume.log; fail "no resume message"; }
diff <(losses full.jsonl) <(losses a.jsonl b.jsonl) || fail "-np 2 resumed losses differ"
cmp full/model.safetensors part/model.safetensors || fail "-np 2 resumed weights differ"
pass "-np 2 resume at step 4 of 12 is bit-identical (losses and model.safetensors)"
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --max-steps 4 --checkpoint part2 > /dev/null
"$TC" train --resume part2 --epochs 2 --no-progress --threads 1 --checkpoint part2 > other.log
grep -q "written by 2 process(es), this run has 1: .*restarts epoch 1" other.log || { cat other.log; fail "no world-size note"; }
grep -q "resumed from part2 at step 4" other.log || fail "resume on 1 process did not continue at step 4"
pass "a 2-process checkpoint resumes on 1 process (the epoch restarts, as stated)"

# 3. A rank that raises ends the job, naming the rank; a global batch the world cannot split.
rc=0; "${MPI[@]}" -np 2 "$TC" train "${common[@]}" --batch-size 63 > err.log 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "an indivisible batch should fail"
grep -q "rank [01]: tensorcast: error: .*--batch-size 63 is the global batch; it must divide by the 2 processes" err.log ||
  { cat err.log; fail "no error naming the rank"; }
pass "an error on the ranks ends the job: $(grep -m1 'rank [01]: tensorcast' err.log)"

# 4. ZeRO: the same weights and losses as plain data parallelism, bit for bit; its
# checkpoint holds the unsharded optimizer state, so it resumes on another world size with
# another stage (or none) exactly as a DDP checkpoint does.
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --zero 2 --metrics zero.jsonl --checkpoint zfull > zero.log
grep -q "gradients reduce-scattered .*(ZeRO stage 2)" zero.log || { cat zero.log; fail "--zero 2: no sharding line"; }
diff <(losses full.jsonl) <(losses zero.jsonl) || fail "--zero 2: losses differ from DDP's"
cmp full/model.safetensors zfull/model.safetensors || fail "--zero 2: weights differ from DDP's"
pass "-np 2 --zero 2: the losses and model.safetensors of DDP, bit for bit"
# Each rank saves its own shard of the optimizer state; the checkpoint names the set.
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --max-steps 4 --checkpoint dpart > /dev/null
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --max-steps 4 --zero 2 --checkpoint zpart > /dev/null
for r in 0 1; do [ -s zpart/optimizer-shard-$r-of-2-step-4.safetensors ] || { ls zpart; fail "no shard file of rank $r"; }; done
cp -r dpart dpart1 && cp -r zpart zpart1 && cp -r zpart zpart2 && cp -r zpart zbad
"${MPI[@]}" -np 2 "$TC" train --resume zpart2 --epochs 2 --no-progress --threads 1 --checkpoint zpart2 --zero 2 > /dev/null
cmp zfull/model.safetensors zpart2/model.safetensors || fail "--zero 2 resumed on its own world size differs"
"${MPI[@]}" -np 4 "$TC" train --resume dpart --epochs 2 --no-progress --threads 1 --checkpoint dpart > /dev/null
"${MPI[@]}" -np 4 "$TC" train --resume zpart --epochs 2 --no-progress --threads 1 --checkpoint zpart --zero 1 > zr.log
grep -q "resumed from zpart at step 4" zr.log || { cat zr.log; fail "--zero 1 did not resume at step 4"; }
cmp dpart/model.safetensors zpart/model.safetensors || fail "a --zero 2 checkpoint resumed on 4 ranks with --zero 1 differs from DDP's"
"$TC" train --resume dpart1 --epochs 2 --no-progress --threads 1 --checkpoint dpart1 > /dev/null
"$TC" train --resume zpart1 --epochs 2 --no-progress --threads 1 --checkpoint zpart1 > /dev/null
cmp dpart1/model.safetensors zpart1/model.safetensors || fail "a --zero 2 checkpoint resumed by one process differs from DDP's"
pass "a -np 2 --zero 2 checkpoint (a shard file per rank) resumes bitwise as DDP's: on -np 2 --zero 2, -np 4 --zero 1, one process"
# A shard of another step in the set, or a missing one: refused, naming the file and rank.
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --max-steps 2 --zero 2 --checkpoint zother > /dev/null
cp zother/optimizer-shard-1-of-2-step-2.safetensors zbad/optimizer-shard-1-of-2-step-4.safetensors
rc=0; "$TC" train --resume zbad --epochs 2 --no-progress --threads 1 > bad.log 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "zbad/optimizer-shard-1-of-2-step-4.safetensors (the shard of rank 1): its 'step' is 2, expected 4" bad.log ||
  { cat bad.log; fail "a shard of another step was not refused by name"; }
rm zbad/optimizer-shard-0-of-2-step-4.safetensors
rc=0; "$TC" train --resume zbad --epochs 2 --no-progress --threads 1 > bad.log 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "optimizer-shard-0-of-2-step-4.safetensors" bad.log || { cat bad.log; fail "a missing shard was not named"; }
pass "a shard of another step or a missing one is refused: $(head -c 160 bad.log)"
# Saving every 2 steps keeps each rank's shards of the last two checkpoints only.
"${MPI[@]}" -np 2 "$TC" train "${common[@]}" --max-steps 8 --zero 1 --checkpoint zevery --checkpoint-every 2 > /dev/null
[ "$(ls zevery | grep -c '^optimizer-shard-')" = 4 ] && [ -e zevery/optimizer-shard-1-of-2-step-6.safetensors ] &&
  [ -e zevery/optimizer-shard-0-of-2-step-8.safetensors ] || { ls zevery; fail "old shards were not removed"; }
pass "checkpointing every 2 steps keeps the shards of the last two checkpoints (steps 6 and 8)"

# 5. A killed rank ends the job within 30 s; a stopped one (a hang) within the timeout;
# also with the optimizer sharded (ZKILL).
pid_of_rank() {  # pid_of_rank R: the tensorcast process with OMPI_COMM_WORLD_RANK=R
  local p
  for p in $(pgrep -f "tensorcast train .*--seed 4242" || true); do
    tr '\0' '\n' < /proc/$p/environ 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return 0; }
  done
  return 0
}
for variant in KILL STOP ZKILL; do
  how=${variant#Z}
  extra=(); [ "$how" = STOP ] && extra=(--dist-timeout 5)
  [ "$variant" = ZKILL ] && extra=(--zero 2 --checkpoint zkill --checkpoint-every 1)
  start=$(date +%s)
  "${MPI[@]}" -np 2 "$TC" train "${common[@]}" --epochs 1000 --seed 4242 "${extra[@]}" > fault.log 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 100); do victim=$(pid_of_rank 1); [ -n "$victim" ] && grep -q "^epoch 1 " fault.log && break; sleep 0.2; done
  [ -n "$victim" ] || { cat fault.log; fail "rank 1 never started"; }
  kill -s "$how" "$victim"
  killed=$(date +%s)
  rc=0; wait "$job" || rc=$?
  took=$(( $(date +%s) - killed ))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat fault.log; fail "SIG$how of rank 1: exit $rc (124: mpirun hung)"; }
  [ "$took" -le 30 ] || fail "SIG$how of rank 1: the job took $took s to end"
  if [ "$how" = KILL ]; then
    grep -Eq "rank 1 .*(signal 9|Killed)|exited on signal 9" fault.log || { cat fault.log; fail "no message naming the killed rank"; }
  else
    grep -q "rank 0: .* did not complete within 5 s" fault.log || { cat fault.log; fail "no timeout message"; }
  fi
  pass "SIG$how of rank 1${extra[*]:+ (${extra[*]})}: the job ended in $took s with exit $rc"
done
# The rank was killed while checkpointing every step: the last complete checkpoint and its
# shards still load.
"$TC" train --resume zkill --max-steps 1 --no-progress --threads 1 > zkill.log 2>&1 ||
  { cat zkill.log; fail "the checkpoint a killed --zero run left does not load"; }
grep -q "resumed from zkill at step" zkill.log || { cat zkill.log; fail "no resume from zkill"; }
pass "after SIGKILL mid-run with --zero 2 --checkpoint-every 1: $(grep -o 'resumed from zkill at step [0-9]*' zkill.log), shards intact"

# 6. bench --distributed reports the all-reduce time, its hidden share and the bytes.
"${MPI[@]}" -np 2 "$TC" bench --model mlp --distributed --steps 5 --warmup 1 --threads 1 --batch-size 32 --json > bench.json
[ "$(wc -l < bench.json)" = 1 ] || { cat bench.json; fail "bench: expected one JSON line (rank 0)"; }
[ "$(json_field bench.json world_size)" = 2 ] || fail "bench: world_size"
# mlp: 669706 fp32 parameters = 2678824 bytes per step
[ "$(json_field bench.json comm_bytes_per_step)" = 2678824 ] || { cat bench.json; fail "bench: bytes per step"; }
pass "bench --distributed: $(cat bench.json | grep -o '"comm_[a-z_]*": [^,}]*' | tr '\n' ' ')"

# 7. bench --distributed --zero 2: per rank, half of DDP's optimizer state and gradients
# (AdamW: two fp32 moments per element and a step count per piece), in one JSON line.
"${MPI[@]}" -np 2 "$TC" bench --model mlp --distributed --zero 2 --steps 3 --warmup 1 --threads 1 --batch-size 32 \
  --json > zbench.json
[ "$(wc -l < zbench.json)" = 1 ] || { cat zbench.json; fail "bench --zero: expected one JSON line"; }
grep -o '"\(optimizer_state\|gradient\)_bytes": [0-9]*' zbench.json | awk -F': ' '
  { v[NR] = $2 }
  END {  # zero rank 0 and 1 (gradient, state), then ddp rank 0 and 1
    if (NR != 8) { print "expected 8 byte counts, got " NR; exit 1 }
    for (k = 1; k <= 4; k += 1) { if (v[k + 4] < 1000) { print "entry " k + 4 ": " v[k + 4] " bytes"; exit 1 }; r = 2 * v[k] / v[k + 4]; if (r < 0.98 || r > 1.02) { print "entry " k ": " v[k] " vs DDP " v[k + 4]; exit 1 } }
  }' || { cat zbench.json; fail "bench --zero 2: not half of DDP's bytes per rank"; }
pass "bench --distributed --zero 2: per rank $(grep -o '"optimizer_state_bytes": [0-9]*' zbench.json | head -1) (DDP: $(grep -o '"optimizer_state_bytes": [0-9]*' zbench.json | tail -1))"
