#!/usr/bin/env bash
# `etc run` device selection as a user sees it, on this machine: without a GPU (or in a
# CPU-only build) --device cuda is exit 4 with a message that says what was found and what
# to do, and --device auto runs on the CPU and says why; with a GPU, auto picks cuda:0.
# Usage: no_gpu_cli_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # NAME WANT_RC PATTERN CMD...
  local name=$1 want=$2 pattern=$3 out rc
  shift 3
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $name (exit $rc, want $want, pattern /$pattern/):"; echo "$out" | head -5
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
}
"$etc" export "$src/examples/mlp.json" -o "$tmp/mlp.pte" >/dev/null 2>&1 || { echo "FAIL: export"; exit 1; }
version=$("$etc" --version 2>&1)
if grep -q 'CUDA support: not built' <<<"$version"; then
  expect "cpu-only build: --device cuda is exit 4" 4 \
    '^etc: error: requested device cuda:0 is not available: this etc was built without CUDA support; use --device cpu to run on the CPU$' \
    "$etc" run "$tmp/mlp.pte" --device cuda
  expect "cpu-only build: --device auto runs on the CPU and says why" 0 \
    'etc: --device auto: this etc was built without CUDA support; running on the CPU' \
    "$etc" run "$tmp/mlp.pte" --device auto
elif grep -q '^CUDA device 0: ' <<<"$version"; then
  expect "with a GPU, --device auto picks cuda:0 and names it" 0 'etc: --device auto: using cuda:0 \(' \
    "$etc" run "$tmp/mlp.pte" --device auto
  expect "a device index that does not exist is exit 4" 4 'requested device cuda:9 is not available: [0-9]+ CUDA device\(s\) visible' \
    "$etc" run "$tmp/mlp.pte" --device cuda:9
else
  # What happened and what to do; the source location only in the debug log (-vv).
  if grep -Eq '\.(cpp|cu|h):[0-9]' <<<"$version"; then
    echo "FAIL: no GPU: etc --version shows a source location:"; grep -E '\.(cpp|cu|h):[0-9]' <<<"$version"
    failures=$((failures + 1))
  else
    echo "ok: no GPU: etc --version says what was found without a source location"
  fi
  expect "no GPU: etc --version says why no device is usable and what to do" 0 \
    '^CUDA devices: none usable \(.*\(cuda[A-Za-z]+\): [a-z].*\)$' "$etc" --version
  expect "no GPU: --device cuda is exit 4 and says what was found" 4 \
    '^etc: error: requested device cuda:0 is not available: no CUDA device visible: [^/]*\(cuda[A-Za-z]+\): [^/]*; use --device cpu to run on the CPU$' \
    "$etc" run "$tmp/mlp.pte" --device cuda
  expect "no GPU: --device cuda:1 is exit 4 too" 4 'requested device cuda:1 is not available: no CUDA device visible' \
    "$etc" run "$tmp/mlp.pte" --device cuda:1
  expect "no GPU: --device auto runs on the CPU and says why" 0 \
    'etc: --device auto: no GPU visible \([^/]*\(cuda[A-Za-z]+\)[^/]*\); running on the CPU$' \
    "$etc" run "$tmp/mlp.pte" --device auto
  expect "no GPU: the debug log keeps where CUDA failed" 0 'cudaGetDeviceCount failed at .*cuda_devices\.cpp:[0-9]+' \
    "$etc" -vv run "$tmp/mlp.pte" --device auto
  expect "no GPU: --device auto still verifies" 0 'verify: all outputs match' \
    "$etc" run "$tmp/mlp.pte" --device auto --verify
fi
((failures == 0))
