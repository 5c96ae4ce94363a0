#!/usr/bin/env bash
# CLI contract checks: commands, output and exit codes (README.md, "CLI").
# Usage: cli_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME WANT_RC PATTERN CMD... : runs CMD, checks its exit code and that stdout+stderr
# match the extended regex PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $name: exit code $rc, expected $want"; echo "$out" | head -20; failures=$((failures + 1)); return
  fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $name: output does not match /$pattern/"; echo "$out" | head -20; failures=$((failures + 1)); return
  fi
  echo "ok: $name"
}

expect "--version prints the version and CUDA status" 0 '^etc [0-9]+\.[0-9]+\.[0-9]+' "$etc" --version
expect "--version says whether CUDA is built in" 0 'CUDA support: (built in|not built)' "$etc" --version
expect "no command is a usage error" 2 'Usage|validate' "$etc"
expect "an unknown command is a usage error" 2 'bogus' "$etc" bogus
expect "validate without a model is a usage error" 2 'MODEL is required' "$etc" validate
expect "an unknown flag is a usage error" 2 'no-such-flag' "$etc" validate --no-such-flag "$src/examples/mlp.json"
expect "validate prints a summary" 0 'valid etc.graph "mlp"' "$etc" validate "$src/examples/mlp.json"
expect "validate counts parameters" 0 'constants: +6 \(17,226 parameters, 68,904 bytes\)' "$etc" validate "$src/examples/mlp.json"
expect "validate lists ops with counts" 0 'aten\.linear\.default x2' "$etc" validate "$src/examples/mlp.json"
expect "a missing model file is exit 1 with the path" 1 "^etc: error: $tmp/none.json: cannot open file: No such file or directory$" \
  "$etc" validate "$tmp/none.json"
expect "a folder as model is exit 1" 1 "^etc: error: $tmp: not a regular file$" "$etc" validate "$tmp"
expect "ops lists every op with its schema" 0 '^aten\.convolution\.default\(Tensor input, Tensor weight, Tensor\? bias' "$etc" ops
n=$("$etc" ops | wc -l)
if [[ $n -ne 57 ]]; then echo "FAIL: etc ops lists $n ops, expected 57"; failures=$((failures + 1)); else echo "ok: etc ops lists 57 ops"; fi

# An error never writes to stdout (stdout is for results, so scripts can rely on it).
out=$("$etc" validate "$tmp/none.json" 2>/dev/null)
if [[ -n "$out" ]]; then echo "FAIL: an error wrote to stdout: $out"; failures=$((failures + 1)); else echo "ok: errors go to stderr only"; fi


exit $((failures > 0))
