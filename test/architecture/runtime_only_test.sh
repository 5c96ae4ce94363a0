#!/usr/bin/env bash
# The runtime stands on its own: runtime_only_runner (built from the runtime libraries alone,
# test/architecture/CMakeLists.txt) runs the examples etc exports, for the CPU and for cuda:0
# (its delegate on the CPU reference backend), and its outputs are byte-identical to
# `etc run --device cpu` on the same inputs. Prints the runner's size beside etc's.
# Usage: runtime_only_test.sh ETC RUNNER SOURCE_DIR
set -uo pipefail
etc=$1
runner=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

for model in mlp cnn transformer_block; do
  for target in cpu cuda:0; do
    case_dir="$tmp/$model-${target/:/}"
    mkdir -p "$case_dir/etc" "$case_dir/runtime"
    if ! "$etc" export "$src/examples/$model.json" -o "$case_dir/p.pte" --target "$target" \
      > /dev/null 2> "$case_dir/export.err"; then
      echo "FAIL: export $model for $target: $(cat "$case_dir/export.err")"; failures=$((failures + 1)); continue
    fi
    # Inputs of the program's shapes and dtypes (from etc inspect), seeded.
    mkdir -p "$case_dir/in"
    "$etc" inspect "$case_dir/p.pte" --format json | python3 "$src/test/architecture/write_inputs.py" "$case_dir/in" 7 ||
      { echo "FAIL: $model ($target): cannot write inputs"; failures=$((failures + 1)); continue; }
    mapfile -t inputs < <(ls "$case_dir"/in/input_*.npy | sort -V)
    args=()
    for i in "${!inputs[@]}"; do args+=(--input "$i=${inputs[$i]}"); done
    if ! "$etc" run "$case_dir/p.pte" --device cpu "${args[@]}" --output-dir "$case_dir/etc" \
      > /dev/null 2> "$case_dir/run.err"; then
      echo "FAIL: etc run $model ($target): $(cat "$case_dir/run.err")"; failures=$((failures + 1)); continue
    fi
    if ! "$runner" "$case_dir/p.pte" "$case_dir/runtime" "${inputs[@]}" 2> "$case_dir/runner.err"; then
      echo "FAIL: runtime_only_runner $model ($target): $(cat "$case_dir/runner.err")"; failures=$((failures + 1)); continue
    fi
    n=0
    for out in "$case_dir"/etc/output_*.npy; do
      name=$(basename "$out")
      if ! cmp -s "$out" "$case_dir/runtime/$name"; then
        echo "FAIL: $model ($target): $name differs between etc run and the runtime-only runner"
        failures=$((failures + 1))
      fi
      n=$((n + 1))
    done
    if [[ $n -eq 0 ]]; then echo "FAIL: $model ($target): no outputs"; failures=$((failures + 1)); fi
    echo "ok: $model ($target): ${#inputs[@]} input(s), $n output(s) byte-identical"
  done
done

size() { stat -c %s "$1"; }
echo "runtime-only runner: $(size "$runner") bytes; etc (compiler + runtime + CLI): $(size "$etc") bytes"
if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
