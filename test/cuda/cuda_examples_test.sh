#!/usr/bin/env bash
# End to end on the GPU: every example exported for CUDA (graph IO on the host, and with
# --io-device device) runs with `etc run --device cuda --verify` against the CPU reference,
# also with --cuda-graphs (capture and replay);
# with two GPUs, also exported for cuda:1. Exits 77 (CTest: skipped) without CUDA support or
# without a visible GPU.
# Usage: cuda_examples_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$("$etc" --version 2>&1)
grep -q 'CUDA support: not built' <<<"$version" && { echo "SKIP: built without CUDA support"; exit 77; }
grep -q '^CUDA device 0: ' <<<"$version" || { echo "SKIP: no CUDA device visible"; exit 77; }
targets=(cuda:0)
grep -q '^CUDA device 1: ' <<<"$version" && targets+=(cuda:1)

failures=0
for model in mlp cnn transformer_block; do
  for target in "${targets[@]}"; do
    for io in host device; do
      name="$model-${target/:/}-$io"
      if ! "$etc" export "$src/examples/$model.json" -o "$tmp/$name.pte" --target "$target" \
          --io-device "$io" >"$tmp/$name.export" 2>&1; then
        echo "FAIL: $name: export"; cat "$tmp/$name.export"; failures=$((failures + 1)); continue
      fi
      if "$etc" run "$tmp/$name.pte" --device "$target" --verify --seed 7 >"$tmp/$name.run" 2>&1; then
        echo "ok: $name: $(grep -E '^verify:' "$tmp/$name.run")"
      else
        echo "FAIL: $name"; cat "$tmp/$name.run"; failures=$((failures + 1))
      fi
      # CUDA graphs: a plain run, a capture, then replays; the last run's outputs are verified.
      if "$etc" run "$tmp/$name.pte" --device "$target" --verify --seed 7 --cuda-graphs \
          --warmup 2 --iterations 3 >"$tmp/$name.graphs" 2>&1; then
        note=""
        grep -q 'CUDA graph capture' "$tmp/$name.graphs" && note=" (capture failed, ran without graphs: $(grep -o 'capture of the delegate failed.*' "$tmp/$name.graphs" | head -1))"
        echo "ok: $name --cuda-graphs: $(grep -E '^verify:' "$tmp/$name.graphs")$note"
      else
        echo "FAIL: $name --cuda-graphs"; cat "$tmp/$name.graphs"; failures=$((failures + 1))
      fi
    done
  done
done
((failures == 0))
