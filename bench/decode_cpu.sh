#!/usr/bin/env bash
# decode_cpu: token-by-token decoding of a Llama-shaped language model (57M parameters by
# default) in fp32, bf16, torchao's weight-only int8 and int4 and ExecuTorch's 8da4w: etc
# against PyTorch eager and ExecuTorch+XNNPACK on the same exported program, at 1 and 2
# threads, with the weight bandwidth etc reaches against a plain copy's (bench/decode_cpu.py
# says how each is measured). Prints one line per measurement, then the tables for
# docs/benchmarks.md.
#
# Usage: bench/decode_cpu.sh [ETC_BINARY] [decode_cpu.py options: --variants, --threads,
#        --steps, --rounds, --layers, --hidden, --work]   (default build/apps/etc/etc)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ETC=${1:-build/apps/etc/etc}
shift || true
[[ -x "$ETC" ]] || { echo "decode_cpu: $ETC is not an executable" >&2; exit 2; }
PY=$("$ROOT/scripts/python-env.sh")
exec "$PY" "$ROOT/bench/decode_cpu.py" "$ETC" "$@"
