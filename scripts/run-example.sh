#!/usr/bin/env bash
# `make run`: validates the bundled example models, exports each to an ExecuTorch .pte for
# the CUDA delegate (and one CPU-only), and shows what was written. Running programs comes
# with the runtime (see README, "Status").
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
echo
echo "make run: exported 4 programs to $out/ (inspect them with: $etc inspect FILE)."
