#!/usr/bin/env bash
# vs_executorch: etc and ExecuTorch (from PyPI) side by side, in one run, on the PyTorch
# models of scripts/make-torch-fixtures.py, both starting from the same torch.export archive:
#  1. export time: `etc export --target cpu` (the whole process) against ExecuTorch's Python
#     pipeline (torch.export.load -> to_edge -> to_executorch -> write, timed after its
#     imports, which favours it); medians of REPEAT;
#  2. planned memory: etc's planned bytes and their lower bound (the peak of simultaneously
#     live bytes in etc's program) against the planned bytes of ExecuTorch's portable
#     program and of its XNNPACK-delegated program;
#  3. CPU latency at 1 and 2 threads, same inputs (the fixtures'): `etc run --device cpu`
#     (set inputs + execute + read outputs: timing_ms h2d + compute + d2h medians) against
#     ExecuTorch's runtime (the PyPI wheel's kernels: its optimized kernels where it has them,
#     portable otherwise) and against its XNNPACK delegate, each through method.execute (set
#     inputs + execute + return outputs; the Python binding's call cost is in its figure,
#     visible on `add`). etc and XNNPACK alternate for ROUNDS rounds; each ratio is the median
#     of the rounds' ratios, and "best" the ratio of each side's fastest call.
# Both exports start with the page cache's dirty pages flushed (sync), so that neither pays
# for writing back the other's output: etc's time varied 3-5x from run to run without it.
# Prints figures and ratios; the exit code is 0 unless a step fails.
#
# Usage: bench/vs_executorch.sh [ETC_BINARY] [FIXTURES]
# Environment: MODELS (add linear mobilenet_v2 mobilenet_v3_small resnet18 minilm),
# REPEAT (3), WARMUP (3), ITERATIONS (30), ROUNDS (5: etc and XNNPACK alternate, so that both
# see the same phases of a machine whose speed drifts by 15-40% within minutes), THREADS
# ("1 2"), BUDGET_S (20: ExecuTorch's slow portable runs time fewer calls, at least 3),
# LATENCY (1; 0 skips part 3).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ETC=${1:-$ROOT/build/apps/etc/etc}
FIX=${2:-$("$ROOT/test/torch/fixtures.sh")}
MODELS=${MODELS:-"add linear mobilenet_v2 mobilenet_v3_small resnet18 minilm"}
REPEAT=${REPEAT:-3}
WARMUP=${WARMUP:-3}
ITERATIONS=${ITERATIONS:-30}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-"1 2"}
PY=$("$ROOT/scripts/python-env.sh")
ET=("$PY" "$ROOT/bench/executorch_runtime.py")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
planned() { # total planned bytes of a .pte
  "$ETC" inspect "$1" --format json | "$PY" -c 'import json, sys
print(sum(b["size"] for b in json.load(sys.stdin)["plans"][0]["buffers"]))'
}

