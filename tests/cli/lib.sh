# Helpers for the CLI tests (sourced). Each test gets the built `tensorcast` as $1.
set -euo pipefail
TC="$(realpath "$1")"
EDIT="$(realpath "${2:-/nonexistent}")"  # tc_safetensors_edit: crafts damaged checkpoints
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tensorcast-cli.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# be32 N: N as 4 big-endian bytes (printf octal escapes).
be32() { printf "\\$(printf %03o $(( ($1 >> 24) & 255 )))\\$(printf %03o $(( ($1 >> 16) & 255 )))\\$(printf %03o $(( ($1 >> 8) & 255 )))\\$(printf %03o $(( $1 & 255 )))"; }

# make_idx_dataset DIR NTRAIN NTEST [SEED]: a tiny Fashion-MNIST look-alike (raw IDX files,
# random pixels, labels 0..9 in a fixed cycle), so tests run in seconds without the dataset.
# With SEED the pixels are the same on every run (gzip's output for a counter from SEED:
# varied bytes, not uniform), for comparisons that hold on most data but not all.
make_idx_dataset() {
  local dir="$1" ntrain="$2" ntest="$3" seed="${4:-}"
  mkdir -p "$dir"
  local split n
  for split in train t10k; do
    if [ "$split" = train ]; then n=$ntrain; else n=$ntest; fi
    { printf '\000\000\010\003'; be32 "$n"; be32 28; be32 28
      if [ -n "$seed" ]; then seq "$seed" $((seed + n * 784)) | gzip -1 -n -c | tail -c +11 | head -c $((n * 784)) || true
      else head -c $((n * 784)) /dev/urandom; fi; } > "$dir/$split-images-idx3-ubyte"
    { printf '\000\000\010\001'; be32 "$n"
      local i; for ((i = 0; i < n; i++)); do printf "\\$(printf %03o $((i * 7 % 10)))"; done; } > "$dir/$split-labels-idx1-ubyte"
  done
}

# expect_fail CODE PATTERN -- CMD...: CMD exits with CODE and prints exactly one line on
# stderr that matches PATTERN (grep -E). The one-time "[autocast] warning" a CPU without
# native 16-bit math prints depends on the machine, so it is not counted.
expect_fail() {
  local code="$1" pattern="$2"; shift 3
  local rc=0
  "$@" > out.txt 2> err_all.txt || rc=$?
  grep -v '^\[autocast\] warning: ' err_all.txt > err.txt || true
  [ "$rc" = "$code" ] || { cat err.txt >&2; fail "'$*' exited $rc, expected $code"; }
  local lines; lines=$(wc -l < err.txt)
  [ "$lines" = 1 ] || { cat err.txt >&2; fail "'$*' printed $lines lines on stderr, expected 1"; }
  grep -Eq -- "$pattern" err.txt || fail "'$*' said '$(cat err.txt)', expected /$pattern/"
  pass "$* -> $(cat err.txt)"
}

# json_field FILE KEY: the raw value of KEY in a one-line JSON object.
json_field() { sed -E 's/.*"'"$2"'": ("[^"]*"|[^,}]*).*/\1/' "$1"; }
