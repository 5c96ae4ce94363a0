#!/usr/bin/env bash
# et_kernels: etc's CPU kernels as ExecuTorch's kernel library, side by side in one run with
# the kernels ExecuTorch's wheel ships and with its XNNPACK delegate, all inside ExecuTorch's
# own runtime (the wheel's libexecutorch.so, Program::load + Method::execute in C++), on the
# programs ExecuTorch itself exports from the PyTorch fixtures (scripts/make-torch-fixtures.py):
#   - "ET kernels": the portable program (to_edge -> to_executorch) in etc_et_runner, which
#     links the wheel's kernel library (its optimized kernels, portable ones where it has none);
#   - "etc kernels": the same program in etc_et_runner_etc_kernels, which links no kernel
#     library of the wheel and registers etc's (register_kernels_with_executorch);
#   - "XNNPACK": ExecuTorch's XNNPACK-delegated program of the same model, through ExecuTorch's
#     Python binding (bench/executorch_runtime.py latency: its own copy of the runtime and
#     XNNPACK; the call cost of the binding is in its figure). The wheel's C++ XNNPACK
#     backend (libexecutorch_backend_xnnpack.so) refuses the blobs the wheel's own exporter
#     writes ("FlatBuffer verification failed": its verifier expects the identifier XN00, the
#     exporter writes XN01), so it cannot run in etc_et_runner;
#   - "etc run": etc's own export of the model run by etc's own runtime (`etc run --device
#     cpu`, compute median), for reference: what etc's kernels do with etc's load planning
#     (fused epilogues, packed constant weights), which a kernel library called one instruction
#     at a time cannot do.
# Each figure is the median Method::execute time (inputs set again before each call, not
# timed) over ITERATIONS calls after the first; etc kernels and XNNPACK alternate for ROUNDS
# rounds and each figure is the median over the rounds. The wheel's kernels run once, with
# fewer calls when they would take over BUDGET_S seconds. Threads: all cores everywhere (the
# C++ runner cannot size ExecuTorch's thread pool, the wheel ships no header for it, so it
# and etc's kernels run at their default, every core; the binding is given the core count).
# The outputs of the two kernel libraries are checked against PyTorch eager's (rtol 1e-3,
# atol 1e-4).
#
# Usage: bench/et_kernels.sh [BUILD_DIR] [FIXTURES]
# Environment: MODELS (resnet18 mobilenet_v2 mobilenet_v3_small minilm llama_block),
# ITERATIONS (20), ROUNDS (3), BUDGET_S (20).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
FIX=${2:-$("$ROOT/test/torch/fixtures.sh")}
MODELS=${MODELS:-"resnet18 mobilenet_v2 mobilenet_v3_small minilm llama_block"}
ITERATIONS=${ITERATIONS:-20}
ROUNDS=${ROUNDS:-3}
BUDGET_S=${BUDGET_S:-20}
ETC=$BUILD/apps/etc/etc
WHEEL_RUNNER=$BUILD/src/executorch/etc_et_runner
ETC_RUNNER=$BUILD/src/executorch/etc_et_runner_etc_kernels
for b in "$ETC" "$WHEEL_RUNNER" "$ETC_RUNNER"; do
  [[ -x $b ]] || { echo "et_kernels: $b is not built (the ExecuTorch plugin needs the wheel: make build)" >&2; exit 1; }
done
PY=$("$ROOT/scripts/python-env.sh")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
# check DIR MODEL: DIR's outputs against the fixture's PyTorch eager outputs.
check() {
  "$PY" - "$1" "$FIX/$2" <<'PY'
import glob, os, sys
import numpy as np
got_dir, want_dir = sys.argv[1], sys.argv[2]
for want in sorted(glob.glob(os.path.join(want_dir, "expected_*.npy"))):
    i = os.path.basename(want)[len("expected_"):-len(".npy")]
    g, w = np.load(os.path.join(got_dir, f"output_{i}.npy")), np.load(want)
    if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-4):
        sys.exit(f"{got_dir}: output {i} differs from PyTorch eager")
PY
}
# et_ms RUNNER PROGRAM OUT_DIR ITERATIONS INPUTS...: the median execute time in ms.
et_ms() {
  local runner=$1 program=$2 out=$3 n=$4
  shift 4
  mkdir -p "$out"
  "$runner" --iterations "$n" "$program" "$out" "$@" 2>"$out.err" >/dev/null ||
    { grep -v ' I ' "$out.err" | tail -3 >&2; return 1; }
  sed -n 's/.*execute: median \([0-9.]*\) ms.*/\1/p' "$out.err"
}

echo "et_kernels: $(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "ExecuTorch $("$PY" -c 'import importlib.metadata as m; print(m.version("executorch"))'); threads: all $(nproc) cores in every runtime"
echo
printf '%-20s %12s %12s %10s %10s %14s %14s\n' model "ET kernels" "etc kernels" XNNPACK "etc run" "ET/etc kernels" "etc kern/XNNPACK"
for m in $MODELS; do
  d="$WORK/$m"
  mkdir -p "$d"
  "$PY" "$ROOT/bench/executorch_runtime.py" export 1 "$FIX/$m/model.pt2" "$d/et.pte" "$d/xnnpack.pte" \
    >/dev/null 2>"$d/export.err" || { tail -5 "$d/export.err" >&2; exit 1; }
  "$ETC" export "$FIX/$m/model.pt2" -o "$d/etc.pte" --target cpu >/dev/null 2>&1
  mapfile -t inputs < <(ls "$FIX/$m"/input_*.npy | sort -V)
  etc_args=()
  for i in "${!inputs[@]}"; do etc_args+=(--input "$i=${inputs[$i]}"); done
  # The wheel's kernels: one call first to size the run within the budget.
  one=$(et_ms "$WHEEL_RUNNER" "$d/et.pte" "$d/wheel" 1 "${inputs[@]}")
  check "$d/wheel" "$m"
  n=$(awk -v one="$one" -v it="$ITERATIONS" -v b="$BUDGET_S" 'BEGIN {n = int(b * 1000 / (one + 1e-9)); if (n > it) n = it; if (n < 3) n = 3; print n}')
  wheel=$(et_ms "$WHEEL_RUNNER" "$d/et.pte" "$d/wheel" "$n" "${inputs[@]}")
  ours_r=() xnn_r=()
  for ((r = 0; r < ROUNDS; ++r)); do
    ours_r+=("$(et_ms "$ETC_RUNNER" "$d/et.pte" "$d/etc_kernels" "$ITERATIONS" "${inputs[@]}")")
    xnn_r+=("$("$PY" "$ROOT/bench/executorch_runtime.py" latency "$(nproc)" 1 "$ITERATIONS" "$d/xnnpack.pte" \
               "${inputs[@]}" 2>"$d/xnnpack.err" | awk '/^latency/ {print $2}')")
  done
  check "$d/etc_kernels" "$m"
  ours=$(printf '%s\n' "${ours_r[@]}" | median)
  xnn=$(printf '%s\n' "${xnn_r[@]}" | median)
  own=$("$ETC" run "$d/etc.pte" --device cpu --warmup 1 --iterations "$ITERATIONS" "${etc_args[@]}" --json |
        "$PY" -c 'import json, sys; print(json.load(sys.stdin)["timing_ms"]["compute_median"])')
  awk -v m="$m" -v w="$wheel" -v a="$ours" -v x="$xnn" -v o="$own" \
    'BEGIN {printf "%-20s %12.3f %12.3f %10.3f %10.3f %14.1f %14.2f\n", m, w, a, x, o, w / a, a / x}'
done
