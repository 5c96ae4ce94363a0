#!/usr/bin/env bash
# export_scale: `etc export` of Llama-style decoders of 852M and 1.57B parameters (bf16, and
# int4 from torchao) against ExecuTorch's own lowering of the same archive, wall time and
# peak RSS side by side (bench/export_scale.py). About 6 GB of archives are written to WORK
# (a temporary folder, removed after; set WORK to keep and reuse them).
# Usage: bench/export_scale.sh [ETC_BINARY]   (default build/apps/etc/etc)
# Environment: WORK (keep the archives there), EXECUTORCH_ALL=1 (ExecuTorch lowers every
# program, not only the 852M bf16 one: minutes and up to 3.5x the weights in memory).
set -euo pipefail
ETC=${1:-build/apps/etc/etc}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -x "$ETC" ]] || { echo "export_scale: $ETC is not an executable" >&2; exit 2; }
PY=$("$ROOT/scripts/python-env.sh")
if [[ -z "${WORK:-}" ]]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
"$PY" "$ROOT/bench/export_scale.py" "$(cd "$(dirname "$ETC")" && pwd)/$(basename "$ETC")" "$WORK" \
  ${EXECUTORCH_ALL:+--executorch-all} 2>&1 | grep -v "is an Enum subclass"