echo "vs_executorch: $(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "ExecuTorch $("$PY" -c 'import importlib.metadata as m; print(m.version("executorch"))'), PyTorch $("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"

declare -A etc_s et_s etc_plan etc_bound et_plan xnn_plan
for m in $MODELS; do
  d="$WORK/$m"
  mkdir -p "$d"
  et_s[$m]=$("${ET[@]}" export "$REPEAT" "$FIX/$m/model.pt2" "$d/et.pte" "$d/xnnpack.pte" 2>"$d/et.err" |
             awk '/^export/ {print $2}') || { tail -5 "$d/et.err" >&2; exit 1; }
  times=()
  for _ in $(seq "$REPEAT"); do
    sync  # dirty pages of earlier writes (ExecuTorch's too) are flushed outside the timed part
    start=$(date +%s%N)
    "$ETC" export "$FIX/$m/model.pt2" -o "$d/etc.pte" --target cpu --report "$d/report.json" >/dev/null 2>&1
    end=$(date +%s%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.4f", (b - a) / 1e9}')")
  done
  etc_s[$m]=$(printf '%s\n' "${times[@]}" | median)
  etc_plan[$m]=$(planned "$d/etc.pte")
  etc_bound[$m]=$("$PY" -c 'import json, sys
print(sum(b["lower_bound_bytes"] for b in json.load(open(sys.argv[1]))["memory"]))' "$d/report.json")
  et_plan[$m]=$(planned "$d/et.pte")
  xnn_plan[$m]=$(planned "$d/xnnpack.pte")
done

echo
echo "1. export time, seconds (median of $REPEAT; ExecuTorch after its imports)"
printf '%-20s %10s %12s %8s\n' model etc ExecuTorch ratio
for m in $MODELS; do
  awk -v m="$m" -v a="${etc_s[$m]}" -v b="${et_s[$m]}" 'BEGIN {printf "%-20s %10.3f %12.3f %7.0fx\n", m, a, b, b / a}'
done

echo
echo "2. planned memory, bytes (etc's lower bound: peak of simultaneously live bytes in etc's program)"
printf '%-20s %12s %12s %14s %12s %10s\n' model etc "etc bound" "ET portable" "ET XNNPACK" "etc/ET"
for m in $MODELS; do
  awk -v m="$m" -v a="${etc_plan[$m]}" -v b="${etc_bound[$m]}" -v c="${et_plan[$m]}" -v x="${xnn_plan[$m]}" \
    'BEGIN {printf "%-20s %12d %12d %14d %12d %10.3f\n", m, a, b, c, x, (c > 0 ? a / c : 0)}'
done

[[ ${LATENCY:-1} == 0 ]] && exit 0
echo
echo "3. CPU latency, ms (medians of $ITERATIONS calls after $WARMUP warm-up calls; same inputs; etc and"
echo "   XNNPACK alternate for $ROUNDS rounds, each figure the median over the rounds and etc/XNNPACK"
echo "   the median of the rounds' ratios; ExecuTorch's portable runtime once; 'best': the fastest call"
echo "   of each over all rounds (etc's fastest compute plus its median input and output copies), less"
echo "   moved by the machine's slow phases, which only ever add time)"
printf '%-20s %3s %10s %12s %12s %10s %12s %10s %s\n' model thr etc "ET runtime" "ET XNNPACK" "etc/ET" "etc/XNNPACK" "best" "ratio per round"
etc_latency() { # model dir, threads
  "$ETC" run "$1/etc.pte" --device cpu --threads "$2" --warmup "$WARMUP" --iterations "$ITERATIONS" \
    "${etc_inputs[@]}" --json >"$1/run.json" 2>"$1/run.err" || { cat "$1/run.err" >&2; return 1; }
  "$PY" -c 'import json, sys
t = json.load(open(sys.argv[1]))["timing_ms"]
print(t["h2d_median"] + t["compute_median"] + t["d2h_median"], t["h2d_median"] + t["compute_min"] + t["d2h_median"])' "$1/run.json"
}
et_latency() { # model dir, program, threads
  "${ET[@]}" latency "$3" "$WARMUP" "$ITERATIONS" "$1/$2" "${inputs[@]}" 2>"$1/lat.err" |
    awk '/^latency/ {print $2, $3}' || { tail -5 "$1/lat.err" >&2; return 1; }
}
for m in $MODELS; do
  d="$WORK/$m"
  inputs=() etc_inputs=()
  i=0
  while [[ -f "$FIX/$m/input_$i.npy" ]]; do
    inputs+=("$FIX/$m/input_$i.npy")
    etc_inputs+=(--input "$i=$FIX/$m/input_$i.npy")
    i=$((i + 1))
  done
  for t in $THREADS; do
    et=$(et_latency "$d" et.pte "$t" | cut -d' ' -f1) || exit 1
    ours_r=() xnn_r=() ratio_r=() best_a=inf best_x=inf
    for ((r = 0; r < ROUNDS; ++r)); do
      # Which goes first alternates too, so neither always follows the other's warm caches.
      if ((r % 2 == 0)); then
        a=$(etc_latency "$d" "$t") || exit 1
        x=$(et_latency "$d" xnnpack.pte "$t") || exit 1
      else
        x=$(et_latency "$d" xnnpack.pte "$t") || exit 1
        a=$(etc_latency "$d" "$t") || exit 1
      fi
      ours_r+=("${a% *}") xnn_r+=("${x% *}")
      ratio_r+=("$(awk -v a="${a% *}" -v x="${x% *}" 'BEGIN {printf "%.2f", a / x}')")
      best_a=$(awk -v a="${a#* }" -v b="$best_a" 'BEGIN {print (b == "inf" || a < b) ? a : b}')
      best_x=$(awk -v a="${x#* }" -v b="$best_x" 'BEGIN {print (b == "inf" || a < b) ? a : b}')
    done
    ours=$(printf '%s\n' "${ours_r[@]}" | median)
    xnn=$(printf '%s\n' "${xnn_r[@]}" | median)
    ratio=$(printf '%s\n' "${ratio_r[@]}" | median)
    awk -v m="$m" -v t="$t" -v a="$ours" -v b="$et" -v x="$xnn" -v q="$ratio" -v rr="${ratio_r[*]}" \
      -v ba="$best_a" -v bx="$best_x" \
      'BEGIN {printf "%-20s %3d %10.4f %12.4f %12.4f %10.2f %12.2f %10.2f %s\n", m, t, a, b, x, a / b, q, ba / bx, rr}'
  done
done
