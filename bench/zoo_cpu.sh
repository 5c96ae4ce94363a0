#!/usr/bin/env bash
# zoo_cpu: etc against ONNX Runtime, ExecuTorch+XNNPACK and AOTInductor on torchvision's models
# at 224x224 and on transformers encoders and a decoder's prefill at deployed sizes, at 1 and 2
# threads, side by side in one run (bench/zoo_cpu.py says how).
# Prepared programs are kept in WORK (default ~/.cache/etc/bench-zoo) so that a second run
# only times; AOTInductor compiles each model once (30-60 s).
#
# Usage: bench/zoo_cpu.sh [ETC_BINARY] [zoo_cpu.py options: --models a,b --threads 1,2 --rounds 3 ...]
#        bench/zoo_cpu.sh [ETC_BINARY] --layers [--models a,b --threads 1 --runs 40]
#          (layer by layer against ONNX Runtime's profiler and XNNPACK's ETDump: zoo_layers.py)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ETC=${1:-$ROOT/build/apps/etc/etc}
shift || true
PY=$("$ROOT/scripts/python-env.sh")
WORK=${WORK:-${ETC_CACHE_DIR:-$HOME/.cache/etc}/bench-zoo}
mkdir -p "$WORK"
echo "etc $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $(date -u +%Y-%m-%d)"
"$ETC" --version | sed -n 2p
exec "$PY" "$ROOT/bench/zoo_cpu.py" "$ETC" "$WORK" "$@"
