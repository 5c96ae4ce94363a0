#!/usr/bin/env bash
# The GPU decoder check rehearsed on the CPU runtime: the programs scripts/build-for-device.sh
# carries (scripts/export-decoders.sh) run through test/torch/cuda_decoders_test.sh with
# --device cpu (host memory standing in for the device's), so that the script and the
# programs are known good before a GPU is lent.
#   test/torch/cuda_decoders_rehearsal.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$src/scripts/export-decoders.sh" "$etc" "$tmp/decoders" || { echo "FAIL: export-decoders.sh"; exit 1; }
bash "$src/test/torch/cuda_decoders_test.sh" "$etc" "$tmp/decoders" cpu
