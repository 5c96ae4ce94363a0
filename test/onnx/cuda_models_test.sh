#!/usr/bin/env bash
# Runs every ONNX model program in DIR (exported for cuda:0 by scripts/build-for-device.sh) on
# the GPU with --verify against the CPU reference (which test/onnx/models_test.sh checks
# against ONNX Runtime). Exit 77 when no GPU is visible.
#   test/onnx/cuda_models_test.sh ETC DIR
set -u
etc=$1 dir=$2
failures=0
for pte in "$dir"/*.pte; do
  out=$("$etc" run "$pte" --device cuda --verify --warmup 2 --iterations 10 2>&1)
  rc=$?
  if ((rc == 4)); then echo "no GPU: $out" | head -3; exit 77; fi
  if ((rc != 0)); then
    echo "FAIL: $(basename "$pte"): exit $rc"; echo "$out" | tail -15; failures=$((failures + 1))
  else
    echo "ok: $(basename "$pte"): $(grep -E 'verify:|compute' <<<"$out" | tr '\n' ' ')"
  fi
done
exit $((failures > 0))
