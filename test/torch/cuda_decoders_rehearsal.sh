#!/usr/bin/env bash
# The GPU decoder check rehearsed on the CPU runtime: the programs scripts/build-for-device.sh
# carries (scripts/export-decoders.sh) run through test/torch/cuda_decoders_test.sh with
# --device cpu (host memory standing in for the device's), and the GPU benchmark
# (bench/decoder_gpu.sh) on them likewise, so that the scripts and the programs are known good
# before a GPU is lent.
#   test/torch/cuda_decoders_rehearsal.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$src/scripts/export-decoders.sh" "$etc" "$tmp/decoders" || { echo "FAIL: export-decoders.sh"; exit 1; }
bash "$src/test/torch/cuda_decoders_test.sh" "$etc" "$tmp/decoders" cpu || exit 1
table=$(STEPS=8 ITERATIONS=1 bash "$src/bench/decoder_gpu.sh" "$etc" "$tmp/decoders" cpu) ||
  { echo "FAIL: bench/decoder_gpu.sh"; echo "$table"; exit 1; }
echo "$table"
rows=$(grep -cE '^\| (llama_decoder|llama_decoder_dynamic|whisper_step|llama_decoder_int4) \| [0-9.]+ \| [0-9.]+ \|' <<<"$table")
((rows == 4)) || { echo "FAIL: bench/decoder_gpu.sh timed $rows of 4 decoders"; exit 1; }
echo "ok: bench/decoder_gpu.sh times the 4 decoders"
