#!/usr/bin/env bash
# onnx_vs_ort: CPU latency of the real ONNX models (test/onnx/models.txt, and PyTorch's own ONNX
# exports of resnet18, mobilenet_v2, mobilenet_v3_small and all-MiniLM-L6-v2 from the torch
# fixtures; the QDQ quantized resnet18 and mobilenet_v2 of scripts/make-qdq-models.py, made by
# ONNX Runtime's own quantize_static) in etc and in ONNX Runtime (the onnxruntime package from PyPI, CPU EP), on the same
# inputs, side by side in one run.
# Both run with 1 and with 2 intra-op threads (etc run --threads, ORT intra_op_num_threads).
# Prints a table of medians (ms) and the ratios etc / ORT at equal threads (below 1: etc is
# faster), each ratio the median of the rounds' ratios; and the "best" ratios: the fastest call of
# each over all rounds, less moved by the machine's slow phases (which only ever add time).
#
# Usage: bench/onnx_vs_ort.sh [ETC_BINARY]   (default build/apps/etc/etc)
# Environment: WARMUP (10), ITERATIONS (100), ROUNDS (3: ONNX Runtime and etc alternate, and
# each figure is the median over the rounds), ONLY (space-separated model ids, e.g.
# "silero_vad torch_resnet18": only those).
set -euo pipefail

ETC=${1:-build/apps/etc/etc}
WARMUP=${WARMUP:-10}
ITERATIONS=${ITERATIONS:-100}
ROUNDS=${ROUNDS:-3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -x "$ETC" ]] || { echo "onnx_vs_ort: $ETC is not an executable" >&2; exit 2; }
PY=$("$ROOT/scripts/python-env.sh")
CACHE=$("$ROOT/scripts/fetch-models.sh")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

median_of() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d$2)" "$1"; }

printf '%-20s %-24s %9s %9s %9s %9s %8s %8s %8s %8s\n' model input "etc-1t" "ort-1t" "etc-2t" "ort-2t" "1t ratio" "2t ratio" "1t best" "2t best"
# bench ID MODEL LABEL ORT_ARGS... -- ETC_EXPORT_ARGS... -- ETC_INPUT_ARGS...
bench() {
  local id=$1 model=$2 label=$3; shift 3
  [[ -n ${ONLY:-} && " $ONLY " != *" $id "* ]] && return 0
  local ort_args=() export_args=() inputs=()
  while [[ $1 != -- ]]; do ort_args+=("$1"); shift; done; shift
  while [[ $1 != -- ]]; do export_args+=("$1"); shift; done; shift
  inputs=("$@")
  "$ETC" export "$model" "${export_args[@]}" --target cpu -o "$WORK/$id.pte" >/dev/null 2>"$WORK/export.err" ||
    { cat "$WORK/export.err" >&2; exit 1; }
  # ROUNDS rounds, each ONNX Runtime then etc at 1 thread, then both at 2 threads: the two
  # sides of a ratio run within seconds of each other (this VM's speed drifts by 15-30%
  # from one minute to the next). The first ONNX Runtime run writes the inputs etc reads.
  local times=()
  for ((r = 0; r < ROUNDS; ++r)); do
    for t in 1 2; do
      "$PY" "$ROOT/test/onnx/ort_run.py" "$model" "${ort_args[@]}" --output-dir "$WORK/ort${t}_$id" \
        --threads "$t" --warmup "$WARMUP" --iterations "$ITERATIONS" >"$WORK/ort.json"
      "$ETC" run "$WORK/$id.pte" --device cpu "${inputs[@]}" --warmup "$WARMUP" \
        --iterations "$ITERATIONS" --threads "$t" --json >"$WORK/etc.json"
      times+=("$(median_of "$WORK/etc.json" '["timing_ms"]["compute_median"]')"
              "$(median_of "$WORK/ort.json" '["latency_ms"]["median"]')"
              "$(median_of "$WORK/etc.json" '["timing_ms"]["compute_min"]')"
              "$(median_of "$WORK/ort.json" '["latency_ms"]["min"]')")
    done
  done
  # Per column the median over the rounds; the ratios are the medians of the rounds' ratios.
  "$PY" - "$id" "$label" "${times[@]}" <<'PYEOF'
import statistics as st, sys
name, label, t = sys.argv[1], sys.argv[2], list(map(float, sys.argv[3:]))
e1, o1, b_e1, b_o1, e2, o2, b_e2, b_o2 = (t[i::8] for i in range(8))
r1 = st.median(a / b for a, b in zip(e1, o1))
r2 = st.median(a / b for a, b in zip(e2, o2))
print('%-20s %-24s %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f %8.2f' % (
    name, label, st.median(e1), st.median(o1), st.median(e2), st.median(o2), r1, r2,
    min(b_e1) / min(b_o1), min(b_e2) / min(b_o2)))
PYEOF
}

while read -r id pkg path sha shapes; do
  [[ -z "$id" || "$id" == \#* ]] && continue
  args=()
  inputs=()
  for s in $shapes; do
    args+=(--input-shape "$s")
    safe=$(printf '%s' "${s%=*}" | tr -c 'A-Za-z0-9._-' '_')
    inputs+=(--input "${s%=*}=$WORK/ort1_$id/input_$safe.npy")
  done
  bench "$id" "$CACHE/$id.onnx" "${shapes// /,}" "${args[@]}" -- "${args[@]}" -- "${inputs[@]}"
done <"$ROOT/test/onnx/models.txt"

# PyTorch's own ONNX exports (opset 20), on the fixture's inputs.
TORCH_FIX=$(bash "$ROOT/test/torch/fixtures.sh" 2>/dev/null | tail -1)
for id in resnet18 mobilenet_v2 mobilenet_v3_small minilm; do
  d="$TORCH_FIX/$id"
  ort_args=(); inputs=(); k=0
  for name in $("$PY" -c "import onnx,sys; print(' '.join(i.name for i in onnx.load(sys.argv[1], load_external_data=False).graph.input))" "$d/model.onnx"); do
    ort_args+=(--input "$name=$d/input_$k.npy"); inputs+=(--input "$k=$d/input_$k.npy"); k=$((k + 1))
  done
  shape=$("$PY" -c "import numpy as np,sys; print('x'.join(map(str, np.load(sys.argv[1]).shape)))" "$d/input_0.npy")
  bench "torch_$id" "$d/model.onnx" "torch.onnx $shape" "${ort_args[@]}" -- -- "${inputs[@]}"
done

# QDQ quantized models made by ONNX Runtime's quantize_static (per-channel and per-tensor int8
# weights, uint8 activations), on ort_run.py's seeded inputs.
QDQ=$(bash "$ROOT/test/torch/fixtures.sh" "" make-qdq-models.py 2>/dev/null | tail -1)
for id in resnet18 mobilenet_v2; do
  for q in pc pt; do
    bench "qdq_${id}_$q" "$QDQ/$id.$q.onnx" "QDQ 1x3x224x224" -- -- --input "x=$WORK/ort1_qdq_${id}_$q/input_x.npy"
  done
done
