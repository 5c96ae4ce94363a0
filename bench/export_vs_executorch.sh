#!/usr/bin/env bash
# export_vs_executorch: export wall time of `etc export --target cpu` against ExecuTorch's
# Python pipeline (torch.export.load -> to_edge -> to_executorch -> write), both starting from
# the same torch.export archive on disk (the default form of each fixture model). ExecuTorch
# is timed inside one Python process after its imports (the figure favours it: the
# interpreter and import cost, printed separately, are left out); etc as a whole process.
# Prints figures and the ratio; the exit code is 0 unless an export fails.
#
# Usage: bench/export_vs_executorch.sh [ETC_BINARY] [FIXTURES]
# Environment: REPEAT (3): medians of REPEAT runs; MODELS (default: add linear mobilenet_v2
# resnet18 minilm).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ETC=${1:-$ROOT/build/apps/etc/etc}
FIX=${2:-$("$ROOT/test/torch/fixtures.sh")}
REPEAT=${REPEAT:-3}
MODELS=${MODELS:-"add linear mobilenet_v2 resnet18 minilm"}
PY=$("$ROOT/scripts/python-env.sh")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$PY" - "$FIX" "$WORK" "$REPEAT" $MODELS >"$WORK/et.txt" 2>"$WORK/et.err" <<'PY' || { cat "$WORK/et.err" >&2; exit 1; }
import os, statistics, sys, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
import torch
from executorch.exir import to_edge
imports = time.perf_counter() - t0
fix, work, repeat, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
print(f"imports {imports:.2f}")
for m in models:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        ep = torch.export.load(os.path.join(fix, m, "model.pt2"))
        prog = to_edge(ep).to_executorch()
        with open(os.path.join(work, m + ".et.pte"), "wb") as f:
            f.write(prog.buffer)
        times.append(time.perf_counter() - t)
    print(m, f"{statistics.median(times):.3f}")
PY

echo "export_vs_executorch: median of $REPEAT; both from the model's torch.export archive on disk"
echo "ExecuTorch: load + to_edge + to_executorch + write, after 'import torch, executorch' ($(awk '/^imports/ {print $2}' "$WORK/et.txt") s, not counted)"
printf '%-14s %12s %16s %10s\n' model "etc export s" "ExecuTorch s" "ratio"
for m in $MODELS; do
  times=()
  for _ in $(seq "$REPEAT"); do
    start=$(date +%s%N)
    "$ETC" export "$FIX/$m/model.pt2" -o "$WORK/$m.pte" --target cpu >/dev/null 2>&1
    end=$(date +%s%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.4f", (b - a) / 1e9}')")
  done
  etc_s=$(printf '%s\n' "${times[@]}" | sort -n | awk -v n="$REPEAT" 'NR == int((n + 1) / 2)')
  et_s=$(awk -v m="$m" '$1 == m {print $2}' "$WORK/et.txt")
  awk -v m="$m" -v a="$etc_s" -v b="$et_s" 'BEGIN {
    printf "%-14s %12.3f %16.3f %9.0fx\n", m, a, b, (a > 0 ? b / a : 0) }'
done
