#!/usr/bin/env bash
# e2e_latency: end-to-end CPU latency of the example models. Each of examples/mlp.json,
# examples/cnn.json and examples/transformer_block.json is exported twice (--target cpu: a
# host-only program; the default target cuda:0: CUDA delegates, whose subgraphs `etc run
# --device cpu` runs through the CPU kernels' IR ops), then run with
# `etc run FILE --device cpu --warmup 20 --iterations 200 --json`, and the compute times
# (timing_ms.compute_median / _min / _max) are printed as a table. Prints figures; the exit
# code is 0 unless an export or a run fails.
#
# Usage: bench/e2e_latency.sh [ETC_BINARY]   (default build/apps/etc/etc)
# Environment: WARMUP (20), ITERATIONS (200), THREADS (1: the figures are per core).
set -euo pipefail

ETC=${1:-build/apps/etc/etc}
WARMUP=${WARMUP:-20}
ITERATIONS=${ITERATIONS:-200}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [[ ! -x "$ETC" ]]; then
  echo "e2e_latency: $ETC is not an executable (build it, or pass its path as \$1)" >&2
  exit 2
fi
if ! command -v python3 >/dev/null; then
  echo "e2e_latency: python3 is needed to read the JSON results" >&2
  exit 2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "e2e_latency: etc run FILE --device cpu --warmup $WARMUP --iterations $ITERATIONS --json"
echo "compute = timing_ms.compute_* in ms (Method::execute only: inputs already bound); target = export --target"
echo
printf '%-18s %-16s %-7s %8s %12s %9s %9s %8s\n' model input target "pte KiB" "compute med" min max "load ms"
for model in mlp cnn transformer_block; do
  for target in cpu cuda:0; do
    pte="$WORK/${model}_${target%%:*}.pte"
    if [[ $target == cpu ]]; then
      "$ETC" export "$ROOT/examples/$model.json" -o "$pte" --target cpu >"$WORK/export.log" 2>&1 ||
        { cat "$WORK/export.log" >&2; exit 1; }
    else
      "$ETC" export "$ROOT/examples/$model.json" -o "$pte" >"$WORK/export.log" 2>&1 ||
        { cat "$WORK/export.log" >&2; exit 1; }
    fi
    "$ETC" run "$pte" --device cpu --warmup "$WARMUP" --iterations "$ITERATIONS" --threads "${THREADS:-1}" --json \
      >"$WORK/run.json" 2>"$WORK/run.log" || { cat "$WORK/run.log" >&2; exit 1; }
    kib=$(( $(stat -c %s "$pte") / 1024 ))
    python3 - "$WORK/run.json" "$ROOT/examples/$model.json" "$model" "$target" "$kib" <<'PY'
import json, sys
path, graph, model, target, kib = sys.argv[1:6]
t = json.load(open(path))["timing_ms"]
inputs = json.load(open(graph)).get("inputs", [])
shape = ",".join("x".join(str(d) for d in i.get("shape", [])) for i in inputs)
print(f"{model:<18} {shape:<16} {target:<7} {int(kib):>8} {t['compute_median']:>12.3f} "
      f"{t['compute_min']:>9.3f} {t['compute_max']:>9.3f} {t['load']:>8.2f}")
PY
  done
done
