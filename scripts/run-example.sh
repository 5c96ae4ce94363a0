#!/usr/bin/env bash
# `make run`: validates the bundled example models, exports each to an ExecuTorch .pte for
# the CUDA delegate (and one CPU-only), shows what was written, and runs every program —
# on the GPU when etc can use one, otherwise on the CPU — checking it with --verify.
set -eu
cd "$(dirname "$0")/.."
etc=${ETC:-build/apps/etc/etc}
out=${OUT:-build/examples}
mkdir -p "$out"
"$etc" --version
for model in mlp cnn transformer_block; do
  echo
  echo "\$ etc validate examples/$model.json"
  "$etc" validate "examples/$model.json"
  echo "\$ etc export examples/$model.json -o $out/$model.pte --report $out/$model.report.json"
  "$etc" export "examples/$model.json" -o "$out/$model.pte" --report "$out/$model.report.json"
done
echo
echo "\$ etc export examples/cnn.json -o $out/cnn_cpu.pte --target cpu"
"$etc" export examples/cnn.json -o "$out/cnn_cpu.pte" --target cpu
echo
echo "\$ etc inspect $out/mlp.pte"
"$etc" inspect "$out/mlp.pte"
for program in mlp cnn transformer_block cnn_cpu; do
  echo
  echo "\$ etc run $out/$program.pte --device auto --verify --seed 1 --warmup 2 --iterations 10"
  "$etc" run "$out/$program.pte" --device auto --verify --seed 1 --warmup 2 --iterations 10 --output-dir "$out/$program.out"
done
echo
echo "make run: exported and ran 4 programs in $out/ (outputs in $out/*.out/)."
