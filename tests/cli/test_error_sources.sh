#!/usr/bin/env bash
# Every error names what it comes from: a checkpoint with a metadata key removed (each key
# in turn) names the file and the key; a bad number in a flag names the flag; a path that
# cannot be made absolute names its flag. One line on stderr, a non-zero exit, never a bare
# standard-library message such as "map::at" or "stoi".
source "$(dirname "$0")/lib.sh"
make_idx_dataset data 64 32
"$TC" train --data data --model mlp --batch-size 16 --max-steps 1 --checkpoint ck > /dev/null

# ---- metadata keys, as inspect lists them ("  KEY = VALUE" between "metadata:" and "tensors:")
"$TC" inspect ck > inspect.txt
keys=$(sed -n '/^metadata:/,/^tensors:/s/^  \([^ ]*\) = .*/\1/p' inspect.txt)
required=" format format_version epoch step tensorcast_version "
seen=0
for key in $keys; do
  mkdir "no_$key"
  file="no_$key/checkpoint.safetensors"
  "$EDIT" ck/checkpoint.safetensors "$file" --drop "$key" || fail "could not drop $key"
  if [[ "$required" != *" $key "* ]]; then  # the run description: optional
    "$TC" inspect "no_$key" > out.txt || fail "inspect refused a checkpoint without the optional key $key"
    continue
  fi
  seen=$((seen + 1))
  expect_fail 1 "^tensorcast: error: \[io\] $file: .*'$key'" -- "$TC" inspect "no_$key"
  expect_fail 1 "^tensorcast: error: \[io\] $file: .*'$key'" -- "$TC" inspect "$file"
  expect_fail 1 "^tensorcast: error: \[io\] $file: .*'$key'" -- "$TC" train --resume "no_$key"
done
[ "$seen" = 5 ] || fail "inspect listed $seen of the 5 required metadata keys: $(echo $keys)"
expect_fail 1 "^tensorcast: error: \[io\] no_tensorcast_version/checkpoint.safetensors: checkpoint metadata lacks 'tensorcast_version'$" -- \
  "$TC" inspect no_tensorcast_version
pass "each required metadata key removed: refused, naming the file and the key"

# A data loader entry that is no integer, read where the world size is compared.
mkdir replicasnan
"$EDIT" ck/checkpoint.safetensors replicasnan/checkpoint.safetensors --tensor loader.num_replicas=F64::nan
expect_fail 1 "^tensorcast: error: \[cli\] --resume replicasnan \(checkpoint.safetensors\): \[data\] state dict entry 'num_replicas' is nan, expected an integer" -- \
  "$TC" train --resume replicasnan

# ---- numbers in flags: parsed whole and range-checked, the flag named (usage errors, exit 2)
expect_fail 2 "^tensorcast: --epochs expects a positive integer, got '99999999999999999999'$" -- \
  "$TC" train --epochs 99999999999999999999
expect_fail 2 "^tensorcast: --batch-size expects a positive integer, got '0x10'$" -- "$TC" train --batch-size 0x10
expect_fail 2 "^tensorcast: --batch-size expects a positive integer, got ' 5'$" -- "$TC" train --batch-size " 5"
expect_fail 2 "^tensorcast: --max-steps expects a positive integer, got '\+5'$" -- "$TC" train --max-steps=+5
expect_fail 2 "^tensorcast: --seed expects a non-negative integer, got '-1'$" -- "$TC" train --seed -1
expect_fail 2 "^tensorcast: --seed expects a non-negative integer, got ''$" -- "$TC" train --seed=
expect_fail 2 "^tensorcast: --lr expects a positive number, got 'nan'$" -- "$TC" train --lr nan
expect_fail 2 "^tensorcast: --lr expects a positive number, got '1e999'$" -- "$TC" train --lr 1e999
expect_fail 2 "^tensorcast: --lr expects a positive number, got ' 1'$" -- "$TC" train --lr " 1"
expect_fail 2 "^tensorcast: --steps expects a positive integer, got '1.5'$" -- "$TC" bench --steps 1.5

# ---- no working directory (removed while the command runs in it): the flag is named
no_cwd() {  # no_cwd PATTERN CMD...: CMD, run in a removed directory, fails with one line matching PATTERN
  local pattern="$1"; shift
  mkdir gone
  local rc=0
  (cd gone && rmdir "$WORK/gone" && exec "$@") > "$WORK/out.txt" 2> "$WORK/err.txt" || rc=$?
  [ "$rc" = 1 ] || { cat "$WORK/err.txt" >&2; fail "'$*' in a removed directory exited $rc, expected 1"; }
  [ "$(wc -l < "$WORK/err.txt")" = 1 ] || { cat "$WORK/err.txt" >&2; fail "'$*' printed more than one line"; }
  grep -Eq -- "$pattern" "$WORK/err.txt" || fail "'$*' said '$(cat "$WORK/err.txt")', expected /$pattern/"
  pass "$* (no working directory) -> $(cat "$WORK/err.txt")"
}
no_cwd "^tensorcast: error: \[cli\] --metrics m.jsonl: cannot make the path absolute: .*working directory removed" \
  "$TC" train --data "$WORK/data" --model mlp --metrics m.jsonl
no_cwd "^tensorcast: error: \[cli\] --checkpoint ck2: cannot make the path absolute: .*working directory removed" \
  "$TC" train --data "$WORK/data" --model mlp --checkpoint ck2
no_cwd "^tensorcast: error: \[cli\] --out rep: cannot make the path absolute: .*working directory removed" \
  "$TC" report --out rep
echo "all error-source cases pass"
