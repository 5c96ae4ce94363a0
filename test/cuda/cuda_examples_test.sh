#!/usr/bin/env bash
# End to end on the GPU: every example exported for CUDA (graph IO on the host, and with
# --io-device device) runs with `etc run --device cuda --verify` against the CPU reference,
# also with --cuda-graphs (capture and replay, the replays counted by `run --json`);
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
      # The IO buffers stay where they are across the 5 calls, so each delegate is captured
      # once and replayed on the last 3 calls: `run --json` counts both, and a capture that
      # failed (or a graph captured again every call) fails the check.
      if "$etc" run "$tmp/$name.pte" --device "$target" --verify --seed 7 --cuda-graphs \
          --warmup 2 --iterations 3 --json >"$tmp/$name.graphs" 2>"$tmp/$name.graphs.err"; then
        if verdict=$(python3 - "$tmp/$name.graphs" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
g = j.get("cuda_graphs") or {}
c, r, f = g.get("captures", 0), g.get("replays", 0), g.get("failed_captures", 0)
ok = j.get("verified") is True and f == 0 and c >= 1 and r >= 3 * c
print("verified %s, %d graph(s) captured, %d replays, %d failed captures" % (j.get("verified"), c, r, f))
sys.exit(0 if ok else 1)
PY
        ); then
          echo "ok: $name --cuda-graphs: $verdict"
        else
          echo "FAIL: $name --cuda-graphs: $verdict"; cat "$tmp/$name.graphs.err"
          failures=$((failures + 1))
        fi
      else
        echo "FAIL: $name --cuda-graphs"; cat "$tmp/$name.graphs" "$tmp/$name.graphs.err"
        failures=$((failures + 1))
      fi
    done
  done
done
((failures == 0))
