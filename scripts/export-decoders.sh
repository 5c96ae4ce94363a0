#!/usr/bin/env bash
# Exports the decoders of scripts/make-decoder-fixtures.py for cuda:0 into OUT, each as
# NAME.pte with NAME.prompt.npy, its extra inputs (NAME.input_K.npy) and NAME.expected (the
# step count, then PyTorch eager's generated ids): what test/torch/cuda_decoders_test.sh runs.
# The static Llama-style decoder and the Whisper-style step keep their KV caches on the GPU;
# the dynamic Llama-style decoder also runs its whole prompt in one call of its length; the
# int4 one (torchao's weight-only layers) runs its linear layers on the packed weights.
# Used by scripts/build-for-device.sh (carried to the GPU machine) and by the CPU rehearsal
# (CTest). Exit 1 when the fixtures or an export fail.
#   scripts/export-decoders.sh ETC OUT [NAME ...]   (default: all four)
set -euo pipefail
etc=$1 out=$2
shift 2
names=("$@")
((${#names[@]})) || names=(llama_decoder llama_decoder_dynamic whisper_step llama_decoder_int4)
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$(bash "$root/test/torch/fixtures.sh" "" make-decoder-fixtures.py)
quantized=""
py=$("$root/scripts/python-env.sh")
mkdir -p "$out"
for name in "${names[@]}"; do
  d="$fixtures/$name" dest="$out/$name"
  if [[ $name == llama_decoder_int4 ]]; then
    # torchao's int4 weight-only layers (scripts/make-quantized-decoder-fixtures.py).
    [[ -n $quantized ]] ||
      quantized=$(bash "$root/test/torch/fixtures.sh" "" make-quantized-decoder-fixtures.py)
    d="$quantized/$name"
  fi
  if ! "$etc" export "$d/model.pt2" --target cuda:0 -o "$dest.pte" >"$dest.export.log" 2>&1; then
    echo "export-decoders: exporting $name failed:" >&2
    cat "$dest.export.log" >&2
    exit 1
  fi
  rm -f "$dest.export.log"
  cp "$d/prompt.npy" "$dest.prompt.npy"
  for f in "$d"/input_*.npy; do
    if [[ -e $f ]]; then cp "$f" "$dest.$(basename "$f")"; fi
  done
  "$py" -c 'import json, sys, numpy as np
d = sys.argv[1]
print(json.load(open(d + "/meta.json"))["steps"])
print(" ".join(str(int(i)) for i in np.load(d + "/expected_ids.npy")))' "$d" >"$dest.expected"
done
