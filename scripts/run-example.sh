#!/usr/bin/env bash
# `make run`: validates every bundled example model with the built etc and prints what it
# found. (Export to .pte and running come with the serializer and runtime; see README.)
set -eu
cd "$(dirname "$0")/.."
etc=${ETC:-build/apps/etc/etc}
"$etc" --version
echo
for model in examples/mlp.json examples/cnn.json examples/transformer_block.json; do
  echo "\$ etc validate $model"
  "$etc" validate "$model"
  echo
done
echo "make run: all example models validated."
