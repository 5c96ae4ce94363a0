#!/usr/bin/env bash
# weight_only: torchao's weight-only int8 and int4 linear layers on the CPU, etc (fused
# dequantization, and --no-fusion) against PyTorch eager in one run (bench/weight_only.py).
# Usage: bench/weight_only.sh [ETC_BINARY]   (default build/apps/etc/etc)
# Environment: ITERATIONS (20 timed calls per measurement), CONFIGS (e.g. "bf16,int8": only
# those; default all).
set -euo pipefail
ETC=${1:-build/apps/etc/etc}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -x "$ETC" ]] || { echo "weight_only: $ETC is not an executable" >&2; exit 2; }
PY=$("$ROOT/scripts/python-env.sh")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" "$ROOT/bench/weight_only.py" "$(cd "$(dirname "$ETC")" && pwd)/$(basename "$ETC")" "$WORK" 2>&1 |
  grep -v "is an Enum subclass"
