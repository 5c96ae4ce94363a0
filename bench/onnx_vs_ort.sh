#!/usr/bin/env bash
# onnx_vs_ort: CPU latency of the real ONNX models (test/onnx/models.txt) in etc and in
# ONNX Runtime (onnxruntime-node, CPU EP), on the same inputs, side by side in one run.
# etc runs single-threaded; ONNX Runtime is measured with 1 and with 2 intra-op threads.
# Prints a table of medians (ms) and the ratios etc / ORT (below 1: etc is faster).
#
# Usage: bench/onnx_vs_ort.sh [ETC_BINARY]   (default build/apps/etc/etc)
# Environment: WARMUP (10), ITERATIONS (100).
set -euo pipefail

ETC=${1:-build/apps/etc/etc}
WARMUP=${WARMUP:-10}
ITERATIONS=${ITERATIONS:-100}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=/usr/bin/python3
[[ -x "$ETC" ]] || { echo "onnx_vs_ort: $ETC is not an executable" >&2; exit 2; }
CACHE=$("$ROOT/scripts/fetch-onnx-models.sh")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

median_of() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d$2)" "$1"; }

printf '%-20s %-18s %10s %10s %10s %9s %9s\n' model input "etc ms" "ort-1t ms" "ort-2t ms" "etc/ort1" "etc/ort2"
while read -r id path sha shapes; do
  [[ -z "$id" || "$id" == \#* ]] && continue
  model="$CACHE/node_modules/$path"
  args=()
  inputs=()
  for s in $shapes; do
    args+=(--input-shape "$s")
    safe=$(printf '%s' "${s%=*}" | tr -c 'A-Za-z0-9._-' '_')
    inputs+=(--input "${s%=*}=$WORK/ort1_$id/input_$safe.npy")
  done
  node "$ROOT/test/onnx/ort_run.mjs" "$model" "${args[@]}" --output-dir "$WORK/ort1_$id" --npm-dir "$CACHE" \
    --threads 1 --warmup "$WARMUP" --iterations "$ITERATIONS" >"$WORK/ort1.json"
  node "$ROOT/test/onnx/ort_run.mjs" "$model" "${args[@]}" --output-dir "$WORK/ort2_$id" --npm-dir "$CACHE" \
    --threads 2 --warmup "$WARMUP" --iterations "$ITERATIONS" >"$WORK/ort2.json"
  "$ETC" export "$model" "${args[@]}" --target cpu -o "$WORK/$id.pte" >/dev/null
  "$ETC" run "$WORK/$id.pte" --device cpu "${inputs[@]}" --warmup "$WARMUP" --iterations "$ITERATIONS" \
    --json >"$WORK/etc.json"
  e=$(median_of "$WORK/etc.json" '["timing_ms"]["compute_median"]')
  o1=$(median_of "$WORK/ort1.json" '["latency_ms"]["median"]')
  o2=$(median_of "$WORK/ort2.json" '["latency_ms"]["median"]')
  "$PY" -c "import sys; e,a,b=map(float,sys.argv[3:]); print('%-20s %-18s %10.3f %10.3f %10.3f %9.2f %9.2f' % (sys.argv[1], sys.argv[2], e, a, b, e/a, e/b))" \
    "$id" "${shapes// /,}" "$e" "$o1" "$o2"
done <"$ROOT/test/onnx/models.txt"
