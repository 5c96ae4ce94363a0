#!/usr/bin/env bash
# torch_import: import + export wall time and peak RSS of `etc export` on PyTorch archives
# (resnet18 and all-MiniLM-L6-v2 from scripts/make-torch-fixtures.py, both forms), against
# the bytes of their weights. The target is peak RSS <= 1.5x the weights: the archive's
# stored weights are mapped, not copied. Also `etc validate` (import only). Prints figures;
# the exit code is 0 unless an export fails.
#
# Usage: bench/torch_import.sh [ETC_BINARY] [FIXTURES]
#   (default build/apps/etc/etc and the cached fixtures of test/torch/fixtures.sh)
# Environment: REPEAT (3): each figure is the median of REPEAT runs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ETC=${1:-$ROOT/build/apps/etc/etc}
FIX=${2:-$("$ROOT/test/torch/fixtures.sh")}
REPEAT=${REPEAT:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# median of REPEAT runs of a command: "seconds peak_kib"
measure() {
  for _ in $(seq "$REPEAT"); do
    /usr/bin/time -f "%e %M" -o "$WORK/t" "$@" >"$WORK/log" 2>&1 || { cat "$WORK/log" >&2; exit 1; }
    cat "$WORK/t"
  done | sort -n | awk -v n="$REPEAT" 'NR == int((n + 1) / 2) {print}'
}

echo "torch_import: median of $REPEAT runs; RSS is the process's peak resident set (/usr/bin/time %M)"
printf '%-10s %-8s %-10s %10s %9s %9s %9s %9s %9s\n' model form command "weights MB" "pte MB" seconds "RSS MB" "RSS/wts" "target"
for model in resnet18 minilm; do
  for form in model model.core; do
    pt2="$FIX/$model/$form.pt2"
    weights=$(python3 - "$pt2" <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
print(sum(i.file_size for i in z.infolist() if "/data/weights/weight_" in i.filename or "/data/constants/tensor_" in i.filename))
PY
)
    for cmd in validate cpu cuda:0; do
      if [[ $cmd == validate ]]; then
        read -r secs kib < <(measure "$ETC" validate "$pt2")
        pte_mb="-"
      else
        read -r secs kib < <(measure "$ETC" export "$pt2" -o "$WORK/out.pte" --target "$cmd")
        pte_mb=$(awk -v b="$(stat -c %s "$WORK/out.pte")" 'BEGIN {printf "%.1f", b / 1e6}')
      fi
      awk -v m="$model" -v f="${form#model}" -v c="$cmd" -v w="$weights" -v p="$pte_mb" -v s="$secs" -v k="$kib" 'BEGIN {
        f = (f == "" ? "default" : "core");
        r = k * 1024 / w;
        printf "%-10s %-8s %-10s %10.1f %9s %9.2f %9.1f %9.2f %9s\n", m, f, c, w / 1e6, p, s, k / 1024, r, (r <= 1.5 ? "met" : "over 1.5")
      }'
    done
  done
done
