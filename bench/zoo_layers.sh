#!/usr/bin/env bash
# zoo_layers: a zoo model's time layer by layer in etc (`etc run --profile-shapes
# --profile-runs`), ONNX Runtime (its profiler) and ExecuTorch+XNNPACK (ETDump), side by side
# (bench/zoo_layers.py says how). Uses bench/zoo_cpu.sh's prepared programs in WORK (default
# ~/.cache/etc/bench-zoo), preparing any model not there yet.
#
# Usage: bench/zoo_layers.sh [ETC_BINARY] [--models a,b] [--threads 1] [--runs 40]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ETC=${1:-$ROOT/build/apps/etc/etc}
shift || true
PY=$("$ROOT/scripts/python-env.sh")
WORK=${WORK:-${ETC_CACHE_DIR:-$HOME/.cache/etc}/bench-zoo}
mkdir -p "$WORK"
echo "etc $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $(date -u +%Y-%m-%d)"
exec "$PY" "$ROOT/bench/zoo_layers.py" "$ETC" "$WORK" "$@"
